package operator

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/privacy/quantile"
	"github.com/dpstream/dpstream/windows"
)

// jointOperator returns c with windows.quantile_mechanism "joint" and its
// operator (test key).
func jointOperator(t *testing.T, c Config) (Config, *Operator) {
	t.Helper()
	return quantileOperator(t, c, QuantileJoint)
}

// TestQuantileJointParts: the joint mechanism's part counts one
// selection per group a unit can touch, not one per rank and group: at
// setting S2 of issue 20 (V = 5, ε = 0.5, δ = 0, three ranks, one group)
// one selection at scale 1/0.5 = 2 (the exponential mechanism: 3 at 6);
// G = 3 groups: 3 selections; replacing units (max_units): 2G; under a
// binding total bound (G = 3, V = 5, T = 6: Vm = 5) the pure-ε L1 bound
// ⌈T/Vm⌉ = 2 selections (jointTotal), with δ > 0 min(2·2 − 1, G) = 3
// packed groups (selectPacked), and at G = V = T = 5 one; T = 15 = G·Vm
// does not bind. The plan's sizing names the mechanism "joint",
// one selection per group, its ε and the rank-error bound. Fails on the
// code before: "joint" was refused (and would be ranks·G selections).
func TestQuantileJointParts(t *testing.T) {
	for _, tc := range []struct {
		name           string
		groups, values int
		total, units   int
		delta          float64
		coords         int
		scale          float64 // 0: not checked (δ > 0)
	}{
		{"S2", 1, 5, 0, 0, 0, 1, 2},
		{"three groups", 3, 5, 0, 0, 0, 3, 6},
		{"replacing: pure ε composes G", 1, 5, 0, 100, 0, 1, 2},
		{"replacing, three groups", 3, 5, 0, 100, 0, 3, 6},
		{"replacing, δ>0: 2G", 3, 5, 0, 100, 1e-6, 6, 0},
		{"total binds", 3, 5, 6, 0, 0, 2, 4},
		{"total binds, δ>0", 3, 5, 6, 0, 1e-6, 3, 0},
		{"total binds, δ>0, packed", 5, 5, 5, 0, 1e-6, 1, 0},
		{"total at G·Vm", 3, 5, 15, 0, 0, 3, 6},
	} {
		near := func(x, want float64) bool { return x >= want && x <= want*(1+1e-9) } // scales round up
		c := quantileConfig(tc.values, 0.5, tc.delta)
		c.Bounds.MaxGroups, c.Bounds.MaxContributions, c.Bounds.MaxUnits = tc.groups, tc.total, tc.units
		_, o := jointOperator(t, c)
		ap := &o.plan.aggs[0]
		n := ap.noises[0]
		if n.mech.Name() != "exponential" || n.kind != selectExact || n.coords != tc.coords || (tc.scale > 0 && !near(n.scale, tc.scale)) {
			t.Errorf("%s: %s part, %d selections at scale %v; want %d at %v", tc.name, n.mech.Name(), n.coords, n.scale, tc.coords, tc.scale)
		}
		if want := int64(selectValues(tc.values, tc.total)); ap.selValues != want || ap.selReplace != (tc.units > 0) {
			t.Errorf("%s: Δ for %d values (replace %v), want %d", tc.name, ap.selValues, ap.selReplace, want)
		}
		if b := o.plan.seriesSensitivity(&n); strings.Contains(b.L1Bound, "bounds.max_contributions") != (tc.total > 0 && tc.total < tc.groups*tc.values) {
			t.Errorf("%s: L1 %g by %q", tc.name, b.L1, b.L1Bound)
		}
		s := o.Sizing().Aggregates[0].Series[0]
		q := s.Quantiles
		if s.Mechanism != QuantileJoint || s.HalfWidth != nil || q == nil || q.Selections != 1 || !near(q.Epsilon, 1/n.scale) ||
			!slices.Equal(q.Ranks, DefaultQuantiles) || q.RankError != ap.selError[0] || !(q.RankError > 0) {
			t.Errorf("%s: plan sizing %+v (%+v)", tc.name, s, q)
		}
	}
	_, o := exponentialOperator(t, quantileConfig(5, 0.5, 0))
	if s := o.Sizing().Aggregates[0].Series[0]; s.Quantiles != nil || s.Mechanism != "exponential" {
		t.Errorf("exponential plan sizing %+v: want no joint summary", s)
	}
}

