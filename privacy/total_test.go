package privacy

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"
)

// totalRef is testdata/total_reference.json, written by
// testdata/gen_total.py: per setting, the parts' norms by brute-force
// enumeration and the minimal scales of the accountants that are exact for
// L2 (Gaussian, μ-GDP) and L1 (Laplace, pure ε), at 50 digits.
type totalRef struct {
	Settings []struct {
		Name    string  `json:"name"`
		Epsilon float64 `json:"epsilon"`
		Delta   float64 `json:"delta"`
		Windows int     `json:"windows"`
		Parts   []struct {
			K, A, T       int
			Replace       bool
			L1, L2sq      float64
			Linf          float64
			GaussianScale string `json:"gaussian_scale"`
			LaplaceScale  string `json:"laplace_scale"`
		} `json:"parts"`
	} `json:"settings"`
	DiscreteGaussian []struct {
		Name       string
		Eps, Delta float64
		K, A, T    int
		Sigma      string
		Vectors    int
	} `json:"discrete_gaussian"`
}

func loadTotalRef(t *testing.T) totalRef {
	t.Helper()
	b, err := os.ReadFile("testdata/total_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref totalRef
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Settings) == 0 || len(ref.DiscreteGaussian) == 0 {
		t.Fatal("reference values: a section is empty")
	}
	return ref
}

// CalibrateParts with the L1 and L2 bounds of a per-unit total bound
// against an independent accountant (gen_total.py: enumeration of the
// vectors and an mpmath μ-GDP solve / the pure-ε sum): never below the
// reference minimum (1e-12 relative, the reference's own float64 rounding)
// and within 1e-6 above it (the closed forms round up by a few ulps; the
// GDP μ solver is exact to ~1e-12). Fails without the L1/L2 bounds (the
// scales are then those of L0 coordinates at L∞: up to √5× and 5× larger).
func TestCalibrateTotalReference(t *testing.T) {
	ref := loadTotalRef(t)
	for _, s := range ref.Settings {
		for _, fam := range []struct {
			m     Mechanism
			delta float64
		}{{Gaussian{}, s.Delta}, {Laplace{}, 0}} {
			parts := make([]Part, len(s.Parts))
			for i, p := range s.Parts {
				l0 := min(p.K, p.T)
				if p.Replace {
					l0 *= 2
				}
				l2 := math.Sqrt(p.L2sq)
				if l2*l2 < p.L2sq {
					l2 = math.Nextafter(l2, math.Inf(1))
				}
				parts[i] = Part{Mechanism: fam.m, L0: l0, Linf: p.Linf, L1: p.L1, L2: l2}
			}
			plans, err := CalibrateParts(Tightest, Budget{Epsilon: s.Epsilon, Delta: fam.delta}, s.Windows, parts)
			if err != nil {
				t.Fatalf("%s, %s: %v", s.Name, fam.m.Name(), err)
			}
			for i, p := range s.Parts {
				want := lcF(t, p.GaussianScale)
				if _, ok := fam.m.(Laplace); ok {
					want = lcF(t, p.LaplaceScale)
				}
				got := plans[i].Scale
				if got < want*(1-1e-12) || got > want*(1+1e-6) {
					t.Errorf("%s, %s, part %d: scale %.12g, reference %.12g (ratio %.9f)", s.Name, fam.m.Name(), i, got, want, got/want)
				}
			}
		}
	}
}

// The discrete Gaussian of one window under a total bound (the worst of
// the shift patterns, compose_total.go) against gen_total.py's exact δ(ε)
// of every sorted shift vector and its bisection for σ (1e-10): never
// below the reference (1e-9 relative) and within 1e-3 above it (the
// solver's CalibrationTolerance of 1e-4 plus the PLD grid's pessimism).
// Fails without the patterns: the scale is then that of L0 coordinates at
// L∞ (√3 to √5 times larger here).
func TestCalibrateTotalDiscreteGaussian(t *testing.T) {
	for _, s := range loadTotalRef(t).DiscreteGaussian {
		pt := Part{Mechanism: DiscreteGaussian{}, L0: min(s.K, s.T), Linf: float64(min(s.A, s.T)), L1: float64(s.T)}
		plans, err := CalibrateParts(Tightest, Budget{Epsilon: s.Eps, Delta: s.Delta}, 1, []Part{pt})
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		want, got := lcF(t, s.Sigma), plans[0].Scale
		if got < want*(1-1e-9) || got > want*(1+1e-3) {
			t.Errorf("%s: σ %.10g, reference %.10g (ratio %.7f)", s.Name, got, want, got/want)
		}
		t.Logf("%s: σ %.8g, reference %.8g (ratio %.7f, %s)", s.Name, got, want, got/want, plans[0].Accounting)
	}
}

// totalPatterns lists the partitions of L1 into at most L0 parts of at
// most Linf (reference: written out by hand), and none where they do not
// apply.
func TestTotalPatterns(t *testing.T) {
	dg := DiscreteGaussian{}
	cases := []struct {
		p    calPart
		want [][]float64 // shifts of every pattern, largest first
	}{
		{calPart{Part: Part{Mechanism: dg, L0: 3, Linf: 2, L1: 4}, n: 3, win: 1}, [][]float64{{2, 2}, {2, 1, 1}}},
		{calPart{Part: Part{Mechanism: dg, L0: 5, Linf: 5, L1: 5}, n: 5, win: 1},
			[][]float64{{5}, {4, 1}, {3, 2}, {3, 1, 1}, {2, 2, 1}, {2, 1, 1, 1}, {1, 1, 1, 1, 1}}},
		{calPart{Part: Part{Mechanism: dg, L0: 2, Linf: 3, L1: 5}, n: 2, win: 1}, [][]float64{{3, 2}}},
		{calPart{Part: Part{Mechanism: dg, L0: 3, Linf: 2, L1: 4}, n: 6, win: 2}, nil},                  // two windows
		{calPart{Part: Part{Mechanism: Laplace{}, L0: 3, Linf: 2, L1: 4}, n: 3, win: 1}, nil},           // real values
		{calPart{Part: Part{Mechanism: dg, L0: 3, Linf: 2, L1: 6}, n: 3, win: 1}, nil},                  // L1 = L0·Linf
		{calPart{Part: Part{Mechanism: DiscreteLaplace{}, L0: 3, Linf: 2, L1: 2.5}, n: 3, win: 1}, nil}, // non-integer
	}
	for i, c := range cases {
		var got [][]float64
		for _, pat := range c.p.totalPatterns() {
			var v []float64
			for _, r := range pat {
				for range r.count {
					v = append(v, r.shift)
				}
			}
			got = append(got, v)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("case %d: patterns %v, want %v", i, got, c.want)
		}
	}
}
