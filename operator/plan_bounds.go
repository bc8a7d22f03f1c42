package operator

// plan_bounds.go says how the contribution bounds combine into each noised
// vector's sensitivity, and which bound binds its L1 and L2: for `dpstream
// plan` (text and JSON) and the release note.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
)

// SizingBounds are the per-unit, per-window contribution bounds of the
// plan (bounds.*); MaxContributions and MaxUnits are 0 when unset.
type SizingBounds struct {
	MaxGroups        int `json:"max_groups"`
	MaxBuckets       int `json:"max_buckets"`
	MaxPerBucket     int `json:"max_per_bucket"`
	MaxValues        int `json:"max_values"`
	MaxContributions int `json:"max_contributions"`
	MaxUnits         int `json:"max_units"`
}

// SeriesSensitivity is how far one unit can move a noised series (all its
// groups) in one window, and which bounds give its L1 and L2 norms.
type SeriesSensitivity struct {
	L0   float64 `json:"l0"`
	L1   float64 `json:"l1"`
	L2   float64 `json:"l2"`
	LInf float64 `json:"linf"`
	// L1Bound and L2Bound name the bounds that L1 and L2 follow from,
	// e.g. "bounds.max_contributions" or "bounds.max_groups ×
	// bounds.max_buckets × bounds.max_per_bucket".
	L1Bound string `json:"l1_bound"`
	L2Bound string `json:"l2_bound"`
}

// boundsSizing returns the plan's bounds (SizingBounds has BoundsConfig's
// fields, in its order, with JSON names).
func boundsSizing(c Config) SizingBounds { return SizingBounds(c.Bounds) }

// seriesSensitivity returns n's sensitivity and the bounds its L1 and L2
// follow from (see windows.Config.Sensitivities, totalSensitivity and
// valuedSensitivity): for every part, the bounds behind its L0 and L∞
// (boundNames), or bounds.max_contributions where the total bound binds,
// and at event level the note that every bound is then 1.
func (p *plan) seriesSensitivity(n *vectorNoise) *SeriesSensitivity {
	s := n.sens
	out := &SeriesSensitivity{L0: s.L0, L1: s.L1, L2: s.L2, LInf: s.Linf}
	agg, series, _ := strings.Cut(n.part, ".")
	b := boundNames(baseAggregate(agg), series)
	switch {
	case b.l1 != "" && s.Total:
		out.L1Bound, out.L2Bound = b.l1Total, b.l2Total
	case b.l1 != "":
		out.L1Bound, out.L2Bound = b.l1, b.l2
	case s.Total && s.Linf < s.L1:
		out.L1Bound = "bounds.max_contributions" + b.factor
		out.L2Bound = "bounds.max_contributions with " + b.per + b.factor
	case s.Total:
		out.L1Bound, out.L2Bound = "bounds.max_contributions"+b.factor, "bounds.max_contributions"+b.factor
	default:
		out.L1Bound, out.L2Bound = b.l0+" × "+b.per+b.factor, "√("+b.l0+") × "+b.per+b.factor
	}
	if l2, ok := n.latticeL2Used(); ok {
		out.L2Bound += " (" + latticeL2Words(l2, n.step) + ")"
	}
	if p.unit == "" {
		out.L1Bound += " (event level: every bound is 1)"
		out.L2Bound += " (event level: every bound is 1)"
	}
	if p.sens.ReplaceOne {
		out.L1Bound += " (replacing one unit: bounds.max_units)"
		out.L2Bound += " (replacing one unit: bounds.max_units)"
	}
	return out
}

// partBounds names the bounds behind a part's sensitivity: L0 = l0 and
// L∞ = per·factor, so L1 = l0 × per × factor and L2 = √l0 × per × factor
// without the total bound (per is the count bound of one coordinate,
// factor the largest contribution of one value, "" for counts); l1 and l2,
// when set, name L1 and L2 directly (the quantiles, whose L1 is not
// L0 × L∞), and l1Total, l2Total where the total bound binds them.
type partBounds struct {
	l0, per, factor  string
	l1, l2           string
	l1Total, l2Total string
}

