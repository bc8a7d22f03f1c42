package windows

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// Benchmark workload (issue 4): per window 100 000 distinct units, 10
// groups × 20 buckets, 1 000 000 events (10 per unit) with uniformly random
// unit, group, bucket and value.
const (
	benchUnits     = 100_000
	benchPerWindow = 1_000_000
)

func benchEvents() []Event {
	r := rand.New(rand.NewPCG(51, 52))
	units := make([]string, benchUnits)
	for i := range units {
		units[i] = fmt.Sprintf("user-%07d", i)
	}
	groups := make([]string, 10)
	for i := range groups {
		groups[i] = fmt.Sprint("country-", i)
	}
	es := make([]Event, benchPerWindow)
	for i := range es {
		es[i] = Event{
			Offset: int64(i), Unit: units[r.IntN(benchUnits)], Group: groups[r.IntN(10)],
			Bucket: r.IntN(20), Value: r.Float64() * 120, HasValue: true,
		}
	}
	// Every unit appears at least once, so each window has exactly 100 000.
	for i, u := range units {
		es[i*10].Unit = u
	}
	return es
}

func benchCfg(bound int, eventLevel bool) Config {
	return Config{
		Size: time.Minute, EventLevel: eventLevel,
		Histogram: true, NumBuckets: 20, Count: true, Sum: true, Mean: true,
		MaxGroups: bound, MaxBuckets: bound, MaxPerBucket: bound, MaxValues: bound,
		Lower: 0, Upper: 100,
	}
}

// BenchmarkWindowAdd measures Add (with window closing amortised in) and
// reports events/s (wall clock and per CPU second of the process), the
// same figures for a baseline — one map[string]int64
// increment per event keyed by unit, reset per window — measured in the
// same run, their ratio, and the bytes per tracked unit (the Memory
// estimate, and the live heap measured after a GC) for one full window.
func BenchmarkWindowAdd(b *testing.B) {
	es := benchEvents()
	for _, bc := range []struct {
		name       string
		bound      int
		eventLevel bool
	}{
		{"bounds=1", 1, false},
		{"bounds=2", 2, false},
		{"bounds=4", 4, false},
		{"event-level", 1, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchAdd(b, es, benchCfg(bc.bound, bc.eventLevel))
		})
	}
}

func benchAdd(b *testing.B, es []Event, cfg Config) {
	est, heap, baseHeap := windowMemory(b, cfg, es)

	b.StopTimer()
	t0, c0 := time.Now(), cpuSeconds()
	baselineRun(es, b.N)
	base, baseCPU := time.Since(t0), cpuSeconds()-c0

	tu := mustNew(b, cfg)
	sink := 0
	b.ReportAllocs()
	b.ResetTimer()
	c1 := cpuSeconds()
	b.StartTimer()
	for i := 0; i < b.N; i++ {
		k := i % benchPerWindow
		e := es[k]
		e.Time = int64(i/benchPerWindow) * 60_000
		tu.Add(e)
		if k == benchPerWindow-1 {
			tu.Advance(0, e.Time+60_000)
			sink += len(tu.Poll(0))
		}
	}
	b.StopTimer()
	cpu := cpuSeconds() - c1
	if got := tu.Stats().Events[Accepted]; got != int64(b.N) {
		b.Fatalf("%d events accepted, want %d", got, b.N)
	}
	rate := float64(b.N) / b.Elapsed().Seconds()
	baseRate := float64(b.N) / base.Seconds()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(baseRate, "baseline-events/s")
	b.ReportMetric(rate/baseRate, "x-baseline")
	// Per CPU second: less sensitive to other load on a shared machine.
	b.ReportMetric(float64(b.N)/cpu, "events/cpu-s")
	b.ReportMetric(float64(b.N)/baseCPU, "baseline-events/cpu-s")
	if !cfg.EventLevel {
		b.ReportMetric(est, "B/unit")
		b.ReportMetric(heap, "heapB/unit")
		b.ReportMetric(baseHeap, "baseline-heapB/unit")
	}
	_ = sink
}

// baselineRun increments a per-unit map entry for n events, starting a new
// map per window.
func baselineRun(es []Event, n int) {
	var m map[string]int64
	for i := 0; i < n; i++ {
		k := i % benchPerWindow
		if k == 0 {
			m = make(map[string]int64)
		}
		m[es[k].Unit]++
	}
}

// windowMemory fills one window with the benchmark events and returns the
// estimated and measured (live heap) bytes per tracked unit, and the
// measured bytes per unit of the baseline map. Unit strings are shared by
// both and not counted.
func windowMemory(b *testing.B, cfg Config, es []Event) (est, heap, baseHeap float64) {
	b.Helper()
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	h0 := live()
	tu := mustNew(b, cfg)
	for _, e := range es {
		tu.Add(e)
	}
	h1 := live()
	m := tu.Memory()
	runtime.KeepAlive(tu)
	if m.Units != benchUnits && !cfg.EventLevel {
		b.Fatalf("%d units tracked, want %d", m.Units, benchUnits)
	}
	h2 := live()
	base := make(map[string]int64)
	for _, e := range es {
		base[e.Unit]++
	}
	h3 := live()
	runtime.KeepAlive(base)
	return float64(m.UnitBytes) / benchUnits, (float64(h1) - float64(h0)) / benchUnits, (float64(h3) - float64(h2)) / benchUnits
}

// cpuSeconds is the user+system CPU time of the process so far (all
// threads, so the garbage collector's work counts too).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
