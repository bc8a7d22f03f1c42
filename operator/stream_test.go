package operator

// A known synthetic stream for the operator's tests: users in regions
// emitting readings with a category and a value, kept within the
// contribution bounds so that the true aggregates are exactly computable
// here, independently of the windows package.

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
)

var (
	testRegions    = []string{"east", "north", "south"}
	testCategories = []string{"a", "b", "c"}
)

const (
	testSize  = 10 * time.Second
	testLower = 0.0
	testUpper = 10.0
	// testBase is 2024-01-01T00:00:00Z in unix ms, a window boundary.
	testBase = int64(1704067200000)
)

type testEvent struct {
	user, region, cat string
	value             float64
	time              int64
}

// truth is the exact aggregate of one region in one window.
type truth struct {
	count  int64
	hist   [3]int64
	sum    float64
	values int64
}

type testStream struct {
	windows int
	events  []testEvent // in time order
	truth   map[int64]map[string]*truth
}

// genStream makes nWindows windows of events from nUsers users (fixed
// seed). Each user has one region; per window it sends 1–3 events, all of
// one category, values in [0, 10]: within max_groups 1, max_buckets 1,
// max_per_bucket 3, max_values 3.
func genStream(seed uint64, nWindows, nUsers int) testStream {
	r := rand.New(rand.NewPCG(seed, 0xd9))
	s := testStream{windows: nWindows, truth: map[int64]map[string]*truth{}}
	size := testSize.Milliseconds()
	for w := range nWindows {
		start := testBase + int64(w)*size
		s.truth[start] = map[string]*truth{}
		for _, reg := range testRegions {
			s.truth[start][reg] = &truth{}
		}
		for u := range nUsers {
			user := "user-" + strconv.Itoa(u)
			region := testRegions[u%len(testRegions)]
			ci := r.IntN(len(testCategories))
			k := 1 + r.IntN(3)
			for range k {
				v := math.Round(r.Float64()*testUpper*100) / 100
				t := start + r.Int64N(size)
				s.events = append(s.events, testEvent{user, region, testCategories[ci], v, t})
				tr := s.truth[start][region]
				tr.count++
				tr.hist[ci]++
				tr.sum += v
				tr.values++
			}
		}
	}
	slices.SortStableFunc(s.events, func(a, b testEvent) int { return int(a.time - b.time) })
	return s
}

// encode returns the event as msgpack (odd i) or JSON (even i).
func (e testEvent) encode(i int) []byte {
	m := map[string]any{"ts": e.time, "user": e.user, "region": e.region, "cat": e.cat, "v": e.value, "extra": "ignored"}
	if i%2 == 0 {
		b, _ := json.Marshal(m)
		return b
	}
	b, _ := msgpack.Marshal(m)
	return b
}

// badInputs are messages the decoder must reject, with their reasons.
func badInputs() ([][]byte, []schema.Reason) {
	nan, _ := msgpack.Marshal(map[string]any{"ts": testBase + 1, "user": "x", "region": "north", "cat": "a", "v": math.NaN()})
	unknown, _ := msgpack.Marshal(map[string]any{"ts": testBase + 1, "user": "x", "region": "north", "cat": "zzz", "v": 1.0})
	missing, _ := json.Marshal(map[string]any{"user": "x", "region": "north", "cat": "a", "v": 1.0})
	notMap, _ := msgpack.Marshal([]int{1, 2, 3})
	return [][]byte{nan, unknown, missing, notMap, []byte("{not json")},
		[]schema.Reason{schema.ReasonNaNOrInf, schema.ReasonUnknownCategory, schema.ReasonMissingField, schema.ReasonNotAMap, schema.ReasonMalformed}
}

// testArrivalDelay is how long after its event time each message of a
// test stream reaches the broker: its record timestamp (arrival time) is
// the event time plus this.
const testArrivalDelay = 200 // ms

