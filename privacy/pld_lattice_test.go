package privacy

import (
	"math"
	"testing"
)

// TestBinnedDGaussPLDBracketsTheorem7: the binned PLD of discrete Gaussian
// noise (σ ≥ 1000) is pessimistic and tight for one coordinate: for every
// ε, Theorem 7 of Canonne, Kamath & Steinke (DiscreteGaussian.Delta, an
// independent computation) ≤ δ_PLD(ε) ≤ Theorem 7 at ε − h (h the grid
// spacing: the discretization moves no loss by more than one spacing) plus
// 1e-12 (slack and tail truncation, both ≤ about 1e-13 here). Where the
// atom-by-atom construction also runs (16σ + Δ ≤ 2¹⁶ atoms, through NewPLD)
// the two agree to 1e-6 relative + 1e-13 absolute (the same grid, the same
// split of the same masses; they differ only in rounding and error terms:
// measured at most 1.2e-7).
// The shifts include the lattice case Δ = 2²⁰ + 1 at σ up to 2³⁰.
func TestBinnedDGaussPLDBracketsTheorem7(t *testing.T) {
	var o PLDOptions
	o, _ = o.withDefaults()
	for _, c := range []struct {
		sigma float64
		d     int64
	}{{1200, 1}, {1200, 3}, {1200, 700}, {3000, 2500}, {3000, 9000},
		{5e6, 1<<20 + 1}, {3.3e8, 1<<20 + 1}, {0x1p30, 1<<20 + 1}} {
		b, err := newBinnedDGaussPLD(newDgaussFamily(c.sigma), c.d, o)
		if err != nil {
			t.Fatalf("σ=%v Δ=%d: %v", c.sigma, c.d, err)
		}
		h := b.Spacing()
		var atoms *PLD
		if 16*c.sigma+float64(c.d) <= dgBinnedAtoms {
			if atoms, err = NewPLD(DiscreteGaussian{}, c.sigma, float64(c.d), PLDOptions{}); err != nil {
				t.Fatal(err)
			}
			if atoms.Spacing() != h {
				t.Errorf("σ=%v Δ=%d: spacing %v (atoms) vs %v (binned)", c.sigma, c.d, atoms.Spacing(), h)
			}
		}
		tt := float64(c.d) / c.sigma
		for _, eps := range []float64{tt * tt / 2, tt, 2 * tt, 3 * tt} {
			got := b.Delta(eps)
			lo := DiscreteGaussian{}.Delta(eps, c.sigma, float64(c.d))
			hi := DiscreteGaussian{}.Delta(math.Max(0, eps-h), c.sigma, float64(c.d)) + 1e-12
			if !(got >= lo*(1-1e-12)-1e-15 && got <= hi) {
				t.Errorf("σ=%v Δ=%d ε=%.4g: δ_PLD %.6g outside [Theorem 7 %.6g, Theorem 7 at ε−h %.6g]", c.sigma, c.d, eps, got, lo, hi)
			}
			if atoms != nil {
				if a := atoms.Delta(eps); !relClose(got, a, 1e-6, 1e-13) {
					t.Errorf("σ=%v Δ=%d ε=%.4g: binned %.10g, atoms %.10g", c.sigma, c.d, eps, got, a)
				}
			}
		}
	}
}

// TestCalibratePartsLatticeShift: a release with discrete Gaussian parts of
// integer L∞ = 2²⁰ + 1 (snapped real values on the lattice Λ = L∞·2⁻²⁰, in
// grid units) next to counts, over 1440 windows, is certified by the PLD —
// not by the basic or advanced theorem, which the calibration fell back to
// when the atom-by-atom PLD exceeded its 2²⁶ atoms (6.3 times the noise) —
// and its noise level is within 1% of exact Gaussian (μ-GDP) accounting for
// continuous Gaussian noise of the same shape: at σ ≥ 1000 the discrete
// Gaussian's loss is the Gaussian's up to terms of order e^{−2π²σ²}, so the
// difference is the PLD's pessimism (the 1% is generous: measured 0.019%
// over 1440 windows, 0.004% for one).
func TestCalibratePartsLatticeShift(t *testing.T) {
	const d = 1<<20 + 1
	shape := func(m Mechanism) []Part {
		return []Part{{Mechanism: m, L0: 1, Linf: 60}, {Mechanism: m, L0: 2, Linf: 60},
			{Mechanism: m, L0: 1, Linf: d}, {Mechanism: m, L0: 1, Linf: d}, {Mechanism: m, L0: 1, Linf: 60}}
	}
	total := Budget{Epsilon: 1, Delta: 1e-6}
	dg, err := CalibrateParts(Tightest, total, 1440, shape(DiscreteGaussian{}))
	if err != nil {
		t.Fatal(err)
	}
	g, err := CalibrateParts(Tightest, total, 1440, shape(Gaussian{}))
	if err != nil {
		t.Fatal(err)
	}
	if dg[2].Accounting != AccountPLD {
		t.Errorf("lattice parts certified by %s, want pld", dg[2].Accounting)
	}
	for i := range dg {
		if r := dg[i].Scale / g[i].Scale; !(r >= 1-1e-3 && r <= 1.01) {
			t.Errorf("part %d: discrete σ %v, Gaussian σ %v (ratio %v)", i, dg[i].Scale, g[i].Scale, r)
		}
	}
	// The certificate holds when recomputed from the scales.
	parts := shape(DiscreteGaussian{})
	scales := make([]float64, len(dg))
	for i := range dg {
		scales[i] = dg[i].Scale
	}
	acc, err := AccountantFor(parts, scales, 1440)
	if err != nil {
		t.Fatal(err)
	}
	if dd := acc.Delta(total.Epsilon); dd > total.Delta {
		t.Errorf("recomputed δ %v exceeds %v", dd, total.Delta)
	}
}
