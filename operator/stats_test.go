package operator

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// statsConfig is the test config releasing the aggregates of issue 11
// (with a small quantile tree unless the test changes it).
func statsConfig(aggs ...string) Config {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Windows.Aggregates = aggs
	c.Windows.QuantileBranching, c.Windows.QuantileDepth = 8, 3
	c.Windows.Quantiles = []float64{0.1, 0.5, 0.9, 0.99}
	return c
}

// The plan derives the new aggregates' sensitivities from the bounds and
// names every part with its L0 and L∞ in the note (--check-config and the
// ledger print it).
func TestPlanNewAggregates(t *testing.T) {
	t.Parallel() // computes alone; no shared state (docs/development.md)
	c := statsConfig(AggUnits, AggVariance, AggQuantiles)
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	p := o.plan
	// G = 1, V = 3, [lower, upper] = [0, 10]: h = 5; tree B = 8, D = 3.
	want := map[string]windows.Sensitivity{
		"units.units":     {L0: 1, L1: 1, L2: 1, Linf: 1},
		"variance.count":  {L0: 1, L1: 3, L2: 3, Linf: 3},
		"variance.sum":    {L0: 1, L1: 15, L2: 15, Linf: 15},
		"variance.sum_sq": {L0: 1, L1: 75, L2: 75, Linf: 75},
		"quantiles.tree":  {L0: 9, L1: 9, L2: 3 * math.Sqrt(3), Linf: 3},
		"selection.units": {L0: 1, L1: 1, L2: 1, Linf: 1},
	}
	got := map[string]windows.Sensitivity{}
	for _, ap := range p.aggs {
		for _, n := range ap.noises {
			got[n.part] = n.sens
		}
	}
	if p.sel != nil {
		got[p.sel.noise.part] = p.sel.noise.sens
	}
	delete(want, "selection.units") // public groups in the test config
	for part, w := range want {
		g, ok := got[part]
		if !ok || g.L0 != w.L0 || g.Linf != w.Linf || g.L1 != w.L1 || math.Abs(g.L2-w.L2) > 1e-9 {
			t.Errorf("%s: sensitivity %+v, want %+v", part, g, w)
		}
		if !strings.Contains(p.note, part+": ") {
			t.Errorf("note does not name %s: %s", part, p.note)
		}
	}
	if len(got) != len(want) {
		t.Errorf("parts %v, want %v", got, want)
	}
	qa := p.aggs[2]
	if qa.tree.Leaves() != 512 || qa.rankH <= 0 || !slices.Equal(qa.labels, []string{"0.1", "0.5", "0.9", "0.99"}) {
		t.Errorf("quantile plan: %+v", qa)
	}
	// Quantiles refuse float noise (their intervals need exact integer
	// noise) and accept auto.
	c.Privacy.Mechanisms = map[string]string{AggQuantiles: "logistic"}
	if _, err := New(c, WithKey(testKey())); err == nil || !strings.Contains(err.Error(), "quantiles need") {
		t.Errorf("logistic quantiles: %v", err)
	}
	c.Privacy.Mechanisms = map[string]string{AggQuantiles: Auto}
	if o, err := New(c, WithKey(testKey())); err != nil || !isDiscrete(o.plan.aggs[2].noises[0].mech) {
		t.Errorf("auto quantiles: %v", err)
	}
}

// statsTruth is the exact value behind every released value of the new
// aggregates of one group (from the bounded window).
func statsTruth(g *windows.Group, leaves int, lower, upper float64) (units, variance float64, sorted []float64) {
	units = float64(g.Units)
	if g.Values > 0 {
		n := float64(g.Values)
		m := g.CentredSum / n
		variance = g.CentredSqSum/n - m*m
	}
	// The leaves' values are known to within a leaf: the coverage check
	// uses the leaf edges (see quantileCovered).
	for _, l := range g.Leaves {
		for range l.Count {
			sorted = append(sorted, float64(l.Leaf))
		}
	}
	return units, variance, sorted
}

