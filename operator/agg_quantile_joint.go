package operator

import (
	"cmp"
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

// quantileJointAgg is the quantiles aggregate with
// windows.quantile_mechanism "joint": all ranks of a group are one draw
// of the joint exponential mechanism (Gillenwater, Joseph & Kulesza, ICML
// 2021; quantile.Joint) over the non-decreasing tuples of the edges of the
// group's exact leaf histogram, pure ε-DP at ε = 1/scale for the whole
// group. A unit touches at most G groups (2G replacing units), so a
// window makes G (2G) selections one unit can influence — not ranks·G as
// the exponential mechanism (quantileSelectAgg): the part has L0 = G
// (2G) and L∞ = 1 and is calibrated with the other parts as
// privacy.Selection. Under a binding total bound T the pure-ε composition
// follows an L1 bound instead (jointTotal, agg_quantile_total.go). Its
// state is the exponential mechanism's (the leaf histogram, windows'
// Group.Leaves): mergeable, exact in stage 2 of scale-out. The draw comes
// from the release's keyed stream, so a replay selects the same edges.
type quantileJointAgg struct {
	leafSelectBase
	// groups, values and total are bounds.max_groups, bounds.max_values
	// and bounds.max_contributions (0 at event level, where every bound
	// is 1, and when unset).
	groups, values, total int
}

// jointSeries names the joint selections' part in notes, logs and
// `dpstream plan` (the released series is "quantiles", as for the other
// mechanisms).
const jointSeries = "joint_selection"

// parts: one selection per group a unit can touch (Units.L0 is G, or 2G
// replacing units); under a binding total bound the pure-ε composition
// counts the L1 bound's selections instead (jointTotal), and with δ > 0
// the PLD accountant composes randomized response per selection over the
// L0 = G (2G) selections, or over the packed groups under a binding total
// bound, as for the exponential mechanism (selectionParts).
//
// Replacing units without a binding total bound, pure ε composes G, not
// 2G: group g's loss moves by at most 2(m_g + m′_g) of Δ = 4V, so its
// selection costs c_g = (m_g + m′_g)/(2V) of its ε (jointTotal's scaling
// argument), and Σ_g c_g ≤ (G·V + G·V)/(2V) = G over the at most 2G
// groups the two units touch.
func (a quantileJointAgg) parts(sens windows.Sensitivities) []partSpec {
	l1, ok := a.jointTotal()
	specs := selectionParts(jointSeries, sens.Units.L0, l1, ok)
	if !ok && sens.ReplaceOne {
		specs[0].pureL0 = sens.Units.L0 / 2
	}
	return specs
}

// complete plans the joint selection: the ranks (sorted for the
// mechanism, with the permutation back to the configured order) and
// labels, the candidates (the leaf edges of the tree's shape), the bound
// Vm behind the loss's sensitivity (selectValues; 1 at event level;
// replacing units with a max_units cap), and the stated rank error at
// level 1 − β: one draw covers every rank, so no split of β over the
// ranks; every rank states the same bound.
func (quantileJointAgg) complete(ap *aggPlan, c Config, beta float64) error {
	leaves, err := completeSelection(ap, c)
	if err != nil {
		return err
	}
	ap.joint = quantile.Joint{Leaves: leaves, Lower: c.Schema.Lower, Upper: c.Schema.Upper}
	ap.jointOrder = make([]int, len(ap.ranks))
	for i := range ap.jointOrder {
		ap.jointOrder[i] = i
	}
	slices.SortStableFunc(ap.jointOrder, func(x, y int) int { return cmp.Compare(ap.ranks[x], ap.ranks[y]) })
	ap.jointRanks = make([]float64, len(ap.ranks))
	for i, k := range ap.jointOrder {
		ap.jointRanks[i] = ap.ranks[k]
	}
	e, err := ap.joint.RankError(ap.jointOptions(), beta)
	if err != nil {
		return fmt.Errorf("%w: quantiles: %w", ErrConfig, err)
	}
	ap.labels, ap.selError = nil, nil
	for _, r := range ap.ranks {
		ap.labels = append(ap.labels, strconv.FormatFloat(r, 'g', -1, 64))
		ap.selError = append(ap.selError, e)
	}
	return nil
}

// jointOptions is the group's joint selection with the plan's sorted
// ranks, scale and bounds.
func (ap *aggPlan) jointOptions() quantile.JointOptions {
	return quantile.JointOptions{Ranks: ap.jointRanks, Scale: ap.noises[0].scale, Values: ap.selValues, Replace: ap.selReplace}
}

// note is the accounting note's sentence on the joint selection.
func (quantileJointAgg) note(ap *aggPlan) string {
	e := "-"
	if len(ap.selError) > 0 {
		e = strconv.FormatFloat(math.Ceil(ap.selError[0]), 'g', -1, 64)
	}
	return fmt.Sprintf("; quantiles %s by the joint exponential mechanism (Gillenwater, Joseph & Kulesza 2021, exact): one selection of all ranks per group "+
		"over the non-decreasing tuples of the %d leaf edges of [%g, %g], ε=%.6g per group; with level %g, every released edge's rank is within %s of rank·N "+
		"beyond the best tuple's loss (the leaf resolution); value intervals are [%g, %g]",
		strings.Join(ap.labels, ", "), ap.joint.Leaves+1, ap.joint.Lower, ap.joint.Upper, 1/ap.noises[0].scale,
		1-ap.noises[0].beta, e, ap.joint.Lower, ap.joint.Upper)
}

// release selects the edges of every rank of g in one joint draw from s
// and lists them in the configured order of the ranks (the mechanism
// takes them sorted); the quantiles' intervals are the whole range and
// the rank_error series states the bound for every rank (see complete).
func (quantileJointAgg) release(_ *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	n := &ap.noises[0]
	edges, err := ap.joint.Select(s, leafCounts(g), ap.jointOptions())
	if err != nil {
		return nil, fmt.Errorf("operator: quantiles: %w", err)
	}
	if len(edges) != len(ap.ranks) {
		return nil, fmt.Errorf("operator: quantiles: joint selection of %d edges for %d ranks", len(edges), len(ap.ranks))
	}
	level := 1 - n.beta
	qs := schema.Series{
		Name: schema.SeriesQuantiles, Mechanism: QuantileJoint, Scale: n.scale, Level: level,
		Sensitivity: schema.Sensitivity{L0: int64(math.Ceil(n.sens.L0)), L1: n.sens.L1, L2: n.sens.L2, LInf: n.sens.Linf},
		Labels:      ap.labels, Floats: make([]float64, len(ap.ranks)),
	}
	for i, k := range ap.jointOrder {
		qs.Floats[k] = ap.joint.Edge(edges[i])
	}
	re := schema.Series{Name: schema.SeriesRankError, Mechanism: schema.DerivedMechanism, Level: level, Labels: ap.labels}
	for k := range ap.ranks {
		qs.Lo, qs.Hi = append(qs.Lo, ap.joint.Lower), append(qs.Hi, ap.joint.Upper)
		e := ap.selError[k]
		re.Floats, re.Lo, re.Hi = append(re.Floats, e), append(re.Lo, e), append(re.Hi, e)
	}
	return []schema.Series{qs, re}, nil
}
