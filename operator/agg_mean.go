package operator

import (
	"math"
	"slices"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// meanAgg is the mean aggregate: two noised parts per group — the centred
// sum Σ(v − mid) (windows.Sensitivities.MeanSum: max_groups coordinates,
// each within ±V·h, h the half-range, V = max_values) and the count of
// values (Sensitivities.Values: each within [0, V]) — and the mean derived
// from them (plan.mean). Each part's interval is at level 1 − β/2, so the
// mean's holds at 1 − β by the union bound.
type meanAgg struct{ aggBase }

func (meanAgg) name() string      { return AggMean }
func (meanAgg) kind() schema.Kind { return schema.KindMean }
func (meanAgg) valued() bool      { return true }

func (meanAgg) enable(w *windows.Config, _ Config, _ int) { w.Mean = true }

func (meanAgg) parts(sens windows.Sensitivities) []partSpec {
	return []partSpec{
		{series: schema.SeriesSum, sens: sens.MeanSum, intervals: 2},
		{series: schema.SeriesCount, integer: true, sens: sens.Values, intervals: 2},
	}
}

func (meanAgg) release(p *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	sum, err := p.noised(&ap.noises[0], []float64{g.CentredSum}, s, nil)
	if err != nil {
		return nil, err
	}
	cnt, err := p.noised(&ap.noises[1], []float64{float64(g.Values)}, s, nil)
	if err != nil {
		return nil, err
	}
	return []schema.Series{sum, cnt, p.mean(sum, cnt)}, nil
}

// mean derives the mean from the noisy centred sum and count (post-
// processing): mid + sum/count clamped to [lower, upper], with the interval
// obtained from the two intervals (each at level 1−β/2, so together 1−β by
// the union bound); with a count interval reaching 0 the interval is the
// whole range.
func (p *plan) mean(sum, cnt schema.Series) schema.Series {
	clamp := func(x float64) float64 { return math.Min(p.upper, math.Max(p.lower, x)) }
	s, c := sum.Value(0), cnt.Value(0)
	m := p.mid
	if c >= 1 {
		m = clamp(p.mid + s/c)
	}
	lo, hi := p.lower, p.upper
	if cl := cnt.Lo[0]; cl >= 1 {
		ch := cnt.Hi[0]
		cands := []float64{sum.Lo[0] / cl, sum.Lo[0] / ch, sum.Hi[0] / cl, sum.Hi[0] / ch}
		lo, hi = clamp(p.mid+slices.Min(cands)), clamp(p.mid+slices.Max(cands))
	}
	return schema.Series{
		Name: schema.SeriesMean, Mechanism: schema.DerivedMechanism, Level: 1 - 2*(1-sum.Level),
		Floats: []float64{m}, Lo: []float64{math.Min(lo, m)}, Hi: []float64{math.Max(hi, m)},
	}
}

func (meanAgg) expect(p *plan, ap *aggPlan, units, events float64) []seriesExpectation {
	// Values at the middle: the centred sum is 0, the count
	// units × min(events, max_values). The mean's interval is what
	// the release derives (plan.mean) from the two intervals.
	if len(ap.noises) < 2 {
		return nil
	}
	cnt := units * math.Min(events, float64(p.bounds.MaxValues))
	sn, cn := &ap.noises[0], &ap.noises[1]
	sum := schema.Series{Floats: []float64{0}, Lo: []float64{-sn.half}, Hi: []float64{sn.half}, Level: 1 - sn.beta}
	c := schema.Series{Ints: []int64{int64(math.Round(cnt))}, Lo: []float64{math.Round(cnt) - cn.half}, Hi: []float64{math.Round(cnt) + cn.half}, Level: 1 - cn.beta}
	m := p.mean(sum, c)
	lo, hi := m.Lo[0], m.Hi[0]
	return []seriesExpectation{
		{series: schema.SeriesSum, expected: math.NaN()},
		{series: schema.SeriesCount, expected: cnt},
		{series: schema.SeriesMean, expected: p.mid, derived: true, level: m.Level, half: (hi - lo) / 2,
			coversRange: lo <= p.lower && hi >= p.upper},
	}
}

// unsizedDerived is the start-up log's line on the mean when no group size
// is given (see sizeless).
func (meanAgg) unsizedDerived() (series, interval string) {
	return schema.SeriesMean, "from the sum's and count's; the whole [lower, upper] until the count's interval excludes 0"
}
