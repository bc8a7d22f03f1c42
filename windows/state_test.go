package windows

import (
	"fmt"
	"testing"
	"time"
)

// keptGroups returns the kept group keys of every tracked unit of w, read
// from the unit blobs.
func keptGroups(w *openWindow) [][]string {
	w.t.flush()
	var out [][]string
	for _, r := range w.idx {
		if r == 0 {
			continue
		}
		b := w.blob(r)
		var kept []string
		pos := w.hdr
		for range b[hMeta] & 0xffff {
			kept = append(kept, w.gkeys[b[pos+gGid]])
			pos += groupSize(b[pos+gCounts])
		}
		out = append(out, kept)
	}
	return out
}

// keptCells returns the kept cells (buckets) of the first kept group of
// every tracked unit of w.
func keptCells(w *openWindow) [][]string {
	w.t.flush()
	var out [][]string
	for _, r := range w.idx {
		if r == 0 {
			continue
		}
		b := w.blob(r)
		g := w.hdr
		var kept []string
		for i := range int(b[g+gCounts] & 0xffff) {
			kept = append(kept, fmt.Sprint(b[g+gWords+cellWords*i]))
		}
		out = append(out, kept)
	}
	return out
}

// A unit whose state outgrows a chunk gets its own allocation; it keeps
// the same bottom-k values in any arrival order, and its allocation is
// released when the unit is evicted under MaxUnits.
func TestLargeUnitState(t *testing.T) {
	cfg := Config{Size: 10 * time.Second, Sum: true, Count: true, MaxGroups: 1, MaxValues: 3000, Lower: 0, Upper: 1e6}
	events := func(unit string, n int, reverse bool) []Event {
		es := make([]Event, n)
		for i := range es {
			k := i
			if reverse {
				k = n - 1 - i
			}
			es[i] = Event{Offset: int64(k), Time: 1, Unit: unit, Group: "g", Bucket: -1, Value: float64(k), HasValue: true}
		}
		return es
	}
	run := func(cfg Config, es []Event) (Window, MemoryStats) {
		tu := mustNew(t, cfg)
		for _, e := range es {
			tu.Add(e)
		}
		m := tu.Memory()
		tu.Advance(0, 1<<40)
		return tu.Poll(1)[0], m
	}
	// 2 000 values: all kept (6 005 words: beyond maxSmall).
	w, m := run(cfg, events("u", 2000, false))
	if g := w.Groups[0]; g.Values != 2000 || g.Sum != 1999*2000/2 || g.Count != 2000 {
		t.Errorf("all kept: values %d sum %v count %d; want 2000, 1999000, 2000", g.Values, g.Sum, g.Count)
	}
	if m.UnitBytes < 2000*valWords*4 {
		t.Errorf("unit bytes %d below the state's size", m.UnitBytes)
	}
	// 5 000 values: 3 000 kept, the same ones in either order.
	fwd, _ := run(cfg, events("u", 5000, false))
	rev, _ := run(cfg, events("u", 5000, true))
	if g := fwd.Groups[0]; g.Values != 3000 || fwd.Drops.Values != 2000 || fwd.Drops.Count != 2000 {
		t.Errorf("bounded: values %d, value drops %d, count drops %d; want 3000, 2000, 2000", g.Values, fwd.Drops.Values, fwd.Drops.Count)
	}
	if string(encode(t, fwd)) != string(encode(t, rev)) {
		t.Error("the kept values depend on arrival order")
	}
	// Two large units one after the other, one kept: in one of the two
	// orders the first, grown unit is evicted and its allocation released.
	cfg.MaxUnits = 1
	for _, order := range [][2]string{{"a", "b"}, {"b", "a"}} {
		tu := mustNew(t, cfg)
		for _, e := range append(events(order[0], 2500, false), events(order[1], 2500, false)...) {
			tu.Add(e)
		}
		tu.flush()
		live := 0
		for _, b := range tu.open[0].ar.big {
			if b != nil {
				live++
			}
		}
		if live != 1 {
			t.Errorf("capped %v: %d own allocations live, want 1", order, live)
		}
		tu.Advance(0, 1<<40)
		w := tu.Poll(1)[0]
		if w.Units != 1 || w.Drops.UnitCap != 2500 || w.Groups[0].Values != 2500 {
			t.Errorf("capped %v: %d units, unit-cap drops %d, values %d; want 1, 2500, 2500", order, w.Units, w.Drops.UnitCap, w.Groups[0].Values)
		}
	}
}
