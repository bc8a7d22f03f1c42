package operator

// Tests of the memory guards (windows.max_open_windows, bounds.max_units,
// windows.max_open_groups) without a broker: config validation, the caps
// reaching the windows package, drops counted in
// dpstream_events_skipped_total, and the calibration following
// windows.Sensitivities with a unit cap. All deterministic (fixed streams,
// fixed key): no statistical false-failure rate.

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/windows"
)

// feeder runs messages through an operator's consume path (decode, core,
// metrics) on partitions 0 … parts−1 of topic "in", without a broker,
// releasing windows from testBase on. Like the Kafka loop, it polls closed
// windows when an event hits windows.max_open_windows.
type feeder struct {
	op     *Operator
	co     *core
	next   [2]int64
	closed []windows.Window // windows closed by makeRoom
}

func newFeeder(t *testing.T, c Config, parts int) *feeder {
	t.Helper()
	c.Observability.SensitiveMetrics = true // the tests read the skip counters
	op, err := New(c, WithKey(testKey()), WithRegistry(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	co, err := newCore(c, op.plan, op.key, testBase)
	if err != nil {
		t.Fatal(err)
	}
	var tps []tp
	for i := range parts {
		tps = append(tps, tp{"in", i})
	}
	if err := co.assign(tps); err != nil {
		t.Fatal(err)
	}
	return &feeder{op: op, co: co}
}

// feed consumes one event on a partition (0 or 1) that arrives at its
// event time, and returns the number of windows open after it.
func (f *feeder) feed(part int, e testEvent) int64 { return f.feedAt(part, e, e.time) }

// feedAt consumes one event on a partition (0 or 1) that arrives at
// arrival (Unix ms; 0: a record without a timestamp), and returns the
// number of windows open after it.
func (f *feeder) feedAt(part int, e testEvent, arrival int64) int64 {
	it := item{m: kafka.Message{Topic: "in", Partition: part, Offset: f.next[part], Value: e.encode(int(f.next[part]))}}
	if arrival != 0 {
		it.m.Time = time.UnixMilli(arrival)
	}
	f.next[part]++
	decode(f.co.dec, &it)
	var dlq []kafka.Message
	f.op.consume(f.co, &it, &dlq, func() bool {
		ws := f.co.poll()
		f.closed = append(f.closed, ws...)
		return len(ws) > 0
	})
	return f.co.agg.Memory().Windows
}

func (f *feeder) skipped(t *testing.T, reason string) float64 {
	return counter(t, f.op.Registry(), "dpstream_events_skipped_total", reason)
}

func TestMemoryGuardDefaultsAndValidation(t *testing.T) {
	if got := Default().Windows.MaxOpenWindows; got != DefaultMaxOpenWindows || got <= 0 {
		t.Errorf("default windows.max_open_windows = %d, want %d (finite)", got, DefaultMaxOpenWindows)
	}
	if d := Default(); d.Bounds.MaxUnits != 0 || d.Windows.MaxOpenGroups != 0 {
		t.Errorf("default max_units %d, max_open_groups %d, want 0 (no cap)", d.Bounds.MaxUnits, d.Windows.MaxOpenGroups)
	}
	base := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g") // size 10s, lateness 1s, idle 2s, max_skew 5m, unit_field "user"
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no window cap", func(c *Config) { c.Windows.MaxOpenWindows = 0 }, ""},
		// ⌈(300s + 1s + 2s)/10s⌉ + 2 = 33 is the smallest cap with max_skew 5m.
		{"smallest window cap", func(c *Config) { c.Windows.MaxOpenWindows = 33 }, ""},
		{"window cap below max_skew", func(c *Config) { c.Windows.MaxOpenWindows = 32 }, "windows.max_open_windows: 32 is below the 33 windows"},
		// Without max_skew: ⌈(1s + 2s)/10s⌉ + 2 = 3.
		{"smallest window cap without max_skew", func(c *Config) { c.Windows.MaxSkew, c.Windows.MaxOpenWindows = 0, 3 }, ""},
		{"window cap below lateness", func(c *Config) { c.Windows.MaxSkew, c.Windows.MaxOpenWindows = 0, 2 }, "windows.max_open_windows: 2 is below the 3 windows"},
		{"lateness of 25 windows", func(c *Config) {
			c.Windows.MaxSkew, c.Windows.AllowedLateness, c.Windows.MaxOpenWindows = 0, 250*time.Second, 27
		}, "windows.max_open_windows: 27 is below the 28 windows"}, // ⌈252/10⌉ + 2
		{"idle timeout of 10 windows", func(c *Config) {
			c.Windows.MaxSkew, c.Windows.IdleTimeout, c.Windows.MaxOpenWindows = 0, 100*time.Second, 12
		}, "windows.max_open_windows: 12 is below the 13 windows"}, // ⌈101/10⌉ + 2
		{"negative window cap", func(c *Config) { c.Windows.MaxOpenWindows = -1 }, "windows.max_open_windows: must not be negative"},
		{"unit cap", func(c *Config) { c.Bounds.MaxUnits = 1000 }, ""},
		{"negative unit cap", func(c *Config) { c.Bounds.MaxUnits = -5 }, "bounds.max_units: must not be negative"},
		{"unit cap without units", func(c *Config) { c.Schema.UnitField = ""; c.Bounds.MaxUnits = 10 }, "bounds.max_units: needs schema.unit_field"},
		{"group cap with units", func(c *Config) { c.Windows.MaxOpenGroups = 10 }, "windows.max_open_groups: applies only to event-level privacy"},
		{"group cap event level", func(c *Config) { c.Schema.UnitField = ""; c.Windows.MaxOpenGroups = 10 }, ""},
		{"negative group cap", func(c *Config) { c.Windows.MaxOpenGroups = -1 }, "windows.max_open_groups: must not be negative"},
	} {
		c := base
		tc.set(&c)
		ps := c.Problems()
		checkOneProblem(t, tc.name, ps, tc.want)
		if len(ps) == 0 {
			w := windowsConfig(c, len(testCategories))
			if w.MaxOpenWindows != c.Windows.MaxOpenWindows || w.MaxUnits != c.Bounds.MaxUnits || w.MaxOpenGroups != c.Windows.MaxOpenGroups {
				t.Errorf("%s: windowsConfig caps (%d, %d, %d), want the config's", tc.name, w.MaxOpenWindows, w.MaxUnits, w.MaxOpenGroups)
			}
			if err := w.Validate(); err != nil {
				t.Errorf("%s: valid operator config gives invalid windows config: %v", tc.name, err)
			}
		}
	}
}

// TestMaxOpenWindowsDropsFarFuture: windows.max_open_windows counts from
// the first window not yet published. An event with a bogus far-future
// time (max_skew off) lands beyond it and is dropped and counted as
// skipped "too_many_windows"; a unit opening one window after another
// never holds more than the cap; a backlog read between two ticks closes
// windows instead of dropping events.
func TestMaxOpenWindowsDropsFarFuture(t *testing.T) {
	const year = int64(365 * 24 * 3600 * 1000) // ms
	t.Run("one far-future event", func(t *testing.T) {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Windows.AllowedLateness = 10 * time.Second // size 10s, idle 2s: ⌈12/10⌉ + 2 = 4 windows at most
		c.Windows.MaxOpenWindows = 4
		c.Windows.MaxSkew = 0 // the cap alone: max_skew would drop the event first (TestMaxSkewDropsFarFuture)
		f := newFeeder(t, c, 2)
		f.feed(1, testEvent{"u0", "north", "a", 1, testBase + 1000}) // holds the watermark
		// Four windows open on partition 0.
		for i, off := range []int64{1000, 11000, 21000, 31000} {
			if n := f.feed(0, testEvent{"u1", "north", "a", 1, testBase + off}); n != int64(i+1) {
				t.Fatalf("after event %d: %d windows open, want %d", i, n, i+1)
			}
		}
		if n := f.feedAt(0, testEvent{"u2", "north", "a", 1, testBase + 1000*year}, testBase+31000); n != 4 {
			t.Errorf("far-future event: %d windows open, want 4 (the cap)", n)
		}
		if got := f.co.agg.Stats().Events[windows.TooManyWindows]; got != 1 {
			t.Errorf("windows counted %d too_many_windows, want 1", got)
		}
		if got := f.skipped(t, windows.TooManyWindows.String()); got != 1 {
			t.Errorf(`events_skipped_total{reason="too_many_windows"} = %v, want 1`, got)
		}
		if got := counter(t, f.op.Registry(), "dpstream_events_decoded_total", ""); got != 6 {
			t.Errorf("events_decoded_total = %v, want 6 (the dropped event decoded fine)", got)
		}
		if len(f.closed) != 0 {
			t.Errorf("%d windows closed, want none (partition 1 holds the watermark)", len(f.closed))
		}
	})
	t.Run("one unit opening windows ahead, at the default cap", func(t *testing.T) {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Windows.MaxOpenWindows = DefaultMaxOpenWindows
		c.Windows.MaxSkew = 0 // else its events beyond 5 minutes ahead are too_far_ahead
		f := newFeeder(t, c, 2)
		f.feed(1, testEvent{"u0", "north", "a", 1, testBase}) // holds the watermark
		// 100 events, each in the next window, all arriving at testBase:
		// nothing can close.
		const n = 100
		var peak int64
		for i := range n {
			peak = max(peak, f.feedAt(0, testEvent{"u", "north", "a", 1, testBase + int64(i)*testSize.Milliseconds()}, testBase))
		}
		if peak != DefaultMaxOpenWindows {
			t.Errorf("peak open windows %d, want %d (the cap)", peak, DefaultMaxOpenWindows)
		}
		want := float64(n - DefaultMaxOpenWindows) // windows 0 … 63 after the first unpublished one are open
		if got := f.skipped(t, "too_many_windows"); got != want {
			t.Errorf(`events_skipped_total{reason="too_many_windows"} = %v, want %v`, got, want)
		}
	})
	t.Run("catch-up closes windows instead of dropping", func(t *testing.T) {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Windows.MaxSkew = 0
		c.Windows.MaxOpenWindows = 3 // the smallest for size 10s, lateness 1s, idle 2s without max_skew
		f := newFeeder(t, c, 1)
		// A backlog of 100 consecutive windows consumed between two ticks:
		// each new window finds the older ones closable, so the cap is met
		// by closing them, and nothing is dropped.
		for i := range 100 {
			if n := f.feed(0, testEvent{"u", "north", "a", 1, testBase + int64(i)*testSize.Milliseconds() + 5000}); n > 3 {
				t.Fatalf("event %d: %d windows open, cap 3", i, n)
			}
		}
		if got := f.skipped(t, "too_many_windows"); got != 0 {
			t.Errorf(`events_skipped_total{reason="too_many_windows"} = %v, want 0`, got)
		}
		if len(f.closed) < 97 {
			t.Errorf("%d windows closed to make room, want ≥ 97", len(f.closed))
		}
	})
}

// TestMaxUnitsDropsCounted: with bounds.max_units, each window keeps at
// most that many units, and the events of the others are counted as
// skipped "unit_cap" when the window closes.
func TestMaxUnitsDropsCounted(t *testing.T) {
	const maxUnits = 10
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Bounds.MaxUnits = maxUnits
	f := newFeeder(t, c, 1)
	s := genStream(5, 3, 60) // 3 windows of 60 users
	for _, e := range s.events {
		f.feed(0, e)
	}
	// The sentinel's arrival closes the 3 windows.
	f.feed(0, testEvent{"sentinel", "north", "a", 0, testBase + 3*testSize.Milliseconds() + c.Windows.AllowedLateness.Milliseconds()})
	ws := f.co.poll()
	f.op.observeClosed(ws)
	if len(ws) < 3 {
		t.Fatalf("%d windows closed, want ≥ 3", len(ws))
	}
	var dropped int64
	for _, w := range ws {
		if w.Units > maxUnits {
			t.Errorf("window %d kept %d units, cap %d", w.Start, w.Units, maxUnits)
		}
		if !w.Sensitivity.ReplaceOne {
			t.Errorf("window %d: sensitivities not replace-one under a unit cap", w.Start)
		}
		dropped += w.Drops.UnitCap
	}
	if dropped == 0 {
		t.Fatal("no unit_cap drops with 60 users per window and a cap of 10")
	}
	if got := f.skipped(t, "unit_cap"); got != float64(dropped) {
		t.Errorf(`events_skipped_total{reason="unit_cap"} = %v, want %d`, got, dropped)
	}
}

// TestMaxUnitsReplaceOneCalibration: bounds.max_units switches the plan to
// windows' replace-one sensitivities. Expected (L0, L∞) per part are
// derived by hand from the formulas in windows.Config.Sensitivities' doc
// for testConfig's bounds (G=1, B=1, P=3, V=3, values in [0, 10], so
// mid = 5, h = 5): add/remove L0 = k, L∞ = max(−lo, hi); replace-one
// L0 = 2k, L∞ = hi − lo. Every scale grows.
func TestMaxUnitsReplaceOneCalibration(t *testing.T) {
	type ls struct{ l0, linf float64 }
	want := map[bool]map[string]ls{
		false: {"count.count": {1, 3}, "histogram.counts": {1, 3}, "sum.sum": {1, 30}, "mean.sum": {1, 15}, "mean.count": {1, 3}},
		true:  {"count.count": {2, 3}, "histogram.counts": {2, 3}, "sum.sum": {2, 30}, "mean.sum": {2, 30}, "mean.count": {2, 3}},
	}
	scales := map[bool]map[string]float64{}
	for _, capped := range []bool{false, true} {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		if capped {
			c.Bounds.MaxUnits = 1000
		}
		op, err := New(c, WithKey(testKey()), WithRegistry(prometheus.NewRegistry()))
		if err != nil {
			t.Fatal(err)
		}
		p := op.plan
		if p.sens.ReplaceOne != capped {
			t.Errorf("capped=%v: plan sensitivities ReplaceOne = %v", capped, p.sens.ReplaceOne)
		}
		if strings.Contains(p.note, "replacing one unit") != capped {
			t.Errorf("capped=%v: note %q", capped, p.note)
		}
		scales[capped] = map[string]float64{}
		seen := 0
		for _, ap := range p.aggs {
			for _, n := range ap.noises {
				w, ok := want[capped][n.part]
				if !ok {
					t.Errorf("unexpected part %q", n.part)
					continue
				}
				seen++
				if n.sens.L0 != w.l0 || n.sens.Linf != w.linf {
					t.Errorf("capped=%v %s: (L0, L∞) = (%g, %g), want (%g, %g)", capped, n.part, n.sens.L0, n.sens.Linf, w.l0, w.linf)
				}
				scales[capped][n.part] = n.scale
			}
		}
		if seen != len(want[capped]) {
			t.Errorf("capped=%v: %d parts, want %d", capped, seen, len(want[capped]))
		}
	}
	for part, s := range scales[false] {
		if !(scales[true][part] > s) {
			t.Errorf("%s: scale %g with max_units, %g without; want more noise with the cap", part, scales[true][part], s)
		}
	}
}

// checkOneProblem fails unless ps is empty (want == "") or holds exactly one
// problem starting with want.
func checkOneProblem(t *testing.T, name string, ps []string, want string) {
	t.Helper()
	switch {
	case want == "" && len(ps) > 0:
		t.Errorf("%s: unexpected problems %q", name, ps)
	case want != "" && (len(ps) != 1 || !strings.HasPrefix(ps[0], want)):
		t.Errorf("%s: problems %q, want exactly one starting %q", name, ps, want)
	}
}
