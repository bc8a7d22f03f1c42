package operator

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestLanesCalibrationCrossCheck: the joint calibration of a window with
// two measures and two histograms (laneConfig, mechanism gaussian, ε = 4,
// δ = 1e-6) agrees with an independent accountant, Google's dp_accounting
// (testdata/gen_lanes_check.py → lanes_check.json). The script derives the
// window's 9 parts and their sensitivities from the bounds alone; the plan
// must have exactly those parts (every lane's among them) and give them
// one noise level κ (σ = κ·shift); dp_accounting's pessimistic δ (loss
// grid 1e-5) at a tabulated κ at or below the plan's is ≤ δ, so the plan
// meets the budget (δ falls as κ grows), and its optimistic δ at a
// tabulated κ at or above 0.998 × the plan's exceeds δ, so 0.2% less noise
// would not. (The plan's κ came out 8.2e-5 above the analytic Gaussian κ
// of 9 continuous parts, 3.5805558.) Deterministic.
func TestLanesCalibrationCrossCheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "lanes_check.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Epsilon, Delta float64
		Parts          []struct {
			Part    string  `json:"part"`
			L0      int     `json:"l0"`
			Linf    float64 `json:"linf"`
			Integer bool    `json:"integer"`
		}
		AnalyticKappa float64      `json:"analytic_kappa"`
		Upper         [][2]float64 `json:"upper"`
		Lower         [][2]float64 `json:"lower"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	c := laneConfig([]string{"127.0.0.1:9092"}, "in", "out", "g")
	c.Privacy.Mechanism = "gaussian"
	c.Privacy.Epsilon, c.Privacy.Delta = ref.Epsilon, ref.Delta
	p := testPlan(t, c)
	var noises []vectorNoise
	for _, ap := range p.aggs {
		noises = append(noises, ap.noises...)
	}
	if len(noises) != len(ref.Parts) {
		t.Fatalf("%d parts, reference %d", len(noises), len(ref.Parts))
	}
	kappa := 0.0
	for i, n := range noises {
		r := ref.Parts[i]
		integer := n.kind == intExact
		if n.part != r.Part || n.coords != r.L0 || n.sens.Linf != r.Linf || integer != r.Integer {
			t.Fatalf("part %d: %s L0 %d L∞ %g integer %v; reference %+v", i, n.part, n.coords, n.sens.Linf, integer, r)
		}
		k := n.scale / n.sens.Linf // σ / shift of exact integer noise
		if n.kind == realLattice {
			k = n.grid / n.calPart().Linf // in lattice units
		}
		if i == 0 {
			kappa = k
		} else if math.Abs(k/kappa-1) > 1e-9 {
			t.Fatalf("part %s: κ %v, the first part's %v: not one noise level", n.part, k, kappa)
		}
	}
	t.Logf("κ = %.9g, %.2e relative to the analytic %.9g", kappa, kappa/ref.AnalyticKappa-1, ref.AnalyticKappa)
	var up, lo [2]float64
	for _, row := range ref.Upper {
		if row[0] <= kappa && row[0] > up[0] {
			up = row
		}
	}
	for _, row := range ref.Lower {
		if row[0] >= 0.998*kappa && (lo[0] == 0 || row[0] < lo[0]) {
			lo = row
		}
	}
	switch {
	case up[0] == 0 || lo[0] == 0:
		t.Fatalf("κ %v outside the reference's tables", kappa)
	case up[1] > ref.Delta:
		t.Errorf("dp_accounting: δ(κ = %v ≤ the plan's %v) = %.6g > δ = %g", up[0], kappa, up[1], ref.Delta)
	case lo[1] <= ref.Delta:
		t.Errorf("dp_accounting: δ(κ = %v ≥ 0.998 × the plan's) = %.6g ≤ δ = %g: the calibration is looser than 0.2%%", lo[0], lo[1], ref.Delta)
	}
}
