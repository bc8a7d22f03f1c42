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

// quantileSelectAgg is the quantiles aggregate with
// windows.quantile_mechanism "exponential": every rank of every group is
// one permute-and-flip selection among the edges of the group's exact leaf
// histogram (quantile.Exponential), each pure ε-DP at ε = 1/scale. A unit
// touches at most G groups (2G replacing units), so a window makes
// ranks·G (ranks·2G) selections that one unit can influence: the part
// has L0 = that number and L∞ = 1 (one selection's ε per unit of 1/scale)
// and is calibrated with the other parts as privacy.Selection (pure ε adds
// up; the PLD accountant composes randomized response at ε). Under a
// binding total bound T (bounds.max_contributions, T < G·Vm with Vm =
// min(V, T)) the selections' pure ε follows an L1 bound instead (see
// selectTotal). Its state is
// the leaf histogram of the tree (windows' Group.Leaves): mergeable, exact
// in stage 2 of scale-out. The draws come from the release's keyed stream
// in rank order, so a replay selects the same edges.
type quantileSelectAgg struct {
	leafSelectBase
	ranks int // the number of ranks released (windows.quantiles)
	// groups, values and total are bounds.max_groups, bounds.max_values
	// and bounds.max_contributions (0 at event level, where every bound
	// is 1, and when unset).
	groups, values, total int
}

// leafSelectBase is what the quantiles' selection mechanisms
// (quantileSelectAgg, quantileJointAgg) share as aggregates: the name,
// kind and values of the quantiles, and the tree's leaf histogram as
// their state.
type leafSelectBase struct{ aggBase }

func (leafSelectBase) name() string      { return AggQuantiles }
func (leafSelectBase) kind() schema.Kind { return schema.KindQuantiles }
func (leafSelectBase) valued() bool      { return true }

func (leafSelectBase) enable(w *windows.Config, c Config, n int) {
	quantilesAgg{}.enable(w, c, n) // the same leaf histogram
}

// selectionSeries names the selections' part in notes and logs.
const selectionSeries = "selection"

// parts: one selection per rank and group a unit can touch (Units.L0 is
// G, or 2G replacing units); under a binding total bound the pure-ε
// composition counts the L1 bound's selections instead (selectTotal).
func (a quantileSelectAgg) parts(sens windows.Sensitivities) []partSpec {
	l1, ok := a.selectTotal(sens.ReplaceOne)
	return selectionParts(selectionSeries, float64(a.ranks)*sens.Units.L0, l1, ok)
}

// selectionParts is the one part of k pure-ε selections at L∞ = 1 named
// series, composed when total by the total bound's l1 selections under
// pure ε (partSpec.pureL0) and packed into selectPacked groups with δ > 0
// (partSpec.deltaL0).
func selectionParts(series string, k, l1 float64, total bool) []partSpec {
	spec := partSpec{series: series, integer: true, selection: true,
		sens: windows.Sensitivity{L0: k, Linf: 1, L1: k, L2: math.Sqrt(k)}}
	if total {
		spec.sens.L1, spec.sens.L2, spec.sens.Total = l1, math.Sqrt(l1), true
		spec.pureL0, spec.deltaL0 = l1, selectPacked(l1, k)
	}
	return []partSpec{spec}
}

// complete plans the selections: the ranks and labels, the candidates
// (the leaf edges of the tree's shape), the bound Vm behind the score's
// sensitivity (selectValues: max_values, or max_contributions when
// smaller; 1 at event level; replacing units with a max_units cap), and
// every rank's stated rank
// error at level 1 − β/ranks, so that the ranks' bounds hold together.
func (quantileSelectAgg) complete(ap *aggPlan, c Config, beta float64) error {
	leaves, err := completeSelection(ap, c)
	if err != nil {
		return err
	}
	ap.selector = quantile.Exponential{Leaves: leaves, Lower: c.Schema.Lower, Upper: c.Schema.Upper}
	ap.labels = nil
	for _, r := range ap.ranks {
		ap.labels = append(ap.labels, strconv.FormatFloat(r, 'g', -1, 64))
	}
	ap.selError, err = ap.selectErrors(ap.selector, beta)
	if err != nil {
		return fmt.Errorf("%w: quantiles: %w", ErrConfig, err)
	}
	return nil
}

