package operator

// Several measures and histograms per stream (lanes.go): a synthetic
// smart-meter stream with two measures (kwh, voltage) and two histograms
// (tariff, appliance) whose exact bounded aggregates are computed here,
// independently of the windows package, and run through Operator.Run on
// the in-process fake broker and on the real one.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

var (
	laneTariffs    = []string{"day", "night", "weekend"}
	laneAppliances = []string{"oven", "heater", "other"}
)

// The measures' public bounds.
const (
	laneKwhUpper  = 0.5
	laneVoltLower = 200.0
	laneVoltUpper = 260.0
)

// laneEvent is one reading of the lanes stream.
type laneEvent struct {
	user, region, tariff, appliance string
	kwh, volt                       float64
	time                            int64
}

// laneTruth is the exact aggregate of one region in one window.
type laneTruth struct {
	count             int64
	tariff, appliance [3]int64
	kwh, volt         float64
}

type laneStream struct {
	windows int
	events  []laneEvent
	truth   map[int64]map[string]*laneTruth
}

// genLaneStream makes nWindows windows of readings from nUsers users (fixed
// seed): per window a user sends 1–3 readings, of one tariff and one
// appliance, kwh in [0, 0.5] and voltage in [200, 260] — within max_groups
// 1, max_buckets 1, max_per_bucket 3 and max_values 3 in every lane, so
// that the bounded aggregates are the plain ones.
func genLaneStream(seed uint64, nWindows, nUsers int) laneStream {
	r := rand.New(rand.NewPCG(seed, 0x22))
	s := laneStream{windows: nWindows, truth: map[int64]map[string]*laneTruth{}}
	size := testSize.Milliseconds()
	for w := range nWindows {
		start := testBase + int64(w)*size
		s.truth[start] = map[string]*laneTruth{}
		for _, reg := range testRegions {
			s.truth[start][reg] = &laneTruth{}
		}
		for u := range nUsers {
			user := "user-" + strconv.Itoa(u)
			region := testRegions[u%len(testRegions)]
			ti, ai := r.IntN(3), r.IntN(3)
			for range 1 + r.IntN(3) {
				kwh := math.Round(r.Float64()*laneKwhUpper*1000) / 1000
				volt := math.Round((laneVoltLower+r.Float64()*(laneVoltUpper-laneVoltLower))*10) / 10
				s.events = append(s.events, laneEvent{user, region, laneTariffs[ti], laneAppliances[ai], kwh, volt, start + r.Int64N(size)})
				tr := s.truth[start][region]
				tr.count++
				tr.tariff[ti]++
				tr.appliance[ai]++
				tr.kwh += kwh
				tr.volt += volt
			}
		}
	}
	slices.SortStableFunc(s.events, func(a, b laneEvent) int { return int(a.time - b.time) })
	return s
}

// messages returns the stream as Kafka messages (JSON and msgpack in
// turn), each with its arrival time as record timestamp, and a sentinel
// reading at the end of the last window + lateness (see
// testStream.messages).
func (s laneStream) messages(lateness time.Duration) []kafka.Message {
	enc := func(e laneEvent, i int) []byte {
		m := map[string]any{"ts": e.time, "user": e.user, "region": e.region, "tariff": e.tariff,
			"appliance": e.appliance, "kwh": e.kwh, "voltage": e.volt}
		if i%2 == 0 {
			b, _ := json.Marshal(m)
			return b
		}
		b, _ := msgpack.Marshal(m)
		return b
	}
	var out []kafka.Message
	for i, e := range s.events {
		out = append(out, kafka.Message{Key: []byte(e.user), Value: enc(e, i), Time: time.UnixMilli(e.time + testArrivalDelay)})
	}
	end := testBase + int64(s.windows)*testSize.Milliseconds() + lateness.Milliseconds()
	sentinel := laneEvent{"sentinel", "north", "day", "oven", 0, laneVoltLower, end}
	out = append(out, kafka.Message{Key: []byte("sentinel"), Value: enc(sentinel, 1), Time: time.UnixMilli(end + testArrivalDelay)})
	testStreamEnd.Store(end + testArrivalDelay)
	return out
}

