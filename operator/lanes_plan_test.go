package operator

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dpstream/dpstream/schema"
)

// TestLaneAssumptions: the plan's assumptions name every extra measure's
// midpoint (its own range's) and every extra histogram's even spread,
// after the first measure's and histogram's lines, which keep their text.
func TestLaneAssumptions(t *testing.T) {
	c := laneConfig([]string{"127.0.0.1:9092"}, "in", "out", "g")
	c.Schema.Measures = append(c.Schema.Measures, schema.Measure{Name: "temp", Field: "temp", Lower: -20, Upper: 40})
	s, err := NewSizing(c, Sizes{UnitsPerGroup: 100})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("histogram events spread evenly over its %d buckets", len(c.Schema.Histogram.Labels())),
		fmt.Sprintf("values at the middle of [lower, upper] = %g", laneKwhUpper/2),
		fmt.Sprintf("values of measure voltage at the middle of its [lower, upper] = %g", (laneVoltLower+laneVoltUpper)/2),
		"values of measure temp at the middle of its [lower, upper] = 10",
		fmt.Sprintf("events of histogram appliance spread evenly over its %d buckets", len(c.Schema.Histograms[0].Labels())),
	}
	if got := s.Assumptions[len(s.Assumptions)-len(want):]; !slices.Equal(got, want) {
		t.Errorf("assumptions end\n%q\nwant\n%q", got, want)
	}
}

// TestAutoQuantilesEveryMeasure: with windows.quantile_mechanism auto
// and several measures, every measure's quantiles are released with the
// mechanism chosen (on the first measure's rank-error bound) and have the
// same rank-error bound: their parts have the same sensitivities (the
// rank error does not depend on a measure's range), so the decision on
// the first measure's is every measure's (docs/aggregates.md, "Several
// measures"). Checked at TestQuantileAuto's setting (V = 1, ε = 1), with
// the exponential mechanism chosen (the default three ranks, laplace and
// δ = 0; released by the joint mechanism: two ranks or more) and the tree
// chosen (99 percentiles: ε/99 per selection, gaussian).
func TestAutoQuantilesEveryMeasure(t *testing.T) {
	percentiles := make([]float64, 99)
	for i := range percentiles {
		percentiles[i] = float64(i+1) / 100
	}
	for _, tc := range []struct {
		mech      string
		ranks     []float64
		wantJoint bool
	}{{"laplace", nil, true}, {"gaussian", percentiles, false}} {
		c := quantileConfig(1, 1, 1e-6)
		c.Schema.Measures = []schema.Measure{{Name: "voltage", Field: "voltage", Lower: 200, Upper: 260}, {Name: "temp", Field: "temp", Lower: -20, Upper: 40}}
		c.Windows.QuantileMechanism, c.Windows.Quantiles = QuantileAuto, tc.ranks
		c.Privacy.Mechanism = tc.mech
		if tc.mech == "laplace" {
			c.Privacy.Delta = 0
		}
		p, err := planFor(c)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		var bounds []float64
		for i := range p.aggs {
			ap := &p.aggs[i]
			if ap.kind != schema.KindQuantiles {
				continue
			}
			names = append(names, ap.name)
			a := ap.agg
			if la, ok := a.(laneAgg); ok {
				a = la.inner
			}
			if _, joint := a.(quantileJointAgg); joint != tc.wantJoint {
				t.Errorf("%s: %s is joint %v, want %v (%q)", tc.mech, ap.name, joint, tc.wantJoint, p.choices)
			}
			one := &plan{aggs: []aggPlan{*ap}}
			bounds = append(bounds, quantileRankBound(one))
		}
		if !slices.Equal(names, []string{AggQuantiles, "quantiles:voltage", "quantiles:temp"}) {
			t.Fatalf("%s: quantiles %q", tc.mech, names)
		}
		if bounds[1] != bounds[0] || bounds[2] != bounds[0] {
			t.Errorf("%s: rank-error bounds %v, want one bound", tc.mech, bounds)
		}
	}
}
