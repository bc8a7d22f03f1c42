package privacy

import (
	"encoding/json"
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
}

// CalibrateParts with the L1 and L2 bounds of a per-unit total bound
// against an independent accountant (gen_total.py: enumeration of the
// vectors and an mpmath μ-GDP solve / the pure-ε sum): never below the
// reference minimum (1e-12 relative, the reference's own float64 rounding)
// and within 1e-6 above it (the closed forms round up by a few ulps; the
// GDP μ solver is exact to ~1e-12). Fails without the L1/L2 bounds (the
// scales are then those of L0 coordinates at L∞: up to √5× and 5× larger).
func TestCalibrateTotalReference(t *testing.T) {
	b, err := os.ReadFile("testdata/total_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref totalRef
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Settings) == 0 {
		t.Fatal("no settings")
	}
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
