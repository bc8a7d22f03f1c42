package operator

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
)

// sumTotalConfig: one window of agg over 5 public groups, a unit adding at
// most 5 values in [0, 100] to each (max_groups 5, max_values 5), at the
// budget ε = 1 and δ, with a total bound of total (0: unset) and the
// mechanism mech.
func sumTotalConfig(agg, mech string, delta float64, total int) Config {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Schema.Histogram = nil
	c.Schema.Lower, c.Schema.Upper = 0, 100
	c.Windows.Aggregates = []string{agg}
	c.Bounds = BoundsConfig{MaxGroups: 5, MaxBuckets: 1, MaxPerBucket: 1, MaxValues: 5, MaxContributions: total}
	c.Privacy.PublicGroups = [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}}
	c.Privacy.Epsilon, c.Privacy.Delta = 1, delta
	c.Privacy.Mechanism, c.Privacy.Mechanisms = mech, nil
	return c
}

// totalReference returns the part scales of the setting named name in
// privacy/testdata/total_reference.json (gen_total.py).
func totalReference(t *testing.T, name string) (laplace, gaussian float64) {
	t.Helper()
	b, err := os.ReadFile("../privacy/testdata/total_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Settings []struct {
			Name  string
			Parts []struct {
				Laplace  string `json:"laplace_scale"`
				Gaussian string `json:"gaussian_scale"`
			}
		}
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	for _, s := range ref.Settings {
		if s.Name == name && len(s.Parts) == 1 {
			l, err1 := strconv.ParseFloat(s.Parts[0].Laplace, 64)
			g, err2 := strconv.ParseFloat(s.Parts[0].Gaussian, 64)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			return l, g
		}
	}
	t.Fatalf("no setting %q", name)
	return 0, 0
}

// seriesScale is one noised series of totalSeries: its reference norm, its
// scale with the total bound and without it.
type seriesScale struct {
	name            string
	ref, scale, old float64
}

// totalSeries plans sumTotalConfig(agg, mech, delta, ·) with the total
// bound 5 and without it, and returns every noised series with its norm
// in ref (a series without one fails the test).
func totalSeries(t *testing.T, agg, mech string, delta float64, ref map[string]float64) []seriesScale {
	t.Helper()
	p, err := planFor(sumTotalConfig(agg, mech, delta, 5))
	if err != nil {
		t.Fatalf("%s: %v", agg, err)
	}
	old, err := planFor(sumTotalConfig(agg, mech, delta, 0))
	if err != nil {
		t.Fatalf("%s: %v", agg, err)
	}
	var out []seriesScale
	for i, n := range p.aggs[0].noises {
		a, ok := ref[n.series]
		if !ok {
			t.Fatalf("%s: series %q has no reference norm", agg, n.series)
		}
		x := seriesScale{name: n.part, ref: a, scale: n.scale, old: old.aggs[0].noises[i].scale}
		t.Logf("%s: scale %.8g (%.6g without the bound)", x.name, x.scale, x.old)
		out = append(out, x)
	}
	return out
}