// selectErrors returns the stated rank error of every rank of ap when e
// selects it, each at level 1 − β/ranks so that the ranks' bounds hold
// together (the plan's, and auto's comparison at the tree's resolution:
// selectionBoundAt).
func (ap *aggPlan) selectErrors(e quantile.Exponential, beta float64) ([]float64, error) {
	out := make([]float64, 0, len(ap.ranks))
	for _, r := range ap.ranks {
		b, err := e.RankError(ap.selectOptions(r), beta/float64(len(ap.ranks)))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// completeSelection plans what the exponential and the joint mechanism
// share: it checks ap has its one part and sets the bound Vm behind the
// score's sensitivity (selectValues: max_values, or max_contributions
// when smaller; 1 at event level; replacing units with a max_units cap)
// and the configured ranks, and returns the number of leaves (the
// candidates are their edges).
func completeSelection(ap *aggPlan, c Config) (int, error) {
	if len(ap.noises) != 1 {
		return 0, fmt.Errorf("operator: quantiles: %d parts, want 1", len(ap.noises))
	}
	ap.selValues, ap.selReplace = int64(selectValues(c.Bounds.MaxValues, c.Bounds.MaxContributions)), c.Bounds.MaxUnits > 0
	if c.Schema.UnitField == "" {
		ap.selValues, ap.selReplace = 1, false
	}
	ap.ranks = slices.Clone(c.Windows.quantileRanks())
	return c.Windows.quantileHistogramLeaves(), nil
}

// leafCounts returns g's exact leaf histogram as the selections take it.
func leafCounts(g *windows.Group) []quantile.LeafCount {
	leaves := make([]quantile.LeafCount, len(g.Leaves))
	for i, l := range g.Leaves {
		leaves[i] = quantile.LeafCount{Leaf: l.Leaf, Count: l.Count}
	}
	return leaves
}

// selectOptions is rank r's selection with the plan's scale and bounds.
func (ap *aggPlan) selectOptions(r float64) quantile.SelectOptions {
	return quantile.SelectOptions{Rank: r, Scale: ap.noises[0].scale, Values: ap.selValues, Replace: ap.selReplace}
}

// note is the accounting note's sentence on the selections.
func (quantileSelectAgg) note(ap *aggPlan) string {
	errs := make([]string, len(ap.selError))
	for i, e := range ap.selError {
		errs[i] = strconv.FormatFloat(math.Ceil(e), 'g', -1, 64)
	}
	return fmt.Sprintf("; quantiles %s by permute-and-flip (exponential mechanism, exact) over the %d leaf edges of [%g, %g], ε=%.6g per rank and group; "+
		"with level %g for all ranks together, each released edge's rank is within %s of rank·N beyond the nearest edge's (the leaf resolution); value intervals are [%g, %g]",
		strings.Join(ap.labels, ", "), ap.selector.Leaves+1, ap.selector.Lower, ap.selector.Upper, 1/ap.noises[0].scale,
		1-ap.noises[0].beta, strings.Join(errs, ", "), ap.selector.Lower, ap.selector.Upper)
}

// release selects every rank's edge for g from its leaf histogram, drawing
// from s in rank order; the quantiles' intervals are the whole range and
// the rank_error series states each rank's bound (see complete).
func (quantileSelectAgg) release(_ *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	n := &ap.noises[0]
	leaves := leafCounts(g)
	level := 1 - n.beta
	qs := schema.Series{
		Name: schema.SeriesQuantiles, Mechanism: n.mech.Name(), Scale: n.scale, Level: level,
		Sensitivity: schema.Sensitivity{L0: int64(math.Ceil(n.sens.L0)), L1: n.sens.L1, L2: n.sens.L2, LInf: n.sens.Linf},
		Labels:      ap.labels,
	}
	re := schema.Series{Name: schema.SeriesRankError, Mechanism: schema.DerivedMechanism, Level: level, Labels: ap.labels}
	for k, r := range ap.ranks {
		j, err := ap.selector.Select(s, leaves, ap.selectOptions(r))
		if err != nil {
			return nil, fmt.Errorf("operator: quantiles: %w", err)
		}
		qs.Floats = append(qs.Floats, ap.selector.Edge(j))
		qs.Lo, qs.Hi = append(qs.Lo, ap.selector.Lower), append(qs.Hi, ap.selector.Upper)
		e := ap.selError[k]
		re.Floats, re.Lo, re.Hi = append(re.Floats, e), append(re.Lo, e), append(re.Hi, e)
	}
	return []schema.Series{qs, re}, nil
}
