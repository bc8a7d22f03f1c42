package operator

import (
	"strings"
	"testing"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
)

// totalConfig: a histogram of 5 categories in which a unit's 5 events may
// fall in one cell or spread over cells (max_buckets 5 × max_per_bucket
// 5), one window's budget ε = 1 and δ, and a total bound of total (0:
// unset).
func totalConfig(mech string, delta float64, total int) Config {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Schema.Histogram = &schema.Histogram{Field: "cat", Categories: []string{"a", "b", "c", "d", "e"}}
	c.Windows.Aggregates = []string{AggHistogram}
	c.Bounds = BoundsConfig{MaxGroups: 1, MaxBuckets: 5, MaxPerBucket: 5, MaxValues: 5, MaxContributions: total}
	c.Privacy.Epsilon, c.Privacy.Delta = 1, delta
	c.Privacy.Mechanism, c.Privacy.Mechanisms = mech, nil
	return c
}

// The acceptance test of issue 20: a unit's 5 events spread over cells,
// under a total bound of 5. The planned noise is at most 1.05× the
// optimum of the bound's norm, computed independently as the
// one-coordinate calibration at that sensitivity (a vector with all of it
// in one cell is a neighbour, so nothing valid is smaller):
//
//   - Laplace, pure ε: the L1 optimum, Laplace at Δ = L1 = 5 (Theorem 3:
//     b = Δ/ε = 5); the plan's discrete Laplace (pure accountant on L1)
//     gives exactly 5;
//   - Gaussian, δ = 1e-6: the L2 optimum, the analytic Gaussian at Δ = L2
//     = 5 (Balle & Wang; privacy.Gaussian's closed form, σ ≈ 21.12); the
//     plan's discrete Gaussian (the PLD over the worst shift pattern)
//     comes within 1e-4 of it.
//
// Without the bound the same plan has 5× (Laplace) and √5× (Gaussian) the
// noise, which the test also checks, so it fails on the old code (which
// has no bounds.max_contributions).
func TestTotalBoundAcceptance(t *testing.T) {
	for _, c := range []struct {
		mech  string
		delta float64
		worse float64 // the noise without the total bound, relative
	}{{"laplace", 0, 5}, {"gaussian", 1e-6, 2.236}} {
		p, err := planFor(totalConfig(c.mech, c.delta, 5))
		if err != nil {
			t.Fatalf("%s: %v", c.mech, err)
		}
		opt, err := map[string]privacy.Mechanism{"laplace": privacy.Laplace{}, "gaussian": privacy.Gaussian{}}[c.mech].Calibrate(1, c.delta, 5)
		if err != nil {
			t.Fatal(err)
		}
		n := p.aggs[0].noises[0]
		if n.scale > 1.05*opt.Scale {
			t.Errorf("%s: scale %.6g > 1.05 × the optimum %.6g", c.mech, n.scale, opt.Scale)
		}
		if n.sens.L1 != 5 || n.sens.L2 != 5 || !n.sens.Total {
			t.Errorf("%s: sensitivity %+v, want L1 = L2 = 5 from the total bound", c.mech, n.sens)
		}
		old, err := planFor(totalConfig(c.mech, c.delta, 0))
		if err != nil {
			t.Fatal(err)
		}
		o := old.aggs[0].noises[0]
		if r := o.scale / n.scale; r < c.worse*0.99 {
			t.Errorf("%s: without the total bound the scale is %.6g, only %.4g× (want ≈ %g×)", c.mech, o.scale, r, c.worse)
		}
		t.Logf("%s: scale %.6g with the bound (optimum %.6g, ratio %.6f), %.6g without", c.mech, n.scale, opt.Scale, n.scale/opt.Scale, o.scale)
	}
}

