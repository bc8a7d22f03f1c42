package operator

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/privacy/rng"
)

// assemble feeds msgs to a new assembler with macKey and returns the
// completed partials' encodings, or the first error.
func assemble(macKey []byte, msgs []kafka.Message) ([][]byte, error) {
	a := newAssembler(macKey)
	var out [][]byte
	for i, m := range msgs {
		c, err := decodePartialChunk(m.Value)
		if err != nil {
			return nil, err
		}
		b, _, err := a.add(c, int64(i))
		if err != nil {
			return nil, err
		}
		if b != nil {
			out = append(out, b)
		}
	}
	return out, nil
}

// TestPartialChunksRoundTrip: a partial larger than a chunk is split and
// reassembled to the same bytes, whatever the order of its chunks.
func TestPartialChunksRoundTrip(t *testing.T) {
	mk := partialMACKey(testKey())
	b := bytes.Repeat([]byte("partial-state "), 2*partialChunkBytes/14+3)
	msgs := partialMessages("p", mk, 60_000, 3, b)
	if len(msgs) != 3 {
		t.Fatalf("%d chunks for %d bytes, want 3", len(msgs), len(b))
	}
	msgs[0], msgs[2] = msgs[2], msgs[0]
	got, err := assemble(mk, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !bytes.Equal(got[0], b) {
		t.Fatalf("reassembled %d partials, want the original one", len(got))
	}
}

// TestPartialMACRejectsForgeries: stage 2 accepts a partial only with the
// MAC of the deployment's key over its window, input partition and bytes.
// A writer without the key — who could compute the plain SHA-256 that
// format version 1 carried — cannot get its own partial state merged, nor
// relabel a genuine partial as another window's or partition's.
func TestPartialMACRejectsForgeries(t *testing.T) {
	mk := partialMACKey(testKey())
	genuine := []byte("the partial state of window 60000, input partition 3")

	// Signed with another key.
	var other rng.Key
	other[0] = 1
	if _, err := assemble(mk, partialMessages("p", partialMACKey(other), 60_000, 3, genuine)); !errors.Is(err, errPartialMessage) {
		t.Errorf("a partial under another key: err %v, want errPartialMessage", err)
	}

	// Forged: bytes of the attacker's choice with their SHA-256 in place of
	// the MAC (version 1's integrity check, which anyone can compute).
	forged := []byte("a partial state of the attacker's choice")
	sum := sha256.Sum256(forged)
	v := append([]byte(nil), partialMagic...)
	v = binary.AppendVarint(v, 60_000)
	v = binary.AppendVarint(v, 3)
	v = append(v, sum[:]...)
	v = binary.AppendUvarint(v, 0)
	v = binary.AppendUvarint(v, 1)
	v = append(v, forged...)
	if _, err := assemble(mk, []kafka.Message{{Value: v}}); !errors.Is(err, errPartialMessage) {
		t.Errorf("a forged partial with a SHA-256: err %v, want errPartialMessage", err)
	}

	// Relabelled: the genuine message with another window or partition in
	// its header.
	for _, h := range []struct {
		start int64
		pid   int64
	}{{120_000, 3}, {60_000, 2}} {
		m := partialMessages("p", mk, 60_000, 3, genuine)[0]
		c, err := decodePartialChunk(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		w := append([]byte(nil), partialMagic...)
		w = binary.AppendVarint(w, h.start)
		w = binary.AppendVarint(w, h.pid)
		w = append(w, c.id.sum[:]...)
		w = binary.AppendUvarint(w, 0)
		w = binary.AppendUvarint(w, 1)
		w = append(w, c.data...)
		if _, err := assemble(mk, []kafka.Message{{Value: w}}); !errors.Is(err, errPartialMessage) {
			t.Errorf("the genuine partial relabelled as window %d, partition %d: err %v, want errPartialMessage", h.start, h.pid, err)
		}
	}

	// The genuine one passes.
	if got, err := assemble(mk, partialMessages("p", mk, 60_000, 3, genuine)); err != nil || len(got) != 1 {
		t.Errorf("the genuine partial: %d assembled, err %v", len(got), err)
	}
}
