package windows

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

func sensCfg() Config {
	return Config{
		Size: time.Minute, Histogram: true, NumBuckets: 10, Count: true, Sum: true, Mean: true,
		MaxGroups: 2, MaxBuckets: 3, MaxPerBucket: 4, MaxValues: 5, Lower: -1, Upper: 3,
	}
}

// Expected values worked out by hand from the formulas at
// Config.Sensitivities: G=2, B=3, P=4, V=5, [Lower, Upper] = [−1, 3],
// mid = 1, h = 2.
func TestSensitivitiesFormulas(t *testing.T) {
	s, err := sensCfg().Sensitivities()
	if err != nil {
		t.Fatal(err)
	}
	r2, r6 := sqrtUp(2), sqrtUp(6)
	want := Sensitivities{
		Histogram: Sensitivity{L0: 6, Linf: 4, L1: 24, L2: mulUp(r6, 4)},
		Count:     Sensitivity{L0: 2, Linf: 5, L1: 10, L2: mulUp(r2, 5)},
		Values:    Sensitivity{L0: 2, Linf: 5, L1: 10, L2: mulUp(r2, 5)},
		Units:     Sensitivity{L0: 2, Linf: 1, L1: 2, L2: r2},
		Sum:       Sensitivity{L0: 2, Linf: 15, L1: 30, L2: mulUp(r2, 15)}, // [min(0, 5·−1), 5·3]
		MeanSum:   Sensitivity{L0: 2, Linf: 10, L1: 20, L2: mulUp(r2, 10)}, // ±5·2
	}
	if s != want {
		t.Errorf("add/remove:\n got %+v\nwant %+v", s, want)
	}

	c := sensCfg()
	c.MaxUnits = 100
	s, _ = c.Sensitivities()
	want = Sensitivities{
		ReplaceOne: true,
		// L0 = 2k, L∞ = hi − lo, L1 = 2k·max(−lo, hi), L2 = √(k·max((hi−lo)², 2·max(−lo, hi)²)).
		Histogram: Sensitivity{L0: 12, Linf: 4, L1: 48, L2: sqrtUp(6 * 32)},
		Count:     Sensitivity{L0: 4, Linf: 5, L1: 20, L2: sqrtUp(2 * 50)},
		Values:    Sensitivity{L0: 4, Linf: 5, L1: 20, L2: sqrtUp(2 * 50)},
		Units:     Sensitivity{L0: 4, Linf: 1, L1: 4, L2: 2},
		Sum:       Sensitivity{L0: 4, Linf: 20, L1: 60, L2: 30},          // √(2·max(400, 450))
		MeanSum:   Sensitivity{L0: 4, Linf: 20, L1: 40, L2: sqrtUp(800)}, // √(2·max(400, 200))
	}
	if s != want {
		t.Errorf("replace-one:\n got %+v\nwant %+v", s, want)
	}

	c = sensCfg()
	c.EventLevel, c.MaxUnits = true, 100 // the unit cap does not apply
	s, _ = c.Sensitivities()
	one := Sensitivity{L0: 1, Linf: 1, L1: 1, L2: 1}
	want = Sensitivities{Histogram: one, Count: one, Values: one, Units: one,
		Sum: Sensitivity{L0: 1, Linf: 3, L1: 3, L2: 3}, MeanSum: Sensitivity{L0: 1, Linf: 2, L1: 2, L2: 2}}
	if s != want {
		t.Errorf("event level:\n got %+v\nwant %+v", s, want)
	}

	c = sensCfg()
	c.MaxBuckets, c.NumBuckets = 50, 4 // L0 per group is min(MaxBuckets, NumBuckets)
	c.Sum, c.Mean, c.Count = false, false, false
	s, _ = c.Sensitivities()
	if s.Histogram.L0 != 8 || s.Sum != (Sensitivity{}) || s.Count != (Sensitivity{}) {
		t.Errorf("disabled aggregates or bucket cap: %+v", s)
	}

	c.MaxGroups = 0
	if _, err := c.Sensitivities(); err == nil {
		t.Error("invalid config gave sensitivities")
	}
}