// boundNames returns the bounds behind the part series of aggregate agg
// (selectionPart for private group selection).
func boundNames(agg, series string) partBounds {
	const (
		groups = "bounds.max_groups"
		values = "bounds.max_values"
		half   = "(schema.upper − schema.lower)/2"
	)
	switch {
	case agg == AggHistogram:
		return partBounds{l0: groups + " × bounds.max_buckets", per: "bounds.max_per_bucket"}
	case agg == AggCount || series == schema.SeriesCount:
		return partBounds{l0: groups, per: values}
	case agg == AggUnits || agg == selectionPart:
		return partBounds{l0: groups, per: "1 (a unit counts once per group)"}
	case agg == AggSum:
		return partBounds{l0: groups, per: values, factor: " × max(|schema.lower|, |schema.upper|)"}
	case series == schema.SeriesSum:
		return partBounds{l0: groups, per: values, factor: " × " + half}
	case series == schema.SeriesSumSq:
		return partBounds{l0: groups, per: values, factor: " × (" + half + ")²"}
	case series == treeSeries:
		return partBounds{l1: groups + " × windows.quantile_depth × " + values,
			l2:      "√(" + groups + " × windows.quantile_depth) × " + values,
			l1Total: "windows.quantile_depth × bounds.max_contributions",
			l2Total: "√(windows.quantile_depth) × bounds.max_contributions with " + values}
	case series == jointSeries:
		return partBounds{l1: groups + " (one joint selection per group)", l2: "√(" + groups + ")",
			l1Total: "bounds.max_contributions / min(" + values + ", bounds.max_contributions), rounded up",
			l2Total: "√(bounds.max_contributions / min(" + values + ", bounds.max_contributions))"}
	case series == selectionSeries:
		return partBounds{l1: "windows.quantiles (ranks) × " + groups, l2: "√(windows.quantiles (ranks) × " + groups + ")",
			l1Total: "windows.quantiles (ranks) × bounds.max_contributions / min(" + values + ", bounds.max_contributions), rounded up",
			l2Total: "√(windows.quantiles (ranks) × bounds.max_contributions / min(" + values + ", bounds.max_contributions))"}
	}
	return partBounds{l0: "L0", per: "L∞"}
}

// totalNote is the release note's sentence on the norms of a part that the
// total bound binds ("" otherwise, so notes without it are unchanged); a
// lattice part also names the L2 its Gaussian accountant uses
// (privacy/compose_lattice_l2.go).
func (n *vectorNoise) totalNote() string {
	if !n.sens.Total {
		return ""
	}
	s := fmt.Sprintf(", L1=%g and L2=%.6g by bounds.max_contributions", n.sens.L1, n.sens.L2)
	if l2, ok := n.latticeL2Used(); ok {
		s += "; " + latticeL2Words(l2, n.step)
	}
	return s
}

// latticeL2Used returns the L2 in grid steps that the Gaussian accountant
// of a realLattice part uses (privacy/compose_lattice_l2.go), and whether
// the total bound binds it (below √L0 times the part's shift in grid
// steps, as calPart gives them), in one window or over a horizon.
func (n *vectorNoise) latticeL2Used() (float64, bool) {
	if !n.sens.Total || n.kind != realLattice {
		return 0, false
	}
	l2 := n.latticeL2(n.coords)
	return l2, l2 < math.Sqrt(float64(n.coords))*privacy.LatticeSensitivity(n.sens.Linf, n.step)
}

// latticeL2Words says which L2 the lattice Gaussian is calibrated for.
func latticeL2Words(l2, step float64) string {
	return fmt.Sprintf("the lattice Gaussian's L2 %.10g steps of 2^%d, rounding included", l2, int(math.Round(math.Log2(step))))
}

