package windows

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// auditCfg is the audit's configuration: 1-minute windows, 10 s
// lateness, count only, every bound 1, max_skew an hour.
func auditCfg() Config {
	return Config{
		Size: time.Minute, AllowedLateness: 10 * time.Second,
		Count: true, MaxGroups: 1, MaxValues: 1,
		MaxSkew: time.Hour,
	}
}

// auditCounts runs the audit's stream — 4 windows of 120 events of distinct
// units (1000 units in all) spread evenly over each window, in time order
// on one partition, each arriving 200 ms after it happened — with an extra
// event inserted after the 10th, and returns the count of each of the 4
// windows.
func auditCounts(t *testing.T, extra *Event) []int64 {
	t.Helper()
	const size = 60_000
	tu := mustNew(t, auditCfg())
	if err := tu.EmitFrom(0); err != nil {
		t.Fatal(err)
	}
	n := 0
	for w := range 4 {
		for i := range 120 {
			ts := int64(w*size + i*size/120)
			tu.Add(Event{Offset: int64(n), Time: ts, Arrival: ts + 200, Unit: fmt.Sprint("u", (w*120+i)%1000), Bucket: -1})
			n++
			if n == 10 && extra != nil {
				tu.Add(*extra)
			}
		}
	}
	tu.Advance(0, 10*size)
	counts := make([]int64, 4)
	for _, w := range tu.Poll(0) {
		if k := w.Start / size; k < 4 {
			for _, g := range w.Groups {
				counts[k] += g.Count
			}
		}
	}
	return counts
}

// The audit's finding: one unit's single event stamped minutes ahead (well
// within max_skew) must not change any other unit's contribution. Under
// the old rule it moved the partition's watermark and made every other
// unit's later events late (120/120/120/120 became 10/0/0/0).
func TestSkewedEventDoesNotDropOthers(t *testing.T) {
	base := auditCounts(t, nil)
	for k, c := range base {
		if c != 120 {
			t.Fatalf("without the skewed event window %d counts %d, want 120", k, c)
		}
	}
	// Unit u999 (not in the 4 windows' 480 units) stamps one event 5
	// minutes ahead of the stream; it arrives with the 10th event.
	skewed := &Event{Offset: 1 << 20, Time: 5*60_000 + 10*500, Arrival: 9*500 + 200, Unit: "u999", Bucket: -1}
	got := auditCounts(t, skewed)
	for k := range got {
		if got[k] != base[k] {
			t.Errorf("window %d: count %d with one unit's skewed event, %d without (all: %v)", k, got[k], base[k], got)
		}
	}
}

// One unit with one event in each of 63 future windows (all within
// max_skew) must not make any other unit's event be dropped: under the old
// rule the 63 windows plus the current one filled max_open_windows (64),
// and the others' events of the next window were dropped until the
// current window closed.
func TestFutureWindowsDoNotDropOthers(t *testing.T) {
	const size = 60_000
	cfg := auditCfg()
	cfg.MaxOpenWindows = 64
	cfg.MaxSkew = 2 * time.Hour
	tu := mustNew(t, cfg)
	tu.AssignPartitions(0, 1)
	if err := tu.EmitFrom(0); err != nil {
		t.Fatal(err)
	}
	// The attacker, on partition 1 at the start: windows 10 … 72, all
	// arriving at time 0.
	for k := range 63 {
		tu.Add(Event{Partition: 1, Offset: int64(k), Time: int64(10+k) * size, Unit: "attacker", Bucket: -1})
	}
	tu.Advance(1, 4*size) // partition 1 was read to its end at 4 min
	// Everyone else, on partition 0, in time order, polled after every
	// event like an in-sync consumer.
	dropped := 0
	for w := range 4 {
		for i := range 120 {
			ts := int64(w*size + i*size/120)
			if s, _ := tu.Add(Event{Offset: int64(w*120 + i), Time: ts, Arrival: ts + 200, Unit: fmt.Sprint("u", w*120+i), Bucket: -1}); s != Accepted {
				dropped++
			}
			tu.Poll(0)
		}
	}
	if dropped > 0 {
		t.Errorf("%d of 480 events of other units dropped (stats %v)", dropped, tu.Stats().Events)
	}
}