// denseQuantileGroup is one group of 3000 values 1/30, 2/30, …, 100 in
// [0, 100], one per leaf of the plan's histogram (at least 65536 leaves,
// histogramLeaves): ⌊30e⌋ values lie below an edge e (the edges fall
// between the values).
func denseQuantileGroup(p *plan) windows.Group {
	counts := map[uint32]int64{}
	leaves := histogramLeaves(&p.aggs[0])
	for i := 1; i <= 3000; i++ {
		counts[windows.LeafOf(float64(i)/30, 0, 100, leaves)]++
	}
	g := p.emptyGroup(p.publicGroups[0])
	for l, k := range counts {
		g.Leaves = append(g.Leaves, windows.LeafCount{Leaf: l, Count: k})
	}
	slices.SortFunc(g.Leaves, func(a, b windows.LeafCount) int { return int(a.Leaf) - int(b.Leaf) })
	return g
}

// histogramLeaves is the number of leaves of the groups' histogram the
// quantiles of ap read (the selections' candidates are their edges; the
// tree coarsens them by leafDiv).
func histogramLeaves(ap *aggPlan) int {
	switch {
	case ap.joint.Leaves > 0:
		return ap.joint.Leaves
	case ap.selector.Leaves > 0:
		return ap.selector.Leaves
	}
	return ap.tree.Leaves() * max(ap.leafDiv, 1)
}

// releaseReplayed releases one window of the group g by p twice and
// fails t unless the two are byte-identical; it returns the first.
func releaseReplayed(t *testing.T, p *plan, g windows.Group) []outMsg {
	t.Helper()
	w := &windows.Window{Start: 0, End: p.size, Groups: []windows.Group{g}}
	out, _, _, err := p.releaseWindow(w, testKey(), "ns", "i", nil)
	if err != nil {
		t.Fatal(err)
	}
	again, _, _, err := p.releaseWindow(w, testKey(), "ns", "i", nil)
	if err != nil || len(again) != len(out) || string(again[0].value) != string(out[0].value) {
		t.Fatalf("replay differs (%v)", err)
	}
	return out
}