// laneConfig is testConfig for the lanes stream: kwh and voltage, tariff
// and appliance, aggregates count, histogram, sum and mean.
func laneConfig(brokers []string, input, output, group string) Config {
	c := testConfig(brokers, input, output, group)
	c.Schema.Histogram = &schema.Histogram{Field: "tariff", Categories: slices.Clone(laneTariffs)}
	c.Schema.ValueField, c.Schema.Lower, c.Schema.Upper = "kwh", 0, laneKwhUpper
	c.Schema.Measures = []schema.Measure{{Name: "voltage", Field: "voltage", Lower: laneVoltLower, Upper: laneVoltUpper}}
	c.Schema.Histograms = []schema.NamedHistogram{{Name: "appliance", Histogram: schema.Histogram{Field: "appliance", Categories: slices.Clone(laneAppliances)}}}
	return c
}

// laneAggregates are the aggregates a window of laneConfig releases.
var laneAggregates = []string{AggCount, AggHistogram, AggSum, AggMean, "sum:voltage", "mean:voltage", "histogram:appliance"}

// checkLaneReleases compares the releases with the stream's truth: every
// window × region × aggregate of laneAggregates present and nothing else,
// each lane's bounds in its releases, every value's 95% interval covering
// the truth at the stated rate. It returns the number of values checked.
func checkLaneReleases(t *testing.T, s laneStream, c Config, rels map[string]schema.Release) int {
	t.Helper()
	want := map[string]bool{}
	for w := range s.windows {
		id := releaseID(c.Kafka.namespace(), testBase+int64(w)*testSize.Milliseconds())
		for _, reg := range testRegions {
			for _, a := range laneAggregates {
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
		if !containsAll(r.Note, "one calibration of all 9 noised parts") {
			t.Errorf("release %q: note %.80q… does not describe one calibration of every lane's parts", k, r.Note)
		}
		tr := s.truth[r.WindowStart][r.Group[0].Value]
		lo, hi, mid := 0.0, laneKwhUpper, laneKwhUpper/2
		if baseAggregate(r.Aggregate) != r.Aggregate && r.Kind != schema.KindHistogram {
			lo, hi, mid = laneVoltLower, laneVoltUpper, laneVoltLower/2+laneVoltUpper/2
		}
		if r.Kind == schema.KindCount || r.Kind == schema.KindHistogram {
			lo, hi = r.Bounds.Lower, r.Bounds.Upper // not checked: the primary's, or none
		}
		if r.Bounds.Lower != lo || r.Bounds.Upper != hi {
			t.Errorf("release %q: bounds [%g, %g], want [%g, %g]", k, r.Bounds.Lower, r.Bounds.Upper, lo, hi)
		}
		switch r.Aggregate {
		case AggCount:
			check(k, r.Series[0], 0, float64(tr.count))
		case AggHistogram, "histogram:appliance":
			truth, labels := tr.tariff, laneTariffs
			if r.Aggregate != AggHistogram {
				truth, labels = tr.appliance, laneAppliances
			}
			if !slices.Equal(r.Series[0].Labels, labels) {
				t.Errorf("release %q: labels %v, want %v", k, r.Series[0].Labels, labels)
			}
			for i := range truth {
				check(fmt.Sprintf("%s[%d]", k, i), r.Series[0], i, float64(truth[i]))
			}
		case AggSum, "sum:voltage":
			sum := tr.kwh
			if r.Aggregate != AggSum {
				sum = tr.volt
			}
			check(k, r.Series[0], 0, sum)
		case AggMean, "mean:voltage":
			sum := tr.kwh
			if r.Aggregate != AggMean {
				sum = tr.volt
			}
			check(k+" centred sum", r.Series[0], 0, sum-mid*float64(tr.count))
			check(k+" count", r.Series[1], 0, float64(tr.count))
			check(k+" mean", r.Series[2], 0, sum/float64(tr.count))
		}
	}
	// 95% intervals (the mean's two inputs at 97.5%): misses are at most
	// Binomial(n, 0.05) in distribution; maxMisses(n) is the mean plus 4.5
	// standard deviations, so the check fails with probability < 1e-4 for
	// a random key (exact binomial tail for n = 180: P(Bin(180, 0.05) ≥ 24)
	// < 1e-4); with the fixed test key the outcome is deterministic.
	if limit := maxMisses(checked); misses > limit {
		t.Errorf("%d of %d values outside their 95%% interval (allowed %d)", misses, checked, limit)
	}
	return checked
}

// laneValues is the number of values checkLaneReleases checks for 4
// windows × 3 regions: count 1, two histograms 3 + 3, two sums 1 + 1, two
// means 3 + 3, 15 per window and region.
const laneValues = 4 * 3 * 15

// TestRunFakeBrokerLanes: two measures and two histograms in one
// configuration, run through Operator.Run on the in-process fake broker:
// every window releases every measure's sum and mean and every histogram,
// values within their intervals at the stated rate, all from one joint
// calibration of the window's 9 noised parts.
func TestRunFakeBrokerLanes(t *testing.T) {
	brokers, cl := fakeBroker(t)
	in, out, group := "lanes-fake-in", "lanes-fake-out", "lanes-fake"
	createTopic(t, cl, in, 2)
	runLanes(t, brokers, cl, in, out, group)
}

// TestKafkaLanes is TestRunFakeBrokerLanes on the real broker.
func TestKafkaLanes(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName("dpstream-lanes-in"), uniqueName("dpstream-lanes-out")
	createTopic(t, cl, in, 2)
	runLanes(t, brokers, cl, in, out, uniqueName("dpstream-lanes"))
}

// runLanes produces the lanes stream to in, runs the operator (its config
// changed by the edits) until the last window is published, checks the
// releases in out and returns them.
func runLanes(t *testing.T, brokers []string, cl *clients, in, out, group string, edits ...func(*Config)) map[string]schema.Release {
	s := genLaneStream(22, 4, 60)
	c := laneConfig(brokers, in, out, group)
	c.Kafka.CreateTopics = true
	for _, e := range edits {
		e(&c)
	}
	produce(t, brokers, in, s.messages(c.Windows.AllowedLateness))
	op, pub := newTestOperator(t, c)
	lastStart := testBase + 3*testSize.Milliseconds()
	// The deadline only bounds a hung run; nothing is timed.
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rels, raw := readReleases(t, cl, out)
	if n := checkLaneReleases(t, s, c, rels); n != laneValues {
		t.Errorf("checked %d values, want %d", n, laneValues)
	}
	if len(raw) != len(rels) {
		t.Errorf("%d release messages, %d distinct releases", len(raw), len(rels))
	}
	return rels
}

// TestRunFakeBrokerLanesRunning: with windows.running, every measure's sum
// and the count carry running totals: in every window, the sum of the
// released values of that aggregate and group so far (sum:voltage's its
// own). Old code: windows.running was refused with extra measures.
func TestRunFakeBrokerLanesRunning(t *testing.T) {
	brokers, cl := fakeBroker(t)
	createTopic(t, cl, "lanes-running-in", 2)
	rels := runLanes(t, brokers, cl, "lanes-running-in", "lanes-running-out", "lanes-running",
		func(c *Config) { c.Windows.Running = true })
	byKey := map[string][]schema.Release{} // aggregate|group → releases in window order
	for _, r := range rels {
		if r.Aggregate == AggCount || r.Aggregate == AggSum || r.Aggregate == "sum:voltage" {
			k := r.Aggregate + "|" + r.Group[0].Value
			byKey[k] = append(byKey[k], r)
		}
	}
	if len(byKey) != 9 {
		t.Fatalf("%d running aggregates × groups, want 9", len(byKey))
	}
	for k, rs := range byKey {
		slices.SortFunc(rs, func(a, b schema.Release) int { return int(a.WindowStart - b.WindowStart) })
		total := 0.0
		for i, r := range rs {
			total += r.Series[0].Value(0)
			last := r.Series[len(r.Series)-1]
			if last.Name != schema.SeriesRunning || last.Windows != int64(i+1) || last.Value(0) != total {
				t.Errorf("%s window %d: last series %s over %d windows = %g, want the running total %g over %d", k, i, last.Name, last.Windows, last.Value(0), total, i+1)
			}
		}
	}
}

// TestLanesConfigProblems: what the lanes do not support yet is refused at
// validation, by setting, and a lane needs an aggregate to release.
func TestLanesConfigProblems(t *testing.T) {
	base := laneConfig([]string{"127.0.0.1:9092"}, "in", "out", "g")
	if ps := base.Problems(); len(ps) > 0 {
		t.Fatalf("valid lanes config: %v", ps)
	}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Windows.Aggregates = []string{AggCount, AggHistogram} }, "schema.measures: need one of sum, mean, variance, quantiles in windows.aggregates"},
		{func(c *Config) { c.Windows.Aggregates = []string{AggCount, AggSum} }, "schema.histograms: need histogram in windows.aggregates"},
		{func(c *Config) { c.Schema.Measures[0].Name = "" }, `schema.measures[0].name "" must be`},
	} {
		cfg := laneConfig([]string{"127.0.0.1:9092"}, "in", "out", "g")
		c.edit(&cfg)
		if got := strings.Join(cfg.Problems(), "\n"); !strings.Contains(got, c.want) {
			t.Errorf("problems %q, want one containing %q", got, c.want)
		}
	}
}

