package operator

import (
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// varianceAgg is the variance aggregate (issue 11): three noised parts per
// group — the value count (windows.Sensitivities.Values: max_groups
// coordinates, each within [0, V], V = max_values), the centred sum
// (Sensitivities.MeanSum: each within ±V·h, h the half-range) and the
// centred sum of squares (Sensitivities.SumSq: each within [0, V·h²]) —
// and the variance and standard deviation derived from them
// (plan.variance). Each part's interval is at level 1 − β/3, so the
// derived intervals hold at 1 − β by the union bound.
type varianceAgg struct{ aggBase }

func (varianceAgg) name() string      { return AggVariance }
func (varianceAgg) kind() schema.Kind { return schema.KindVariance }
func (varianceAgg) valued() bool      { return true }

func (varianceAgg) enable(w *windows.Config, _ Config, _ int) { w.Variance = true }

func (varianceAgg) parts(sens windows.Sensitivities) []partSpec {
	return []partSpec{
		{series: schema.SeriesCount, integer: true, sens: sens.Values, intervals: 3},
		{series: schema.SeriesSum, sens: sens.MeanSum, intervals: 3},
		{series: schema.SeriesSumSq, sens: sens.SumSq, intervals: 3},
	}
}

// release noises the variance's three parts — the value count N,
// the centred sum S1 = Σ(v − mid) and the centred sum of squares
// S2 = Σ(v − mid)², mid = (lower + upper)/2 — and derives the variance
// S2/N − (S1/N)² and the standard deviation from them (post-processing).
// This is the decomposition of Google's Privacy on Beam BoundedVariance
// (differential-privacy library, go/dpagg/variance.go: noised count,
// normalized sum and normalized sum of squares around the midpoint):
// centring makes S1 and S2 small and bounded by the half-range, so their
// sensitivities V·h and V·h² are the smallest the bounds allow.
func (varianceAgg) release(p *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
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

func (varianceAgg) expect(p *plan, ap *aggPlan, units, events float64) []seriesExpectation {
	// Values assumed uniform on [lower, upper]: centred sum 0, centred
	// squares h²/3 each (h the half-range), variance h²/3. The
	// standard deviation's interval is what the release derives
	// (plan.variance) from the three intervals.
	if len(ap.noises) < 3 {
		return nil
	}
	cnt := math.Round(units * math.Min(events, float64(p.bounds.MaxValues)))
	h := (p.upper - p.lower) / 2
	sq := cnt * h * h / 3
	at := func(n *vectorNoise, v float64, integer bool) schema.Series {
		s := schema.Series{Lo: []float64{v - n.half}, Hi: []float64{v + n.half}, Level: 1 - n.beta}
		if integer {
			s.Ints = []int64{int64(v)}
		} else {
			s.Floats = []float64{v}
		}
		return s
	}
	_, sd := p.variance(at(&ap.noises[0], cnt, true), at(&ap.noises[1], 0, false), at(&ap.noises[2], sq, false))
	return []seriesExpectation{
		{series: schema.SeriesCount, expected: cnt},
		{series: schema.SeriesSum, expected: math.NaN()},
		{series: schema.SeriesSumSq, expected: sq},
		{series: schema.SeriesStddev, expected: h / math.Sqrt(3), derived: true, level: sd.Level, half: (sd.Hi[0] - sd.Lo[0]) / 2,
			coversRange: sd.Lo[0] <= 0 && sd.Hi[0] >= math.Sqrt(p.maxVariance())},
	}
}
