package operator

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dpstream/dpstream/privacy/quantile"
	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// quantilesAgg is the quantiles aggregate (issue 11): one noised vector per
// group — every node below the root of the group's quantile tree over
// [lower, upper] (windows.Sensitivities.Tree, see windows' treeSensitivity),
// with exact integer noise only — and the ranks windows.quantiles derived
// from it with their intervals and rank errors (quantile.Tree). The noised
// nodes are not published.
type quantilesAgg struct{ aggBase }

func (quantilesAgg) name() string      { return AggQuantiles }
func (quantilesAgg) kind() schema.Kind { return schema.KindQuantiles }
func (quantilesAgg) valued() bool      { return true }

func (quantilesAgg) enable(w *windows.Config, c Config, _ int) {
	w.Quantiles = true
	w.TreeBranching, w.TreeDepth = c.Windows.quantileLeaves()
}

// variant returns the quantiles' type for windows.quantile_mechanism:
// the tree (quantilesAgg), the exponential mechanism (quantileSelectAgg)
// or the joint exponential mechanism (quantileJointAgg); "auto" is
// resolved by buildPlan, which plans the candidates (plan_quantile.go).
func (a quantilesAgg) variant(c Config) aggregator {
	var groups, values, total int
	if c.Schema.UnitField != "" {
		groups, values, total = c.Bounds.MaxGroups, c.Bounds.MaxValues, c.Bounds.MaxContributions
	}
	switch c.Windows.quantileMechanism() {
	case QuantileExponential:
		return quantileSelectAgg{ranks: len(c.Windows.quantileRanks()), groups: groups, values: values, total: total}
	case QuantileJoint:
		return quantileJointAgg{groups: groups, values: values, total: total}
	}
	return a
}

// parts: every node below the root of every group's tree, one vector. The
// tree's intervals need the tail of sums of its noise
// (quantile.Tree.RankBound): exact integer noise only, also for "auto".
func (quantilesAgg) parts(sens windows.Sensitivities) []partSpec {
	// pureL0: L1/L∞ = G·D (2G·D replacing units): the tree moves by at
	// most V per level and group (windows treeSensitivity; exact for a
	// whole V, whose product G·D·V is exact). norms: with δ > 0, the same
	// L1 = G·D·V and L2 = √(G·D)·V reach the accountants (privacy.Part).
	// Under a binding total bound T the tree's L1 is D·T (Sensitivity.Total:
	// the norms reach every accountant, pure ε included).
	return []partSpec{{series: treeSeries, integer: true, sens: sens.Tree, exactAuto: true, pureL0: sens.Tree.L1 / sens.Tree.Linf, norms: true,
		exactOnly: "quantiles need laplace, gaussian or auto (exact integer noise on the tree)"}}
}

// treeSeries names the quantile tree's noised nodes in notes and logs (the
// nodes themselves are not published; the quantiles derived from them are).
const treeSeries = "tree"

// quantilePlan is the part of an aggregate's plan only the quantiles use:
// the ranks, their labels, the tree and the half-width H of every noised
// prefix count at the plan's level (quantile.Tree).
type quantilePlan struct {
	ranks  []float64
	labels []string
	tree   quantile.Tree
	rankH  float64
	// leafDiv is how many leaves of the groups' histogram (quantileLeaves)
	// one leaf of the tree covers: 1, or branching^k when "auto" keeps a
	// histogram k levels finer than its tree.
	leafDiv int
	// The exponential mechanism's (quantileSelectAgg.complete): the
	// candidates, the bound behind each selection's sensitivity and the
	// stated rank error of every rank.
	selector   quantile.Exponential
	selValues  int64
	selReplace bool
	selError   []float64
	// The joint exponential mechanism's (quantileJointAgg.complete; it
	// also sets selValues, selReplace and selError): the candidates, the
	// ranks sorted and jointOrder[i], the configured index of the i-th
	// sorted rank.
	joint      quantile.Joint
	jointRanks []float64
	jointOrder []int
}

