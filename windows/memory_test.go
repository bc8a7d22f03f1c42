package windows

import (
	"fmt"
	"testing"
)

// MaxUnits bounds the tracked units, and with them the memory, however
// many units arrive; evicted units' records are reused.
func TestMaxUnitsBoundsMemory(t *testing.T) {
	cfg := allCfg()
	cfg.MaxGroups, cfg.MaxBuckets, cfg.MaxValues = 1, 1, 1
	cfg.MaxUnits = 1000
	tu := mustNew(t, cfg)
	for u := 0; u < 50_000; u++ {
		tu.Add(Event{Offset: int64(u), Time: 1, Unit: fmt.Sprint("u", u), Group: fmt.Sprint("g", u%7), Bucket: u % 8, Value: 1, HasValue: true})
	}
	m := tu.Memory()
	if m.Units != 1000 || m.Windows != 1 || m.Groups != 7 {
		t.Fatalf("memory %+v, want 1000 units, 1 window, 7 groups", m)
	}
	// The limit of the first implementation, kept: at most 2048 units'
	// records of 84 bytes (urec, grec, brec and vrec: 24+32+12+16) and an
	// index of at most 4096 slots (load ≥ 1/4). A unit's blob now takes
	// 16 words (64 bytes) with every bound 1 and MaxUnits.
	if limit := int64(2048*84 + 4096*4); m.UnitBytes > limit {
		t.Errorf("unit bytes %d > %d", m.UnitBytes, limit)
	}
	// Every interned group counts its estimate, groupBytes (a named
	// result of memory once shadowed the constant, which then counted 0).
	if m.GroupBytes < m.Groups*groupBytes {
		t.Errorf("group bytes %d < %d groups × %d", m.GroupBytes, m.Groups, groupBytes)
	}
	tu.Advance(0, 20_000)
	w := tu.Poll(0)[0]
	if w.Units != 1000 || w.Drops.UnitCap != 49_000 {
		t.Errorf("window units %d, unit-cap drops %d; want 1000, 49000", w.Units, w.Drops.UnitCap)
	}
	// Closed: only the recycled slabs remain.
	if m := tu.Memory(); m.Units != 0 || m.Windows != 0 || m.Groups != 0 {
		t.Errorf("after Poll: %+v", m)
	}
}

// Recycled slabs give the same windows as fresh ones.
func TestRecycledStateIsClean(t *testing.T) {
	cfg := propCfg()
	cfg.AllowedLateness = 0
	events := func(base int64) []Event {
		var es []Event
		for i := 0; i < 500; i++ {
			es = append(es, Event{Offset: int64(i), Time: base + int64(i*19%10_000), Unit: fmt.Sprint("u", i%37),
				Group: fmt.Sprint("g", i%5), Bucket: i % 6, Value: float64(i % 11), HasValue: i%3 != 0})
		}
		return es
	}
	tu := mustNew(t, cfg)
	var got []Window
	for k := int64(0); k < 3; k++ {
		for _, e := range events(k * 10_000) {
			tu.Add(e)
		}
		tu.Advance(0, (k+1)*10_000)
		got = append(got, tu.Poll(0)...)
	}
	for k := int64(0); k < 3; k++ {
		fresh := mustNew(t, cfg)
		fresh.EmitFrom(k * 10_000)
		for _, e := range events(k * 10_000) {
			fresh.Add(e)
		}
		fresh.Advance(0, (k+1)*10_000)
		want := fresh.Poll(0)[0]
		if string(encode(t, got[k])) != string(encode(t, want)) {
			t.Fatalf("window %d from recycled state differs from a fresh one", k)
		}
	}
}