// TestLoadLanes: schema.measures and schema.histograms load from YAML (a
// histogram's keys beside its name), a misspelt key inside one is an
// unknown key, and a scalar where the list belongs a type error.
func TestLoadLanes(t *testing.T) {
	dir := t.TempDir()
	load := func(yaml string) (Config, []string, error) {
		file := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadAll(file, nil)
	}
	c, ps, err := load("schema:\n  measures:\n    - {name: voltage, field: voltage, lower: 200, upper: 260, optional: true}\n" +
		"  histograms:\n    - {name: appliance, field: appliance, categories: [oven, heater], other: true}\n")
	if err != nil || len(ps) > 0 {
		t.Fatalf("load: %v %v", err, ps)
	}
	m, h := c.Schema.Measures, c.Schema.Histograms
	if len(m) != 1 || m[0] != (schema.Measure{Name: "voltage", Field: "voltage", Lower: 200, Upper: 260, Optional: true}) ||
		len(h) != 1 || h[0].Name != "appliance" || h[0].Field != "appliance" || !slices.Equal(h[0].Categories, []string{"oven", "heater"}) || !h[0].Other {
		t.Fatalf("loaded %+v %+v", m, h)
	}
	if _, _, err := load("schema:\n  measures:\n    - {name: v, field: v, lowr: 1}\n"); err == nil || !strings.Contains(err.Error(), "lowr") {
		t.Errorf("misspelt key: %v", err)
	}
	if _, ps, _ := load("schema:\n  measures: 3\n"); !strings.Contains(strings.Join(ps, "\n"), "schema.measures: 3 is not a list of maps") {
		t.Errorf("scalar measures: %v", ps)
	}
}

