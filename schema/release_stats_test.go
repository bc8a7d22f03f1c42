package schema

import (
	"errors"
	"math"
	"testing"
)

// statsGolden are the golden releases of the aggregates of issue 11
// (units, variance, quantiles), checked in under testdata/ like
// goldenReleases (TestStatsReleaseGolden makes the same checks).
func statsGolden() map[string]*Release {
	base := func(agg string, kind Kind) Release {
		return Release{
			ReleaseID: "latency/2024-05-01T12:00:00.000Z", WindowStart: 1714564800000, WindowEnd: 1714564860000,
			Aggregate: agg, Kind: kind, Group: []GroupValue{{"region", "eu"}},
			Budget: Budget{Epsilon: 1, Delta: 1e-6}, Spent: Budget{Epsilon: 1, Delta: 1e-6},
			Unit: "user_id", Bounds: Bounds{MaxGroups: 1, MaxValues: 2, Lower: 0, Upper: 1000},
			Instance: "dpstream-0", Note: "per-window budget; one calibration of all parts",
		}
	}
	units := base("units", KindUnits)
	units.Bounds.Lower, units.Bounds.Upper = 0, 0
	units.Series = []Series{{Name: SeriesUnits, Mechanism: "discrete-laplace", Scale: 7.25,
		Sensitivity: Sensitivity{L0: 1, L1: 1, L2: 1, LInf: 1},
		Ints:        []int64{4127}, Level: 0.95, Lo: []float64{4105}, Hi: []float64{4149}}}
	variance := base("variance", KindVariance)
	variance.Series = []Series{
		{Name: SeriesCount, Mechanism: "discrete-laplace", Scale: 14.5, Sensitivity: Sensitivity{L0: 1, L1: 2, L2: 2, LInf: 2},
			Ints: []int64{8190}, Level: 0.9833333333333333, Lo: []float64{8130}, Hi: []float64{8250}},
		{Name: SeriesSum, Mechanism: "laplace", Scale: 3625, Sensitivity: Sensitivity{L0: 1, L1: 1000, L2: 1000, LInf: 1000},
			Floats: []float64{-2815000.5}, Level: 0.9833333333333333, Lo: []float64{-2829842.25}, Hi: []float64{-2800158.75}},
		{Name: SeriesSumSq, Mechanism: "laplace", Scale: 1812500, Sensitivity: Sensitivity{L0: 1, L1: 500000, L2: 500000, LInf: 500000},
			Floats: []float64{1160000000}, Level: 0.9833333333333333, Lo: []float64{1152578750}, Hi: []float64{1167421250}},
		{Name: SeriesVariance, Mechanism: DerivedMechanism, Floats: []float64{23516.9}, Level: 0.95, Lo: []float64{22002.4}, Hi: []float64{25043.1}},
		{Name: SeriesStddev, Mechanism: DerivedMechanism, Floats: []float64{math.Sqrt(23516.9)}, Level: 0.95,
			Lo: []float64{math.Sqrt(22002.4)}, Hi: []float64{math.Sqrt(25043.1)}},
	}
	quantiles := base("quantiles", KindQuantiles)
	labels := []string{"0.5", "0.9", "0.99"}
	quantiles.Series = []Series{
		{Name: SeriesQuantiles, Mechanism: "discrete-laplace", Scale: 29, Sensitivity: Sensitivity{L0: 8, L1: 8, L2: 4, LInf: 2},
			Labels: labels, Floats: []float64{120.4, 310.75, 842.5}, Level: 0.95,
			Lo: []float64{117.1875, 302.734375, 812.5}, Hi: []float64{123.046875, 318.359375, 875}},
		{Name: SeriesRankError, Mechanism: DerivedMechanism, Labels: labels, Floats: []float64{4704, 5958.4, 6230.3}, Level: 0.95,
			Lo: []float64{4704, 5958.4, 6230.3}, Hi: []float64{4704, 5958.4, 6230.3}},
	}
	return map[string]*Release{"release_units": &units, "release_variance": &variance, "release_quantiles": &quantiles}
}

func TestStatsReleaseGolden(t *testing.T) {
	for name, r := range statsGolden() {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, r) })
	}
}

// Validate enforces the new kinds' shapes: the series in order, labels
// per rank for quantiles, float-valued derived series, and "derived" only
// on the derived series.
func TestStatsReleaseValidate(t *testing.T) {
	g := statsGolden()
	cases := map[string]func(r *Release){
		"units with labels":         func(r *Release) { r.Series[0].Labels = []string{"x"} },
		"variance missing stddev":   func(r *Release) { r.Series = r.Series[:4] },
		"variance derived count":    func(r *Release) { r.Series[0].Mechanism = DerivedMechanism },
		"variance integer variance": func(r *Release) { r.Series[3].Floats, r.Series[3].Ints = nil, []int64{1} },
		"stddev not derived":        func(r *Release) { r.Series[4].Mechanism = "laplace" },
		"quantiles without labels":  func(r *Release) { r.Series[0].Labels = nil },
		"quantiles integer":         func(r *Release) { r.Series[0].Floats, r.Series[0].Ints = nil, []int64{1, 2, 3} },
		"rank error not derived":    func(r *Release) { r.Series[1].Mechanism = "discrete-laplace" },
		"quantiles series order":    func(r *Release) { r.Series[0], r.Series[1] = r.Series[1], r.Series[0] },
	}
	for name, mod := range cases {
		var r Release
		switch {
		case name[:5] == "units":
			r = *g["release_units"]
		case name[:9] == "quantiles" || name[:4] == "rank":
			r = *g["release_quantiles"]
		default:
			r = *g["release_variance"]
		}
		r.Series = append([]Series(nil), r.Series...)
		mod(&r)
		if err := r.Validate(); !errors.Is(err, ErrInvalidRelease) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}
