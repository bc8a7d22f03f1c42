package operator

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestAutoUsesNorms: `mechanism: auto` compares the candidates with the
// sensitivities each is calibrated with. Setting S3 of issue 20 (the
// quantile tree, V = 5, ε = 4, δ = 1e-6, the default 16-ary tree of depth
// 4: L0 = 20 nodes at L∞ = 5, L1 = G·D·V = 20, L2 = √(G·D)·V = 10). The
// discrete Laplace on L1 has scale L1/ε = 5 (pure ε of the shift's L1,
// gen_total.py's Laplace rule; variance ≈ 49.8, std ≈ 7.07); the discrete
// Gaussian over the worst shift pattern has σ ≈ 11.934 (σ_exact of
// privacy/testdata/tree_total_reference.json, gen_tree_total.py; variance
// ≈ 142). The old comparison (20 coordinates at 5: Laplace 25, Gaussian
// ≈ 26.7) picked the discrete Gaussian, σ ≈ 11.93 — this test failed so
// on the code before the change. Tolerances: the pure-ε scale is a closed
// form (1e-9 relative); the plan's σ within [1 − 1e-9, 1 + 1e-3] of σ_exact
// as in TestTreeNormsDelta.
func TestAutoUsesNorms(t *testing.T) {
	ref := treeTotalRef(t)
	if ref[0].Name != "S3 tree V=5" {
		t.Fatalf("reference %+v: want S3 first", ref)
	}
	sigma, err := strconv.ParseFloat(ref[0].SigmaExact, 64)
	if err != nil {
		t.Fatal(err)
	}
	scale := map[string]float64{}
	for _, m := range []string{"auto", "gaussian"} {
		c := quantileConfig(5, 4, 1e-6)
		c.Privacy.Mechanism, c.Privacy.Mechanisms = m, nil
		p, err := planFor(c)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		n := p.aggs[0].noises[0]
		scale[m] = n.scale
		if m == "gaussian" {
			if n.scale < sigma*(1-1e-9) || n.scale > sigma*(1+1e-3) {
				t.Errorf("gaussian: σ %.8g, reference %.8g", n.scale, sigma)
			}
			continue
		}
		if n.mech.Name() != "discrete-laplace" || !n.auto {
			t.Errorf("auto chose %s (%v), want discrete-laplace; choices %v", n.mech.Name(), n.auto, p.choices)
		}
		if want := 20.0 / 4; math.Abs(n.scale/want-1) > 1e-9 {
			t.Errorf("auto: scale %v, want L1/ε = %v", n.scale, want)
		}
		if len(p.choices) != 1 || !strings.Contains(p.choices[0], "L1 and L2") {
			t.Errorf("choices %v: want one, saying the norms were used", p.choices)
		}
		// The plan (`dpstream plan`) shows the choice.
		s := p.sizing(c, Sizes{})
		ss := s.Aggregates[0].Series[0]
		if ss.Mechanism != "discrete-laplace" || !ss.Auto || ss.Scale != n.scale {
			t.Errorf("plan series %+v, want discrete-laplace, auto, scale %v", ss, n.scale)
		}
		t.Logf("auto: %s scale %.8g (variance %.4g); %v", n.mech.Name(), n.scale, n.mech.Variance(n.scale), p.choices)
	}
	if v := 2 * scale["auto"] * scale["auto"]; !(v < scale["gaussian"]*scale["gaussian"]) {
		t.Errorf("auto's Laplace variance bound %v is not below the Gaussian's %v", v, scale["gaussian"]*scale["gaussian"])
	}
}
