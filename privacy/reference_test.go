package privacy

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"sync"
	"testing"
)

// Reference values from testdata/gen_reference.py (mpmath, 32 digits): an
// independent implementation of Lemma 1, Theorems 3–5 and the Subbotin CDF.
// See that script for how each value is computed.

type lcRefScale struct {
	Mechanism string  `json:"mechanism"`
	Epsilon   float64 `json:"epsilon"`
	Delta     float64 `json:"delta"`
	ScaleLo   string  `json:"scale_lo"` // fails the criterion
	ScaleHi   string  `json:"scale_hi"` // meets it; hi/lo − 1 ≤ 1e-22
}

type lcRefDelta struct {
	Mechanism string  `json:"mechanism"`
	Epsilon   float64 `json:"epsilon"`
	Scale     float64 `json:"scale"`
	Delta     string  `json:"delta"`
}

type lcRefCDF struct {
	Mechanism string  `json:"mechanism"`
	X         float64 `json:"x"`
	CDF       string  `json:"cdf"` // F(x), given for x ≤ 0
	SF        string  `json:"sf"`  // 1 − F(x), given for x > 0
}

type lcRefMoment struct {
	Mechanism string            `json:"mechanism"`
	MeanAbs   string            `json:"mean_abs"`
	Variance  string            `json:"variance"`
	Quantiles map[string]string `json:"quantiles"` // β → q with P(|X| > q) = β
}

type lcReference struct {
	Scales  []lcRefScale  `json:"scales"`
	Deltas  []lcRefDelta  `json:"deltas"`
	CDFs    []lcRefCDF    `json:"cdfs"`
	Moments []lcRefMoment `json:"moments"`
}

var (
	lcRefOnce sync.Once
	lcRef     lcReference
	lcRefErr  error
)

func lcLoadReference(t *testing.T) *lcReference {
	t.Helper()
	lcRefOnce.Do(func() {
		b, err := os.ReadFile("testdata/reference.json")
		if err != nil {
			lcRefErr = err
			return
		}
		lcRefErr = json.Unmarshal(b, &lcRef)
	})
	if lcRefErr != nil {
		t.Fatalf("reference values: %v", lcRefErr)
	}
	if len(lcRef.Scales) == 0 || len(lcRef.Deltas) == 0 || len(lcRef.CDFs) == 0 || len(lcRef.Moments) == 0 {
		t.Fatal("reference values: a section is empty")
	}
	return &lcRef
}

// lcF parses a reference number (float64 rounding to nearest: half an ulp,
// far below every tolerance here).
func lcF(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("reference value %q: %v", s, err)
	}
	return v
}