// TestRunFakeBrokerLanesReplay: a several-measures run that crashes with
// half of a window's releases written and restarts publishes, for every
// key, the same bytes as a run without the crash (fake broker; the input
// topic, namespace and configuration are the same, the groups and output
// topics differ).
func TestRunFakeBrokerLanesReplay(t *testing.T) {
	brokers, cl := fakeBroker(t)
	in := "lanes-replay-in"
	createTopic(t, cl, in, 2)
	s := genLaneStream(23, 3, 30)
	produce(t, brokers, in, s.messages(time.Second))
	lastStart := testBase + 2*testSize.Milliseconds()

	clean := laneConfig(brokers, in, "lanes-replay-clean", "lanes-replay-clean")
	clean.Kafka.CreateTopics = true
	op, pub := newTestOperator(t, clean)
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	_, want := readReleases(t, cl, clean.Kafka.OutputTopic)

	c := laneConfig(brokers, in, "lanes-replay-out", "lanes-replay")
	c.Kafka.CreateTopics = true
	op, pub = newTestOperator(t, c)
	crashAt(op, crashHalf)
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); !errors.Is(err, errCrash) {
		t.Fatalf("first run: want the simulated crash, got %v", err)
	}
	if len(readAll(t, cl, c.Kafka.OutputTopic)) == 0 {
		t.Fatal("the crash wrote no release: the test needs a partly published window")
	}
	op, pub = newTestOperator(t, c)
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("restart: %v", err)
	}
	_, got := readReleases(t, cl, c.Kafka.OutputTopic)
	if len(want) != 3*3*len(laneAggregates) {
		t.Errorf("%d releases, want %d", len(want), 3*3*len(laneAggregates))
	}
	sameReleases(t, want, got, "without the crash", "after the crash and restart")
}

