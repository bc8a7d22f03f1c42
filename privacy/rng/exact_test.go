package rng

import (
	"math"
	"math/big"
	"testing"
)

// TestDyadicUp: the sampler's scale is never below the requested one and is
// exact wherever scale·2⁶² is an integer.
func TestDyadicUp(t *testing.T) {
	for _, sc := range []float64{1, 3, 0.7, 10.000000000000002, 0x1p-10, 0x1p-30, 0x1p40, 1.0 / 3, math.Pi * 1e-5} {
		num, den := DyadicUp(sc)
		got := float64(num) / float64(den) // both exact here
		if got < sc || got > sc*(1+0x1p-30) {
			t.Errorf("DyadicUp(%v) = %d/%d", sc, num, den)
		}
		if sc >= 0x1p-10 && got != sc {
			t.Errorf("DyadicUp(%v) = %d/%d is not exact", sc, num, den)
		}
		if num%2 == 0 && den > 1 {
			t.Errorf("DyadicUp(%v) = %d/%d is not reduced", sc, num, den)
		}
	}
}

// TestBernExp checks the exact Bernoulli(exp(−γ)) primitives: frequencies
// over 4·10⁵ draws within 5 standard deviations (failure probability 6e-7
// each), for small and big rationals.
func TestBernExp(t *testing.T) {
	s := NewStream(testKey, "bernexp")
	const n = 400_000
	freq := func(f func() bool) float64 {
		k := 0
		for i := 0; i < n; i++ {
			if f() {
				k++
			}
		}
		return float64(k) / n
	}
	check := func(name string, got, p float64) {
		if math.Abs(got-p) > 5*math.Sqrt(p*(1-p)/n) {
			t.Errorf("%s: frequency %.5f, want %.5f", name, got, p)
		}
	}
	check("e^-1/3", freq(func() bool { return s.bernExp(1, 3) }), math.Exp(-1.0/3))
	check("e^-7/2", freq(func() bool { return s.bernExp(7, 2) }), math.Exp(-3.5))
	check("e^-0", freq(func() bool { return s.bernExp(0, 5) }), 1)
	// Big rationals: γ = 1 + r/d with d ≈ 2^100.
	d := newBig(t, "1267650600228229401496703205376") // 2^100
	r := newBig(t, "633825300114114700748351602688")  // 2^99: r/d = 1/2
	q := newBig(t, "1")
	check("big e^-1.5", freq(func() bool { return s.bernExpBig(q, r, d) }), math.Exp(-1.5))
	third := newBig(t, "422550200076076467165567735125") // ⌊2^100/3⌋
	check("big 1/3", freq(func() bool { return s.bernBig(third, d) }), 1.0/3)
	// The exported form: γ = n/d = 2^101/2^100·... = 2.5 with big n and d.
	n5 := new(big.Int).Add(new(big.Int).Lsh(d, 1), r) // 2.5·2^100
	check("BernoulliExp 2.5", freq(func() bool { return s.BernoulliExp(n5, d) }), math.Exp(-2.5))
}

func newBig(t *testing.T, s string) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("bad big integer %q", s)
	}
	return v
}
