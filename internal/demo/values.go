package demo

// values.go: the true value of each released value, and the checks of a
// window against it (coverage of the intervals, agreement with the
// operator's exact aggregates).

import (
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/schema"
)

// sortReleases sorts a window's releases by region (configuration order)
// and aggregate (display order).
func sortReleases(rs []schema.Release) {
	slices.SortFunc(rs, func(a, b schema.Release) int {
		ga, gb := slices.Index(Regions, groupValue(&a)), slices.Index(Regions, groupValue(&b))
		if ga != gb {
			return ga - gb
		}
		return slices.Index(AggregateOrder, a.Aggregate) - slices.Index(AggregateOrder, b.Aggregate)
	})
}

// groupValue returns the region of a release.
func groupValue(r *schema.Release) string {
	if len(r.Group) == 0 {
		return ""
	}
	return r.Group[0].Value
}

// trueValues returns the demo's true values for every value of series i of
// r, NaN where there is none (the mean of no values).
func trueValues(r *schema.Release, i int, g *GroupTruth) []float64 {
	if g == nil {
		return nil
	}
	s := &r.Series[i]
	switch {
	case s.Name == schema.SeriesRunning:
		return nil // see runningSeries
	case r.Kind == schema.KindCount:
		return []float64{float64(g.Count)}
	case r.Kind == schema.KindHistogram:
		out := make([]float64, len(g.Hist))
		for j, c := range g.Hist {
			out[j] = float64(c)
		}
		return out
	case r.Kind == schema.KindSum:
		return []float64{g.Sum}
	case r.Kind == schema.KindUnits:
		return []float64{float64(g.Units)}
	case s.Name == schema.SeriesQuantiles:
		out := make([]float64, len(s.Labels))
		for j, l := range s.Labels {
			q, err := strconv.ParseFloat(l, 64)
			if err != nil {
				return nil
			}
			out[j] = g.Quantile(q)
		}
		return out
	case s.Name == schema.SeriesRankError:
		// The true rank error of each released quantile: how far rank·N
		// is from the ranks the released value takes among the kept
		// values (between the number below it and the number at or below).
		if len(r.Series) < 1 || r.Series[0].Len() != s.Len() {
			return nil
		}
		out := make([]float64, s.Len())
		n := float64(len(g.Kept))
		for j, l := range s.Labels {
			q, err := strconv.ParseFloat(l, 64)
			if err != nil {
				return nil
			}
			x := r.Series[0].Value(j)
			below := float64(sort.SearchFloat64s(g.Kept, x))
			atOrBelow := float64(sort.Search(len(g.Kept), func(i int) bool { return g.Kept[i] > x }))
			out[j] = math.Max(0, math.Max(below-q*n, q*n-atOrBelow))
		}
		return out
	case s.Name == schema.SeriesVariance:
		return []float64{g.Variance()}
	case s.Name == schema.SeriesStddev:
		return []float64{math.Sqrt(g.Variance())}
	case s.Name == schema.SeriesSumSq:
		return []float64{g.CentredSqSum}
	case s.Name == schema.SeriesSum: // the mean's centred sum
		return []float64{g.CentredSum}
	case s.Name == schema.SeriesCount:
		return []float64{float64(g.Values)}
	case s.Name == schema.SeriesMean:
		return []float64{g.Mean()}
	}
	return nil
}

// displayed returns the index of the series a table shows for r: the mean
// for a mean release and the standard deviation for a variance release
// (their other series are the inputs), the quantiles for a quantiles
// release, else the only one.
func displayed(r *schema.Release) int {
	for i, s := range r.Series {
		if s.Name == schema.SeriesMean || s.Name == schema.SeriesStddev {
			return i
		}
	}
	return 0
}

// coverage counts the displayed values of w, those whose true value lies in
// their interval, and the groups whose truth is inexact.
func coverage(w *Window) (checked, covered, inexact int) {
	for gi := range w.Truth {
		if !w.Truth[gi].Exact {
			inexact++
		}
	}
	for i := range w.Releases {
		r := &w.Releases[i]
		si := displayed(r)
		s := &r.Series[si]
		for j, t := range trueValues(r, si, w.Truth[groupValue(r)]) {
			if math.IsNaN(t) || j >= s.Len() {
				continue
			}
			checked++
			if s.Lo[j] <= t && t <= s.Hi[j] {
				covered++
			}
		}
	}
	return checked, covered, inexact
}

// compareTruth counts the values where the demo's truth differs from the
// operator's exact bounded aggregates of p (sums to a relative 1e-12: the
// operator rounds an exact sum once, the demo adds in float64; the
// generated readings are whole watt-hours, so both are exact here).
func compareTruth(truth map[string]*GroupTruth, p *operator.Published) int {
	bad := 0
	for _, reg := range Regions {
		t := truth[reg]
		if t == nil || !t.Exact {
			continue
		}
		var g struct {
			count, values int64
			hist          []int64
			sum, csum     float64
		}
		g.hist = make([]int64, len(synthStatuses))
		for _, og := range p.Window.Groups {
			if og.Key == schema.MakeGroup(reg) {
				g.count, g.values, g.sum, g.csum = og.Count, og.Values, og.Sum, og.CentredSum
				if og.Histogram != nil {
					g.hist = og.Histogram
				}
			}
		}
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
		if g.count != t.Count {
			bad++
		}
		if g.values != t.Values {
			bad++
		}
		if !near(g.sum, t.Sum) {
			bad++
		}
		if !near(g.csum, t.CentredSum) {
			bad++
		}
		if !slices.Equal(g.hist, t.Hist) {
			bad++
		}
	}
	return bad
}