// ownStatus is what Add must decide for a valid event e (bucket and value
// in range, partition assigned) from e alone and the trusted emission
// start from: a predicate on the event, never on other events.
func ownStatus(cfg Config, e Event, from int64) Status {
	size, off := ms(cfg.Size), ms(cfg.Offset)
	start := off + floorDivTest(e.Time-off, size)*size
	switch {
	case cfg.MaxSkew > 0 && e.Time-e.Arrival > ms(cfg.MaxSkew):
		return TooFarAhead
	case start+size+ms(cfg.AllowedLateness) <= e.Arrival:
		return Late
	case start < off+floorDivTest(from-off, size)*size:
		return Late
	}
	return Accepted
}

func floorDivTest(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// With arrival times monotone on each partition, every event's status is
// its own predicate (ownStatus) — whatever the other events, the
// interleaving of partitions and the moments Poll is called — so the
// content of each window is exactly the events whose own predicates accept
// them. Checked for 4 seeds × 6 interleavings with stray far-future events,
// genuine jumps, watermark hints and an emission start inside the data.
func TestStatusIsOwnPredicate(t *testing.T) {
	cfg := propCfg()
	cfg.MaxSkew = 30 * time.Second
	from := int64(20_000)
	counts := map[Status]int{}
	for seed := uint64(1); seed <= 4; seed++ {
		seqs := genPartitions(rand.New(rand.NewPCG(seed, 77)), 3, 300, 25)
		withStrays(rand.New(rand.NewPCG(seed, 78)), seqs)
		var want []string
		for _, seq := range seqs {
			var st []Status
			for _, e := range seq {
				if e.Bucket != -2 {
					st = append(st, ownStatus(cfg, e, from))
					counts[st[len(st)-1]]++
				}
			}
			want = append(want, fmt.Sprint(st))
		}
		got := sameUnderInterleavings(t, cfg, seqs, seed, 6, &from)
		if w := "[" + strings.Join(want, " ") + "]"; got != w {
			t.Fatalf("seed %d: statuses differ from the events' own predicates", seed)
		}
	}
	t.Logf("statuses %v", counts)
	if counts[Late] == 0 || counts[TooFarAhead] == 0 || counts[Accepted] == 0 {
		t.Errorf("statuses %v: the test does not exercise every predicate", counts)
	}
}

// An in-sync consumer never reaches MaxOpenWindows when it is at least
// ⌈(MaxSkew + AllowedLateness + D)/Size⌉ + 2, where D is how far the
// emission watermark lags an event's arrival (here: under one window, two
// partitions polled every few events): events as far ahead of their
// arrival as MaxSkew allows, at the smallest such cap, are never dropped as
// TooManyWindows.
func TestInSyncNeverReachesCap(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		cfg := propCfg()
		cfg.MaxSkew = 45 * time.Second
		cfg.MaxOpenWindows = 8 // ⌈(45 s + 2 s + 10 s)/10 s⌉ + 2
		r := rand.New(rand.NewPCG(seed, 5))
		tu := mustNew(t, cfg)
		tu.AssignPartitions(0, 1)
		if err := tu.EmitFrom(0); err != nil {
			t.Fatal(err)
		}
		var arr [2]int64
		capped := 0
		for i := range 3000 {
			p := r.IntN(2)
			arr[p] = max(arr[p], arr[1-p]-5_000) + int64(r.IntN(200)) // partitions within 5 s of each other
			ts := arr[p] - int64(r.IntN(3_000))
			if r.IntN(20) == 0 {
				ts = arr[p] + 45_000 - int64(r.IntN(100)) // a device clock up to MaxSkew ahead
			}
			s, _ := tu.Add(Event{Partition: int32(p), Offset: int64(i), Time: ts, Arrival: arr[p], Unit: fmt.Sprint("u", r.IntN(50)), Bucket: -1})
			if s == TooManyWindows {
				capped++
			}
			if i%5 == 4 {
				tu.Poll(0)
			}
		}
		if capped > 0 {
			t.Errorf("seed %d: %d events dropped by the cap while in sync (stats %v)", seed, capped, tu.Stats().Events)
		}
		if tu.Stats().Events[Accepted] < 2500 {
			t.Errorf("seed %d: only %d accepted", seed, tu.Stats().Events[Accepted])
		}
	}
}
