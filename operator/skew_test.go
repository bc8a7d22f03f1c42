package operator

// Tests of windows.max_skew without a broker: defaults, validation, the
// mapping onto windows.Config, loading from the environment, and a
// far-future event dropped and counted as skipped "too_far_ahead". All
// deterministic (fixed events, fixed key): no false-failure rate.

import (
	"testing"
	"time"

	"github.com/dpstream/dpstream/windows"
)

func TestMaxSkewConfig(t *testing.T) {
	if got := Default().Windows.MaxSkew; got != DefaultMaxSkew || got <= 0 {
		t.Errorf("default windows.max_skew = %v, want %v (on)", got, DefaultMaxSkew)
	}
	base := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g") // size 10s, lateness 1s
	for _, tc := range []struct {
		name string
		skew time.Duration
		want string // the one problem expected, "" for none
	}{
		{"default", DefaultMaxSkew, ""},
		{"off", 0, ""},
		{"exactly size + lateness", 11 * time.Second, ""},
		{"below size + lateness", 11*time.Second - time.Millisecond, "windows.max_skew: 10.999s is below size + allowed_lateness (11s)"},
		{"negative", -time.Second, "windows.max_skew: must not be negative"},
		{"sub-millisecond", time.Hour + time.Microsecond, "windows.max_skew: 1h0m0.000001s is not a whole number of milliseconds"},
	} {
		c := base
		c.Windows.MaxSkew = tc.skew
		ps := c.Problems()
		checkOneProblem(t, tc.name, ps, tc.want)
		if len(ps) == 0 {
			w := windowsConfig(c, len(testCategories))
			if w.MaxSkew != tc.skew {
				t.Errorf("%s: windowsConfig MaxSkew %v, want %v", tc.name, w.MaxSkew, tc.skew)
			}
			if err := w.Validate(); err != nil {
				t.Errorf("%s: valid operator config gives invalid windows config: %v", tc.name, err)
			}
		}
	}
	t.Setenv("DPSTREAM_WINDOWS_MAX_SKEW", "48h")
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Windows.MaxSkew != 48*time.Hour {
		t.Errorf("DPSTREAM_WINDOWS_MAX_SKEW=48h loaded as %v", c.Windows.MaxSkew)
	}
}

// TestMaxSkewDropsFarFuture: with the default windows.max_skew, one event
// in the year 9999 on a partition with a watermark is dropped and counted
// as skipped "too_far_ahead"; it opens no window and leaves the watermark
// alone, so the next normal event is accepted, not late.
func TestMaxSkewDropsFarFuture(t *testing.T) {
	const farFuture = 253402300799999 // 9999-12-31T23:59:59.999Z in Unix ms, the schema's default limit
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	f := newFeeder(t, c, 1)
	if n := f.feed(0, testEvent{"u0", "north", "a", 1, testBase + 1000}); n != 1 {
		t.Fatalf("%d windows open, want 1", n)
	}
	if n := f.feed(0, testEvent{"u1", "north", "a", 1, farFuture}); n != 1 {
		t.Errorf("far-future event: %d windows open, want 1", n)
	}
	if got := f.skipped(t, windows.TooFarAhead.String()); got != 1 {
		t.Errorf(`events_skipped_total{reason="too_far_ahead"} = %v, want 1`, got)
	}
	if wm, ok := f.co.agg.Watermark(); !ok || wm != testBase+1000 {
		t.Errorf("watermark %d (%v), want %d: the dropped event moved it", wm, ok, testBase+1000)
	}
	f.feed(0, testEvent{"u2", "north", "a", 1, testBase + 2000})
	st := f.co.agg.Stats()
	if st.Events[windows.Accepted] != 2 || st.Events[windows.Late] != 0 || st.Events[windows.TooFarAhead] != 1 {
		t.Errorf("statuses %v: want 2 accepted, 0 late, 1 too far ahead", st.Events)
	}
	if got := counter(t, f.op.Registry(), "dpstream_events_decoded_total", ""); got != 3 {
		t.Errorf("events_decoded_total = %v, want 3 (the dropped event decoded fine)", got)
	}
	if ws := f.co.poll(time.UnixMilli(testBase)); len(ws) != 0 {
		t.Errorf("%d windows closed, want none", len(ws))
	}
}
