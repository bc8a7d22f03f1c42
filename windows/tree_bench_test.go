package windows

import (
	"testing"
	"time"
)

// BenchmarkWindowAddAggregates measures, in one run on the workload of
// BenchmarkWindowAdd (bounds 2), Add with window closing amortised in for
// three configurations, and reports each one's events/s and bytes per
// tracked unit (Memory estimate and live heap) and the ratios:
//
//	off    histogram and count only (no values kept per unit)
//	today  histogram, count, sum and mean (values kept per unit)
//	all    today plus units, variance and quantiles (Google's default tree,
//	       16^4 leaves)
//
// The new aggregates keep no per-unit state of their own: variance and
// quantiles are computed from the values a unit already keeps, when the
// window closes; so "all" costs "today"'s memory per unit, and its extra
// time is the per-value leaf and square at window close.
func BenchmarkWindowAddAggregates(b *testing.B) {
	es := benchEvents()
	off := benchCfg(2, false)
	off.Sum, off.Mean, off.Lower, off.Upper = false, false, 0, 0
	today := benchCfg(2, false)
	all := today
	all.Units, all.Variance, all.Quantiles, all.TreeBranching, all.TreeDepth = true, true, true, DefaultTreeBranching, DefaultTreeDepth
	cfgs := []struct {
		name string
		cfg  Config
	}{{"off", off}, {"today", today}, {"all", all}}
	est := make([]float64, len(cfgs))
	heap := make([]float64, len(cfgs))
	for i, c := range cfgs {
		est[i], heap[i], _ = windowMemory(b, c.cfg, es)
	}
	rate := make([]float64, len(cfgs))
	b.ResetTimer()
	for i, c := range cfgs {
		tu := mustNew(b, c.cfg)
		t0 := time.Now()
		for n := 0; n < b.N; n++ {
			k := n % benchPerWindow
			e := es[k]
			e.Time = int64(n/benchPerWindow) * 60_000
			tu.Add(e)
			if k == benchPerWindow-1 {
				tu.Advance(0, e.Time+60_000)
				tu.Poll(0)
			}
		}
		tu.Advance(0, int64(b.N/benchPerWindow+2)*60_000)
		tu.Poll(0)
		rate[i] = float64(b.N) / time.Since(t0).Seconds()
		b.ReportMetric(rate[i], c.name+"-events/s")
		b.ReportMetric(est[i], c.name+"-B/unit")
		b.ReportMetric(heap[i], c.name+"-heapB/unit")
	}
	b.ReportMetric(rate[2]/rate[0], "all/off-events")
	b.ReportMetric(rate[2]/rate[1], "all/today-events")
	b.ReportMetric(est[2]/est[0], "all/off-B")
	b.ReportMetric(est[2]/est[1], "all/today-B")
	b.ReportMetric(heap[2]/heap[1], "all/today-heapB")
}