// quantileCovered reports whether [lo, hi] holds the true r-quantile of the
// kept values, known by leaf (the ⌈rN⌉-th smallest value's leaf must meet
// the interval).
func quantileCovered(leafOf []float64, r float64, lo, hi, lower, upper float64, leaves int) bool {
	if len(leafOf) == 0 {
		return true
	}
	k := max(1, int(math.Ceil(r*float64(len(leafOf)))))
	j := leafOf[k-1]
	w := (upper - lower) / float64(leaves)
	return lo <= lower+(j+1)*w && hi >= lower+j*w
}

// The released intervals of units, variance, stddev and quantiles cover
// the truth at least at the stated level over many noise keys (the noise
// is drawn per key; the windows are fixed): 8 windows × 3 groups × 200
// keys. The level is 0.95 per value (variance and quantiles are
// conservative: union bounds); the test fails if a value's coverage is
// below 0.95 − 4 binomial standard deviations (false-failure rate ≈ 3e-5
// per series, deterministic with the fixed keys). It also checks the
// released quantiles are non-decreasing in the rank, and that every value
// in a quantile's interval — the released one included — is within the
// stated rank error.
func TestNewAggregatesCoverage(t *testing.T) {
	t.Parallel() // computes alone; no shared state (docs/development.md)
	c := statsConfig(AggUnits, AggVariance, AggQuantiles)
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	p := o.plan
	items := baseItems(genStream(21, 8, 90), c.Windows.AllowedLateness)
	run := runWindows(t, c, o, auditMessages(items))
	if len(run.windows) != 8 {
		t.Fatalf("%d windows", len(run.windows))
	}
	qa := p.aggs[2]
	leaves := qa.tree.Leaves()
	const keys = 200
	hits, total := map[string]int{}, map[string]int{}
	rankBad := 0
	for k := range keys {
		key := auditKey("stats-coverage", 0, k)
		for wi := range run.windows {
			w := &run.windows[wi]
			out, _, _, err := p.releaseWindow(w, key, "test", "t", nil)
			if err != nil {
				t.Fatal(err)
			}
			byKey := map[string]*windows.Group{}
			for gi := range w.Groups {
				byKey[w.Groups[gi].Key] = &w.Groups[gi]
			}
			for _, m := range out {
				g := byKey[schema.MakeGroup(m.rel.Group[0].Value)]
				if g == nil {
					t.Fatalf("release for a group the window does not have")
				}
				units, variance, sortedLeaves := statsTruth(g, leaves, testLower, testUpper)
				check := func(name string, s schema.Series, i int, truth float64) {
					total[name]++
					if s.Lo[i] <= truth && truth <= s.Hi[i] {
						hits[name]++
					}
				}
				switch m.rel.Kind {
				case schema.KindUnits:
					check("units", m.rel.Series[0], 0, units)
				case schema.KindVariance:
					check("variance", m.rel.Series[3], 0, variance)
					check("stddev", m.rel.Series[4], 0, math.Sqrt(variance))
					check("count", m.rel.Series[0], 0, float64(g.Values))
					check("sum", m.rel.Series[1], 0, g.CentredSum)
					check("sum_sq", m.rel.Series[2], 0, g.CentredSqSum)
				case schema.KindQuantiles:
					qs := m.rel.Series[0]
					if !slices.IsSorted(qs.Floats) {
						t.Fatalf("quantiles not monotone: %v", qs.Floats)
					}
					allIn := true
					for i, r := range qa.ranks {
						if !quantileCovered(sortedLeaves, r, qs.Lo[i], qs.Hi[i], testLower, testUpper, leaves) {
							allIn = false
						}
						// Rank error of the released value, counted by leaf.
						n := float64(len(sortedLeaves))
						lf := float64(windows.LeafOf(qs.Floats[i], testLower, testUpper, leaves))
						below := float64(sort.SearchFloat64s(sortedLeaves, lf))
						atOrBelow := float64(sort.SearchFloat64s(sortedLeaves, lf+1))
						if below > r*n+m.rel.Series[1].Floats[i] || atOrBelow < r*n-m.rel.Series[1].Floats[i] {
							rankBad++
						}
					}
					total["quantiles (all ranks)"]++
					if allIn {
						hits["quantiles (all ranks)"]++
					}
				}
			}
		}
	}
	for name, n := range total {
		rate := float64(hits[name]) / float64(n)
		floor := 0.95 - 4*math.Sqrt(0.95*0.05/float64(n))
		t.Logf("%s: %d/%d covered (%.4f)", name, hits[name], n, rate)
		if rate < floor {
			t.Errorf("%s: coverage %.4f below %.4f", name, rate, floor)
		}
	}
	if len(total) != 7 {
		t.Errorf("checked %v", total)
	}
	if rankBad > 0 {
		t.Errorf("%d released quantiles outside their stated rank error", rankBad)
	}
}

