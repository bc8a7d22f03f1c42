package operator

// partials.go is the wire format of the partials topic (scale-out, see
// KafkaConfig.ScaleOut): stage 1 writes one partial state per window and
// input partition, split into chunks that fit a Kafka message; stage 2
// reassembles them and accepts a partial only with a valid MAC under a key
// derived from the noise key, which every instance of the deployment holds:
// a client that may write to the partials topic but does not hold the key
// cannot make stage 2 merge a partial state of its own.
//
// A partial state is the windows package's encoding of windows.Partial
// (MarshalBinary) of one window and one input partition. Its messages are
// keyed "<window start in ms>/<input partition id>" (both decimal); the
// value of each is
//
//	magic "dpp3" (4 bytes)
//	window start in ms (signed varint)
//	input partition id, partitionID (signed varint)
//	MAC: partialMAC of the whole encoding (32 bytes)
//	chunk index i (unsigned varint), number of chunks n (unsigned varint)
//	chunk i of the encoding (at most partialChunkBytes)
//
// Format version 2 ("dpp2") has the same layout under a MAC key not bound
// to the deployment (partialMACKeyV2) and is read only for the windows in
// flight at the upgrade; version 1 is not read.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/privacy/rng"
)

// partialMagic starts every partials topic message (format version 3:
// the MAC key is bound to the deployment, see partialBinding). Version 2
// (partialMagicV2) had the same layout under a MAC key derived from the
// noise key alone, so two deployments sharing a key could replay each
// other's partials; it is read only for windows in flight at the upgrade
// (see assembler.v2Before). Version 1 carried a plain SHA-256 instead of
// the MAC and is not read.
var partialMagic = []byte("dpp3")

// partialMagicV2 starts the partials of the previous format version.
var partialMagicV2 = []byte("dpp2")

// partialMACDomain separates the partials MAC key from every other use of
// the noise key (the noise streams use "dpstream/release/v2").
const partialMACDomain = "dpstream/partials-mac/v2"

// partialMACDomainV2 is the domain of format version 2's MAC key.
const partialMACDomainV2 = "dpstream/partials-mac/v1"

// partialBinding is everything that makes one deployment's partials
// distinct from another's under the same key: the release namespace, the
// release digest of the configuration (ReleaseDigest, which the noise
// binds too), the input topics (sorted) and the partials topic. A partial
// written by a deployment that differs in any of them fails this
// deployment's MAC check.
type partialBinding struct {
	namespace     string
	digest        string
	inputTopics   []string // sorted
	partialsTopic string
}

// partialBindingOf returns the binding of a deployment with kafka config
// k and release digest digest.
func partialBindingOf(k KafkaConfig, digest string) partialBinding {
	return partialBinding{
		namespace:     k.namespace(),
		digest:        digest,
		inputTopics:   slices.Sorted(slices.Values(k.InputTopics)),
		partialsTopic: k.partialsTopic(),
	}
}

// appendField appends s with its length as a uvarint before it, so that
// a sequence of fields has one reading only.
func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encode is the binding's unambiguous encoding: every string
// length-prefixed (appendField), the topics preceded by their count:
//
//	field(partialMACDomain) ‖ field(namespace) ‖ field(digest) ‖
//	uvarint(n) ‖ field(topic_1) ‖ … ‖ field(topic_n) ‖ field(partials topic)
func (b partialBinding) encode() []byte {
	out := appendField(nil, partialMACDomain)
	out = appendField(out, b.namespace)
	out = appendField(out, b.digest)
	out = binary.AppendUvarint(out, uint64(len(b.inputTopics)))
	for _, t := range b.inputTopics {
		out = appendField(out, t)
	}
	return appendField(out, b.partialsTopic)
}

// partialMACKey derives the key of the partials topic's MACs from the
// noise key and the deployment: HMAC-SHA256(key, binding.encode()).
func partialMACKey(k rng.Key, b partialBinding) []byte {
	m := hmac.New(sha256.New, k[:])
	m.Write(b.encode())
	return m.Sum(nil)
}

// partialMACKeyV2 is format version 2's MAC key, bound to nothing but the
// noise key: HMAC-SHA256(key, partialMACDomainV2).
func partialMACKeyV2(k rng.Key) []byte {
	m := hmac.New(sha256.New, k[:])
	m.Write([]byte(partialMACDomainV2))
	return m.Sum(nil)
}