// TestPartialLanesCodec: a window's partial states of several lanes round
// trip through the "dpl1" payload; without lanes the payload is the
// primary's encoding alone (byte-identical to before); a payload with the
// wrong number of lanes, a lane of another window, trailing bytes or a
// missing tag is refused.
func TestPartialLanesCodec(t *testing.T) {
	c := laneConfig([]string{"127.0.0.1:9092"}, "in", "out", "g")
	co, err := newCore(c, testPlan(t, c), testKey(), testBase)
	if err != nil {
		t.Fatal(err)
	}
	co.split = true
	co.aggs = map[int32]*windows.Tumbling{}
	if err := co.assign([]tp{{"in", 0}}); err != nil {
		t.Fatal(err)
	}
	for i, e := range genLaneStream(5, 1, 6).events {
		ev := schema.Event{Time: e.time, Unit: e.user, Group: schema.MakeGroup(e.region), Bucket: i % 3, Value: e.kwh, HasValue: true,
			Extra: &schema.Extra{Measures: []schema.MeasureValue{{Value: e.volt, Has: true}}, Buckets: []int{(i + 1) % 3}}}
		co.handleItem(&item{m: kafka.Message{Topic: "in", Partition: 0, Offset: int64(i), Time: time.UnixMilli(e.time)}, ev: ev})
	}
	co.advance(0, testBase+10*testSize.Milliseconds())
	ps := co.pollPartials()
	if len(ps) < 2 || len(ps[0].lanes) != 2 {
		t.Fatalf("partials %d, lanes %d", len(ps), len(ps[0].lanes))
	}
	b, err := encodePartial(ps[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	p, lanes, err := decodePartial(b, 2)
	if err != nil || p.Start != ps[0].p.Start || len(lanes) != 2 {
		t.Fatalf("round trip: %v, %d lanes", err, len(lanes))
	}
	for i := range lanes {
		x, _ := lanes[i].MarshalBinary()
		y, _ := ps[0].lanes[i].MarshalBinary()
		if !bytes.Equal(x, y) {
			t.Errorf("lane %d changed in the round trip", i)
		}
	}
	plain, _ := ps[0].p.MarshalBinary()
	if got, _ := encodePartial(partialOut{pid: 0, p: ps[0].p}, 0); !bytes.Equal(got, plain) {
		t.Error("without lanes the payload is not the primary's encoding")
	}
	other := ps[0]
	other.lanes = []windows.Partial{ps[0].lanes[0], ps[len(ps)-1].lanes[1]}
	bad := map[string][]byte{"no tag": plain, "trailing": append(slices.Clone(b), 0)}
	if bad["another window"], err = encodePartial(other, 2); err != nil {
		t.Fatal(err)
	}
	for name, x := range bad {
		if _, _, err := decodePartial(x, 2); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, _, err := decodePartial(b, 1); err == nil {
		t.Error("decoded with the wrong number of lanes")
	}
}

// TestLanesQuantiles: an extra measure's quantiles (tree, exponential
// and joint exponential mechanism) span the measure's own range, and a window of the lanes
// stream releases quantiles:voltage within [200, 260] and quantiles of kwh
// within [0, 0.5]. Old code (before the lane's range reached complete):
// the voltage tree spanned kwh's [0, 0.5].
func TestLanesQuantiles(t *testing.T) {
	for _, mech := range []string{QuantileTree, QuantileExponential, QuantileJoint} {
		c := laneConfig([]string{"127.0.0.1:9092"}, "in", "out", "g")
		c.Windows.Aggregates = []string{AggCount, AggQuantiles}
		c.Schema.Histograms = nil
		c.Windows.QuantileMechanism = mech
		p := testPlan(t, c)
		ap := p.aggs[len(p.aggs)-1]
		lo, hi := ap.tree.Lower, ap.tree.Upper
		switch mech {
		case QuantileExponential:
			lo, hi = ap.selector.Lower, ap.selector.Upper
		case QuantileJoint:
			lo, hi = ap.joint.Lower, ap.joint.Upper
		}
		if ap.name != "quantiles:voltage" || lo != laneVoltLower || hi != laneVoltUpper {
			t.Fatalf("%s: last aggregate %s over [%g, %g], want quantiles:voltage over [200, 260]", mech, ap.name, lo, hi)
		}
		var evs []schema.Event
		for _, e := range genLaneStream(7, 1, 60).events {
			evs = append(evs, schema.Event{Time: e.time, Unit: e.user, Group: schema.MakeGroup(e.region), Bucket: -1, Value: e.kwh, HasValue: true,
				Extra: &schema.Extra{Measures: []schema.MeasureValue{{Value: e.volt, Has: true}}}})
		}
		_, out := releaseFirstWindow(t, c, p, testBase, evs)
		n := 0
		for _, m := range out {
			r := m.rel
			lo, hi := 0.0, laneKwhUpper
			if r.Aggregate == "quantiles:voltage" {
				lo, hi = laneVoltLower, laneVoltUpper
			} else if r.Aggregate != AggQuantiles {
				continue
			}
			n++
			for _, v := range r.Series[0].Floats {
				if v < lo || v > hi {
					t.Errorf("%s %s: quantile %g outside [%g, %g]", mech, r.Key(), v, lo, hi)
				}
			}
		}
		if n != 6 {
			t.Errorf("%s: %d quantile releases, want 6 (3 regions × 2 measures)", mech, n)
		}
	}
}

// TestRunWarningsLanes: an extra measure's mean whose interval is its whole
// range warns like the first measure's, naming the lane's aggregate and
// its own range. Old code: the lane's mean:v2 was not looked up (no
// warning), or judged against the first measure's range.
func TestRunWarningsLanes(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Privacy.Epsilon = 0.05 // public groups: released, but the means say nothing
	c.Schema.Measures = []schema.Measure{{Name: "v2", Field: "v", Lower: -100, Upper: 100}}
	w := warnLines(runObserved(t, c, neighbourMessages(false, "north")).logs)
	if !strings.Contains(w, `"aggregate":"mean:v2"`) || !strings.Contains(w, `"range":"[-100, 100]"`) {
		t.Errorf("whole-range warning of the lane's mean: %s", w)
	}
}

// TestLanesFactorization: where the running totals use the square-root
// factorization (event level, horizon budget, Gaussian noise), an extra
// measure's sum is factorized like the first's, and its release of a
// window carries its running total. Old code: windows.running was refused
// with extra measures (and the lane's sum, not found by its name, would
// have gone unfactorized).
func TestLanesFactorization(t *testing.T) {
	c := factConfig(16, "gaussian")
	c.Schema.Measures = []schema.Measure{{Name: "v2", Field: "v", Lower: -5, Upper: 5}}
	o, hs := factOperator(t, c)
	p := o.plan
	for _, name := range []string{AggCount, AggSum, "sum:v2"} {
		if ap := p.aggPlan(name); ap == nil || ap.noises[0].fact == nil {
			t.Fatalf("%s: not factorized", name)
		}
	}
	var evs []schema.Event
	for _, e := range genStream(3, 1, 30).events {
		evs = append(evs, schema.Event{Time: e.time - testBase + hs, Group: schema.MakeGroup(e.region), Bucket: slices.Index(testCategories, e.cat), Value: e.value, HasValue: true,
			Extra: &schema.Extra{Measures: []schema.MeasureValue{{Value: e.value, Has: true}}}})
	}
	w, out := releaseFirstWindow(t, c, p, hs, evs)
	out, _, err := p.addRunning(out, nil, w)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range out {
		r, err := schema.DecodeRelease(m.value)
		if err != nil {
			t.Fatal(err)
		}
		if r.Aggregate != "sum:v2" {
			continue
		}
		n++
		last := r.Series[len(r.Series)-1]
		if last.Name != schema.SeriesRunning || last.Value(0) != r.Series[0].Value(0) {
			t.Errorf("%s: series %+v", r.Key(), r.Series)
		}
	}
	if n != 3 {
		t.Errorf("%d sum:v2 releases, want 3", n)
	}
}

// releaseFirstWindow feeds evs (arriving at their event times) to a core
// of c and p on one partition, releasing from from, and returns the first
// window that closes and its releases.
func releaseFirstWindow(t *testing.T, c Config, p *plan, from int64, evs []schema.Event) (*windows.Window, []outMsg) {
	t.Helper()
	co, err := newCore(c, p, testKey(), from)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.assign([]tp{{"in", 0}}); err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		co.handleItem(&item{m: kafka.Message{Topic: "in", Partition: 0, Offset: int64(i), Time: time.UnixMilli(evs[i].Time)}, ev: evs[i]})
	}
	co.advance(0, from+2*testSize.Milliseconds())
	ws := co.poll()
	if len(ws) == 0 {
		t.Fatal("no window closed")
	}
	out, _, _, err := p.releaseWindow(&ws[0], testKey(), "test", "i", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &ws[0], out
}
