package operator

// partials.go is the wire format of the partials topic (scale-out, see
// KafkaConfig.ScaleOut): stage 1 writes one partial state per window and
// input partition, split into chunks that fit a Kafka message; stage 2
// reassembles them and accepts a partial only with a valid MAC under a key
// derived from the noise key, which every instance of the deployment holds:
// a client that may write to the partials topic but does not hold the key
// cannot make stage 2 merge a partial state of its own.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/privacy/rng"
)

// partialMagic starts every partials topic message (format version 2:
// version 1 carried a plain SHA-256 instead of the MAC and is not read).
var partialMagic = []byte("dpp2")

// partialMACDomain separates the partials MAC key from every other use of
// the noise key (the noise streams use "dpstream/release/v2").
const partialMACDomain = "dpstream/partials-mac/v1"

// partialMACKey derives the key of the partials topic's MACs from the
// noise key: HMAC-SHA256(key, partialMACDomain).
func partialMACKey(k rng.Key) []byte {
	m := hmac.New(sha256.New, k[:])
	m.Write([]byte(partialMACDomain))
	return m.Sum(nil)
}

// partialMAC is HMAC-SHA256(macKey, varint(start) ‖ varint(pid) ‖ b): it
// binds the partial's encoding to its window and input partition.
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
}

// partialMessages splits the encoding b of the partial of window start and
// input partition pid into messages for topic. Every message carries the
// partial's id (with its MAC under macKey), its index and the number of
// chunks, so that stage 2 can reassemble it whatever else the topic holds
// in between.
func partialMessages(topic string, macKey []byte, start int64, pid int32, b []byte) []kafka.Message {
	sum := partialMAC(macKey, start, pid, b)
	n := max(1, (len(b)+partialChunkBytes-1)/partialChunkBytes)
	key := []byte(strconv.FormatInt(start, 10) + "/" + strconv.Itoa(int(pid)))
	out := make([]kafka.Message, 0, n)
	for i := range n {
		chunk := b[min(i*partialChunkBytes, len(b)):min((i+1)*partialChunkBytes, len(b))]
		v := append([]byte(nil), partialMagic...)
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

// partialChunk is one decoded message of the partials topic.
type partialChunk struct {
	id       partialID
	index, n int
	data     []byte
}

// decodePartialChunk decodes one partials topic message.
func decodePartialChunk(v []byte) (partialChunk, error) {
	var c partialChunk
	if !bytes.HasPrefix(v, partialMagic) {
		return c, errPartialMessage
	}
	r := bytes.NewReader(v[len(partialMagic):])
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
	macKey []byte
	parts  map[partialID]*assembly
}

// assembly is one partial being collected, with the offset of its first
// chunk seen (which holds back the partials topic's commits).
type assembly struct {
	chunks [][]byte
	have   int
	first  int64
}

func newAssembler(macKey []byte) *assembler {
	return &assembler{macKey: macKey, parts: map[partialID]*assembly{}}
}

// add adds the chunk read at offset and returns the whole encoding when
// the partial is complete (and its first offset), or nil.
func (a *assembler) add(c partialChunk, offset int64) ([]byte, int64, error) {
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
	if want := partialMAC(a.macKey, c.id.start, c.id.pid, b); !hmac.Equal(want[:], c.id.sum[:]) {
		return nil, 0, fmt.Errorf("%w: window %d, partition %d: the MAC does not match (damaged, or not written with this deployment's key)",
			errPartialMessage, c.id.start, c.id.pid)
	}
	return b, as.first, nil
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