// TestTotalBoundSumAcceptance: a sum over 5 groups, a unit adding at most
// 5 values in [0, 100] to each and at most 5 in all (bounds.max_contributions
// 5). One unit moves the sums by integer counts of values times at most
// 100: the vectors of gen_total.py's "hist 5x5 total 5" (5 coordinates in
// [0, 5], total 5) scaled by 100, so its reference scales ×100 are the
// optima: Laplace (pure ε) on L1 = 500, scale 500; the continuous
// Gaussian on L2 = 500 at δ = 1e-6, σ ≈ 2112.
//
//   - laplace (δ = 0): the plan's rounded Laplace is calibrated by the pure
//     accountant on the L1 of the rounded sums (500 + 5 grid steps of
//     2^-11): at most 1.05× (in fact 1 + 2e-5) the optimum, never below
//     it; without the bound 5× (L0 = 5 groups at 500). Fails on the old
//     code (2500, the total bound did not reach sums).
//   - gaussian (δ = 1e-6): the lattice discrete Gaussian is calibrated by
//     the L2 accountant (privacy/compose_lattice_l2.go) on the L2 of the
//     rounded sums (500/step + √5 steps): within [1, 1.05]× (in fact
//     1 + 4e-5: the PLD's pessimism) the L2 optimum; without the bound
//     √5×. Fails on the old code (4723.5: the bound reached the lattice
//     part through L0 and L∞ only, √5× the optimum).
func TestTotalBoundSumAcceptance(t *testing.T) {
	lap, gauss := totalReference(t, "hist 5x5 total 5")
	lap, gauss = 100*lap, 100*gauss
	scale := func(mech string, delta float64, total int) float64 {
		p, err := planFor(sumTotalConfig(AggSum, mech, delta, total))
		if err != nil {
			t.Fatalf("%s, total %d: %v", mech, total, err)
		}
		return p.aggs[0].noises[0].scale
	}
	got, old := scale("laplace", 0, 5), scale("laplace", 0, 0)
	if got < lap || got > 1.05*lap {
		t.Errorf("laplace: scale %.8g, want within [1, 1.05] × the L1 optimum %.8g", got, lap)
	}
	if r := old / got; r < 4.99 {
		t.Errorf("laplace: without the bound %.6g, only %.4g× (want ≈ 5×)", old, r)
	}
	t.Logf("laplace: scale %.8g (L1 optimum %.8g, ratio %.7f), %.6g without the bound", got, lap, got/lap, old)
	got, old = scale("gaussian", 1e-6, 5), scale("gaussian", 1e-6, 0)
	if got < gauss || got > 1.05*gauss {
		t.Errorf("gaussian: scale %.8g, want within [1, 1.05] × the L2 optimum %.8g", got, gauss)
	}
	if r := old / got; r < 2.23 {
		t.Errorf("gaussian: without the bound %.6g, only %.4g× (want ≈ √5×)", old, r)
	}
	t.Logf("gaussian: scale %.8g (L2 optimum %.8g, ratio %.7f), %.6g without the bound", got, gauss, got/gauss, old)
	// The plan says which L2 the Gaussian used: 500/2^-11 + √5 steps.
	p, err := planFor(sumTotalConfig(AggSum, "gaussian", 1e-6, 5))
	if err != nil {
		t.Fatal(err)
	}
	const used = "the lattice Gaussian's L2 1024002.236 steps of 2^-11, rounding included"
	if e := p.seriesSensitivity(&p.aggs[0].noises[0]); !strings.Contains(e.L2Bound, used) || !strings.Contains(p.note, used) {
		t.Errorf("L2 bound %q, note %q: want %q", e.L2Bound, p.note, used)
	}
}

// TestTotalBoundSumHorizon: TestTotalBoundSumAcceptance's gaussian setting
// (a sum over 5 groups, at most 5 values in [0, 100] per group and 5 in
// all: L2 = 500 per window) with a user-level horizon of W = 16 and 256
// windows and ε = 1, δ = 1e-6 over the horizon. A unit may move a
// different vector in every window, each of L2 ≤ 500; the continuous
// Gaussian's L2 optimum is the analytic Gaussian at √W·500 (W Gaussians
// at shift 500 compose to the Gaussian at √W·500/σ): σ_opt of
// privacy/testdata/dg_l2_horizon_reference.json (gen_dg_l2_horizon.py,
// mpmath bisection; its W = 1 value is total_reference.json's ×100). The
// lattice discrete Gaussian's per-window scale, calibrated by the L2
// accountant over the horizon, is within [1, 1.05]× σ_opt (in fact 1 +
// 1e-4: the rounding's √5 steps, the PLD's pessimism and the lemma's
// terms), and without the total bound (5·W coordinates at L∞ = 500) at
// least 2× larger (√5× expected); the plan names the L2 used, and the
// ledger's ε after a quarter of the horizon is the L2 accountant's. Fails
// on the old code (the L2 accountant applied in one window only: the part
// was composed as 5·W coordinates, √5× σ_opt).
func TestTotalBoundSumHorizon(t *testing.T) {
	b, err := os.ReadFile("../privacy/testdata/dg_l2_horizon_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Sum []struct {
			Windows  int
			SigmaOpt string `json:"sigma_opt"`
		}
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, r := range ref.Sum {
		if r.Windows == 1 {
			continue
		}
		found++
		opt, err := strconv.ParseFloat(r.SigmaOpt, 64)
		if err != nil {
			t.Fatal(err)
		}
		plan := func(total int) *plan {
			c := sumTotalConfig(AggSum, "gaussian", 0, total)
			c.Privacy.Epsilon = 0
			c.Privacy.Horizon = time.Duration(r.Windows) * c.Windows.Size
			c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = 1, 1e-6
			p, err := planFor(c)
			if err != nil {
				t.Fatalf("W=%d, total %d: %v", r.Windows, total, err)
			}
			return p
		}
		p, old := plan(5), plan(0)
		got, without := p.aggs[0].noises[0].scale, old.aggs[0].noises[0].scale
		if got < opt || got > 1.05*opt {
			t.Errorf("W=%d: scale %.8g, want within [1, 1.05] × the L2 optimum %.8g", r.Windows, got, opt)
		}
		if without < 2*got {
			t.Errorf("W=%d: without the bound %.6g, only %.4g× (want ≈ √5×)", r.Windows, without, without/got)
		}
		const used = "the lattice Gaussian's L2 1024002.236 steps of 2^-11, rounding included"
		if e := p.seriesSensitivity(&p.aggs[0].noises[0]); !strings.Contains(e.L2Bound, used) || !strings.Contains(p.note, used) {
			t.Errorf("W=%d: L2 bound %q, note %q: want %q", r.Windows, e.L2Bound, p.note, used)
		}
		t.Logf("W=%d: scale %.8g (L2 optimum %.8g, ratio %.7f), %.6g without the bound (%.4f×)", r.Windows, got, opt, got/opt, without, without/got)
		// The ledger's ε after a quarter of the horizon (on its grid of
		// windows): the continuous Gaussian's at √k·500/σ (closed form),
		// within 1.01× (the lemma's terms, the PLD's pessimism and the
		// rounding's √5 steps are above it).
		k := ledgerGrid(r.Windows/4, r.Windows)
		ref := privacy.GaussianAccountant{Mu: math.Sqrt(float64(k)) * 500 / got}.Epsilon(1e-6)
		if e := p.ledger.spent(k).Epsilon; e < ref || e > 1.01*ref {
			t.Errorf("W=%d: the ledger's ε after %d windows %.8g, continuous Gaussian at L2 %.8g", r.Windows, k, e, ref)
		} else {
			t.Logf("W=%d: the ledger's ε after %d windows %.8g (continuous Gaussian at L2 %.8g)", r.Windows, k, e, ref)
		}
	}
	if found != 2 {
		t.Fatalf("%d horizons in the reference, want 2 (16, 256)", found)
	}
}