// totalNorms adds the L1 and L2 bounds of a part that the total bound
// binds, or whose norms bind by construction with δ > 0 (the quantile
// tree, partSpec.norms), to its calibration part pt:
//
//   - integer parts (histogram, count, the mean's values, tree), where one
//     grid step is one unit of value: L1 and L2 as derived;
//
//   - real values on a grid (realSnapped: sums, the mean's centred sum,
//     the variance's squares under laplace, logistic or subbotin:R) that
//     the total bound binds: L1 only (the pure-ε accountant is the one
//     that uses it, for Laplace-like noise), in value units and widened
//     for the rounding — each of the at most L0 coordinates a unit moves
//     rounds to the grid with a change of at most its exact change plus
//     one step, so the rounded values' L1 is at most L1 + L0·step — and
//     only when that is below L0 times the shift (else it gains nothing).
//
//   - real values under the lattice discrete Gaussian (realLattice) that
//     the total bound binds: L2 only, in grid units (latticeL2), for the
//     L2 accountant of privacy/compose_lattice_l2.go (in one window or
//     over a horizon of windows). L1 is
//     not passed: in grid units it is about 2^20 times L∞, far beyond the
//     shift patterns the PLD enumerates (privacy/compose_total.go).
func (n *vectorNoise) totalNorms(pt *privacy.Part) {
	switch {
	case (n.sens.Total || n.norms) && (n.kind == intExact || n.kind == intRounded):
		pt.L1, pt.L2 = n.sens.L1, n.sens.L2
	case n.sens.Total && n.kind == selectExact && n.sens.L1 < float64(pt.L0)*pt.Linf:
		// The selections' pure ε follows the L1 bound under every budget
		// (pure ε-DP is (ε, δ)-DP): the pure accountant uses it
		// (calLinearPure), the PLD keeps L0 packed groups (selectPacked).
		pt.L1 = n.sens.L1
	case n.sens.Total && n.kind == realSnapped:
		// L0·step is exact (the step is a power of two); the sum rounds up.
		l1 := math.Nextafter(n.sens.L1+math.Ceil(n.sens.L0)*n.step, math.Inf(1))
		if l1 < float64(pt.L0)*pt.Linf {
			pt.L1 = l1
		}
	case n.sens.Total && n.kind == realLattice:
		if l2, ok := n.latticeL2Used(); ok {
			pt.L2 = l2 // privacy's L2 accountant (calPart.latticeL2)
		}
	}
}

// latticeL2 is the L2 norm, in grid steps, of one unit's change to the
// rounded values of a realLattice part that moves at most l0 coordinates:
// a coordinate whose exact change is x rounds to a change of at most
// |x|/step + 1 steps (|round(u) − round(v)| ≤ |u − v| + 1), so by the
// triangle inequality the rounded change's L2 is at most sens.L2/step +
// √d, d = max(l0, ⌈sens.L0⌉) the coordinates it can move; rounded up.
// (The division by a power of two is exact.)
func (n *vectorNoise) latticeL2(l0 int) float64 {
	d := math.Max(float64(l0), math.Ceil(n.sens.L0))
	root := math.Nextafter(math.Sqrt(d), math.Inf(1))
	return math.Nextafter(n.sens.L2/n.step+root, math.Inf(1))
}

// totalCap caps what one unit adds to a histogram or a count, x, by the
// total bound (for the sizes' expected values).
func (p *plan) totalCap(x float64) float64 {
	if p.maxContrib > 0 {
		return math.Min(x, float64(p.maxContrib))
	}
	return x
}

// suggestTotal is Suggest's total bound: with a histogram whose cells ×
// per-cell bound exceeds the events a unit adds to a group (the sizes),
// bounds.max_contributions at max_groups × those events bounds the same
// data with less noise (no contribution is clipped when a unit adds that
// many events to each of its groups).
func suggestTotal(c Config, sz Sizes, worst func(Config, Sizes) (float64, bool), add func(change, key, value string, rel float64)) {
	b := c.Bounds
	if c.Schema.UnitField == "" || !(sz.EventsPerUnit > 0) || !slices.Contains(c.Windows.Aggregates, AggHistogram) {
		return
	}
	m := b.MaxGroups * int(math.Ceil(sz.EventsPerUnit))
	if m >= b.MaxGroups*b.MaxBuckets*b.MaxPerBucket || (b.MaxContributions > 0 && b.MaxContributions <= m) {
		return
	}
	d := c
	d.Bounds.MaxContributions = m
	if r, ok := worst(d, sz); ok {
		add(fmt.Sprintf("bounds.max_contributions %d (each unit adds about %g events to each of at most %d groups: L1 %d instead of %d for the histogram)",
			m, sz.EventsPerUnit, b.MaxGroups, m, b.MaxGroups*b.MaxBuckets*b.MaxPerBucket), "bounds.max_contributions", strconv.Itoa(m), r)
	}
}
