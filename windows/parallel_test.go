package windows

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// runByStart feeds the per-partition sequences round-robin (one element
// per partition in turn; Bucket −2 elements are watermark hints, as in
// genPartitions), polling after every step, then advances every partition
// past the last window and polls the rest. With from set it calls
// EmitFrom(*from) first. It returns every emitted window's encoding by
// start.
func runByStart(t *testing.T, cfg Config, seqs [][]Event, from *int64) map[int64][]byte {
	t.Helper()
	tu := newAssigned(t, cfg, len(seqs), from)
	out := map[int64][]byte{}
	poll := func() {
		for _, w := range tu.Poll(0) {
			b, err := w.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if _, dup := out[w.Start]; dup {
				t.Fatalf("window %d emitted twice", w.Start)
			}
			out[w.Start] = b
		}
	}
	for i := 0; ; i++ {
		fed := false
		for p := range seqs {
			if i >= len(seqs[p]) {
				continue
			}
			fed = true
			if e := seqs[p][i]; e.Bucket == -2 {
				if err := tu.Advance(e.Partition, e.Time); err != nil {
					t.Fatal(err)
				}
			} else {
				tu.Add(e)
			}
		}
		if !fed {
			break
		}
		poll()
	}
	end := lastTime(seqs...) + 20_000 // past the last window's end + lateness, and every arrival
	for p := range seqs {
		if err := tu.Advance(int32(p), end); err != nil {
			t.Fatal(err)
		}
	}
	for n := -1; n != len(out); {
		n = len(out)
		poll()
	}
	return out
}

// withoutEvent returns seqs without the i-th element of partition p, every
// later offset of p shifted down by one (the neighbouring stream as Kafka
// would number it).
func withoutEvent(seqs [][]Event, p, i int) [][]Event {
	out := make([][]Event, len(seqs))
	for q := range seqs {
		out[q] = slices.Clone(seqs[q])
	}
	out[p] = slices.Delete(out[p], i, i+1)
	for j := i; j < len(out[p]); j++ {
		out[p][j].Offset--
	}
	return out
}

// TestEventLevelRemovalChangesOneWindow is the precondition of parallel
// composition over a horizon (operator.Config.ParallelComposition): with
// EventLevel and the windows released from a fixed EmitFrom point, removing
// one event from a stream (every later offset of its partition shifting
// by one) leaves every other window's exact aggregates byte-identical —
// with no cap, and with the caps the operator may set at event level
// (MaxOpenGroups, which chooses among the groups of one window only, and
// MaxOpenWindows counted from the emission point). MaxOpenWindows without
// EmitFrom counts the windows open at once, so one event can drop an event
// of another window: the operator always calls EmitFrom, and the test
// shows the condition is needed. The data and the removed events come
// from fixed seeds (deterministic: no false failures).
func TestEventLevelRemovalChangesOneWindow(t *testing.T) {
	base := func() Config {
		c := propCfg()
		c.EventLevel, c.Units, c.Variance = true, true, true
		c.Quantiles, c.TreeBranching, c.TreeDepth = true, 4, 2
		return c
	}
	from := int64(0)
	variants := map[string]func(*Config){
		"no cap":           func(*Config) {},
		"max open groups":  func(c *Config) { c.MaxOpenGroups = 2 },
		"max open windows": func(c *Config) { c.MaxOpenWindows = 2 },
	}
	for name, edit := range variants {
		cfg := base()
		edit(&cfg)
		starts := mustNew(t, cfg)
		r := rand.New(rand.NewPCG(20, 1))
		for trial := range 6 {
			seqs := genPartitions(r, 3, 120, 5)
			full := runByStart(t, cfg, seqs, &from)
			changed := 0
			for range 25 {
				p := r.IntN(len(seqs))
				i := r.IntN(len(seqs[p]))
				if seqs[p][i].Bucket == -2 {
					continue // a watermark hint, not an event
				}
				own := starts.WindowStart(seqs[p][i].Time)
				less := runByStart(t, cfg, withoutEvent(seqs, p, i), &from)
				for s, b := range full {
					if s == own {
						if !bytes.Equal(less[s], b) {
							changed++
						}
						continue
					}
					if !bytes.Equal(less[s], b) {
						t.Fatalf("%s, trial %d: removing event %d of partition %d (window %d) changed window %d", name, trial, i, p, own, s)
					}
				}
				for s := range less {
					if _, ok := full[s]; !ok && s != own {
						t.Fatalf("%s, trial %d: removing event %d of partition %d added window %d", name, trial, i, p, s)
					}
				}
			}
			if changed == 0 {
				t.Errorf("%s, trial %d: no removal changed its own window (the test removes nothing)", name, trial)
			}
		}
	}

	// MaxOpenWindows without EmitFrom: window [0, 10 s) holds window
	// [10 s, 20 s) out, so removing its only event changes the other one.
	cfg := base()
	cfg.MaxOpenWindows = 1
	seqs := [][]Event{{
		{Partition: 0, Offset: 0, Time: 1_000, Arrival: 1_000, Group: "g", Bucket: -1},
		{Partition: 0, Offset: 1, Time: 11_000, Arrival: 1_100, Group: "g", Bucket: -1},
	}}
	full := runByStart(t, cfg, seqs, nil)
	less := runByStart(t, cfg, withoutEvent(seqs, 0, 0), nil)
	second := int64(10_000)
	if _, ok := full[second]; ok && bytes.Equal(full[second], less[second]) {
		t.Errorf("max open windows without EmitFrom: removing the first window's event did not change the second window")
	}
	if _, ok := less[second]; !ok {
		t.Errorf("max open windows without EmitFrom: the second window is missing without the first event: %v", less)
	}
}