// The plan says which bound binds each series' L1 and L2, and the note
// carries the total bound only where it binds.
func TestTotalBoundPlanSays(t *testing.T) {
	c := totalConfig("laplace", 0, 5)
	c.Windows.Aggregates = []string{AggCount, AggHistogram}
	s, err := NewSizing(c, Sizes{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Bounds.MaxContributions != 5 || s.Bounds.MaxPerBucket != 5 {
		t.Errorf("bounds %+v", s.Bounds)
	}
	want := map[string][2]string{
		AggCount:     {"bounds.max_groups × bounds.max_values", "√(bounds.max_groups) × bounds.max_values"},
		AggHistogram: {"bounds.max_contributions", "bounds.max_contributions"},
	}
	for _, a := range s.Aggregates {
		e := a.Series[0].Sensitivity
		if e == nil || e.L1Bound != want[a.Aggregate][0] || e.L2Bound != want[a.Aggregate][1] {
			t.Errorf("%s: sensitivity %+v, want bounds %q", a.Aggregate, e, want[a.Aggregate])
		}
	}
	c.Bounds.MaxPerBucket, c.Bounds.MaxContributions = 2, 5
	p, err := planFor(c)
	if err != nil {
		t.Fatal(err)
	}
	e := p.seriesSensitivity(&p.aggs[1].noises[0])
	if e.L1 != 5 || e.L2Bound != "bounds.max_contributions with bounds.max_per_bucket" || e.L2 != 3 {
		t.Errorf("histogram of 5 cells × 2, total 5: %+v, want L1 5, L2 3 = √(2·2² + 1²)", e)
	}
	if !strings.Contains(p.note, "L1=5 and L2=3 by bounds.max_contributions") || strings.Count(p.note, "max_contributions") != 1 {
		t.Errorf("note: %s", p.note)
	}
}

// --target suggests the total bound when a histogram's cells × per-cell
// bound exceeds the events a unit adds, and not once it is set.
func TestTotalBoundSuggested(t *testing.T) {
	c := totalConfig("laplace", 0, 0)
	find := func(c Config) *Suggestion {
		s, err := NewSizing(c, Sizes{UnitsPerGroup: 250, EventsPerUnit: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Suggest(c, 0.01); err != nil {
			t.Fatal(err)
		}
		for i := range s.Suggestions {
			if s.Suggestions[i].Setting == "bounds.max_contributions" {
				return &s.Suggestions[i]
			}
		}
		return nil
	}
	if sg := find(c); sg == nil || sg.Value != "4" {
		t.Errorf("suggestion %+v, want bounds.max_contributions 4", sg)
	}
	c.Bounds.MaxContributions = 4
	if sg := find(c); sg != nil {
		t.Errorf("suggested %+v with the bound already set", sg)
	}
}

// The plan names the bounds behind every part's L1 and L2 (issue 20: the
// quantile tree's L1 = G·D·V and L2 = √(G·D)·V were labelled "L0 × L∞",
// which they are not — this test fails so on the old code, as on the
// generic labels of sums, means, variances and units), with and without
// the total bound, and the total bound's label on the valued parts names
// the per-value factor.
func TestPlanBoundLabels(t *testing.T) {
	for _, total := range []int{0, 2} {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Windows.Aggregates = []string{AggCount, AggHistogram, AggSum, AggMean, AggVariance, AggUnits, AggQuantiles}
		c.Bounds = BoundsConfig{MaxGroups: 2, MaxBuckets: 2, MaxPerBucket: 3, MaxValues: 3, MaxContributions: total}
		c.Privacy.Mechanism, c.Privacy.Mechanisms = "laplace", nil
		s, err := NewSizing(c, Sizes{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range s.Aggregates {
			for _, ss := range a.Series {
				e := ss.Sensitivity
				if e == nil {
					continue // derived series
				}
				n++
				name := a.Aggregate + "." + ss.Series
				if strings.Contains(e.L1Bound, "L0") || strings.Contains(e.L2Bound, "L∞") || !strings.Contains(e.L1Bound, "bounds.") {
					t.Errorf("total %d: %s: labels %q, %q", total, name, e.L1Bound, e.L2Bound)
				}
				switch {
				case a.Aggregate == AggQuantiles:
					want := "bounds.max_groups × windows.quantile_depth × bounds.max_values"
					if total > 0 {
						want = "windows.quantile_depth × bounds.max_contributions"
					}
					if e.L1Bound != want {
						t.Errorf("%s: L1 label %q, want %q", name, e.L1Bound, want)
					}
				case total > 0 && a.Aggregate == AggSum:
					if e.L1Bound != "bounds.max_contributions × max(|schema.lower|, |schema.upper|)" ||
						e.L2Bound != "bounds.max_contributions × max(|schema.lower|, |schema.upper|)" {
						t.Errorf("%s: labels %q, %q", name, e.L1Bound, e.L2Bound)
					}
				case total > 0 && a.Aggregate != AggUnits:
					if !strings.HasPrefix(e.L1Bound, "bounds.max_contributions") {
						t.Errorf("%s: L1 label %q, want the total bound", name, e.L1Bound)
					}
				}
			}
		}
		if n < 8 {
			t.Errorf("total %d: only %d noised series", total, n)
		}
	}
}
