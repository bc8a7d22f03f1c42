package windows

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// propCfg: 10 s windows, 2 s lateness, every aggregate, tight bounds so that
// every bound is exercised.
func propCfg() Config {
	return Config{
		Size: 10 * time.Second, AllowedLateness: 2 * time.Second,
		Histogram: true, NumBuckets: 6, Count: true, Sum: true, Mean: true,
		MaxGroups: 2, MaxBuckets: 2, MaxPerBucket: 2, MaxValues: 3,
		Lower: -5, Upper: 5,
	}
}

// genPartitions returns per-partition event sequences: arrival times
// increasing on each partition (a broker's LogAppendTime), event times
// around them with jitter up to ±3 s (some out of order within lateness,
// some late), a few far behind (late), units shared across partitions,
// values partly outside the clamping range.
func genPartitions(r *rand.Rand, parts, perPart, units int) [][]Event {
	seqs := make([][]Event, parts)
	for p := range seqs {
		ts := int64(r.IntN(5_000) + r.IntN(3)*25_000) // partitions may start far apart
		arr := ts
		for i := 0; i < perPart; i++ {
			ts += int64(r.IntN(400))
			arr = max(arr, ts+int64(r.IntN(500))) // arrives 0–0.5 s after ts, monotone
			t := ts + int64(r.IntN(6_000)) - 3_000
			if r.IntN(50) == 0 {
				t -= 20_000 // far behind: late
			}
			e := Event{
				Partition: int32(p), Offset: int64(i), Time: t, Arrival: arr,
				Unit:   fmt.Sprint("u", r.IntN(units)),
				Group:  fmt.Sprint("g", r.IntN(4)),
				Bucket: r.IntN(7) - 1,
			}
			if r.IntN(10) == 0 {
				e.Unit = ""
			}
			if r.IntN(4) != 0 {
				e.Value, e.HasValue = r.NormFloat64()*4, true
			}
			if r.IntN(40) == 0 {
				// A watermark hint, part of the partition's sequence: an
				// event with Bucket −2 stands for Advance(p, Time), a time
				// no later event of p arrives before.
				seqs[p] = append(seqs[p], Event{Partition: int32(p), Time: arr, Arrival: arr, Bucket: -2})
			}
			seqs[p] = append(seqs[p], e)
		}
	}
	return seqs
}

// newAssigned returns a Tumbling with partitions 0 … parts−1 assigned,
// after EmitFrom(*from) when from is set.
func newAssigned(t *testing.T, cfg Config, parts int, from *int64) *Tumbling {
	t.Helper()
	tu := mustNew(t, cfg)
	if from != nil {
		if err := tu.EmitFrom(*from); err != nil {
			t.Fatal(err)
		}
	}
	ids := make([]int32, parts)
	for p := range ids {
		ids[p] = int32(p)
	}
	tu.AssignPartitions(ids...)
	return tu
}