// complete plans the quantiles: their ranks and labels, the tree, and the
// half-width H of its noised prefix counts at level 1 − β
// (quantile.Tree.RankBound), which gives every quantile's interval and
// rank error.
func (quantilesAgg) complete(ap *aggPlan, c Config, beta float64) error {
	if len(ap.noises) != 1 {
		return fmt.Errorf("operator: quantiles: %d noised parts, want 1", len(ap.noises))
	}
	b, d := c.Windows.quantileTree()
	ap.tree = quantile.Tree{Branching: b, Depth: d, Lower: c.Schema.Lower, Upper: c.Schema.Upper}
	ap.leafDiv = max(1, c.Windows.quantileHistogramLeaves()/ap.tree.Leaves())
	ap.ranks = slices.Clone(c.Windows.quantileRanks())
	for _, r := range ap.ranks {
		ap.labels = append(ap.labels, strconv.FormatFloat(r, 'g', -1, 64))
	}
	n := &ap.noises[0]
	h, err := ap.tree.RankBound(n.mech, n.scale, beta)
	if err != nil {
		return fmt.Errorf("%w: quantiles: %w", ErrConfig, err)
	}
	ap.rankH = h
	return nil
}

// note is the accounting note's sentence on the quantiles: the tree, and
// the half-width of its prefix counts behind the intervals.
func (quantilesAgg) note(ap *aggPlan) string {
	return fmt.Sprintf("; quantiles %s from one tree of %d^%d leaves over [%g, %g] (Hay et al. consistency, top-down walk), intervals hold together when every noised prefix count is within ±%g (level %g), rank error ≤ 2(1+q)·%g",
		strings.Join(ap.labels, ", "), ap.tree.Branching, ap.tree.Depth, ap.tree.Lower, ap.tree.Upper, ap.rankH, 1-ap.noises[0].beta, ap.rankH)
}

// release noises every node below the root of the group's quantile
// tree (one vector, ap.noises[0]: integer noise, drawn in node order from
// s) and derives the requested quantiles, their intervals and rank errors
// from it (quantile.Tree). The noised nodes are not published.
func (quantilesAgg) release(_ *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	n := &ap.noises[0]
	nodes, err := quantileNodes(ap, g, s)
	if err != nil {
		return nil, err
	}
	vals, lo, hi, _ := ap.tree.Release(nodes, ap.ranks, ap.rankH)
	level := 1 - n.beta
	qs := schema.Series{
		Name: schema.SeriesQuantiles, Mechanism: n.mech.Name(), Scale: n.scale, Level: level,
		Sensitivity: schema.Sensitivity{L0: int64(math.Ceil(n.sens.L0)), L1: n.sens.L1, L2: n.sens.L2, LInf: n.sens.Linf},
		Labels:      ap.labels, Floats: vals, Lo: lo, Hi: hi,
	}
	re := schema.Series{Name: schema.SeriesRankError, Mechanism: schema.DerivedMechanism, Level: level, Labels: ap.labels}
	for _, r := range ap.ranks {
		e := quantile.RankError(r, ap.rankH)
		re.Floats, re.Lo, re.Hi = append(re.Floats, e), append(re.Lo, e), append(re.Hi, e)
	}
	return []schema.Series{qs, re}, nil
}

// treeSensitivities returns w's sensitivities with the quantile tree's
// at the tree's depth (quantileTree): the groups' leaf histogram w
// describes may be finer (quantileLeaves), and the tree of "auto" reads it
// coarsened (leafDiv).
func treeSensitivities(w windows.Config, c Config) (windows.Sensitivities, error) {
	if w.Quantiles {
		_, w.TreeDepth = c.Windows.quantileTree()
	}
	return w.Sensitivities()
}

// treeNodes returns the true node counts of g's quantile tree, in the
// noised vector's order (quantile.Tree); the histogram's leaves are
// coarsened to the tree's (leafDiv).
func treeNodes(ap *aggPlan, g *windows.Group) ([]float64, error) {
	leaves := make([]float64, ap.tree.Leaves())
	div := uint64(max(ap.leafDiv, 1))
	for _, l := range g.Leaves {
		i := uint64(l.Leaf) / div
		if i >= uint64(len(leaves)) {
			return nil, fmt.Errorf("operator: quantiles: leaf %d of a tree of %d leaves (%d histogram leaves per tree leaf)", l.Leaf, len(leaves), div)
		}
		leaves[i] += float64(l.Count)
	}
	return ap.tree.NodeCounts(leaves), nil
}

// quantileNodes returns g's noised tree nodes, the noise drawn from s in
// node order: what the release's quantiles are computed from.
func quantileNodes(ap *aggPlan, g *windows.Group, s *rng.Stream) ([]float64, error) {
	nodes, err := treeNodes(ap, g)
	if err != nil {
		return nil, err
	}
	n := &ap.noises[0]
	for i, v := range nodes {
		x, err := n.add(s, v)
		if err != nil {
			return nil, err
		}
		nodes[i] = x
	}
	return nodes, nil
}
