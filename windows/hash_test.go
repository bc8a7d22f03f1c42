package windows

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// SipHash-2-4-128 known answers: key 00 01 … 0f, message 00 01 … (n−1),
// copied from vectors_sip128 in the reference implementation's vectors.h
// (github.com/veorq/SipHash, commit 1a7d041).
var sip128Vectors = map[int]string{
	0:  "a3817f04ba25a8e66df67214c7550293",
	1:  "da87c1d86b99af44347659119b22fc45",
	7:  "a1f1ebbed8dbc153c0b84aa61ff08239",
	8:  "3b62a9ba6258f5610f83e264f31497b4",
	15: "5493e99933b0a8117e08ec0f97cfc3d9",
	16: "6ee2a4ca67b054bbfd3315bf85230577",
	17: "473d06e8738db89854c066c47ae47740",
	63: "5150d1772f50834a503e069a973fbd7c",
}

func refKey() (uint64, uint64) {
	var k [16]byte
	for i := range k {
		k[i] = byte(i)
	}
	return binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:])
}

func TestSipHash128Vectors(t *testing.T) {
	k0, k1 := refKey()
	for n, want := range sip128Vectors {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(i)
		}
		h := newSip(k0, k1)
		h.str(string(msg))
		a, b := h.sum128()
		var out [16]byte
		binary.LittleEndian.PutUint64(out[:8], a)
		binary.LittleEndian.PutUint64(out[8:], b)
		if got := hex.EncodeToString(out[:]); got != want {
			t.Errorf("len %d: got %s, want %s", n, got, want)
		}
	}
}

// Feeding a message in arbitrary pieces, as words or strings, must give the
// same tag as feeding it at once.
func TestSipHashIncremental(t *testing.T) {
	k0, k1 := refKey()
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 500; trial++ {
		msg := make([]byte, r.IntN(80))
		for i := range msg {
			msg[i] = byte(r.Uint32())
		}
		whole := newSip(k0, k1)
		whole.str(string(msg))
		a0, b0 := whole.sum128()

		h := newSip(k0, k1)
		rest := msg
		for len(rest) > 0 {
			if len(rest) >= 8 && r.IntN(2) == 0 {
				h.word(binary.LittleEndian.Uint64(rest))
				rest = rest[8:]
				continue
			}
			n := 1 + r.IntN(len(rest))
			h.str(string(rest[:n]))
			rest = rest[n:]
		}
		a, b := h.sum128()
		if a != a0 || b != b0 {
			t.Fatalf("trial %d (len %d): pieces give a different tag", trial, len(msg))
		}
	}
}

func TestSipDoesNotAllocate(t *testing.T) {
	s := "some-unit-identifier-0123456789"
	n := testing.AllocsPerRun(100, func() {
		h := newSip(1, 2)
		h.word(3)
		h.str(s)
		h.sum128()
	})
	if n != 0 {
		t.Errorf("%v allocations per hash, want 0", n)
	}
}

// The register-only fast paths give the same tags as the incremental
// hasher, from a fresh state and from one holding a whole word.
func TestSipFastPaths(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 500; trial++ {
		k0, k1 := r.Uint64(), r.Uint64()
		msg := make([]byte, r.IntN(80))
		for i := range msg {
			msg[i] = byte(r.Uint32())
		}
		for _, prefix := range []bool{false, true} {
			st := newSip(k0, k1)
			if prefix {
				st.word(tagUnit)
			}
			inc := st
			inc.str(string(msg))
			a0, b0 := inc.sum128()
			if a, b := st.sumString(string(msg)); a != a0 || b != b0 {
				t.Fatalf("trial %d (len %d, prefix %v): sumString differs", trial, len(msg), prefix)
			}
			x, y := r.Uint64(), r.Uint64()
			inc = st
			inc.word(x)
			inc.word(y)
			a0, b0 = inc.sum128()
			if a, b := st.sumWords(x, y); a != a0 || b != b0 {
				t.Fatalf("trial %d (prefix %v): sumWords differs", trial, prefix)
			}
		}
	}
}