// TestTotalBoundMeanVariance: the mean's and the variance's parts under
// the total bound of TestTotalBoundSumAcceptance's setting, with laplace
// and δ = 0. A unit adds at most T = 5 values in all, so, from first
// principles, the L1 of its change is 5 to the values (the mean's
// count), 5·50 to the centred sum (values in [0, 100] centred on 50) and
// 5·50² to the centred squares. Pure ε adds up over the parts as
// Σ L1_i/scale_i (Laplace-type noise); the plan's scales spend at least
// ε/1.05 of it by these L1 (so no part's noise is more than 1.05× what its
// share of the budget needs) and at most ε (1e-9 relative: the rounded
// values' L1 exceeds these by 5 grid steps). Without the bound every part
// spends its budget on L0·L∞ = 5 groups × 5 values: at least 4.99× the
// noise. Fails on the old code (the total bound did not reach these parts).
func TestTotalBoundMeanVariance(t *testing.T) {
	l1 := map[string]float64{schema.SeriesCount: 5, schema.SeriesSum: 5 * 50, schema.SeriesSumSq: 5 * 50 * 50}
	for _, agg := range []string{AggMean, AggVariance} {
		spent := 0.0
		for _, x := range totalSeries(t, agg, "laplace", 0, l1) {
			spent += x.ref / x.scale
			if r := x.old / x.scale; r < 4.99 {
				t.Errorf("%s: scale %.6g, without the bound only %.4g× more", x.name, x.scale, r)
			}
		}
		if spent > 1+1e-9 || spent < 1/1.05 {
			t.Errorf("%s: the parts spend ε = %.8g by their L1, want within [1/1.05, 1]", agg, spent)
		}
		t.Logf("%s: ε spent by L1 %.8f", agg, spent)
	}
}

