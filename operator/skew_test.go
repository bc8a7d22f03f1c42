package operator

// Tests of windows.max_skew and of arrival times without a broker:
// defaults, validation, the mapping onto windows.Config, loading from the
// environment, a far-future event dropped and counted as skipped
// "too_far_ahead", one unit's skewed event leaving the other units'
// releases unchanged, records without a timestamp, and partitions read to
// their end. All deterministic (fixed events, fixed key): no
// false-failure rate.

import (
	"bytes"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

func TestMaxSkewConfig(t *testing.T) {
	if got := Default().Windows.MaxSkew; got != DefaultMaxSkew || got <= 0 {
		t.Errorf("default windows.max_skew = %v, want %v (on)", got, DefaultMaxSkew)
	}
	if err := validConfig().Validate(); err != nil {
		t.Errorf("the default max_skew and max_open_windows do not fit together: %v", err)
	}
	base := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g") // size 10s, lateness 1s, idle 2s, max_open_windows 64
	for _, tc := range []struct {
		name string
		skew time.Duration
		want string // the one problem expected, "" for none
	}{
		{"default", DefaultMaxSkew, ""},
		{"off", 0, ""},
		{"below size (no lower bound any more)", time.Second, ""},
		// ⌈(617s + 1s + 2s)/10s⌉ + 2 = 64: the largest with the default cap.
		{"the largest the default cap allows", 617 * time.Second, ""},
		{"too large for the default cap", 618 * time.Second, "windows.max_open_windows: 64 is below the 65 windows"},
		{"negative", -time.Second, "windows.max_skew: must not be negative"},
		{"sub-millisecond", time.Minute + time.Microsecond, "windows.max_skew: 1m0.000001s is not a whole number of milliseconds"},
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
// in the year 9999 arriving now is dropped and counted as skipped
// "too_far_ahead"; it opens no window, and the next normal event is
// accepted, not late.
func TestMaxSkewDropsFarFuture(t *testing.T) {
	const farFuture = 253402300799999 // 9999-12-31T23:59:59.999Z in Unix ms, the schema's default limit
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	f := newFeeder(t, c, 1)
	if n := f.feed(0, testEvent{"u0", "north", "a", 1, testBase + 1000}); n != 1 {
		t.Fatalf("%d windows open, want 1", n)
	}
	if n := f.feedAt(0, testEvent{"u1", "north", "a", 1, farFuture}, testBase+1000); n != 1 {
		t.Errorf("far-future event: %d windows open, want 1", n)
	}
	if got := f.skipped(t, windows.TooFarAhead.String()); got != 1 {
		t.Errorf(`events_skipped_total{reason="too_far_ahead"} = %v, want 1`, got)
	}
	if wm, ok := f.co.agg.Watermark(); !ok || wm != testBase+1000 {
		t.Errorf("watermark %d (%v), want %d: the arrival times alone set it", wm, ok, testBase+1000)
	}
	f.feed(0, testEvent{"u2", "north", "a", 1, testBase + 2000})
	st := f.co.agg.Stats()
	if st.Events[windows.Accepted] != 2 || st.Events[windows.Late] != 0 || st.Events[windows.TooFarAhead] != 1 {
		t.Errorf("statuses %v: want 2 accepted, 0 late, 1 too far ahead", st.Events)
	}
	if got := counter(t, f.op.Registry(), "dpstream_events_decoded_total", ""); got != 3 {
		t.Errorf("events_decoded_total = %v, want 3 (the dropped event decoded fine)", got)
	}
	if ws := f.co.poll(); len(ws) != 0 {
		t.Errorf("%d windows closed, want none", len(ws))
	}
}

// TestSkewedEventDoesNotChangeOthersReleases: one unit's single event
// stamped minutes ahead of the stream (well within windows.max_skew) leaves
// the releases of every window the other units' events fall in byte for
// byte unchanged (the noise is keyed by the release, so equal true values
// give equal bytes). Under the old rule it moved the partition's watermark
// and every later event of the other units was dropped as late.
func TestSkewedEventDoesNotChangeOthersReleases(t *testing.T) {
	s := genStream(21, 4, 60)
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	msgs := s.messages(0, c.Windows.AllowedLateness)
	_, ref, _, _ := runCore(t, c, msgs, map[string]int64{}, noClosedWindow)
	// user-7 sends one more event, stamped 5 minutes ahead (within the
	// default max_skew of the arrival), right after the 20th message.
	skewed := testEvent{"user-7", testRegions[7%len(testRegions)], "a", 1, s.events[19].time + 5*60_000 - testArrivalDelay}
	extra := kafka.Message{Key: []byte("user-7"), Value: skewed.encode(1), Time: msgs[19].Time}
	with := append(append(append([]kafka.Message{}, msgs[:20]...), extra), msgs[20:]...)
	_, got, _, _ := runCore(t, c, with, map[string]int64{}, noClosedWindow)
	n := 0
	for k, b := range ref {
		r, err := schema.DecodeRelease(b)
		if err != nil {
			t.Fatal(err)
		}
		if r.WindowStart >= testBase+4*testSize.Milliseconds() {
			continue // the skewed event's own window, or later
		}
		n++
		if !bytes.Equal(got[k], b) {
			t.Errorf("release %s changed by one unit's skewed event", k)
		}
	}
	if n != 4*3*4 {
		t.Errorf("compared %d releases, want 48 (4 windows × 3 groups × 4 aggregates)", n)
	}
}

// TestRecordWithoutTimestamp: a record without a usable timestamp (Kafka
// timestamp ≤ 0, which kafka-go reports as the zero time) has no trusted
// arrival time: it is skipped and counted as "no_record_timestamp", sent
// to the dead-letter topic when one is configured, and nothing crashes or
// reaches the windows; its offset still advances the commit.
func TestRecordWithoutTimestamp(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Kafka.DeadLetterTopic = "dead"
	f := newFeeder(t, c, 1)
	it := item{m: kafka.Message{Topic: "in", Partition: 0, Offset: 0, Value: testEvent{"u0", "north", "a", 1, testBase}.encode(1)}}
	decode(f.co.dec, &it)
	var dlq []kafka.Message
	f.op.consume(f.co, &it, &dlq, nil)
	if got := f.skipped(t, noTimestampReason); got != 1 {
		t.Errorf(`events_skipped_total{reason=%q} = %v, want 1`, noTimestampReason, got)
	}
	if len(dlq) != 1 || string(dlq[0].Headers[0].Value) != noTimestampReason {
		t.Errorf("dead letters %v, want the record with reason %s", dlq, noTimestampReason)
	}
	if st := f.co.agg.Stats(); st.Events != [len(st.Events)]int64{} {
		t.Errorf("the record reached the windows: %v", st.Events)
	}
	if got := f.co.commitOffsets()["in"][0]; got != 1 {
		t.Errorf("commit offset %d, want 1 (past the skipped record)", got)
	}
}

// TestCaughtUpPartitionAdvances: a partition without new records holds
// the windows open until its fetcher reports it read to its end (a
// caught-up marker); at the next tick it moves to the marker's fetch time
// − idle_timeout, and the windows the other partition's arrivals passed
// close. A later event on it arrives after that time and is judged by its
// own arrival: late for a closed window, accepted for an open one.
func TestCaughtUpPartitionAdvances(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g") // size 10s, lateness 1s, idle 2s
	f := newFeeder(t, c, 2)
	for i := range 5 {
		f.feed(0, testEvent{"u", "north", "a", 1, testBase + int64(i)*testSize.Milliseconds() + 500})
	}
	if ws := f.co.poll(); len(ws) != 0 {
		t.Fatalf("%d windows closed while partition 1 has no watermark", len(ws))
	}
	// Partition 1 read to its end by a fetch issued at testBase + 33 s:
	// advanced to 31 s, which closes windows 0, 1 and 2 (ends + 1 s ≤ 31 s).
	marker := item{m: kafka.Message{Topic: "in", Partition: 1, Offset: 0}, caughtUp: time.UnixMilli(testBase + 33_000)}
	var dlq []kafka.Message
	f.op.consume(f.co, &marker, &dlq, nil)
	if ws := f.co.poll(); len(ws) != 0 {
		t.Fatalf("%d windows closed before the tick applied the marker", len(ws))
	}
	f.co.applyCaughtUp() // as the Kafka loop does on a tick, after polling
	ws := f.co.poll()
	if len(ws) != 3 || ws[0].Start != testBase || ws[2].Start != testBase+20_000 {
		t.Fatalf("closed %d windows, want [0 s, 10 s, 20 s)", len(ws))
	}
	if got := counter(t, f.op.Registry(), "dpstream_events_in_total", "in"); got != 5 {
		t.Errorf("events_in_total = %v, want 5 (markers are not messages)", got)
	}
	// Later records of partition 1 arrive after the fetch.
	f.feedAt(1, testEvent{"v", "north", "a", 1, testBase + 15_000}, testBase+33_500)
	f.feedAt(1, testEvent{"w", "north", "a", 1, testBase + 30_500}, testBase+33_500)
	st := f.co.agg.Stats()
	if st.Events[windows.Late] != 1 || st.Events[windows.Accepted] != 6 {
		t.Errorf("statuses %v: want the event of a closed window late, the other accepted", st.Events)
	}
}
