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
// follow from (see windows.Config.Sensitivities and totalSensitivity).
func (p *plan) seriesSensitivity(n *vectorNoise) *SeriesSensitivity {
	s := n.sens
	out := &SeriesSensitivity{L0: s.L0, L1: s.L1, L2: s.L2, LInf: s.Linf}
	agg, _, _ := strings.Cut(n.part, ".")
	agg = baseAggregate(agg)
	var l0, linf string // the bounds behind L0 and L∞ of the product form
	switch agg {
	case AggHistogram:
		l0, linf = "bounds.max_groups × bounds.max_buckets", "bounds.max_per_bucket"
	case AggCount:
		l0, linf = "bounds.max_groups", "bounds.max_values"
	}
	switch {
	case s.Total && s.Linf < s.L1:
		out.L1Bound = "bounds.max_contributions"
		out.L2Bound = "bounds.max_contributions with " + linf
	case s.Total:
		out.L1Bound, out.L2Bound = "bounds.max_contributions", "bounds.max_contributions"
	case l0 != "":
		out.L1Bound, out.L2Bound = l0+" × "+linf, "√("+l0+") × "+linf
	default:
		out.L1Bound, out.L2Bound = "L0 × L∞", "√L0 × L∞"
	}
	if p.sens.ReplaceOne {
		out.L1Bound += " (replacing one unit: bounds.max_units)"
		out.L2Bound += " (replacing one unit: bounds.max_units)"
	}
	return out
}

// totalNote is the release note's sentence on the norms of a part that the
// total bound binds ("" otherwise, so notes without it are unchanged).
func (n *vectorNoise) totalNote() string {
	if !n.sens.Total {
		return ""
	}
	return fmt.Sprintf(", L1=%g and L2=%.6g by bounds.max_contributions", n.sens.L1, n.sens.L2)
}

// totalNorms adds the L1 and L2 bounds of a part that the total bound
// binds, or whose norms bind by construction with δ > 0 (the quantile
// tree, partSpec.norms), to its calibration part: integer parts only
// (histogram, count, tree), where one grid step is one unit of value.
func (n *vectorNoise) totalNorms(pt *privacy.Part) {
	if (n.sens.Total || n.norms) && (n.kind == intExact || n.kind == intRounded) {
		pt.L1, pt.L2 = n.sens.L1, n.sens.L2
	}
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