// Every derived value is rounded up: compare with exact big.Float
// arithmetic on random bounds.
func TestSensitivitiesRoundUp(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	exact := func(x float64) *big.Float { return new(big.Float).SetPrec(300).SetFloat64(x) }
	for trial := 0; trial < 2000; trial++ {
		c := sensCfg()
		c.MaxGroups, c.MaxValues = 1+r.IntN(1000), 1+r.IntN(1000)
		c.Lower = -r.Float64() * math.Ldexp(1, r.IntN(40)-20)
		c.Upper = r.Float64() * math.Ldexp(1, r.IntN(40)-20)
		if r.IntN(2) == 0 {
			c.MaxUnits = 10
		}
		s, err := c.Sensitivities()
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]Sensitivity{"sum": s.Sum, "mean_sum": s.MeanSum, "count": s.Count} {
			// Add/remove: L1 ≥ L0·L∞ and L2² ≥ L0·L∞², exactly.
			if !s.ReplaceOne {
				l1 := new(big.Float).Mul(exact(v.L0), exact(v.Linf))
				if exact(v.L1).Cmp(l1) < 0 {
					t.Fatalf("%s L1 %v < L0·L∞", name, v.L1)
				}
				l2sq := new(big.Float).Mul(exact(v.L0), new(big.Float).Mul(exact(v.Linf), exact(v.Linf)))
				if new(big.Float).Mul(exact(v.L2), exact(v.L2)).Cmp(l2sq) < 0 {
					t.Fatalf("%s L2 %v < √L0·L∞", name, v.L2)
				}
			}
		}
		// The sum's L∞ covers V·Upper and V·|Lower| exactly.
		for _, b := range []float64{c.Upper, -c.Lower} {
			p := new(big.Float).Mul(exact(float64(c.MaxValues)), exact(b))
			if !s.ReplaceOne && exact(s.Sum.Linf).Cmp(p) < 0 {
				t.Fatalf("sum L∞ %v < V·%v", s.Sum.Linf, b)
			}
		}
	}
}

func TestRoundingHelpers(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	exact := func(x float64) *big.Float { return new(big.Float).SetPrec(300).SetFloat64(x) }
	for trial := 0; trial < 10000; trial++ {
		a := math.Ldexp(r.Float64()*2-1, r.IntN(80)-40)
		b := math.Ldexp(r.Float64()*2-1, r.IntN(80)-40)
		p := new(big.Float).Mul(exact(a), exact(b))
		if up := mulUp(a, b); exact(up).Cmp(p) < 0 || (up != a*b && math.Nextafter(a*b, math.Inf(1)) != up) {
			t.Fatalf("mulUp(%v, %v) = %v", a, b, up)
		}
		if dn := mulDown(a, b); exact(dn).Cmp(p) > 0 || (dn != a*b && math.Nextafter(a*b, math.Inf(-1)) != dn) {
			t.Fatalf("mulDown(%v, %v) = %v", a, b, dn)
		}
		sum := new(big.Float).Add(exact(a), exact(b))
		if up := addUp(a, b); exact(up).Cmp(sum) < 0 || (up != a+b && math.Nextafter(a+b, math.Inf(1)) != up) {
			t.Fatalf("addUp(%v, %v) = %v", a, b, up)
		}
		x := math.Abs(a)
		s := sqrtUp(x)
		if new(big.Float).Mul(exact(s), exact(s)).Cmp(exact(x)) < 0 {
			t.Fatalf("sqrtUp(%v) = %v is below √x", x, s)
		}
		if s2 := math.Nextafter(s, 0); new(big.Float).Mul(exact(s2), exact(s2)).Cmp(exact(x)) >= 0 {
			t.Fatalf("sqrtUp(%v) = %v is not the smallest upper bound", x, s)
		}
	}
}

func TestCombine(t *testing.T) {
	a := Sensitivity{L0: 2, L1: 6, L2: 3, Linf: 3}
	b := Sensitivity{L0: 1, L1: 4, L2: 4, Linf: 4}
	got := Combine(a, b)
	if got != (Sensitivity{L0: 3, L1: 10, L2: 5, Linf: 4}) {
		t.Errorf("Combine = %+v", got)
	}
	if Combine() != (Sensitivity{}) {
		t.Error("empty Combine")
	}
}
