package operator

import (
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// sumAgg is the sum aggregate: the sum of the clamped values per group,
// one real value per group noised with windows.Sensitivities.Sum
// (max_groups coordinates, each within [min(0, V·lower), max(0, V·upper)],
// V = max_values).
type sumAgg struct{ aggBase }

func (sumAgg) name() string      { return AggSum }
func (sumAgg) kind() schema.Kind { return schema.KindSum }
func (sumAgg) valued() bool      { return true }
func (sumAgg) running() bool     { return true }

func (sumAgg) enable(w *windows.Config, _ Config, _ int) { w.Sum = true }

func (sumAgg) parts(sens windows.Sensitivities) []partSpec {
	return []partSpec{{series: schema.SeriesSum, sens: sens.Sum}}
}

func (sumAgg) release(p *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	return scalarRelease(p, ap, g.Sum, s)
}

func (sumAgg) expect(p *plan, _ *aggPlan, units, events float64) []seriesExpectation {
	// Values assumed at the middle of [lower, upper].
	return []seriesExpectation{{series: schema.SeriesSum, expected: units * math.Min(events, float64(p.bounds.MaxValues)) * p.mid}}
}