// messages returns the stream as Kafka messages keyed by user, each with
// its record timestamp (Time) set to its arrival time, the event time
// plus testArrivalDelay (monotone: the events are in time order), with the
// bad inputs mixed in every badEvery events (0: none, arriving with the
// event before them), followed by one sentinel event at the end of the
// last window + lateness. On one partition the sentinel's arrival closes
// the last window; with more, the partitions without it close it once the
// operator has read them to their end (core.caughtUp), at a tick after the
// one that published the windows the data closed.
func (s testStream) messages(badEvery int, lateness time.Duration) []kafka.Message {
	bad, _ := badInputs()
	var out []kafka.Message
	for i, e := range s.events {
		at := time.UnixMilli(e.time + testArrivalDelay)
		out = append(out, kafka.Message{Key: []byte(e.user), Value: e.encode(i), Time: at})
		if badEvery > 0 && i%badEvery == badEvery-1 {
			b := bad[(i/badEvery)%len(bad)]
			out = append(out, kafka.Message{Key: []byte(e.user), Value: b, Time: at})
		}
	}
	end := testBase + int64(s.windows)*testSize.Milliseconds() + lateness.Milliseconds()
	sentinel := testEvent{"sentinel", "north", "a", 0, end}
	out = append(out, kafka.Message{Key: []byte("sentinel"), Value: sentinel.encode(1), Time: time.UnixMilli(end + testArrivalDelay)})
	testStreamEnd.Store(end + testArrivalDelay)
	return out
}

// testStreamEnd is the largest record timestamp (arrival time) of the
// messages returned by the latest call of testStream.messages: the end of
// the simulated time of the stream a test produces (tests do not run in
// parallel).
var testStreamEnd atomic.Int64

// testClock is the operator's clock in tests with a broker: it starts
// idle_timeout after the end of the latest test stream (testStreamEnd, the
// sentinel's arrival, as if the stream had just been produced live) and
// runs testSlowdown times slower than real time. A partition read to its
// end then moves to the sentinel's arrival time and stays there, so
// exactly the stream's windows close (by the records' arrival times and
// the partitions' ends), never a later empty one however long the test
// takes (the next would need about 10⁴ s); a restart without
// windows.start releases only windows after the stream. Commits, every
// commit_interval of this clock, then happen in effect only when a run
// drains.
func testClock(idle time.Duration) func() time.Time { return slowClock(idle, testSlowdown) }

// testSlowdown is how many times slower than real time testClock runs.
const testSlowdown = 1000

// slowClock is testClock running slowdown times slower than real time (1:
// at the real rate, for the benchmark's publish latencies).
func slowClock(idle time.Duration, slowdown time.Duration) func() time.Time {
	start := time.UnixMilli(testStreamEnd.Load()).Add(idle)
	t0 := time.Now()
	return func() time.Time { return start.Add(time.Since(t0) / slowdown) }
}

// testConfig is the operator config the stream is made for.
func testConfig(brokers []string, input, output, group string) Config {
	c := Default()
	c.Kafka.Brokers = brokers
	c.Kafka.InputTopics = []string{input}
	c.Kafka.OutputTopic = output
	c.Kafka.GroupID = group
	c.Kafka.ReleaseNamespace = "test"
	c.Kafka.Instance = "test-instance"
	c.Kafka.CommitInterval = 200 * time.Millisecond
	c.Kafka.RetryBackoff = 100 * time.Millisecond
	c.Kafka.SessionTimeout = 10 * time.Second
	c.Schema.TimeField = "ts"
	c.Schema.UnitField = "user"
	c.Schema.GroupBy = []string{"region"}
	c.Schema.Histogram = &schema.Histogram{Field: "cat", Categories: slices.Clone(testCategories)} // a copy: tests may reorder it
	c.Schema.ValueField, c.Schema.Lower, c.Schema.Upper = "v", testLower, testUpper
	c.Windows.Size = testSize
	c.Windows.Start = time.UnixMilli(testBase).UTC().Format(time.RFC3339) // the stream's first window
	c.Windows.AllowedLateness = time.Second
	c.Windows.IdleTimeout = 2 * time.Second
	c.Windows.Aggregates = []string{AggCount, AggHistogram, AggSum, AggMean}
	c.Bounds = BoundsConfig{MaxGroups: 1, MaxBuckets: 1, MaxPerBucket: 3, MaxValues: 3}
	c.Privacy.Epsilon, c.Privacy.Delta = 4, 1e-6
	c.Privacy.PublicGroups = [][]string{{"east"}, {"north"}, {"south"}}
	c.Observability.Listen = ""
	c.Observability.LogLevel = "warn"
	return c
}

// testKey is a fixed secret key for reproducible tests.
func testKey() rng.Key {
	var k rng.Key
	for i := range k {
		k[i] = byte(i*7 + 1)
	}
	return k
}

