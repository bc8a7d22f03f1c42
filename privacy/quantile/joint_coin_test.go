package quantile

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// coinTarget is a lazy Bernoulli target: its certified bounds and its
// value as a rational (exact, or the 60-digit mpmath value of an
// irrational, whose rounding is far below any uniform's resolution here).
type coinTarget struct {
	name   string
	bounds func(prec uint) (lo, hi *big.Float, err error)
	exact  *big.Rat
}

// ratBounds returns directed roundings of r at prec bits.
func ratBounds(r *big.Rat) func(prec uint) (lo, hi *big.Float, err error) {
	return func(prec uint) (*big.Float, *big.Float, error) {
		lo := new(big.Float).SetPrec(prec).SetMode(big.ToNegativeInf).SetRat(r)
		hi := new(big.Float).SetPrec(prec).SetMode(big.ToPositiveInf).SetRat(r)
		return lo, hi, nil
	}
}

// coinTargets are 1/3, 5/7, 1/2 (a dyadic: the uniform may match it for
// a whole word) and exp(−1/7).
func coinTargets() []coinTarget {
	e17, _ := new(big.Rat).SetString(expReference[1].v)
	return []coinTarget{
		{"1/3", ratBounds(big.NewRat(1, 3)), big.NewRat(1, 3)},
		{"5/7", ratBounds(big.NewRat(5, 7)), big.NewRat(5, 7)},
		{"1/2", ratBounds(big.NewRat(1, 2)), big.NewRat(1, 2)},
		{"exp(−1/7)", func(prec uint) (*big.Float, *big.Float, error) {
			b, err := expNegBounds(big.NewRat(1, 7), prec)
			lo, hi := b.value()
			return lo, hi, err
		}, e17},
	}
}

// TestLazyBernoulliExact forces the refinement (the first comparison at 2
// bits, so most decisions need a second word) and checks every decision
// against the exact comparison: with the words drawn (V over 2^64w), a
// true must have (V+1)/2^64w ≤ a and a false V/2^64w ≥ a. Words come from
// math/rand (seeded) and, to exercise long matches, copies of the
// target's own expansion. It fails for a coin that decides on an
// overlapping interval or compares the wrong end.
func TestLazyBernoulliExact(t *testing.T) {
	defer func(p uint) { coinStartPrec = p }(coinStartPrec)
	coinStartPrec = 2
	r := rand.New(rand.NewPCG(7, 7))
	for _, c := range coinTargets() {
		refined := 0
		expansion := expansionWords(c.exact, 4)
		for trial := range 2000 {
			var words []uint64
			word := func() uint64 {
				var w uint64
				if trial%10 == 0 && len(words) < 3 { // follow a's expansion for up to 3 words
					w = expansion[len(words)]
				} else {
					w = r.Uint64()
				}
				words = append(words, w)
				return w
			}
			ok, n, err := lazyBernoulli(word, c.bounds)
			if err != nil {
				t.Fatal(err)
			}
			if n > 1 {
				refined++
			}
			v := new(big.Int)
			for _, w := range words {
				v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(w))
			}
			den := new(big.Int).Lsh(big.NewInt(1), uint(64*len(words)))
			if ok {
				if new(big.Rat).SetFrac(new(big.Int).Add(v, big.NewInt(1)), den).Cmp(c.exact) > 0 {
					t.Fatalf("%s: accepted a uniform not surely below it (%d words)", c.name, len(words))
				}
			} else if new(big.Rat).SetFrac(v, den).Cmp(c.exact) < 0 {
				t.Fatalf("%s: rejected a uniform not surely above it (%d words)", c.name, len(words))
			}
		}
		if c.name != "1/2" && refined < 100 { // 1/2 is exact at 2 bits: nothing to refine

			t.Errorf("%s: only %d of 2000 decisions refined", c.name, refined)
		}
	}
}

// expansionWords returns the first n base-2⁶⁴ digits of a ∈ [0, 1).
func expansionWords(a *big.Rat, n int) []uint64 {
	out := make([]uint64, n)
	x := new(big.Rat).Set(a)
	two64 := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 64))
	for i := range out {
		x.Mul(x, two64)
		d := new(big.Int).Quo(x.Num(), x.Denom())
		out[i] = d.Uint64()
		x.Sub(x, new(big.Rat).SetInt(d))
	}
	return out
}

// TestLazyBernoulliFrequency: over 5·10⁴ coins per target (seeded words,
// refinement forced), the frequency of true is within 5 standard
// deviations of a (false failure below 6e-7 per target).
func TestLazyBernoulliFrequency(t *testing.T) {
	defer func(p uint) { coinStartPrec = p }(coinStartPrec)
	coinStartPrec = 2
	r := rand.New(rand.NewPCG(8, 8))
	const n = 50_000
	for _, c := range coinTargets() {
		hits := 0
		for range n {
			ok, _, err := lazyBernoulli(r.Uint64, c.bounds)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				hits++
			}
		}
		a, _ := c.exact.Float64()
		if f := float64(hits) / n; math.Abs(f-a) > 5*math.Sqrt(a*(1-a)/n) {
			t.Errorf("%s: frequency %g", c.name, f)
		}
	}
}
