package windows

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

var testSeed = [32]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}

// countCfg: 10 s windows, 2 s lateness, counts only, generous bounds.
func countCfg() Config {
	return Config{
		Size: 10 * time.Second, AllowedLateness: 2 * time.Second,
		Count: true, MaxGroups: 1, MaxValues: 100,
	}
}

func mustNew(t testing.TB, cfg Config) *Tumbling {
	t.Helper()
	tu, err := New(cfg, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	return tu
}

// op is one step of a boundary scenario: exactly one of add, advance,
// assign, revoke or poll.
type op struct {
	add     *Event // Add this event and expect status want
	want    Status
	advance [2]int64 // Advance(partition, wm) if advance[1] != 0
	assign  []int32
	revoke  []int32
	poll    []int64 // Poll(0) and expect these window starts (nil: expect none)
}

// ev is an event at time ts on partition p that arrives when it happens.
func ev(p int32, ts int64) *Event { return evAt(p, ts, ts) }

// evAt is an event at time ts on partition p that arrives at arr.
func evAt(p int32, ts, arr int64) *Event {
	return &Event{Partition: p, Time: ts, Arrival: arr, Unit: "u", Bucket: -1}
}

func pollOp(starts ...int64) op { return op{poll: starts} }

func TestBoundaries(t *testing.T) {
	const s = 10_000 // window size in ms; lateness is 2_000
	tests := []struct {
		name string
		cfg  func(*Config)
		ops  []op
	}{
		{name: "event exactly at end belongs to the next window", ops: []op{
			{add: ev(0, 0)}, {add: ev(0, s)}, {add: ev(0, s+2_000)}, pollOp(0),
		}},
		{name: "window closes when the watermark reaches end + lateness, not before", ops: []op{
			{add: ev(0, 0)}, {add: ev(0, s+1_999)}, pollOp(),
			{add: ev(0, s+2_000)}, pollOp(0),
		}},
		{name: "out of order within lateness is accepted", ops: []op{
			{add: ev(0, 5_000)}, {add: ev(0, s+1_999)}, {add: evAt(0, 1, s+1_999)}, pollOp(),
			{add: ev(0, s+2_000)}, pollOp(0),
		}},
		{name: "event after close is late", ops: []op{
			{add: ev(0, 0)}, {add: ev(0, s+2_000)}, pollOp(0),
			{add: evAt(0, s-1, s+2_000), want: Late},
		}},
		{name: "an event arriving at its window's end + lateness is late before the window closes", ops: []op{
			{assign: []int32{0, 1}}, {add: ev(1, 0)}, {add: ev(0, s+2_000)},
			{add: evAt(0, 3_000, s+2_000), want: Late}, {add: evAt(0, 3_000, s+1_999)}, {add: ev(1, 3_000)}, pollOp(),
			{add: ev(1, s+2_000)}, pollOp(0),
		}},
		{name: "event times do not move the watermark", ops: []op{
			{add: evAt(0, 5*s, 0)}, {add: evAt(0, 1_000, 1_000)}, pollOp(),
			{add: evAt(0, 2_000, s+1_999)}, pollOp(), {advance: [2]int64{0, s + 2_000}}, pollOp(0),
		}},
		{name: "empty windows between data are emitted", ops: []op{
			{add: ev(0, 0)}, {add: ev(0, 3*s+1)}, {advance: [2]int64{0, 4*s + 2_000}}, pollOp(0, s, 2*s, 3*s),
		}},
		{name: "a poll before anything closes does not fix the first window", ops: []op{
			{assign: []int32{0, 1}}, {advance: [2]int64{1, 3_000}}, {add: ev(0, 5*s)}, pollOp(),
			{add: ev(1, 5_000)}, {advance: [2]int64{0, 7 * s}}, {advance: [2]int64{1, 7 * s}},
			pollOp(0, s, 2*s, 3*s, 4*s, 5*s),
		}},
		{name: "nothing before the first data window", ops: []op{
			{add: ev(0, 5*s)}, {advance: [2]int64{0, 7 * s}}, pollOp(5 * s),
		}},
		{name: "assigned partition without watermark holds windows open", ops: []op{
			{assign: []int32{0, 1}}, {add: ev(0, 0)}, {add: ev(0, 5*s)}, pollOp(),
			{advance: [2]int64{1, s + 2_000}}, pollOp(0),
		}},
		{name: "Advance stops an empty partition from holding windows open", ops: []op{
			{assign: []int32{0, 1}}, {add: ev(0, 0)}, {add: ev(0, 5*s)}, pollOp(),
			{advance: [2]int64{1, 5 * s}}, pollOp(0, s, 2*s, 3*s),
			// p1's later events arrive after the vouched time: an old one is
			// late by its own arrival.
			{add: evAt(1, 2*s, 5*s), want: Late}, {add: evAt(1, 4*s+500, 5*s)}, {add: ev(0, 6*s+3_000)}, pollOp(),
			{advance: [2]int64{1, 6 * s}}, pollOp(4 * s),
		}},
		{name: "the smallest partition watermark closes windows", ops: []op{
			{assign: []int32{0, 1}}, {add: ev(0, 0)}, {add: ev(1, 3*s)}, pollOp(),
			{advance: [2]int64{0, 2*s + 2_000}}, pollOp(0, s),
		}},
		{name: "revoked partition stops holding windows open and its events are dropped", ops: []op{
			{assign: []int32{0, 1}}, {add: ev(0, 0)}, {add: ev(0, 2*s)}, pollOp(),
			{revoke: []int32{1}}, pollOp(0),
			{add: ev(1, 2*s), want: Unassigned},
			{assign: []int32{1}}, {add: ev(1, 2*s)}, {add: ev(0, 3*s+2_000)}, pollOp(),
			{add: ev(1, 3*s+2_000)}, pollOp(s, 2*s),
		}},
		{name: "no partitions left: nothing closes", ops: []op{
			{add: ev(0, 0)}, {add: ev(0, 5*s)}, {revoke: []int32{0}}, pollOp(),
		}},
		{name: "epoch offset and negative times", cfg: func(c *Config) { c.Offset = 3 * time.Second }, ops: []op{
			{add: ev(0, 2_999)}, {add: ev(0, 3_000)}, {advance: [2]int64{0, 3_000 + 2_000}}, pollOp(-7_000),
		}},
		{name: "bad inputs are dropped without effect", cfg: func(c *Config) {
			c.Histogram, c.NumBuckets, c.MaxBuckets, c.MaxPerBucket = true, 3, 1, 1
			c.Sum, c.Lower, c.Upper = true, 0, 1
		}, ops: []op{
			{add: &Event{Time: maxTime + 1, Bucket: -1}, want: BadTime},
			{add: &Event{Time: 0, Arrival: minTime - 1, Bucket: -1}, want: BadTime},
			{add: &Event{Time: 0, Bucket: 3}, want: BadBucket},
			{add: &Event{Time: 0, Bucket: -2}, want: BadBucket},
			{add: &Event{Time: 0, Bucket: -1, HasValue: true, Value: math.NaN()}, want: BadValue},
			{add: &Event{Time: 0, Bucket: -1, HasValue: true, Value: math.Inf(-1)}, want: BadValue},
			{add: &Event{Time: 9_000, Bucket: 2, HasValue: true, Value: 7}},
			{advance: [2]int64{0, s + 2_000}}, pollOp(0),
		}},
		{name: "too many open windows", cfg: func(c *Config) { c.MaxOpenWindows = 2 }, ops: []op{
			{add: ev(0, 0)}, {add: ev(0, s)}, {add: ev(0, 2*s), want: TooManyWindows}, {add: ev(0, s+1)},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := countCfg()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			tu := mustNew(t, cfg)
			for i, o := range tc.ops {
				switch {
				case o.add != nil:
					if got, _ := tu.Add(*o.add); got != o.want {
						t.Fatalf("op %d: Add(t=%d, p=%d) = %v, want %v", i, o.add.Time, o.add.Partition, got, o.want)
					}
				case o.advance[1] != 0:
					if err := tu.Advance(int32(o.advance[0]), o.advance[1]); err != nil {
						t.Fatalf("op %d: %v", i, err)
					}
				case o.assign != nil:
					tu.AssignPartitions(o.assign...)
				case o.revoke != nil:
					tu.RevokePartitions(o.revoke...)
				default:
					var got []int64
					for _, w := range tu.Poll(0) {
						got = append(got, w.Start)
						if w.End != w.Start+s {
							t.Fatalf("op %d: window [%d, %d)", i, w.Start, w.End)
						}
					}
					if !reflect.DeepEqual(got, o.poll) {
						t.Fatalf("op %d: Poll = %v, want %v", i, got, o.poll)
					}
				}
			}
		})
	}
}

// The contents of boundary windows: data lands in the right window, empty
// windows carry no groups, and late events are counted in Stats.
func TestWindowContents(t *testing.T) {
	tu := mustNew(t, countCfg())
	add := func(ts int64, unit string) Status {
		s, _ := tu.Add(Event{Time: ts, Arrival: ts, Unit: unit, Group: "g", Bucket: -1})
		return s
	}
	add(0, "a")
	add(9_999, "b")
	add(10_000, "c")
	add(30_000, "d")
	tu.Advance(0, 42_000)
	ws := tu.Poll(0)
	if len(ws) != 4 {
		t.Fatalf("got %d windows, want 4", len(ws))
	}
	wantCounts := []int64{2, 1, 0, 1}
	for i, w := range ws {
		var c int64
		for _, g := range w.Groups {
			c += g.Count
		}
		if c != wantCounts[i] || w.Units != wantCounts[i] {
			t.Errorf("window %d: count %d, units %d, want %d", i, c, w.Units, wantCounts[i])
		}
	}
	if add(29_999, "e") != Late {
		t.Fatal("event for an emitted window accepted")
	}
	st := tu.Stats()
	if st.Events[Accepted] != 4 || st.Events[Late] != 1 || st.Windows != 4 {
		t.Errorf("stats %+v", st)
	}
}

func TestPollLimit(t *testing.T) {
	tu := mustNew(t, countCfg())
	tu.Add(*ev(0, 0))
	tu.Advance(0, 100_000)
	var starts []int64
	for {
		ws := tu.Poll(3)
		if len(ws) == 0 {
			break
		}
		if len(ws) > 3 {
			t.Fatalf("Poll(3) returned %d windows", len(ws))
		}
		for _, w := range ws {
			starts = append(starts, w.Start)
		}
	}
	if len(starts) != 9 || starts[8] != 80_000 {
		t.Fatalf("windows %v, want 0 … 80000", starts)
	}
}

func TestEmitFrom(t *testing.T) {
	tu := mustNew(t, countCfg())
	if err := tu.EmitFrom(25_000); err != nil {
		t.Fatal(err)
	}
	if s, _ := tu.Add(*ev(0, 15_000)); s != Late {
		t.Fatalf("event before EmitFrom: %v, want late", s)
	}
	tu.Add(*ev(0, 45_000))
	tu.Advance(0, 52_000)
	ws := tu.Poll(0)
	if len(ws) != 3 || ws[0].Start != 20_000 || ws[2].Start != 40_000 {
		t.Fatalf("got %d windows from %v", len(ws), ws)
	}
	if err := tu.EmitFrom(0); !errors.Is(err, ErrStarted) {
		t.Fatalf("EmitFrom after start: %v", err)
	}
}

func TestAdvanceErrors(t *testing.T) {
	tu := mustNew(t, countCfg())
	tu.RevokePartitions(3)
	if err := tu.Advance(3, 0); !errors.Is(err, ErrRevoked) {
		t.Errorf("Advance on revoked: %v", err)
	}
	if err := tu.Advance(0, math.MaxInt64); !errors.Is(err, ErrTime) {
		t.Errorf("Advance to MaxInt64: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := Config{
		Size: time.Minute, AllowedLateness: time.Second,
		Histogram: true, NumBuckets: 10, Count: true, Sum: true, Mean: true,
		MaxGroups: 2, MaxBuckets: 3, MaxPerBucket: 4, MaxValues: 5, Lower: -1, Upper: 1,
	}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"zero size", func(c *Config) { c.Size = 0 }, "size must be positive"},
		{"fractional ms", func(c *Config) { c.Size = time.Minute + time.Microsecond }, "size 1m0.000001s is not a whole number of milliseconds"},
		{"offset", func(c *Config) { c.Offset = time.Minute }, "offset must be in [0, size)"},
		{"lateness", func(c *Config) { c.AllowedLateness = -1 }, "allowed lateness must not be negative"},
		{"no aggregate", func(c *Config) { c.Histogram, c.Count, c.Sum, c.Mean = false, false, false, false }, "at least one aggregate"},
		{"buckets", func(c *Config) { c.NumBuckets = 0 }, "num buckets in [1, 65536], got 0"},
		{"max buckets", func(c *Config) { c.MaxBuckets = 0 }, "max buckets in"},
		{"per bucket", func(c *Config) { c.MaxPerBucket = 0 }, "max per bucket in"},
		{"groups", func(c *Config) { c.MaxGroups = 0 }, "max groups must be in"},
		{"values", func(c *Config) { c.MaxValues = 1 << 20 }, "max values in"},
		{"nan lower", func(c *Config) { c.Lower = math.NaN() }, "lower must be finite"},
		{"inf upper", func(c *Config) { c.Upper = math.Inf(1) }, "upper must be finite"},
		{"huge upper", func(c *Config) { c.Upper = 1e300 }, "upper must be finite with magnitude at most 2^53"},
		{"empty range", func(c *Config) { c.Lower, c.Upper = 1, 1 }, "lower must be below upper"},
		{"units", func(c *Config) { c.MaxUnits = -1 }, "max units must not be negative"},
		{"open groups with units", func(c *Config) { c.MaxOpenGroups = 5 }, "max open groups applies to event-level privacy only"},
		{"open windows", func(c *Config) { c.MaxOpenWindows = -1 }, "max open windows must not be negative"},
		{"skew", func(c *Config) { c.MaxSkew = -time.Second }, "max skew must not be negative"},
		{"skew ms", func(c *Config) { c.MaxSkew = time.Second + 1 }, "max skew 1.000000001s is not a whole number of milliseconds"},
		{"skew huge", func(c *Config) { c.MaxSkew = maxDuration + time.Millisecond }, "max skew must be at most"},
	}
	for _, tc := range tests {
		c := valid
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
			continue
		}
		if n := strings.Count(err.Error(), "windows: invalid config"); n != 1 {
			t.Errorf("%s: %d problems reported, want 1: %v", tc.name, n, err)
		}
	}
	// Several problems: one line each.
	err := Config{}.Validate()
	if n := strings.Count(err.Error(), "\n") + 1; n < 3 {
		t.Errorf("zero config: %d problems reported: %v", n, err)
	}
	if _, err := New(Config{}, testSeed); !errors.Is(err, ErrConfig) {
		t.Errorf("New with zero config: %v", err)
	}
}

func TestStatusString(t *testing.T) {
	if Late.String() != "late" || TooManyWindows.String() != "too_many_windows" || TooFarAhead.String() != "too_far_ahead" || Status(200).String() != "status(200)" {
		t.Error("status names")
	}
}
