package operator

import (
	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// unitsAgg is the units aggregate (issue 11): the number of distinct
// privacy units per group, one integer per group noised with
// windows.Sensitivities.Units (max_groups coordinates, each moved by at
// most 1).
type unitsAgg struct{ aggBase }

func (unitsAgg) name() string      { return AggUnits }
func (unitsAgg) kind() schema.Kind { return schema.KindUnits }

func (unitsAgg) enable(w *windows.Config, _ Config, _ int) { w.Units = true }

func (unitsAgg) parts(sens windows.Sensitivities) []partSpec {
	return []partSpec{{series: schema.SeriesUnits, integer: true, sens: sens.Units}}
}

func (unitsAgg) release(p *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	return scalarRelease(p, ap, float64(g.Units), s)
}

func (unitsAgg) expect(_ *plan, _ *aggPlan, units, _ float64) []seriesExpectation {
	return []seriesExpectation{{series: schema.SeriesUnits, expected: units}}
}
