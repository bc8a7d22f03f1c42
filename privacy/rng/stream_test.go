package rng

import (
	"crypto/hmac"
	"crypto/sha256"
	"math"
	"math/rand/v2"
	"testing"
)

// Statistical tests in this file use fixed keys and release ids, so they are
// deterministic; each states the probability that it would fail for a
// correct implementation under a random key (its false-failure rate).

// testKey is a fixed, non-secret key for tests.
var testKey = Key{0x64, 0x70, 0x73, 0x74, 0x72, 0x65, 0x61, 0x6d}

// TestStreamIndependentIDs checks that streams of neighbouring release ids
// are uncorrelated: the sample correlation of 2·10⁵ paired normal variates
// has standard deviation 1/√n; the bound 5/√n fails with probability
// 5.7e-7 for independent streams.
func TestStreamIndependentIDs(t *testing.T) {
	const n = 200000
	a, b := NewStream(testKey, "release-1"), NewStream(testKey, "release-2")
	var sab, saa, sbb float64
	for i := 0; i < n; i++ {
		x, y := a.Normal(), b.Normal()
		sab += x * y
		saa += x * x
		sbb += y * y
	}
	r := sab / math.Sqrt(saa*sbb)
	if math.Abs(r) > 5/math.Sqrt(n) {
		t.Errorf("correlation between release streams %.5f exceeds %.5f", r, 5/math.Sqrt(n))
	}
}

// TestFloat64Binades checks that Float64 reaches deep binades with the right
// probability: P(U ∈ [2^−(k+1), 2^−k)) = 2^−(k+1). With n = 4·10⁶ the counts
// of binades 0…17 are tested together (chi-square, 18 cells plus the rest),
// and binades 12 and beyond exercise the multi-word exponent path. The
// chi-square bound 60 on 18 degrees of freedom fails with probability
// 2.1e-6. It also checks the open interval and the low mantissa bit.
func TestFloat64Binades(t *testing.T) {
	n := 4_000_000
	if testing.Short() {
		n = 1_000_000
	}
	const cells = 18
	var count [cells + 1]int
	odd := 0
	s := NewStream(testKey, "binades")
	for i := 0; i < n; i++ {
		u := s.Float64()
		if !(u > 0 && u < 1) {
			t.Fatalf("Float64 returned %v", u)
		}
		_, e := math.Frexp(u) // u ∈ [2^(e−1), 2^e): binade k = −e
		k := -e
		if k > cells {
			k = cells
		}
		count[k]++
		odd += int(math.Float64bits(u) & 1)
	}
	chi := 0.0
	for k := 0; k <= cells; k++ {
		p := math.Ldexp(1, -(k + 1))
		if k == cells {
			p = math.Ldexp(1, -cells)
		}
		e := p * float64(n)
		chi += (float64(count[k]) - e) * (float64(count[k]) - e) / e
	}
	if chi > 60 {
		t.Errorf("binade counts %v: chi-square %.1f > 60", count, chi)
	}
	// The lowest mantissa bit is a fair coin: |z| > 5 has probability 5.7e-7.
	if z := (float64(odd) - float64(n)/2) / math.Sqrt(float64(n)/4); math.Abs(z) > 5 {
		t.Errorf("low mantissa bit set %d of %d times (z = %.1f)", odd, n, z)
	}
}

func TestUniformFromParts(t *testing.T) {
	cases := []struct {
		zeros int
		mant  uint64
		want  float64
	}{
		{0, 0, 0.5},
		{0, mantMask, math.Nextafter(1, 0)},
		{1, 0, 0.25},
		{52, 1, math.Ldexp(1+0x1p-52, -53)},
		{maxUniformZeros, 0, math.Ldexp(1, -1022)}, // smallest normal
		{5000, 0, math.Ldexp(1, -1022)},            // clamped
	}
	for _, c := range cases {
		if got := uniformFromParts(c.zeros, c.mant); got != c.want {
			t.Errorf("uniformFromParts(%d, %#x) = %v, want %v", c.zeros, c.mant, got, c.want)
		}
	}
}

// TestUint64n checks range and uniformity: for n = 7, 7·10⁵ draws, the
// chi-square bound 40 on 6 degrees of freedom fails with probability 4.6e-7.
// For n = 2⁶³ + 2⁶² (where modulo reduction would be badly biased) the
// fraction below 2⁶³ must be 2/3 within 5 standard deviations.
func TestUint64n(t *testing.T) {
	s := NewStream(testKey, "uint64n")
	const draws = 700000
	var c [7]int
	for i := 0; i < draws; i++ {
		v := s.Uint64n(7)
		if v >= 7 {
			t.Fatalf("Uint64n(7) = %d", v)
		}
		c[v]++
	}
	chi := 0.0
	for _, k := range c {
		d := float64(k) - draws/7
		chi += d * d / (draws / 7)
	}
	if chi > 40 {
		t.Errorf("Uint64n(7) counts %v: chi-square %.1f", c, chi)
	}
	const big = 1<<63 + 1<<62
	low := 0
	const m = 300000
	for i := 0; i < m; i++ {
		v := s.Uint64n(big)
		if v >= big {
			t.Fatalf("Uint64n(%d) = %d", uint64(big), v)
		}
		if v < 1<<63 {
			low++
		}
	}
	if z := (float64(low) - m*2.0/3) / math.Sqrt(m*2.0/9); math.Abs(z) > 5 {
		t.Errorf("Uint64n(2^63+2^62): %d of %d below 2^63 (z = %.1f)", low, m, z)
	}
	if s.Uint64n(0) != 0 || s.Uint64n(1) != 0 {
		t.Error("Uint64n(0) and Uint64n(1) must be 0")
	}
}

// TestStreamSeed checks NewStream against the construction it documents:
// ChaCha8 seeded with HMAC-SHA256(key, release id), computed here with the
// standard library directly.
func TestStreamSeed(t *testing.T) {
	mac := hmac.New(sha256.New, testKey[:])
	mac.Write([]byte("golden"))
	var seed [32]byte
	copy(seed[:], mac.Sum(nil))
	want := rand.NewChaCha8(seed)
	s := NewStream(testKey, "golden")
	for i := 0; i < 100; i++ {
		if a, b := s.Uint64(), want.Uint64(); a != b {
			t.Fatalf("word %d: %#x, want %#x", i, a, b)
		}
	}
}