// checkReleases compares releases with the stream's truth: every expected
// window and group present (and nothing else), every value's interval
// covering the truth at the stated rate, and consistent metadata. It
// returns the number of values checked.
func checkReleases(t *testing.T, s testStream, c Config, rels map[string]schema.Release) int {
	t.Helper()
	size := testSize.Milliseconds()
	mid := (testLower + testUpper) / 2
	want := map[string]bool{}
	for w := range s.windows {
		id := releaseID(c.Kafka.namespace(), testBase+int64(w)*size)
		for _, reg := range testRegions {
			for _, a := range c.Windows.Aggregates {
				want[schema.ReleaseKey(id, a, reg)] = true
			}
		}
	}
	for k := range want {
		if _, ok := rels[k]; !ok {
			t.Errorf("release %q is missing", k)
		}
	}
	checked, misses := 0, 0
	check := func(what string, sr schema.Series, i int, truth float64) {
		checked++
		if !(sr.Lo[i] <= truth && truth <= sr.Hi[i]) {
			misses++
			t.Logf("%s: true %g outside [%g, %g] (value %g)", what, truth, sr.Lo[i], sr.Hi[i], sr.Value(i))
		}
	}
	for k, r := range rels {
		if !want[k] {
			t.Errorf("unexpected release %q", k)
			continue
		}
		// Metadata.
		if r.WindowEnd-r.WindowStart != size || r.Budget.Epsilon != c.Privacy.Epsilon || r.Budget.Delta != c.Privacy.Delta ||
			r.Spent != r.Budget || r.Unit != "user" || r.Instance != "test-instance" || r.Bounds.MaxPerBucket != 3 ||
			r.Bounds.Upper != testUpper || len(r.Group) != 1 || r.Group[0].Name != "region" {
			t.Errorf("release %q: inconsistent metadata %+v", k, r)
		}
		if !containsAll(r.Note, "one calibration of all 5 noised parts", "accounting tightest", "histogram.counts: discrete-laplace") {
			t.Errorf("release %q: accounting note %q does not describe the calibration", k, r.Note)
		}
		tr := s.truth[r.WindowStart][r.Group[0].Value]
		for _, sr := range r.Series {
			// laplace runs as discrete-laplace on counts, as snapped
			// (rounded) Laplace on sums.
			want := "discrete-laplace"
			switch {
			case sr.Mechanism == schema.DerivedMechanism && sr.Name == schema.SeriesMean:
				continue
			case sr.Name == schema.SeriesSum:
				want = "laplace"
			}
			if sr.Mechanism != want {
				t.Errorf("release %q series %s: mechanism %q, want %q", k, sr.Name, sr.Mechanism, want)
			}
		}
		switch r.Kind {
		case schema.KindCount:
			check(k, r.Series[0], 0, float64(tr.count))
		case schema.KindHistogram:
			if !slices.Equal(r.Series[0].Labels, testCategories) {
				t.Errorf("release %q: labels %v", k, r.Series[0].Labels)
			}
			for i := range testCategories {
				check(fmt.Sprintf("%s[%d]", k, i), r.Series[0], i, float64(tr.hist[i]))
			}
		case schema.KindSum:
			check(k, r.Series[0], 0, tr.sum)
		case schema.KindMean:
			check(k+" centred sum", r.Series[0], 0, tr.sum-mid*float64(tr.values))
			check(k+" count", r.Series[1], 0, float64(tr.values))
			check(k+" mean", r.Series[2], 0, tr.sum/float64(tr.values))
		}
	}
	// 95% intervals: the number of misses of n values is at most
	// Binomial(n, 0.05) in distribution (the mean's two inputs are at
	// 97.5%). maxMisses(96) = 15 and P(Bin(96, 0.05) ≥ 16) < 8.5e-5 (exact
	// binomial tail), so this fails with probability < 1e-4 for a random
	// key; with the fixed test key the outcome is deterministic.
	if limit := maxMisses(checked); misses > limit {
		t.Errorf("%d of %d values outside their 95%% interval (allowed %d)", misses, checked, limit)
	}
	return checked
}

// maxMisses is the largest number of misses of n 95% intervals accepted: the
// mean plus 4.5 standard deviations of Binomial(n, 0.05), rounded up.
func maxMisses(n int) int {
	m := 0.05 * float64(n)
	return int(math.Ceil(m + 4.5*math.Sqrt(m*0.95)))
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
