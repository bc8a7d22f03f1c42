package operator

// pipeline_stats.go releases the aggregates of issue 11 whose values are
// post-processed from several noised parts: the variance (and standard
// deviation) and the quantiles.

import (
	"fmt"
	"math"
	"strings"

	"github.com/dpstream/dpstream/privacy/quantile"
	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// varianceSeries noises the variance's three parts — the value count N,
// the centred sum S1 = Σ(v − mid) and the centred sum of squares
// S2 = Σ(v − mid)², mid = (lower + upper)/2 — and derives the variance
// S2/N − (S1/N)² and the standard deviation from them (post-processing).
// This is the decomposition of Google's Privacy on Beam BoundedVariance
// (differential-privacy library, go/dpagg/variance.go: noised count,
// normalized sum and normalized sum of squares around the midpoint):
// centring makes S1 and S2 small and bounded by the half-range, so their
// sensitivities V·h and V·h² are the smallest the bounds allow.
func (p *plan) varianceSeries(ap aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	cnt, err := p.noised(&ap.noises[0], []float64{float64(g.Values)}, s, nil)
	if err != nil {
		return nil, err
	}
	sum, err := p.noised(&ap.noises[1], []float64{g.CentredSum}, s, nil)
	if err != nil {
		return nil, err
	}
	sq, err := p.noised(&ap.noises[2], []float64{g.CentredSqSum}, s, nil)
	if err != nil {
		return nil, err
	}
	v, sd := p.variance(cnt, sum, sq)
	return []schema.Series{cnt, sum, sq, v, sd}, nil
}

// maxVariance is the largest variance of values in [lower, upper]:
// ((upper − lower)/2)², reached with half the values at each end.
func (p *plan) maxVariance() float64 {
	h := (p.upper - p.lower) / 2
	if d := p.upper - p.lower; d-2*h != 0 || math.Abs(d) > math.MaxFloat64/2 {
		h = math.Nextafter(h, math.Inf(1)) // (upper − lower)/2 was rounded
	}
	v := h * h
	if math.FMA(h, h, -v) > 0 { // h² rounded down: round up
		v = math.Nextafter(v, math.Inf(1))
	}
	return v
}

// variance derives the variance and the standard deviation from the noisy
// count, centred sum and centred sum of squares (each with its interval at
// level 1 − β/3), clamped to [0, ((upper − lower)/2)²].
//
// Interval: with probability ≥ 1 − β all three true values lie in their
// intervals at once (union bound), N ∈ [n⁻, n⁺], S1 ∈ [a⁻, a⁺] and
// S2 ∈ [b⁻, b⁺]; the true variance S2/N − (S1/N)² is then at least
// max(b⁻, 0)/n⁺ − max(|a⁻|, |a⁺|)²/n⁻² and at most b⁺/n⁻ − m²/n⁺², m
// the distance of [a⁻, a⁺] from 0 (each term bounded separately over the
// box), both clamped to the range. A count interval reaching below 1
// gives the whole range [0, ((upper − lower)/2)²]. The standard
// deviation's interval is the square root of the variance's (monotone).
// With a noisy count below 1 the estimate is 0.
func (p *plan) variance(cnt, sum, sq schema.Series) (v, sd schema.Series) {
	top := p.maxVariance()
	clamp := func(x float64) float64 { return math.Min(top, math.Max(0, x)) }
	n, s1, s2 := cnt.Value(0), sum.Value(0), sq.Value(0)
	est := 0.0
	if n >= 1 {
		m := s1 / n
		est = clamp(s2/n - m*m)
	}
	lo, hi := 0.0, top
	if nl := cnt.Lo[0]; nl >= 1 {
		nh := cnt.Hi[0]
		al, ah, bl, bh := sum.Lo[0], sum.Hi[0], sq.Lo[0], sq.Hi[0]
		far := math.Max(math.Abs(al), math.Abs(ah))
		near := 0.0
		if al > 0 {
			near = al
		} else if ah < 0 {
			near = -ah
		}
		lo = clamp(math.Max(bl, 0)/nh - (far/nl)*(far/nl))
		hi = clamp(bh/nl - (near/nh)*(near/nh))
	}
	level := 1 - 3*(1-cnt.Level)
	lo, hi = math.Min(lo, est), math.Max(hi, est)
	v = schema.Series{Name: schema.SeriesVariance, Mechanism: schema.DerivedMechanism, Level: level,
		Floats: []float64{est}, Lo: []float64{lo}, Hi: []float64{hi}}
	sd = schema.Series{Name: schema.SeriesStddev, Mechanism: schema.DerivedMechanism, Level: level,
		Floats: []float64{math.Sqrt(est)}, Lo: []float64{math.Sqrt(lo)}, Hi: []float64{math.Sqrt(hi)}}
	return v, sd
}

// quantileSeries noises every node below the root of the group's quantile
// tree (one vector, ap.noises[0]: integer noise, drawn in node order from
// s) and derives the requested quantiles, their intervals and rank errors
// from it (quantile.Tree). The noised nodes are not published.
func (p *plan) quantileSeries(ap aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	n := &ap.noises[0]
	nodes, err := quantileNodes(&ap, g, s)
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

// treeNodes returns the true node counts of g's quantile tree, in the
// noised vector's order (quantile.Tree).
func treeNodes(ap *aggPlan, g *windows.Group) ([]float64, error) {
	leaves := make([]float64, ap.tree.Leaves())
	for _, l := range g.Leaves {
		if int(l.Leaf) >= len(leaves) {
			return nil, fmt.Errorf("operator: quantiles: leaf %d of a tree of %d leaves", l.Leaf, len(leaves))
		}
		leaves[l.Leaf] = float64(l.Count)
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

// quantileNote is the accounting note's sentence on the quantiles: the
// tree, and the half-width of its prefix counts behind the intervals.
func (p *plan) quantileNote() string {
	for _, ap := range p.aggs {
		if ap.kind == schema.KindQuantiles {
			return fmt.Sprintf("; quantiles %s from one tree of %d^%d leaves over [%g, %g] (Hay et al. consistency, top-down walk), intervals hold together when every noised prefix count is within ±%g (level %g), rank error ≤ 2(1+q)·%g",
				strings.Join(ap.labels, ", "), ap.tree.Branching, ap.tree.Depth, ap.tree.Lower, ap.tree.Upper, ap.rankH, 1-ap.noises[0].beta, ap.rankH)
		}
	}
	return ""
}
