package windows

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// bigSum is the oracle: the exact sum in a big.Float wide enough for any
// float64 sum here (2^-1074 … 2^1024 spans 2098 bits; 4096 leaves room for
// the carries of up to 2^1998 terms), rounded to the nearest float64 with
// ties to even by big.Float.Float64.
func bigSum(xs []float64) float64 {
	acc := new(big.Float).SetPrec(4096)
	for _, x := range xs {
		acc.Add(acc, new(big.Float).SetPrec(4096).SetFloat64(x))
	}
	f, _ := acc.Float64()
	return f
}

func TestExactSumMatchesBigFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	gens := map[string]func() float64{
		"uniform":   func() float64 { return r.Float64()*2 - 1 },
		"wide":      func() float64 { return math.Ldexp(r.Float64()-0.5, r.IntN(200)-100) },
		"cancel":    func() float64 { return []float64{1e16, -1e16, 1, 0.1, -0.1, 3e-17}[r.IntN(6)] },
		"subnormal": func() float64 { return math.Ldexp(float64(r.IntN(9)-4), -1074) },
		"ties": func() float64 {
			return []float64{1, math.Ldexp(1, -53), math.Ldexp(1, -106), -math.Ldexp(1, -53)}[r.IntN(4)]
		},
	}
	for name, gen := range gens {
		for trial := 0; trial < 300; trial++ {
			xs := make([]float64, 1+r.IntN(60))
			for i := range xs {
				xs[i] = gen()
			}
			var e exactSum
			for _, x := range xs {
				e.add(x)
			}
			want := bigSum(xs)
			if got := e.value(); got != want {
				t.Fatalf("%s trial %d: got %v, want %v (%v)", name, trial, got, want, xs)
			}
			// Canonical partials: any order of addition gives the same list.
			e.canon()
			r.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
			var f exactSum
			for i := len(xs) - 1; i >= 0; i-- {
				f.add(xs[i])
			}
			f.canon()
			if !slices.Equal(e.p, f.p) {
				t.Fatalf("%s trial %d: canonical partials differ: %v vs %v", name, trial, e.p, f.p)
			}
			if got := e.value(); got != want {
				t.Fatalf("%s trial %d: canon changed the value: %v, want %v", name, trial, got, want)
			}
		}
	}
}

func TestExactSumMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = math.Ldexp(r.Float64()-0.5, r.IntN(120)-60)
	}
	var a, b exactSum
	for i, x := range xs {
		if i%3 == 0 {
			a.add(x)
		} else {
			b.add(x)
		}
	}
	a.merge(&b)
	if got, want := a.value(), bigSum(xs); got != want {
		t.Fatalf("merged sum %v, want %v", got, want)
	}
}