// With units as the only aggregate and private group selection (group_by
// without public groups), a group only one unit touches is released at
// most at the selection's δ rate, and a large group always: selection is
// unchanged by the new aggregate. 400 keys; the singleton's release
// probability per window is ≤ pw ≈ 1e-9, so any release fails the test
// (false-failure rate ≤ 400·1e-9).
func TestUnitsOnlyGroupSelection(t *testing.T) {
	c := statsConfig(AggUnits)
	c.Privacy.PublicGroups = nil
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	p := o.plan
	if p.sel == nil || len(p.aggs) != 1 || p.aggs[0].kind != schema.KindUnits {
		t.Fatalf("plan: selection %v, aggs %d", p.sel != nil, len(p.aggs))
	}
	w := windows.Window{Start: testBase, End: testBase + testSize.Milliseconds(), Groups: []windows.Group{
		{Key: schema.MakeGroup("big"), Units: 200},
		{Key: schema.MakeGroup("lonely"), Units: 1},
	}}
	big := 0
	for k := range 400 {
		out, _, withheld, err := p.releaseWindow(&w, auditKey("units-selection", 0, k), "test", "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out {
			switch m.rel.Group[0].Value {
			case "lonely":
				t.Fatalf("key %d: a group of one unit released (threshold %g)", k, p.sel.threshold)
			case "big":
				big++
				if v := m.rel.Series[0].Ints[0]; math.Abs(float64(v)-200) > 50 {
					t.Errorf("units %d for 200", v)
				}
			}
		}
		if withheld != 1 {
			t.Errorf("key %d: %d groups withheld", k, withheld)
		}
	}
	if big != 400 {
		t.Errorf("the large group was released %d of 400 times", big)
	}
}

// The variance is post-processed into [0, ((upper − lower)/2)²], and so
// is its interval, however large the noise; the standard deviation is its
// square root.
func TestVarianceClamped(t *testing.T) {
	c := statsConfig(AggVariance)
	c.Privacy.Epsilon = 0.01 // huge noise
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	w := windows.Window{Start: testBase, End: testBase + testSize.Milliseconds()}
	for k := range 200 {
		out, _, _, err := o.plan.releaseWindow(&w, auditKey("variance-clamp", 0, k), "test", "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out {
			v, sd := m.rel.Series[3], m.rel.Series[4]
			if v.Floats[0] < 0 || v.Floats[0] > 25 || v.Lo[0] < 0 || v.Hi[0] > 25*(1+1e-15) || v.Lo[0] > v.Floats[0] || v.Hi[0] < v.Floats[0] {
				t.Fatalf("variance %v in [%v, %v] outside [0, 25]", v.Floats[0], v.Lo[0], v.Hi[0])
			}
			if sd.Floats[0] != math.Sqrt(v.Floats[0]) || sd.Hi[0] != math.Sqrt(v.Hi[0]) {
				t.Fatalf("stddev %v is not √%v", sd.Floats[0], v.Floats[0])
			}
		}
	}
}

var _ = fmt.Sprintf
var _ = rng.Key{}