// TestTotalBoundTree: the total bound reaches the quantile tree. Two
// public groups, at most V = 5 values per group and T = 5 in all: per
// level a unit moves at most T = 5 counts (L1 = D·T = 20, L2 = √D·5 = 10,
// L0 = 20 nodes at L∞ 5 — exactly one group's tree at V = 5), where
// without the bound it is G·D·V = 40 (L0 = 40).
//
//   - laplace, ε = 0.5, δ = 0: scale L1/ε = 40 (pure ε of the shift's L1);
//     80 without the bound;
//   - gaussian, ε = 4, δ = 1e-6: the one-group S3 tree's σ_exact of
//     tree_total_reference.json (gen_tree_total.py), σ ≈ 11.934, within
//     [1 − 1e-9, 1 + 1e-3] as in TestTreeNormsDelta; more without the
//     bound.
//
// Fails on the old code (the total bound did not reach the tree).
func TestTotalBoundTree(t *testing.T) {
	sigma, err := strconv.ParseFloat(treeTotalRef(t)[0].SigmaExact, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(mech string, eps, delta float64, total int) Config {
		c := quantileConfig(5, eps, delta)
		c.Privacy.PublicGroups = [][]string{{"east"}, {"west"}}
		c.Bounds.MaxGroups, c.Bounds.MaxContributions = 2, total
		c.Privacy.Mechanism, c.Privacy.Mechanisms = mech, nil
		return c
	}
	scale := func(c Config) float64 {
		p, err := planFor(c)
		if err != nil {
			t.Fatal(err)
		}
		n := p.aggs[0].noises[0]
		if c.Bounds.MaxContributions > 0 && (n.sens.L1 != 20 || n.sens.L0 != 20 || n.sens.L2 != 10 || !n.sens.Total) {
			t.Errorf("%s: the tree's sensitivity %+v, want L0 20, L1 20, L2 10", c.Privacy.Mechanism, n.sens)
		}
		return n.scale
	}
	if got, old := scale(cfg("laplace", 0.5, 0, 5)), scale(cfg("laplace", 0.5, 0, 0)); got < 40 || got > 40*(1+1e-9) || old < 79.99 {
		t.Errorf("laplace: scale %v (want L1/ε = 40), %v without the bound (want 80)", got, old)
	}
	got, old := scale(cfg("gaussian", 4, 1e-6, 5)), scale(cfg("gaussian", 4, 1e-6, 0))
	if got < sigma*(1-1e-9) || got > sigma*(1+1e-3) || !(old > got*1.1) {
		t.Errorf("gaussian: σ %.8g, reference %.8g; %.6g without the bound", got, sigma, old)
	}
	t.Logf("gaussian: σ %.8g (reference %.8g, ratio %.6f), %.6g without the bound", got, sigma, got/sigma, old)
}

// TestTotalBoundMeanVarianceGaussian: the mean's and the variance's parts
// under the total bound of TestTotalBoundSumAcceptance's setting, with
// gaussian at ε = 1, δ = 1e-6. A unit adds at most T = 5 values in all, so
// the L2 of its change is 5 to the count, 5·50 to the centred sum and
// 5·50² to the centred squares (one group takes them all). Gaussian noise
// on independent parts is μ-GDP with μ² = Σ (L2_i/scale_i)², and the
// budget allows μ* = 5/σ* with σ* the continuous Gaussian's scale for L2 =
// 5 (gen_total.py, "hist 5x5 total 5"). The plan's scales spend μ within
// [μ*/1.05, μ*·(1 + 1e-3)] (1e-3 for the count's exact discrete
// accounting, which may differ slightly from the continuous one) — no
// part's noise is more than 1.05× what its share needs — and each part's
// noise is at least 2.2× smaller than without the bound (√5× for the
// lattice parts). Fails on the old code (the lattice parts got the bound
// through L0 and L∞ only: μ spent ≈ μ*/2).
func TestTotalBoundMeanVarianceGaussian(t *testing.T) {
	_, gauss := totalReference(t, "hist 5x5 total 5")
	muStar := 5 / gauss
	l2 := map[string]float64{schema.SeriesCount: 5, schema.SeriesSum: 5 * 50, schema.SeriesSumSq: 5 * 50 * 50}
	for _, agg := range []string{AggMean, AggVariance} {
		mu2 := 0.0
		for _, x := range totalSeries(t, agg, "gaussian", 1e-6, l2) {
			mu2 += (x.ref / x.scale) * (x.ref / x.scale)
			if r := x.old / x.scale; r < 2.2 {
				t.Errorf("%s: scale %.6g, without the bound only %.4g× more", x.name, x.scale, r)
			}
		}
		if mu := math.Sqrt(mu2); mu > muStar*(1+1e-3) || mu < muStar/1.05 {
			t.Errorf("%s: the parts spend μ = %.8g by their L2, want within [μ*/1.05, μ*·(1 + 1e-3)], μ* = %.8g", agg, mu, muStar)
		} else {
			t.Logf("%s: μ spent by L2 %.8f of μ* %.8f (ratio %.6f)", agg, mu, muStar, mu/muStar)
		}
	}
}
