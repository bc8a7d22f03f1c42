package windows

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Partial benchmarks use the workload of BenchmarkWindowAdd (issue 4):
// one window of 100 000 units with 10 events each over 10 groups × 20
// buckets, every event with a value.
//
//	go test -run '^$' -bench Partial ./windows/
//
// BenchmarkPartialEncode reports the encoded size per unit of the
// window's partial and the encoding and decoding rates. BenchmarkPartialMerge
// merges 4 partials — "keyed": input keyed by unit, 25 000 disjoint units
// per partition; "spread": every event on a random partition, so ≈ 94 %
// of the units are on each — and reports units/s (distinct units of the
// window per second) next to the time a single Tumbling's Poll takes to
// finish the same window, measured in the same run (x-poll: merge time /
// Poll time), and the time PollPartials takes for the 4 partitions
// (stage1-ns) against the same Poll.

// partialBench is the prepared input of one benchmark case.
type partialBench struct {
	cfg     Config
	parts   []Partial
	pollNs  float64 // single Tumbling: Poll of the window (best of 3)
	stageNs float64 // 4 Tumblings: PollPartials of the window, summed
}

var (
	partialBenchMu    sync.Mutex
	partialBenchCache = map[string]*partialBench{}
)

// fillWindow adds the events (with partition p, or every partition of
// their own with p < 0) to a new Tumbling for cfg and closes the window.
func fillWindow(b *testing.B, cfg Config, es []Event) *Tumbling {
	b.Helper()
	tu := mustNew(b, cfg)
	tu.EmitFrom(0)
	parts := map[int32]bool{}
	for _, e := range es {
		parts[e.Partition] = true
	}
	for p := range parts {
		tu.AssignPartitions(p)
	}
	for _, e := range es {
		tu.Add(e)
	}
	for p := range parts {
		tu.Advance(p, 60_000)
	}
	return tu
}

// preparePartials returns (and caches) the case: events split over 4
// partitions by split, per-partition partials, and the Poll time of a
// single Tumbling over all of them.
func preparePartials(b *testing.B, name string, bound int, split func(i int, e Event) int32) *partialBench {
	b.Helper()
	partialBenchMu.Lock()
	defer partialBenchMu.Unlock()
	if pb := partialBenchCache[name]; pb != nil {
		return pb
	}
	cfg := benchCfg(bound, false)
	es := benchEvents()
	for i := range es {
		es[i].Partition = split(i, es[i])
	}
	pb := &partialBench{cfg: cfg, pollNs: 1e18}
	for range 3 {
		tu := fillWindow(b, cfg, es)
		t0 := time.Now()
		ws := tu.Poll(0)
		pb.pollNs = min(pb.pollNs, float64(time.Since(t0).Nanoseconds()))
		if len(ws) != 1 || ws[0].Units != benchUnits {
			b.Fatalf("%d windows", len(ws))
		}
	}
	byPart := map[int32][]Event{}
	for _, e := range es {
		byPart[e.Partition] = append(byPart[e.Partition], e)
	}
	for p := range int32(len(byPart)) {
		tu := fillWindow(b, cfg, byPart[p])
		t0 := time.Now()
		ps := tu.PollPartials(0)
		pb.stageNs += float64(time.Since(t0).Nanoseconds())
		if len(ps) != 1 {
			b.Fatalf("%d partials", len(ps))
		}
		pb.parts = append(pb.parts, ps[0])
	}
	partialBenchCache[name] = pb
	return pb
}

func BenchmarkPartialEncode(b *testing.B) {
	for _, bound := range []int{1, 2} {
		b.Run(fmt.Sprintf("bounds=%d", bound), func(b *testing.B) {
			pb := preparePartials(b, fmt.Sprint("one/", bound), bound, func(int, Event) int32 { return 0 })
			p := pb.parts[0]
			data, err := p.MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			var q Partial
			t0 := time.Now()
			const decodes = 5
			for range decodes {
				if err := q.UnmarshalBinary(data); err != nil {
					b.Fatal(err)
				}
			}
			decodeNs := float64(time.Since(t0).Nanoseconds()) / decodes
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := p.MarshalBinary(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(len(data))/float64(p.Units()), "B/unit")
			b.ReportMetric(float64(len(data))/decodeNs*1e3, "decode-MB/s")
			b.ReportMetric(pb.stageNs, "pollpartials-ns")
			b.ReportMetric(pb.pollNs, "poll-ns")
		})
	}
}

func BenchmarkPartialMerge(b *testing.B) {
	splits := []struct {
		name  string
		split func(i int, e Event) int32
	}{
		// benchEvents' units are "user-%07d": by unit number modulo 4.
		{"keyed", func(_ int, e Event) int32 { return int32(e.Unit[len(e.Unit)-1]-'0') % 4 }},
		{"spread", func(i int, _ Event) int32 { return int32(rand.New(rand.NewPCG(uint64(i), 53)).IntN(4)) }},
	}
	for _, s := range splits {
		for _, bound := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/bounds=%d", s.name, bound), func(b *testing.B) {
				pb := preparePartials(b, fmt.Sprint(s.name, "/", bound), bound, s.split)
				in := 0
				for _, p := range pb.parts {
					in += p.Units()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					w, err := MergePartials(pb.cfg, testSeed, pb.parts)
					if err != nil {
						b.Fatal(err)
					}
					if w.Units != benchUnits {
						b.Fatalf("%d units", w.Units)
					}
				}
				b.StopTimer()
				perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(benchUnits/perOp*1e9, "units/s")
				b.ReportMetric(float64(in)/4, "units/partial")
				b.ReportMetric(pb.pollNs, "poll-ns")
				b.ReportMetric(perOp/pb.pollNs, "x-poll")
				b.ReportMetric(pb.stageNs/pb.pollNs, "stage1-x-poll")
			})
		}
	}
}
