package operator

// intent.go is the format of a publication intent in the state topic.
//
// Before the releases of a batch of closed windows are written to the
// output topic, the release messages themselves are written to the state
// topic, so that a crash in the middle of a publication is completed by
// the next start with exactly those messages (resume.go, completeIntent):
//
//   - The messages: every release's key and value, each length-prefixed
//     with an unsigned varint (key length ‖ key ‖ value length ‖ value,
//     message after message), concatenated and cut into chunks of at most
//     intentChunkBytes. Chunk i is a state topic message keyed
//     intentKey(group, i): group id ‖ NUL ‖ "intent" ‖ NUL ‖ decimal i.
//     The Kafka timestamp is not stored: a completed release gets its
//     window's scheduled publication time again (intentReleaseTime).
//   - The record: the group's state record (state.go) with Pending set to
//     an intentRecord (JSON, below) that gives the number of chunks and
//     messages, the hex SHA-256 of the concatenated chunks, and the
//     progress the publication makes final (Through, Ledger, Digest,
//     Running). It is written after its chunks, in a second write, so
//     that it is never durable before them.
//
// An intent is current while its Through is after the record's
// ClosedThrough; chunks of an older, larger intent may remain in the
// (compacted) topic and are ignored. The messages are noised releases,
// never input data.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// intentRecord describes the release messages of a batch of windows that
// are being published: once they are all written, ClosedThrough becomes
// Through and the ledger becomes Ledger.
type intentRecord struct {
	Through  int64         `json:"through"`
	Chunks   int           `json:"chunks"`
	Messages int           `json:"messages"`
	SHA256   string        `json:"sha256"` // of the concatenated chunks
	Ledger   *ledgerRecord `json:"ledger,omitempty"`
	Digest   string        `json:"digest"`
	// Running is the running totals after Through (windows.running).
	Running *runningRecord `json:"running,omitempty"`
}

// intentChunkBytes is the largest intent chunk: half of Kafka's default
// message.max.bytes (1 MiB), so that a chunk with its framing always fits.
const intentChunkBytes = 512 << 10

// intentKey is the state topic key of chunk i of group's intent: the group
// id, NUL, "intent", NUL, i — never equal to a group id (the state record's
// key) unless a group id contains NUL.
func intentKey(group string, i int) string {
	return group + "\x00intent\x00" + strconv.Itoa(i)
}

// encodeIntent serialises release messages (key and value, each length-
// prefixed with a uvarint) and splits the result into chunks of at most
// intentChunkBytes. It returns the chunks and the hex SHA-256 of their
// concatenation.
func encodeIntent(msgs []kafka.Message) ([][]byte, string) {
	buf := appendFramed(nil, msgs)
	sum := sha256.Sum256(buf)
	var chunks [][]byte
	for len(buf) > intentChunkBytes {
		chunks = append(chunks, buf[:intentChunkBytes])
		buf = buf[intentChunkBytes:]
	}
	chunks = append(chunks, buf)
	return chunks, hex.EncodeToString(sum[:])
}

// readIntent reassembles the intent's messages from its chunks and checks
// them against the recorded count and digest (chunks of an older, larger
// intent may still be in the topic; they are ignored).
func readIntent(in *intentRecord, chunks map[int][]byte) ([]kafka.Message, error) {
	var buf []byte
	for i := range in.Chunks {
		c, ok := chunks[i]
		if !ok {
			return nil, fmt.Errorf("publication intent through %s: chunk %d of %d is missing", tsString(in.Through), i, in.Chunks)
		}
		buf = append(buf, c...)
	}
	if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != in.SHA256 {
		return nil, fmt.Errorf("publication intent through %s: its chunks do not match the recorded digest", tsString(in.Through))
	}
	out, err := parseFramed(buf)
	if err != nil {
		return nil, fmt.Errorf("publication intent: %w", err)
	}
	if len(out) != in.Messages {
		return nil, fmt.Errorf("publication intent through %s: %d messages, %d recorded", tsString(in.Through), len(out), in.Messages)
	}
	return out, nil
}

// appendFramed appends the keys and values of msgs to buf, each
// length-prefixed with a uvarint: the framing of the intent's messages.
func appendFramed(buf []byte, msgs []kafka.Message) []byte {
	for _, m := range msgs {
		buf = binary.AppendUvarint(buf, uint64(len(m.Key)))
		buf = append(buf, m.Key...)
		buf = binary.AppendUvarint(buf, uint64(len(m.Value)))
		buf = append(buf, m.Value...)
	}
	return buf
}

// parseFramed reads the messages that appendFramed wrote (keys and values
// copied out of buf).
func parseFramed(buf []byte) ([]kafka.Message, error) {
	var out []kafka.Message
	r := bytes.NewReader(buf)
	next := func() ([]byte, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return nil, errors.New("truncated message")
		}
		b := make([]byte, n)
		_, _ = r.Read(b)
		return b, nil
	}
	for r.Len() > 0 {
		k, err := next()
		if err != nil {
			return nil, err
		}
		v, err := next()
		if err != nil {
			return nil, err
		}
		out = append(out, kafka.Message{Key: k, Value: v})
	}
	return out, nil
}

// intentMessages builds the state topic messages of an intent: its chunks
// first, then the state record that points at them (one partition, written
// in order in one call, so the record is never ahead of its chunks).
func intentMessages(ctx context.Context, c *clients, stateTopic, group, outputTopic string, base stateRecord, in intentRecord, releases []kafka.Message) ([]kafka.Message, error) {
	chunks, sum := encodeIntent(releases)
	in.Chunks, in.Messages, in.SHA256 = len(chunks), len(releases), sum
	out := make([]kafka.Message, 0, len(chunks)+1)
	for i, ch := range chunks {
		out = append(out, kafka.Message{Topic: stateTopic, Key: []byte(intentKey(group, i)), Value: ch})
	}
	base.Pending = &in
	sm, err := stateMessage(ctx, c, stateTopic, group, outputTopic, base)
	if err != nil {
		return nil, err
	}
	return append(out, sm), nil
}

// intentReleaseTime is the Kafka timestamp of a release completed from a
// publication intent: its window's scheduled publication time, as publish
// set it (the intent stores key and value only). A value that does not
// decode (never written by publish) gets the schedule of the intent's
// last window, through.
func intentReleaseTime(cfg Config, key, value []byte, through int64) time.Time {
	if r, ok := readRelease(key, value); ok {
		return scheduledAt(cfg, r.windowEnd)
	}
	return scheduledAt(cfg, through)
}
