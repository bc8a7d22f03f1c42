package operator

// Broker tests of the scale-out topology (kafka.scale_out) at a start:
// stage 1 commits input offsets behind the partials it wrote, not behind
// stage 2's final windows, so its commits can run ahead of the state topic.

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/windows"
)

// farWindows is how many windows after windows.start the restarted stage 1
// resumes in TestKafkaScaleOutRestartFarAhead: more than
// windows.DefaultPollLimit (1024, the windows one Poll emits at most) plus
// DefaultMaxOpenWindows (64), so that one poll before retrying an event
// cannot make room for it.
const farWindows = windows.DefaultPollLimit + DefaultMaxOpenWindows + 117

// TestKafkaScaleOutRestartFarAhead: stage 1 commits input offsets behind
// the partials it wrote, not behind stage 2's final windows, so a restarted
// instance (or one handed a partition on a rebalance) can resume a
// partition far ahead of the state topic's last final window — here,
// while stage 2 waits for a silent partition during a backlog, farWindows
// windows ahead of windows.start. The resumed partition's first event must
// be counted in its window as a single instance counts it, not dropped as
// too_many_windows because the new aggregator's first window lags behind
// the data. (Partition 0 carries one event every 100 windows up to
// farWindows, then one per window; partition 1 is empty and the clock
// stands before the stream, so no window closes on it.)
func TestKafkaScaleOutRestartFarAhead(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-scale-far-in")
	createTopic(t, cl, in, 2)
	// A message key that the producer's balancer sends to partition 0.
	var key []byte
	for i := 0; key == nil; i++ {
		k := []byte("k" + string(rune('a'+i)))
		if (kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: k}, 0, 1) == 0 {
			key = k
		}
	}
	size := testSize.Milliseconds()
	var msgs []kafka.Message
	add := func(w int) {
		ts := testBase + int64(w)*size + 1000
		e := testEvent{"user-1", "east", "a", 1, ts}
		msgs = append(msgs, kafka.Message{Key: key, Value: e.encode(len(msgs)), Time: time.UnixMilli(ts + 100)})
	}
	for w := 0; w < farWindows; w += 100 {
		add(w)
	}
	for w := farWindows; w < farWindows+5; w++ {
		add(w)
	}
	produce(t, brokers, in, msgs)

	c := testConfig(brokers, in, uniqueName("dpstream-scale-far-out"), uniqueName("dpstream-scale-far"))
	c.Kafka.CreateTopics = true
	c.Kafka.ScaleOut = true
	c.Observability.SensitiveMetrics = true
	run := func(want int) *prometheus.Registry {
		t.Helper()
		reg := prometheus.NewRegistry()
		op, err := New(c, WithKey(testKey()), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			WithRegistry(reg), WithClock(func() time.Time { return time.UnixMilli(testBase) }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- op.Run(ctx) }()
		deadline := time.After(60 * time.Second)
		for consumed(op, in) < float64(want) {
			select {
			case err := <-errc:
				cancel()
				t.Fatalf("Run returned early: %v", err)
			case <-deadline:
				cancel()
				<-errc
				t.Fatalf("consumed %v of %d messages in 60 s", consumed(op, in), want)
			case <-time.After(50 * time.Millisecond):
			}
		}
		cancel() // drains: writes the closed windows' partials, commits behind them
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if got := consumed(op, in); got != float64(want) {
			t.Fatalf("consumed %v messages, want %d", got, want)
		}
		return reg
	}
	reg := run(len(msgs))
	if got := counter(t, reg, "dpstream_events_skipped_total", windows.TooManyWindows.String()); got != 0 {
		t.Fatalf("the first run dropped %v events as too_many_windows", got)
	}
	// The restart resumes behind the last window's event, the only one
	// still open.
	reg = run(1)
	if got := counter(t, reg, "dpstream_events_skipped_total", windows.TooManyWindows.String()); got != 0 {
		t.Errorf("after the restart, %v events were dropped as too_many_windows (a single instance drops none)", got)
	}
	if got := counter(t, reg, "dpstream_events_late_total", ""); got != 0 {
		t.Errorf("after the restart, %v events were dropped as late", got)
	}
}

// TestKafkaScaleOutFirstStartAfterStage1Commits: on a new deployment,
// stage 1 commits input offsets as soon as partials are written, before
// stage 2 (on whichever instance gets the merge group first) records the
// deployment's origin in the state topic. Stage 2 must not take those
// commits for a lost state record and refuse to start. (The input group
// commits offset 0 of partition 0 here, as stage 1 of another instance
// would have, skipping nothing.)
func TestKafkaScaleOutFirstStartAfterStage1Commits(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-scale-first-in")
	createTopic(t, cl, in, 2)
	const nWindows = 4
	s := genStream(37, nWindows, 10)
	produce(t, brokers, in, s.messages(0, time.Second))

	out := uniqueName("dpstream-scale-first-out")
	c := testConfig(brokers, in, out, uniqueName("dpstream-scale-first"))
	c.Kafka.CreateTopics = true
	c.Kafka.ScaleOut = true
	commitOffset(t, cl, c.Kafka.GroupID, in, 0)
	op, _ := newTestOperator(t, c)
	runAllUntilOutput(t, []*Operator{op}, cl, out, nWindows*len(testRegions)*len(c.Windows.Aggregates), 60*time.Second)
}