// TestQuantileJointRelease: the release path of "joint" at setting S2
// (V = 5, ε = 0.5, δ = 0): one group's release carries every rank, in the
// configured order with its label, the selected edges non-decreasing in
// the rank, the whole range as intervals, the same stated rank error for
// every rank (the bound of all ranks together), the note names the
// mechanism; a replay is byte-identical; on the dense group every rank's
// edge is within the stated bound plus 2 of rank·N (the best tuple's loss
// is 0 here: the 3000 values each have an edge; false failure at most β =
// 0.05, once, with the fixed key). Then the same plan with the ranks
// configured out of order (0.9, 0.5, 0.99; Validate refuses it, the
// aggregate does not rely on it) lists them in that order. Needs
// quantile.Joint.Select (joint-core).
func TestQuantileJointRelease(t *testing.T) {
	c, o := jointOperator(t, quantileConfig(5, 0.5, 0))
	p := o.plan
	ap := &p.aggs[0]
	if !strings.Contains(p.note, "joint exponential mechanism") || !strings.Contains(p.note, "one selection of all ranks per group") {
		t.Errorf("note %q does not describe the joint selection", p.note)
	}
	g := denseQuantileGroup(p)
	out := releaseReplayed(t, p, g)
	qs, re := out[0].rel.Series[0], out[0].rel.Series[1]
	if qs.Mechanism != QuantileJoint || !slices.Equal(qs.Labels, []string{"0.5", "0.9", "0.99"}) || len(qs.Floats) != 3 || len(re.Floats) != 3 {
		t.Fatalf("quantiles %+v, rank errors %+v", qs, re)
	}
	for k, r := range ap.ranks {
		v := qs.Floats[k]
		if qs.Lo[k] != 0 || qs.Hi[k] != 100 || re.Floats[k] != ap.selError[0] {
			t.Errorf("rank %g: interval [%g, %g], rank error %g; want the range and %g", r, qs.Lo[k], qs.Hi[k], re.Floats[k], ap.selError[0])
		}
		if k > 0 && v < qs.Floats[k-1] {
			t.Errorf("rank %g: edge %g below rank %g's %g", r, v, ap.ranks[k-1], qs.Floats[k-1])
		}
		rank := math.Floor(v * 30) // values below the edge v (1/30 apart)
		if d := math.Abs(rank - r*3000); d > re.Floats[k]+2 {
			t.Errorf("rank %g: value %g has rank %g, %g from %g beyond the bound %g", r, v, rank, d, r*3000, re.Floats[k])
		}
	}
	c.Windows.Quantiles = []float64{0.9, 0.5, 0.99}
	if err := (quantileJointAgg{}).complete(ap, c, ap.noises[0].beta); err != nil {
		t.Fatal(err)
	}
	qs = releaseReplayed(t, p, g)[0].rel.Series[0]
	if !slices.Equal(qs.Labels, []string{"0.9", "0.5", "0.99"}) || !(qs.Floats[1] <= qs.Floats[0] && qs.Floats[0] <= qs.Floats[2]) {
		t.Errorf("ranks configured 0.9, 0.5, 0.99: labels %q, values %v", qs.Labels, qs.Floats)
	}
}

// TestQuantileJointConfig: "joint" is accepted with up to
// quantile.MaxJointRanks ranks and refused beyond, naming both settings;
// "auto" with more ranks is accepted (it keeps the exponential mechanism
// or the tree there); an unknown mechanism's error lists "joint". The
// release digest binds the mechanism: joint, exponential and auto differ.
// Fails on the code before: "joint" was refused.
func TestQuantileJointConfig(t *testing.T) {
	many := make([]float64, quantile.MaxJointRanks+1)
	for i := range many {
		many[i] = float64(i+1) / float64(len(many)+1)
	}
	c := quantileConfig(1, 1, 1e-6)
	c.Windows.QuantileMechanism = QuantileJoint
	c.Windows.Quantiles = many[:quantile.MaxJointRanks]
	if err := c.Validate(); err != nil {
		t.Errorf("%d ranks with joint: %v", quantile.MaxJointRanks, err)
	}
	c.Windows.Quantiles = many
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "windows.quantiles") || !strings.Contains(err.Error(), "windows.quantile_mechanism joint selects at most 32") {
		t.Errorf("%d ranks with joint: %v", len(many), err)
	}
	c.Windows.QuantileMechanism = QuantileAuto
	if err := c.Validate(); err != nil {
		t.Errorf("%d ranks with auto: %v", len(many), err)
	}
	c.Windows.QuantileMechanism = "jointly"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "joint") {
		t.Errorf("unknown mechanism: %v", err)
	}
	c = quantileConfig(1, 1, 1e-6)
	digests := map[string]string{}
	for _, m := range []string{QuantileJoint, QuantileExponential, QuantileAuto} {
		c.Windows.QuantileMechanism = m
		d, err := ReleaseDigest(c)
		if err != nil {
			t.Fatal(err)
		}
		for other, od := range digests {
			if od == d {
				t.Errorf("digest of %s equals %s's", m, other)
			}
		}
		digests[m] = d
	}
}
