package operator

import (
	"math"

	"github.com/dpstream/dpstream/schema"
)

// Sizing rules (dpstream plan) of the aggregates of issue 11.
func init() {
	sizingRules[AggUnits] = func(_ *plan, _ *aggPlan, units, _ float64) []seriesExpectation {
		return []seriesExpectation{{series: schema.SeriesUnits, expected: units}}
	}
	sizingRules[AggVariance] = func(p *plan, ap *aggPlan, units, events float64) []seriesExpectation {
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
}
