package operator

import (
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// countAgg is the count aggregate: the number of kept values (events) per
// group, one integer per group noised with windows.Sensitivities.Count
// (max_groups coordinates, each moved by at most max_values; with
// max_contributions, L1 and L2 bounded by it too, plan_bounds.go).
type countAgg struct{ aggBase }

func (countAgg) name() string      { return AggCount }
func (countAgg) kind() schema.Kind { return schema.KindCount }
func (countAgg) running() bool     { return true }

func (countAgg) enable(w *windows.Config, _ Config, _ int) { w.Count = true }

func (countAgg) parts(sens windows.Sensitivities) []partSpec {
	return []partSpec{{series: schema.SeriesCount, integer: true, sens: sens.Count}}
}

func (countAgg) release(p *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	return scalarRelease(p, ap, float64(g.Count), s)
}

func (countAgg) expect(p *plan, _ *aggPlan, units, events float64) []seriesExpectation {
	// A unit adds at most max_values events to a group's count (and at
	// most max_contributions in all).
	return []seriesExpectation{{series: schema.SeriesCount, expected: units * p.totalCap(math.Min(events, float64(p.bounds.MaxValues)))}}
}