// partialMAC is HMAC-SHA256(macKey, varint(start) ‖ varint(pid) ‖ b): it
// binds the partial's encoding to its window and input partition (and,
// through macKey, to the deployment).
func partialMAC(macKey []byte, start int64, pid int32, b []byte) [sha256.Size]byte {
	m := hmac.New(sha256.New, macKey)
	var hdr []byte
	hdr = binary.AppendVarint(hdr, start)
	hdr = binary.AppendVarint(hdr, int64(pid))
	m.Write(hdr)
	m.Write(b)
	var out [sha256.Size]byte
	m.Sum(out[:0])
	return out
}

// partialChunkBytes is the largest chunk payload: half of Kafka's default
// message.max.bytes (1 MiB), like the state topic's intent chunks.
const partialChunkBytes = 512 << 10

// partialID names one partial: its window and input partition id, and the
// MAC of its encoding (so that chunks of two different attempts are never
// mixed).
type partialID struct {
	start int64
	pid   int32
	sum   [sha256.Size]byte
	v2    bool // format version 2 (partialMagicV2)
}

// partialMessages splits the encoding b of the partial of window start and
// input partition pid into messages for topic. Every message carries the
// partial's id (with its MAC under macKey), its index and the number of
// chunks, so that stage 2 can reassemble it whatever else the topic holds
// in between.
func partialMessages(topic string, macKey []byte, start int64, pid int32, b []byte) []kafka.Message {
	return partialMessagesMagic(partialMagic, topic, macKey, start, pid, b)
}

// partialMessagesMagic is partialMessages with the given magic (tests
// write format version 2 with it).
func partialMessagesMagic(magic []byte, topic string, macKey []byte, start int64, pid int32, b []byte) []kafka.Message {
	sum := partialMAC(macKey, start, pid, b)
	n := max(1, (len(b)+partialChunkBytes-1)/partialChunkBytes)
	key := []byte(strconv.FormatInt(start, 10) + "/" + strconv.Itoa(int(pid)))
	out := make([]kafka.Message, 0, n)
	for i := range n {
		chunk := b[min(i*partialChunkBytes, len(b)):min((i+1)*partialChunkBytes, len(b))]
		v := append([]byte(nil), magic...)
		v = binary.AppendVarint(v, start)
		v = binary.AppendVarint(v, int64(pid))
		v = append(v, sum[:]...)
		v = binary.AppendUvarint(v, uint64(i))
		v = binary.AppendUvarint(v, uint64(n))
		v = append(v, chunk...)
		out = append(out, kafka.Message{Topic: topic, Key: key, Value: v})
	}
	return out
}

// errPartialMessage: a partials topic message that is not one of ours.
var errPartialMessage = errors.New("operator: not a partial-state message")

// errPartialMAC: a complete partial whose MAC does not match this
// deployment's (damaged, written under another key, or by another
// deployment under the same key).
var errPartialMAC = fmt.Errorf("%w: the MAC does not match (damaged, or not written by this deployment: another key, namespace, configuration, input topics or partials topic)", errPartialMessage)

// errPartialV2: a partial of format version 2 (not bound to the
// deployment) of a window that started at or after the deployment's
// cutoff (assembler.v2Before), which only version 3 may carry.
var errPartialV2 = fmt.Errorf("%w: format version 2 (dpp2, not bound to the deployment) for a window after the upgrade cutoff", errPartialMessage)

// partialChunk is one decoded message of the partials topic.
type partialChunk struct {
	id       partialID
	index, n int
	data     []byte
}

// decodePartialChunk decodes one partials topic message.
func decodePartialChunk(v []byte) (partialChunk, error) {
	var c partialChunk
	switch {
	case bytes.HasPrefix(v, partialMagic):
	case bytes.HasPrefix(v, partialMagicV2):
		c.id.v2 = true
	default:
		return c, errPartialMessage
	}
	r := bytes.NewReader(v[len(partialMagic):]) // both magics are 4 bytes
	start, err := binary.ReadVarint(r)
	if err != nil {
		return c, errPartialMessage
	}
	pid, err := binary.ReadVarint(r)
	if err != nil || pid < 0 || pid > 1<<31-1 {
		return c, errPartialMessage
	}
	if _, err := r.Read(c.id.sum[:]); err != nil {
		return c, errPartialMessage
	}
	i, err1 := binary.ReadUvarint(r)
	n, err2 := binary.ReadUvarint(r)
	if err1 != nil || err2 != nil || n == 0 || i >= n || n > 1<<20 {
		return c, errPartialMessage
	}
	c.id.start, c.id.pid = start, int32(pid)
	c.index, c.n = int(i), int(n)
	c.data = v[len(v)-r.Len():]
	return c, nil
}

