package operator

// Fuzz targets for the readers of what the operator reads back from
// Kafka: the state topic's records and intent chunks (which a reset by
// hand, a bug of an older version or a damaged log could make anything)
// and the partials topic's messages (which anyone allowed to write to that
// topic controls). None may panic; each round-trips through its encoder.
// deploy/test.sh runs each for a fixed number of executions; the seeds are
// the pinned records of testdata/compat (compat_test.go).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"testing"
)

// FuzzDecodeState: decodeState never panics, and a record it accepts
// encodes (encodeState) to a record that decodes to the same encoding.
func FuzzDecodeState(f *testing.F) {
	f.Add(readCompat(f, "state.json"))
	f.Add(readCompat(f, "state_pending.json"))
	f.Add([]byte(`{"v":1,"closed_through":1704067240000,"output_offsets":{"0":3,"1":0}}`))
	f.Add([]byte(`{"v":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeState(b)
		if err != nil {
			return
		}
		if s.Version != 1 && s.Version != stateVersion {
			t.Fatalf("accepted version %d", s.Version)
		}
		end := map[int]int64{}
		for p, o := range s.OutputOffsets {
			i, err := strconv.Atoi(p)
			if err != nil || strconv.Itoa(i) != p {
				return // recoverState refuses it (ErrState); nothing to round-trip
			}
			end[i] = o
		}
		e1, err := encodeState(*s, end)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := decodeState(e1)
		if err != nil {
			t.Fatalf("the encoding of an accepted record does not decode: %v\n%s", err, e1)
		}
		e2, err := encodeState(*s2, end)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e1, e2) {
			t.Fatalf("not a round trip:\n%s\n%s", e1, e2)
		}
	})
}

// FuzzReadIntent: readIntent never panics on any two chunks (with their
// digest and a claimed message count), and the messages it returns
// re-encode (encodeIntent) to chunks that read back to the same messages.
func FuzzReadIntent(f *testing.F) {
	chunks := compatIntentChunks(f)
	msgs, err := readIntent(&intentRecord{Through: compatIntentEnd, Chunks: 2, Messages: 640, SHA256: compatIntentSHA256}, chunks)
	if err != nil {
		f.Fatal(err)
	}
	// Seeds: the first three pinned messages, split at a few points (the
	// pinned chunks themselves are 512 KiB, too large for mutation).
	small, _ := encodeIntent(msgs[:3])
	for _, cut := range []int{0, 7, len(small[0]) / 2} {
		f.Add(small[0][:cut], small[0][cut:], 3)
	}
	f.Add([]byte{0x05, 'k'}, []byte{}, 1)
	f.Fuzz(func(t *testing.T, c0, c1 []byte, n int) {
		sum := sha256.Sum256(append(append([]byte(nil), c0...), c1...))
		in := intentRecord{Through: compatIntentEnd, Chunks: 2, Messages: n, SHA256: hex.EncodeToString(sum[:])}
		got, err := readIntent(&in, map[int][]byte{0: c0, 1: c1})
		if err != nil {
			return
		}
		if len(got) != n {
			t.Fatalf("%d messages, %d recorded", len(got), n)
		}
		re, sum2 := encodeIntent(got)
		back := map[int][]byte{}
		for i, c := range re {
			back[i] = c
		}
		again, err := readIntent(&intentRecord{Chunks: len(re), Messages: n, SHA256: sum2}, back)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !bytes.Equal(got[i].Key, again[i].Key) || !bytes.Equal(got[i].Value, again[i].Value) {
				t.Fatalf("message %d differs after a round trip", i)
			}
		}
	})
}

// FuzzDecodePartialChunk: decodePartialChunk never panics; what it
// accepts has an index below its count and its data is the message's
// tail; the assembler takes it without panicking; and any data written by
// partialMessages for the decoded window and partition decodes and
// reassembles to itself under the MAC key.
func FuzzDecodePartialChunk(f *testing.F) {
	msgs := compatPartialsTopic(f)
	f.Add(msgs[0].Value)
	f.Add(msgs[1].Value[:2048])
	f.Add([]byte("dpp2"))
	f.Add([]byte("dpp1\x00\x00"))
	macKey := partialMACKey(testKey(), partialBinding{})
	f.Fuzz(func(t *testing.T, v []byte) {
		c, err := decodePartialChunk(v)
		if err != nil {
			return
		}
		if c.index < 0 || c.index >= c.n || c.id.pid < 0 || !bytes.HasSuffix(v, c.data) {
			t.Fatalf("accepted chunk %d of %d, partition %d", c.index, c.n, c.id.pid)
		}
		a := newAssembler(macKey, partialMACKeyV2(testKey()), math.MaxInt64)
		if b, _, err := a.add(c, 0); err == nil && b != nil && c.n != 1 {
			t.Fatalf("a partial of %d chunks complete after one", c.n)
		}
		if len(c.data) == 0 {
			// The assembler cannot tell an empty encoding from an
			// incomplete partial (add returns nil for both); no partial
			// encodes to nothing, and stage 2 would skip one as
			// undecodable anyway.
			return
		}
		out := partialMessages("p", macKey, c.id.start, c.id.pid, c.data)
		got, err := assemble(macKey, out)
		if err != nil || len(got) != 1 || !bytes.Equal(got[0], c.data) {
			t.Fatalf("round trip of window %d, partition %d: %d partials, err %v", c.id.start, c.id.pid, len(got), err)
		}
		for _, m := range out {
			d, err := decodePartialChunk(m.Value)
			if err != nil || d.id.start != c.id.start || d.id.pid != c.id.pid {
				t.Fatalf("re-encoded chunk: %+v, err %v", d.id, err)
			}
		}
	})
}