func lcParse(t *testing.T, name string) Mechanism {
	t.Helper()
	m, err := Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Every Calibrate result against the exact minimum: never below it (≥ the
// upper end of the reference bracket) and within the method's tolerance
// above it: 1e-9 for closed forms (a few ulps of rounding up, plus the
// upward steps that the conservative Delta check may add: up to 1.2e-10
// seen), 1e-6 for solvers, 1e-3 for table lookups. Also at Δ = 3.7
// (Lemma 2), and the solver path on its own where Calibrate uses a table.
func TestCalibrateReference(t *testing.T) {
	ref := lcLoadReference(t)
	tol := map[Method]float64{ClosedForm: 1e-9, Solver: 1e-6, Table: 1e-3}
	worstUnmargined := math.Inf(1)
	worst := map[Method]float64{}
	counts := map[Method]int{}
	for _, r := range ref.Scales {
		m := lcParse(t, r.Mechanism)
		lo, hi := lcF(t, r.ScaleLo), lcF(t, r.ScaleHi)
		for _, sens := range []float64{1, 3.7} {
			c, err := m.Calibrate(r.Epsilon, r.Delta, sens)
			if err != nil {
				t.Errorf("%s ε = %v δ = %v: %v", r.Mechanism, r.Epsilon, r.Delta, err)
				continue
			}
			counts[c.Method]++
			got := c.Scale / sens
			worst[c.Method] = math.Max(worst[c.Method], got/lo-1)
			if got < hi*(1-2e-16) || got > lo*(1+tol[c.Method]) {
				t.Errorf("%s ε = %v δ = %v Δ = %v (%s): scale/Δ %.17g, exact in [%.17g, %.17g], relative %+.3e",
					r.Mechanism, r.Epsilon, r.Delta, sens, c.Method, got, lo, hi, got/hi-1)
			}
		}
		var solve func(e, d float64) (float64, error)
		switch m := m.(type) {
		case Gaussian:
			solve = gaussianSolve
		case Subbotin:
			if m.R != 1 {
				solve = m.solve // R = 2 too: the generic path against condition (3)
			}
		}
		if solve == nil {
			continue
		}
		s, err := solve(r.Epsilon, r.Delta)
		if err != nil {
			t.Errorf("%s solver ε = %v δ = %v: %v", r.Mechanism, r.Epsilon, r.Delta, err)
			continue
		}
		if s < hi || s > lo*(1+1e-6) {
			t.Errorf("%s solver ε = %v δ = %v: %.17g, exact in [%.17g, %.17g], relative %+.3e", r.Mechanism, r.Epsilon, r.Delta, s, lo, hi, s/hi-1)
		}
		// evalMargin is a safety factor, not load-bearing: without it the
		// solver would still be above the exact minimum up to 1e-9.
		worstUnmargined = math.Min(worstUnmargined, s/(1+evalMargin)/lo-1)
	}
	if worstUnmargined < -1e-9 {
		t.Errorf("solver without evalMargin is %.2e below the exact minimum; the margin is load-bearing", -worstUnmargined)
	}
	t.Logf("%d reference points; methods used: %v; most above the exact minimum: %v; solver/(1+evalMargin) − exact ≥ %.2e (relative)",
		len(ref.Scales), counts, worst, worstUnmargined)
}

// Delta against the exact δ at given scales. Delta is an upper bound: it
// rounds Δ/scale up and adds lemma1's survivalErr slack, which matters
// only where δ is a tiny difference of two much larger tail probabilities
// (δ ≈ 1e-294 for subbotin:1.5 at scale 10: 3e-8 relative). So it must be
// ≥ the reference up to the reference's own rounding (1e-15) and within
// 1e-7 above it; where the exact δ is 0 (Laplace at scale Δ/ε) the rounding
// of Δ/scale may leave at most 1e-15.
func TestDeltaReference(t *testing.T) {
	ref := lcLoadReference(t)
	worst := 0.0
	for _, r := range ref.Deltas {
		m := lcParse(t, r.Mechanism).(lcDelta)
		want := lcF(t, r.Delta)
		got := m.Delta(r.Epsilon, r.Scale, 1)
		if want < 1e-300 {
			if got > 1e-15 {
				t.Errorf("%s ε = %v s = %v: δ = %v, want ≈ 0 (reference %v)", r.Mechanism, r.Epsilon, r.Scale, got, want)
			}
			continue
		}
		worst = math.Max(worst, got/want-1)
		if got < want*(1-1e-15) || got > want*(1+1e-7) {
			t.Errorf("%s ε = %v s = %v: δ = %.17g, want %.17g (relative %+.2e)", r.Mechanism, r.Epsilon, r.Scale, got, want, got/want-1)
		}
		// Three times the sensitivity at three times the scale: the same δ.
		if g3 := m.Delta(r.Epsilon, 3*r.Scale, 3); math.Abs(g3/got-1) > 1e-9 {
			t.Errorf("%s: Delta not scale-invariant: %v vs %v", r.Mechanism, g3, got)
		}
	}
	t.Logf("Delta at most %.2e (relative) above the exact δ", worst)
}

// Every CDF against mpmath, in both tails, within the survivalErr bound
// that lemma1 relies on: |p − p_ref| ≤ survivalErr·(1 + |ln p_ref|)·p_ref
// for p = F(x), x ≤ 0, and p = 1 − F(x), x > 0.
func TestSurvivalAccuracy(t *testing.T) {
	ref := lcLoadReference(t)
	worst := 0.0
	for _, r := range ref.CDFs {
		m := lcParse(t, r.Mechanism).(lcDelta)
		var got, want float64
		if r.X <= 0 {
			got, want = m.CDF(r.X), lcF(t, r.CDF)
		} else {
			// The upper tail through symmetry: 1 − F(x) = F(−x).
			got, want = m.CDF(-r.X), lcF(t, r.SF)
		}
		if want < 1e-300 {
			if got > 1e-300 {
				t.Errorf("%s tail at %v = %v, want < 1e-300", r.Mechanism, r.X, got)
			}
			continue
		}
		bound := survivalErr * (1 + math.Abs(math.Log(want)))
		rel := math.Abs(got/want - 1)
		worst = math.Max(worst, rel/bound)
		if rel > bound {
			t.Errorf("%s tail at %v = %.17g, want %.17g: relative error %.2e above the bound %.2e", r.Mechanism, r.X, got, want, rel, bound)
		}
	}
	t.Logf("worst tail error: %.2f of the survivalErr bound", worst)
}

// Variance and E|X| against numerical integration of the density (relative
// 1e-12); HalfWidth against the exact tail quantile: never below it and at
// most 1e-12 above (rounded up).
func TestMomentsReference(t *testing.T) {
	ref := lcLoadReference(t)
	for _, r := range ref.Moments {
		m := lcParse(t, r.Mechanism)
		for _, c := range []struct {
			what      string
			got, want float64
		}{
			{"variance", m.Variance(2), 4 * lcF(t, r.Variance)},
			{"mean abs error", m.MeanAbsError(2), 2 * lcF(t, r.MeanAbs)},
		} {
			if math.Abs(c.got/c.want-1) > 1e-12 {
				t.Errorf("%s %s = %.17g, want %.17g", r.Mechanism, c.what, c.got, c.want)
			}
		}
		if len(r.Quantiles) == 0 {
			t.Errorf("%s: no quantiles", r.Mechanism)
		}
		for b, q := range r.Quantiles {
			beta, want := lcF(t, b), 2*lcF(t, q)
			got := m.HalfWidth(2, beta)
			if got < want*(1-1e-15) || got > want*(1+1e-12) {
				t.Errorf("%s HalfWidth(2, %v) = %.17g, want %.17g (relative %+.2e)", r.Mechanism, beta, got, want, got/want-1)
			}
		}
	}
}