// assembler collects partial chunks until a partial is complete, and
// checks its MAC.
type assembler struct {
	macKey []byte // format version 3: bound to the deployment
	// macKeyV2 checks format version 2 partials, accepted only for windows
	// that start before v2Before: the windows in flight when the
	// deployment first ran a version that writes version 3 (recorded in
	// the state topic, see stateRecord.PartialsBoundFrom). Stage 1 never
	// rewrites a partial it committed behind, so those windows need the
	// old partials; later ones are never written in version 2 by this
	// deployment, so a version 2 partial of theirs is a replay.
	macKeyV2 []byte
	v2Before int64
	// prevKey (nil: none) checks format version 3 partials written under
	// the deployment's previous binding (a configuration change: another
	// release digest, namespace or input topics), accepted for windows
	// before prevBefore only: the windows in flight at the change, whose
	// partials stage 1 will not write again.
	prevKey    []byte
	prevBefore int64
	parts      map[partialID]*assembly
}

// assembly is one partial being collected, with the offset of its first
// chunk seen (which holds back the partials topic's commits).
type assembly struct {
	chunks [][]byte
	have   int
	first  int64
}

// newAssembler returns an assembler that accepts format version 3 under
// macKey, and version 2 under macKeyV2 for windows before v2Before.
func newAssembler(macKey, macKeyV2 []byte, v2Before int64) *assembler {
	return &assembler{macKey: macKey, macKeyV2: macKeyV2, v2Before: v2Before, parts: map[partialID]*assembly{}}
}

// add adds the chunk read at offset and returns the whole encoding when
// the partial is complete (and its first offset), or nil.
func (a *assembler) add(c partialChunk, offset int64) ([]byte, int64, error) {
	if c.id.v2 && c.id.start >= a.v2Before {
		return nil, 0, fmt.Errorf("%w: window %d, partition %d, cutoff %d", errPartialV2, c.id.start, c.id.pid, a.v2Before)
	}
	as := a.parts[c.id]
	if as == nil {
		as = &assembly{chunks: make([][]byte, c.n), first: offset}
		a.parts[c.id] = as
	}
	if len(as.chunks) != c.n {
		return nil, 0, fmt.Errorf("%w: chunk counts disagree for window %d, partition %d", errPartialMessage, c.id.start, c.id.pid)
	}
	if as.chunks[c.index] == nil {
		as.chunks[c.index] = c.data
		as.have++
	}
	if as.have < c.n {
		return nil, 0, nil
	}
	delete(a.parts, c.id)
	b := bytes.Join(as.chunks, nil)
	if !a.valid(c.id, b) {
		return nil, 0, fmt.Errorf("%w: window %d, partition %d", errPartialMAC, c.id.start, c.id.pid)
	}
	return b, as.first, nil
}

// valid reports whether the MAC of the partial id with encoding b is one
// this assembler accepts.
func (a *assembler) valid(id partialID, b []byte) bool {
	ok := func(key []byte) bool {
		want := partialMAC(key, id.start, id.pid, b)
		return hmac.Equal(want[:], id.sum[:])
	}
	if id.v2 {
		return ok(a.macKeyV2)
	}
	return ok(a.macKey) || (a.prevKey != nil && id.start < a.prevBefore && ok(a.prevKey))
}

// drop forgets the incomplete partials of windows before next.
func (a *assembler) drop(next int64) {
	for id := range a.parts {
		if id.start < next {
			delete(a.parts, id)
		}
	}
}

// oldest returns the smallest first offset of an incomplete partial (ok
// false: none).
func (a *assembler) oldest() (int64, bool) {
	var o int64
	ok := false
	for _, as := range a.parts {
		if !ok || as.first < o {
			o, ok = as.first, true
		}
	}
	return o, ok
}