// TestKafkaScaleOutLostStateRefused: the check above still protects a
// scale-out deployment whose state record was lost: the merge group has
// committed offsets on the partials topic, so a restart with
// windows.start (which would publish the history again) is refused.
func TestKafkaScaleOutLostStateRefused(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-scale-lost-in")
	createTopic(t, cl, in, 2)
	const nWindows = 3
	s := genStream(41, nWindows, 10)
	produce(t, brokers, in, s.messages(0, time.Second))

	out := uniqueName("dpstream-scale-lost-out")
	c := testConfig(brokers, in, out, uniqueName("dpstream-scale-lost"))
	c.Kafka.CreateTopics = true
	c.Kafka.ScaleOut = true
	op, _ := newTestOperator(t, c)
	runAllUntilOutput(t, []*Operator{op}, cl, out, nWindows*len(testRegions)*len(c.Windows.Aggregates), 60*time.Second)

	loseStateExpectRefusal(t, brokers, c)
}

// TestKafkaScaleOutRebalanceSkipsFinalWindows: a rebalance long after
// windows.start must not make stage 1 re-send a partial state for every
// window since windows.start. Instance A runs alone until stage 2 has
// published every window; then B joins. After the rebalance, no partial of
// a window that was already final may be written: stage 1 starts each
// generation after the state topic's last final window. (Before, A kept the
// restart point it read at its own start — windows.start on a new
// deployment — and wrote an empty partial for each of its partition's
// windows again; over a week of 1-minute windows that is 10080 per
// partition per rebalance.)
func TestKafkaScaleOutRebalanceSkipsFinalWindows(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-scale-rebal-in")
	createTopic(t, cl, in, 2)
	const nWindows = 8
	s := genStream(43, nWindows, 12)
	produce(t, brokers, in, s.messages(0, time.Second))

	out := uniqueName("dpstream-scale-rebal-out")
	c := testConfig(brokers, in, out, uniqueName("dpstream-scale-rebal"))
	c.Kafka.CreateTopics = true
	c.Kafka.ScaleOut = true
	a, _ := newTestOperator(t, c)
	b, _ := newTestOperator(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	start := func(op *Operator) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := op.Run(ctx); err != nil {
				errs <- err
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	waitFor := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		stop := time.Now().Add(d)
		for !ok() {
			select {
			case err := <-errs:
				t.Fatalf("an instance failed: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			if time.Now().After(stop) {
				t.Fatalf("%s: not within %v", what, d)
			}
		}
	}
	start(a)
	want := nWindows * len(testRegions) * len(c.Windows.Aggregates)
	waitFor("all windows published by A alone", 90*time.Second, func() bool {
		// The output topic exists once A has set up.
		if _, err := cl.partitions(ctx, out); err != nil {
			return false
		}
		return len(readAll(t, cl, out)) >= want
	})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	ct, err := closedThrough(ctx2, cl, c.Kafka.stateTopic(), c.Kafka.GroupID)
	if err != nil {
		t.Fatal(err)
	}
	if ct == noClosedWindow {
		t.Fatal("no final window recorded")
	}
	before := len(readAll(t, cl, c.Kafka.partialsTopic()))
	// The state topic, read at every rebalance, is created compacted with
	// hourly segments, so that compaction keeps it short.
	res, err := cl.client.DescribeConfigs(ctx2, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: c.Kafka.stateTopic(), ConfigNames: []string{"cleanup.policy", "segment.ms"}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range res.Resources {
		for _, e := range r.ConfigEntries {
			got[e.ConfigName] = e.ConfigValue
		}
	}
	if got["cleanup.policy"] != "compact" || got["segment.ms"] != stateSegmentMs {
		t.Errorf("state topic configs %v, want cleanup.policy=compact, segment.ms=%s", got, stateSegmentMs)
	}

	start(b)
	serves := func(op *Operator) bool {
		op.health.mu.Lock()
		defer op.health.mu.Unlock()
		return op.health.stages["partial"] == "1 of 2 input partitions"
	}
	waitFor("both instances serving one input partition", 60*time.Second, func() bool { return serves(a) && serves(b) })
	// Stage 1 writes closed windows' partials at its ticks (every
	// tickInterval): give it several.
	time.Sleep(10 * tickInterval(c))
	var stale int
	for _, m := range readAll(t, cl, c.Kafka.partialsTopic())[before:] {
		ch, err := decodePartialChunk(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if ch.id.start+testSize.Milliseconds() <= ct {
			stale++
		}
	}
	if stale > 0 {
		t.Errorf("after the rebalance, %d partials of windows already final (through %s) were written", stale, tsString(ct))
	}
}