// runInterleaved feeds the sequences in an interleaving drawn from r,
// polling at random moments, then advances every partition far ahead and
// polls the rest. With from set it calls EmitFrom(*from) first. It returns
// the encoded windows and the statuses of the events in per-partition
// order.
func runInterleaved(t *testing.T, cfg Config, seqs [][]Event, r *rand.Rand, from *int64) ([][]byte, string) {
	t.Helper()
	tu := newAssigned(t, cfg, len(seqs), from)
	pos := make([]int, len(seqs))
	status := make([][]Status, len(seqs))
	var out [][]byte
	poll := func() {
		for _, w := range tu.Poll(0) {
			b, err := w.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	for {
		var live []int
		for p := range seqs {
			if pos[p] < len(seqs[p]) {
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			break
		}
		p := live[r.IntN(len(live))]
		n := 1 + r.IntN(5) // a burst from one partition
		for ; n > 0 && pos[p] < len(seqs[p]); n-- {
			if e := seqs[p][pos[p]]; e.Bucket == -2 {
				if err := tu.Advance(e.Partition, e.Time); err != nil {
					t.Fatal(err)
				}
			} else {
				s, _ := tu.Add(e)
				status[p] = append(status[p], s)
			}
			pos[p]++
		}
		if r.IntN(8) == 0 {
			poll()
		}
	}
	end := lastTime(seqs...) + 20_000 // past the last window's end + lateness, and every arrival
	for p := range seqs {
		tu.Advance(int32(p), end)
	}
	for {
		n := len(out)
		poll()
		if len(out) == n {
			break
		}
	}
	return out, fmt.Sprint(status)
}

// The same per-partition sequences give byte-identical windows and the same
// per-event statuses for every interleaving and polling schedule.
func TestInterleavingDoesNotChangeResults(t *testing.T) {
	variants := map[string]func(*Config){
		"units":            func(*Config) {},
		"units, capped":    func(c *Config) { c.MaxUnits = 7 },
		"total":            func(c *Config) { c.MaxContributions = 3 },
		"total, capped":    func(c *Config) { c.MaxContributions = 3; c.MaxUnits = 7 },
		"event level":      func(c *Config) { c.EventLevel = true },
		"event level, cap": func(c *Config) { c.EventLevel = true; c.MaxOpenGroups = 3 },
	}
	for name, mod := range variants {
		t.Run(name, func(t *testing.T) {
			cfg := propCfg()
			mod(&cfg)
			for seed := uint64(1); seed <= 4; seed++ {
				seqs := genPartitions(rand.New(rand.NewPCG(seed, 99)), 3, 300, 25)
				sameUnderInterleavings(t, cfg, seqs, seed, 10, nil)
			}
		})
	}
}

// Splitting the units between two instances (input keyed by unit) and
// merging their partial windows gives the single instance's windows, in
// either merge order, and survives encoding.
func TestMergeEqualsSingleInstance(t *testing.T) {
	for _, v := range []struct {
		eventLevel bool
		total      int
	}{{false, 0}, {true, 0}, {false, 3}} {
		eventLevel := v.eventLevel
		cfg := propCfg()
		cfg.EventLevel, cfg.MaxContributions = eventLevel, v.total
		// Lateness depends on each event's own arrival only, so the
		// instances drop exactly the events the single instance drops.
		r := rand.New(rand.NewPCG(7, 8))
		seqs := genPartitions(r, 1, 2_000, 40)
		// Instance by unit (or by event for event level): partitions keyed by unit.
		seqs[0] = slices.DeleteFunc(seqs[0], func(e Event) bool { return e.Bucket == -2 })
		split := [2][]Event{}
		for _, e := range seqs[0] {
			var k int
			if e.Unit != "" {
				k = int(e.Unit[len(e.Unit)-1]) % 2
			} else {
				k = int(e.Offset % 2)
			}
			split[k] = append(split[k], e)
		}
		end := lastTime(seqs...) + 80_000
		single := collect(t, cfg, seqs[0], end)
		a, b := collect(t, cfg, split[0], end), collect(t, cfg, split[1], end)
		if len(single) < 5 {
			t.Fatalf("only %d windows", len(single))
		}
		for start, want := range single {
			wa, okA := a[start]
			wb, okB := b[start]
			if !okA || !okB {
				t.Fatalf("window %d missing from a partial", start)
			}
			// Round-trip the partials through the encoding, as the merge stage would.
			wa, wb = roundTrip(t, wa), roundTrip(t, wb)
			ab, ba := wa, wb
			ab.Groups = cloneGroups(wa.Groups)
			ba.Groups = cloneGroups(wb.Groups)
			if err := ab.Merge(&wb); err != nil {
				t.Fatal(err)
			}
			if err := ba.Merge(&wa); err != nil {
				t.Fatal(err)
			}
			if ab.Partials != 2 {
				t.Fatalf("partials %d", ab.Partials)
			}
			want.Partials = 2
			wantB, gotAB, gotBA := encode(t, want), encode(t, ab), encode(t, ba)
			if !bytes.Equal(gotAB, wantB) || !bytes.Equal(gotBA, wantB) {
				t.Fatalf("event level %v, window %d: merged partials differ from the single instance", eventLevel, start)
			}
		}
	}
}

// lastTime is the largest event or arrival time in the sequences.
func lastTime(seqs ...[]Event) int64 {
	m := int64(0)
	for _, s := range seqs {
		for _, e := range s {
			m = max(m, e.Time, e.Arrival)
		}
	}
	return m
}

func cloneGroups(gs []Group) []Group {
	out := make([]Group, len(gs))
	for i := range gs {
		out[i] = gs[i].clone()
	}
	return out
}

// collect runs one instance on one partition up to watermark end and
// returns its windows by start.
func collect(t *testing.T, cfg Config, events []Event, end int64) map[int64]Window {
	t.Helper()
	tu := mustNew(t, cfg)
	if err := tu.EmitFrom(0); err != nil { // same first window in every instance
		t.Fatal(err)
	}
	for _, e := range events {
		tu.Add(e)
	}
	tu.Advance(0, end)
	out := map[int64]Window{}
	for ws := tu.Poll(0); len(ws) > 0; ws = tu.Poll(0) {
		for _, w := range ws {
			out[w.Start] = w
		}
	}
	return out
}

func encode(t *testing.T, w Window) []byte {
	t.Helper()
	b, err := w.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func roundTrip(t *testing.T, w Window) Window {
	t.Helper()
	b := encode(t, w)
	var out Window
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encode(t, out), b) {
		t.Fatal("encoding is not stable under a round trip")
	}
	return out
}

// Removing one unit's events changes every released vector by at most the
// derived sensitivities (add/remove, or replace-one with a unit cap). The
// unit is removed from a random dataset and the change measured directly.
func TestSensitivityHoldsEmpirically(t *testing.T) {
	variants := map[string]func(*Config){
		"units":  func(*Config) {},
		"capped": func(c *Config) { c.MaxUnits = 6 },
		"total":  func(c *Config) { c.MaxContributions = 3 },
		"total, capped": func(c *Config) {
			c.MaxContributions = 3
			c.MaxUnits = 6
		},
		"event level": func(c *Config) { c.EventLevel = true },
	}
	for name, mod := range variants {
		t.Run(name, func(t *testing.T) {
			cfg := propCfg()
			cfg.AllowedLateness = 0
			mod(&cfg)
			sens, err := cfg.Sensitivities()
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(11, 12))
			worst := map[string]Sensitivity{}
			for trial := 0; trial < 150; trial++ {
				var events []Event
				for i := 0; i < 150; i++ {
					e := Event{Offset: int64(i), Time: int64(r.IntN(10_000)),
						Unit: fmt.Sprint("u", r.IntN(12)), Group: fmt.Sprint("g", r.IntN(5)), Bucket: r.IntN(7) - 1}
					if r.IntN(3) != 0 {
						e.Value, e.HasValue = (r.Float64()*2-1)*8, true
					}
					events = append(events, e)
				}
				// The neighbour: without one unit (event level: without one event).
				var rest []Event
				victim := fmt.Sprint("u", r.IntN(12))
				drop := r.IntN(len(events))
				for i, e := range events {
					if (cfg.EventLevel && i != drop) || (!cfg.EventLevel && e.Unit != victim) {
						rest = append(rest, e)
					}
				}
				full, nb := oneWindow(t, cfg, events), oneWindow(t, cfg, rest)
				for agg, d := range diffVectors(full, nb, cfg.NumBuckets) {
					w := worst[agg]
					w.L0, w.L1, w.L2, w.Linf = max(w.L0, d.L0), max(w.L1, d.L1), max(w.L2, d.L2), max(w.Linf, d.Linf)
					worst[agg] = w
				}
			}
			bound := map[string]Sensitivity{
				"histogram": sens.Histogram, "count": sens.Count, "sum": sens.Sum,
				"mean_sum": sens.MeanSum, "values": sens.Values, "units": sens.Units,
			}
			for agg, w := range worst {
				b := bound[agg]
				t.Logf("%-9s worst change %+v, sensitivity %+v", agg, w, b)
				if w.L0 > b.L0 || w.L1 > b.L1 || w.L2 > b.L2 || w.Linf > b.Linf {
					t.Errorf("%s: change %+v exceeds sensitivity %+v", agg, w, b)
				}
				if w.Linf == 0 {
					t.Errorf("%s: no change ever observed; the test is not exercising it", agg)
				}
			}
		})
	}
}

func oneWindow(t *testing.T, cfg Config, events []Event) Window {
	t.Helper()
	tu := mustNew(t, cfg)
	tu.EmitFrom(0)
	for _, e := range events {
		if s, _ := tu.Add(e); s != Accepted {
			t.Fatalf("status %v", s)
		}
	}
	tu.Advance(0, 10_000)
	ws := tu.Poll(0)
	if len(ws) != 1 {
		t.Fatalf("%d windows", len(ws))
	}
	return ws[0]
}

// exactDiff returns |a − b| rounded down, minus the rounding slack of the
// released sums: each is an exact sum rounded once to float64, so
// neighbouring sums may differ by Δ plus half an ulp of each (documented
// at Group.Sum). What remains must be within the sensitivity.
func exactDiff(a, b float64) float64 {
	d := new(big.Float).SetPrec(2200).Sub(big.NewFloat(a).SetPrec(2200), big.NewFloat(b).SetPrec(2200))
	d.Abs(d)
	slack := new(big.Float).SetPrec(2200).SetFloat64(ulp(a)/2 + ulp(b)/2) // exact: powers of two
	d.Sub(d, slack)
	if d.Sign() < 0 {
		return math.Abs(a - b) // |a − b| is within the slack; report it unadjusted
	}
	f, _ := d.Float64()
	return f
}

// ulp is the spacing of float64 values at x.
func ulp(x float64) float64 {
	x = math.Abs(x)
	return math.Nextafter(x, math.Inf(1)) - x
}

// diffVectors measures the change between two windows per aggregate vector
// (groups absent from one window count as zero).
func diffVectors(a, b Window, nb int) map[string]Sensitivity {
	type vec map[string]float64
	flat := func(w Window) map[string]vec {
		m := map[string]vec{"histogram": {}, "count": {}, "sum": {}, "mean_sum": {}, "values": {}, "units": {}}
		for _, g := range w.Groups {
			for k := 0; k < nb; k++ {
				m["histogram"][fmt.Sprint(g.Key, "/", k)] = float64(g.Histogram[k])
			}
			m["count"][g.Key] = float64(g.Count)
			m["sum"][g.Key] = g.Sum
			m["mean_sum"][g.Key] = g.CentredSum
			m["values"][g.Key] = float64(g.Values)
			m["units"][g.Key] = float64(g.Units)
		}
		return m
	}
	fa, fb := flat(a), flat(b)
	out := map[string]Sensitivity{}
	for agg := range fa {
		var s Sensitivity
		keys := map[string]bool{}
		for k := range fa[agg] {
			keys[k] = true
		}
		for k := range fb[agg] {
			keys[k] = true
		}
		sq := 0.0
		for k := range keys {
			d := exactDiff(fa[agg][k], fb[agg][k])
			if d > 0 {
				s.L0++
			}
			s.L1 += d
			sq += d * d
			s.Linf = max(s.Linf, d)
		}
		s.L2 = math.Sqrt(sq)
		out[agg] = s
	}
	return out
}

// sameUnderInterleavings runs seqs in the reference interleaving (stream
// (seed, 0)) and in n others (streams (seed, 1…n)), each with EmitFrom(*from)
// if from is set, fails unless every run gives the same statuses and
// byte-identical windows (at least 5 of them), and returns the reference
// statuses.
func sameUnderInterleavings(t *testing.T, cfg Config, seqs [][]Event, seed uint64, n uint64, from *int64) string {
	t.Helper()
	ref, refStatus := runInterleaved(t, cfg, seqs, rand.New(rand.NewPCG(seed, 0)), from)
	if len(ref) < 5 {
		t.Fatalf("seed %d: only %d windows", seed, len(ref))
	}
	for k := uint64(1); k <= n; k++ {
		got, status := runInterleaved(t, cfg, seqs, rand.New(rand.NewPCG(seed, k)), from)
		if status != refStatus {
			t.Fatalf("seed %d interleaving %d: statuses differ", seed, k)
		}
		if len(got) != len(ref) {
			t.Fatalf("seed %d interleaving %d: %d windows, want %d", seed, k, len(got), len(ref))
		}
		for i := range ref {
			if !bytes.Equal(got[i], ref[i]) {
				t.Fatalf("seed %d interleaving %d: window %d differs", seed, k, i)
			}
		}
	}
	return refStatus
}
