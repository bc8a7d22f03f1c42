package operator

import (
	"slices"
	"testing"

	"github.com/dpstream/dpstream/windows"
)

// TestQuantileLeaves: with windows.quantile_depth unset the selection
// mechanisms ("exponential", "joint", and "auto" whatever it resolves to)
// keep the deepest histogram of at most windows.MaxTreeLeaves leaves
// (16^5 = 2^20; 2^20 for branching 2), the tree the default 16^4; a set
// depth is every mechanism's. The windows' state and the plan's
// candidates agree (a selection over other leaves than the state's would
// read the wrong edges). Fails on the code before (every default was
// 16^4 = 65536 leaves).
func TestQuantileLeaves(t *testing.T) {
	for _, tc := range []struct {
		mech             string
		branching, depth int
		want             int
	}{
		{"", 0, 0, 1 << 16},
		{QuantileTree, 0, 0, 1 << 16},
		{QuantileExponential, 0, 0, 1 << 20},
		{QuantileJoint, 0, 0, 1 << 20},
		{QuantileAuto, 0, 0, 1 << 20},
		{QuantileJoint, 2, 0, 1 << 20},
		{QuantileJoint, 10, 0, 1_000_000},
		{QuantileJoint, 0, 3, 1 << 12},
		{QuantileAuto, 0, 3, 1 << 12},
		{QuantileTree, 0, 5, 1 << 20},
	} {
		c := quantileConfig(5, 1, 1e-6)
		c.Windows.QuantileMechanism, c.Windows.QuantileBranching, c.Windows.QuantileDepth = tc.mech, tc.branching, tc.depth
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatalf("%q %d^%d: %v", tc.mech, tc.branching, tc.depth, err)
		}
		state := windowsConfig(c, 0).TreeLeaves()
		if got := histogramLeaves(&o.plan.aggs[0]); state != tc.want || got != tc.want {
			t.Errorf("%q, branching %d, depth %d: state %d leaves, plan %d, want %d", tc.mech, tc.branching, tc.depth, state, got, tc.want)
		}
	}
}

// TestQuantileAutoTreeCoarsens: when "auto" resolves to the tree (99
// ranks) the groups' histogram is 16^5 leaves and the tree keeps 16^4: its
// sensitivity and scale are those of the configured tree, and its true
// node counts from the fine histogram are the configured tree's from the
// coarse histogram of the same values (each tree leaf the sum of its 16
// histogram leaves). Fails if the tree read the fine leaves as its own
// (an error: leaf beyond the tree) or were calibrated at depth 5.
func TestQuantileAutoTreeCoarsens(t *testing.T) {
	c := quantileConfig(5, 1, 1e-6)
	c.Windows.Quantiles = evenRanks(99)
	c.Windows.QuantileMechanism = QuantileAuto
	auto, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	c.Windows.QuantileMechanism = QuantileTree
	tree, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	a, b := &auto.plan.aggs[0], &tree.plan.aggs[0]
	if a.tree != b.tree || a.leafDiv != 16 || b.leafDiv != 1 {
		t.Fatalf("auto's tree %+v (÷%d), the configured %+v (÷%d): want the same 16^4 tree over 16 histogram leaves each", a.tree, a.leafDiv, b.tree, b.leafDiv)
	}
	if na, nb := a.noises[0], b.noises[0]; na.mech.Name() != nb.mech.Name() || na.scale != nb.scale || na.sens != nb.sens {
		t.Errorf("auto's tree %s at %v (%+v), the configured %s at %v (%+v)", na.mech.Name(), na.scale, na.sens, nb.mech.Name(), nb.scale, nb.sens)
	}
	group := func(p *plan, leaves int) windows.Group {
		counts := map[uint32]int64{}
		for i := range 5000 {
			// Values spread unevenly: dense near 0, one at the top.
			v := 100 * float64(i*i) / (5000 * 5000)
			counts[windows.LeafOf(v, 0, 100, leaves)]++
		}
		counts[windows.LeafOf(100, 0, 100, leaves)]++
		g := p.emptyGroup(p.publicGroups[0])
		for l, k := range counts {
			g.Leaves = append(g.Leaves, windows.LeafCount{Leaf: l, Count: k})
		}
		slices.SortFunc(g.Leaves, func(x, y windows.LeafCount) int { return int(x.Leaf) - int(y.Leaf) })
		return g
	}
	fine, coarse := group(auto.plan, 1<<20), group(tree.plan, 1<<16)
	na, err := treeNodes(a, &fine)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := treeNodes(b, &coarse)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(na, nb) {
		t.Error("auto's tree nodes from the 16^5 histogram differ from the configured tree's from the 16^4 one")
	}
	if _, err := treeNodes(b, &fine); err == nil {
		t.Error("the configured 16^4 tree read a 16^5 histogram without an error")
	}
}

// TestQuantileAutoComparesAtTreeResolution: auto compares the selection's
// stated rank-error bound with the tree's at the tree's 16^4 leaves, not
// at the selection's own 2^20 (whose bound is larger by the logarithm of
// the extra candidates, not by a wider error): at 40 ranks (V = 1, ε = 1,
// δ = 1e-6) the exponential mechanism's bound is below the tree's at 16^4
// leaves and above it at 2^20, and auto keeps the exponential mechanism,
// as it did before the finer grid. Fails when auto compares the 2^20
// bound (it picks the tree).
func TestQuantileAutoComparesAtTreeResolution(t *testing.T) {
	c := quantileConfig(1, 1, 1e-6)
	c.Windows.Quantiles = evenRanks(40)
	bound := func(mech string, depth int) float64 {
		cc := c
		cc.Windows.QuantileMechanism, cc.Windows.QuantileDepth = mech, depth
		o, err := New(cc, WithKey(testKey()))
		if err != nil {
			t.Fatal(err)
		}
		return quantileRankBound(o.plan)
	}
	tree, fine, coarse := bound(QuantileTree, 0), bound(QuantileExponential, 0), bound(QuantileExponential, 4)
	if !(coarse < tree && tree < fine) {
		t.Fatalf("bounds: tree %.1f, exponential at 16^4 %.1f and at 2^20 %.1f: want the tree's between", tree, coarse, fine)
	}
	c.Windows.QuantileMechanism = QuantileAuto
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	if got := o.plan.aggs[0].noises[0].mech.Name(); got != "exponential" || histogramLeaves(&o.plan.aggs[0]) != 1<<20 {
		t.Errorf("auto planned %s over %d leaves, want the exponential mechanism over 2^20 (choices %q)", got, histogramLeaves(&o.plan.aggs[0]), o.plan.choices)
	}
}

// evenRanks returns the n ranks 1/(n+1), …, n/(n+1).
func evenRanks(n int) []float64 {
	r := make([]float64, n)
	for i := range r {
		r[i] = float64(i+1) / float64(n+1)
	}
	return r
}
