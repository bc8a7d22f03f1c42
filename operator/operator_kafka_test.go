package operator

// Integration tests against a real Apache Kafka broker (deploy/kafka/kafka.sh).
// They skip when DPSTREAM_TEST_BROKERS is unset or the broker is down.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// runUntil runs an operator until the window starting at lastStart is
// published (or the hook's crash fires), then stops it and returns Run's
// error. The deadline bounds the whole run.
func runUntil(t *testing.T, op *Operator, lastStart int64, published chan int64, deadline time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- op.Run(ctx) }()
	timeout := time.After(deadline)
	for {
		select {
		case s := <-published:
			if s >= lastStart {
				cancel()
				return <-errc
			}
		case err := <-errc:
			return err
		case <-timeout:
			cancel()
			<-errc
			t.Fatalf("window %d not published within %v", lastStart, deadline)
		}
	}
}

// newTestOperator builds an operator with the test key, a logger, its own
// registry, the test clock (testClock: consistent with the simulated
// arrival times of the latest test stream), and a hook sending the start
// of every published window. The logger collects every line at debug level
// (shown with -v); when the test ends, scanLogs fails it if any line holds
// the noise key or a unit id of the test streams.
func newTestOperator(t *testing.T, c Config) (*Operator, chan int64) {
	t.Helper()
	op, ch, _ := newLoggedTestOperator(t, c)
	return op, ch
}

// newLoggedTestOperator is newTestOperator that also returns the log.
func newLoggedTestOperator(t *testing.T, c Config) (*Operator, chan int64, *logSink) {
	t.Helper()
	ch := make(chan int64, 1024)
	sink := &logSink{}
	log := sink.logger(t)
	t.Cleanup(func() { scanLogs(t, sink) })
	op, err := New(c, WithKey(testKey()), WithLogger(log), WithRegistry(prometheus.NewRegistry()),
		WithClock(testClock(c.Windows.IdleTimeout)), WithReleaseHook(func(p Published) { ch <- p.Window.Start }))
	if err != nil {
		t.Fatal(err)
	}
	return op, ch, sink
}

// testStreamUnits is more than the number of units any test stream
// (genStream) has: their ids are "user-0" … "user-<n-1>", plus the
// flooding unit "flood" of spreadMessages.
const testStreamUnits = 1000

// scanLogs fails t if a line of sink holds the noise key (raw, hex,
// base64) or, as a whole token, a unit id of the test streams. (Event
// values of genStream are small numbers that a log line could hold by
// chance; TestKafkaSecurity scans for values made unique for that.)
func scanLogs(t *testing.T, sink *logSink) {
	var sec secrets
	sec.key()
	for u := range testStreamUnits {
		sec.token("unit id", "user-"+strconv.Itoa(u))
	}
	sec.token("unit id", "flood")
	for _, f := range sec.find(sink.String()) {
		t.Error(f)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// counter reads a counter of the registry by name and label value ("" for
// none), 0 if absent.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || (len(m.GetLabel()) > 0 && m.GetLabel()[0].GetValue() == label) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestKafkaEndToEnd: a known stream with bad input mixed in goes through a
// real broker; the output topic, decoded with the exported decoder, has
// every expected window and group with values within their intervals at
// the stated rate and consistent metadata; bad input is counted by reason;
// /metrics, /healthz and /readyz answer.
func TestKafkaEndToEnd(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName("dpstream-e2e-in"), uniqueName("dpstream-e2e-out")
	createTopic(t, cl, in, 2)
	s := genStream(11, 4, 60)
	c := testConfig(brokers, in, out, uniqueName("dpstream-e2e"))
	c.Kafka.CreateTopics = true
	c.Observability.Listen = "127.0.0.1:0"
	c.Observability.SensitiveMetrics = true // the test reads the input and skip counters
	msgs := s.messages(7, c.Windows.AllowedLateness)
	produce(t, brokers, in, msgs)

	op, pub := newTestOperator(t, c)
	var ready atomic.Bool
	go func() {
		addr := op.MetricsAddr(context.Background())
		for range 200 {
			if r, err := http.Get("http://" + addr + "/readyz"); err == nil {
				r.Body.Close()
				if r.StatusCode == 200 {
					ready.Store(true)
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	lastStart := testBase + 3*testSize.Milliseconds()
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !ready.Load() {
		t.Error("/readyz never answered 200")
	}
	rels, _ := readReleases(t, cl, out)
	if n := checkReleases(t, s, c, rels); n != 96 {
		t.Errorf("checked %d values, want 96", n)
	}
	reg := op.Registry()
	_, reasons := badInputs()
	for _, r := range reasons {
		if counter(t, reg, "dpstream_events_skipped_total", r.String()) == 0 {
			t.Errorf("bad input reason %s not counted", r)
		}
	}
	if got := counter(t, reg, "dpstream_events_in_total", in); got != float64(len(msgs)) {
		t.Errorf("events_in_total = %v, want %d", got, len(msgs))
	}
	if got := counter(t, reg, "dpstream_windows_published_total", ""); got < 4 {
		t.Errorf("windows_published_total = %v, want ≥ 4", got)
	}
	// The ledger: a per-window budget is spent once per window.
	for name, want := range map[string]float64{
		"dpstream_budget_spent_epsilon": c.Privacy.Epsilon, "dpstream_budget_spent_delta": c.Privacy.Delta,
		"dpstream_budget_total_epsilon": c.Privacy.Epsilon, "dpstream_budget_window_delta": c.Privacy.Delta,
	} {
		if got := gauge(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// gauge returns the value of an unlabelled gauge, NaN if absent.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return math.NaN()
}

// TestKafkaRestartNoDuplicates: a run interrupted by simulated crashes —
// in the middle of a window's publication, after the releases but before
// the state record, after the state record but before the commit — and by
// a clean stop, then restarted, publishes exactly the releases of an
// uninterrupted run: same keys, identical bytes, nothing twice.
func TestKafkaRestartNoDuplicates(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-restart-in")
	createTopic(t, cl, in, 2)
	const nWindows = 6
	s := genStream(12, nWindows, 40)
	produce(t, brokers, in, s.messages(0, time.Second))
	lastStart := testBase + (nWindows-1)*testSize.Milliseconds()

	// The reference: one uninterrupted run.
	refOut := uniqueName("dpstream-restart-ref")
	ref := testConfig(brokers, in, refOut, uniqueName("dpstream-ref"))
	ref.Kafka.CreateTopics = true
	op, pub := newTestOperator(t, ref)
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("reference run: %v", err)
	}
	refRels, refRaw := readReleases(t, cl, refOut)
	if len(refRels) != nWindows*3*4 {
		t.Fatalf("reference run published %d releases, want %d", len(refRels), nWindows*3*4)
	}

	// Each crash stage in its own deployment (group, output and state
	// topics): a run that crashes at the stage, then a clean run that must
	// complete the publication (from the recorded intent where there is
	// one) and everything after it.
	for _, stage := range []crashPoint{crashHalf, crashReleases, crashState} {
		out := uniqueName("dpstream-restart-" + stage.String())
		c := testConfig(brokers, in, out, uniqueName("dpstream-crash-"+stage.String()))
		c.Kafka.CreateTopics = true
		op, pub := newTestOperator(t, c)
		fired := false
		op.crash = func(s crashPoint) bool {
			if s == stage {
				fired = true
			}
			return s == stage
		}
		if err := runUntil(t, op, lastStart, pub, 90*time.Second); !errors.Is(err, errCrash) {
			t.Fatalf("%s: want a simulated crash, got %v (fired %v)", stage, err, fired)
		}
		op, _ = newTestOperator(t, c)
		runUntilOutput(t, op, cl, out, len(refRels), 90*time.Second)
		rels, raw := readReleases(t, cl, out) // fails on duplicate keys
		if len(rels) != len(refRels) {
			t.Errorf("%s: interrupted runs published %d releases, the reference %d", stage, len(rels), len(refRels))
		}
		for k, b := range refRaw {
			if got, ok := raw[k]; !ok {
				t.Errorf("%s: release %q missing after the restart", stage, k)
			} else if !bytes.Equal(got, b) {
				t.Errorf("%s: release %q differs from the reference run", stage, k)
			}
		}
	}
}

// runUntilOutput runs op until the output topic holds n messages (a run
// that only completes an earlier publication publishes no new window, so
// the release hook cannot tell), then stops it and fails on a Run error.
func runUntilOutput(t *testing.T, op *Operator, cl *clients, out string, n int, deadline time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- op.Run(ctx) }()
	stop := time.Now().Add(deadline)
	for time.Now().Before(stop) {
		select {
		case err := <-errc:
			t.Fatalf("run ended early: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
		if len(readAll(t, cl, out)) >= n {
			cancel()
			if err := <-errc; err != nil {
				t.Fatalf("run: %v", err)
			}
			return
		}
	}
	cancel()
	<-errc
	t.Fatalf("output %s did not reach %d messages within %v", out, n, deadline)
}

// consumed reads the operator's events_in counter for topic (a sensitive
// metric: the operator must run with observability.sensitive_metrics).
func consumed(op *Operator, topic string) float64 {
	var m dto.Metric
	_ = op.m.s.eventsIn.WithLabelValues(topic).Write(&m)
	return m.GetCounter().GetValue()
}

// BenchmarkKafkaEndToEnd measures events/s through the operator (fetch,
// decode, windows, noise, publish) on the real broker, next to a bare
// kafka-go consumer group reading the same topic in the same run, and the
// publish latency after window close. Both are timed from their first
// message to their last (the group join is excluded from both). The machine
// is shared, so each runs rounds times, alternating, and the best of each is
// reported. Run it with
//
//	go test -run '^$' -bench KafkaEndToEnd -benchtime 1x ./operator
func BenchmarkKafkaEndToEnd(b *testing.B) {
	brokers := kafkatest.Brokers(b)
	cl := testClients(b, brokers)
	in := uniqueName("dpstream-bench-in")
	createTopic(b, cl, in, 2)
	s := genStream(13, 10, 10000) // ≈ 200 000 events
	msgs := s.messages(0, time.Second)
	produce(b, brokers, in, msgs)
	n := len(msgs)
	const rounds = 3
	for b.Loop() {
		var bestBare, bestOp float64
		var maxLat time.Duration
		for range rounds {
			bestBare = max(bestBare, benchBare(b, brokers, in, n))
			r, lat := benchOperator(b, brokers, in, n)
			bestOp = max(bestOp, r)
			maxLat = max(maxLat, lat)
		}
		b.ReportMetric(bestOp, "events/s")
		b.ReportMetric(bestBare, "bare-events/s")
		b.ReportMetric(bestOp/bestBare, "ratio")
		b.ReportMetric(float64(maxLat.Microseconds())/1000, "max-publish-ms")
	}
}

// benchBare reads n messages of topic with a fresh kafka-go consumer group
// and returns messages/s from the first message to the last.
func benchBare(b *testing.B, brokers []string, topic string, n int) float64 {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: uniqueName("dpstream-bench-bare"),
		Topic: topic, MinBytes: 1, MaxBytes: 8 << 20, MaxWait: 250 * time.Millisecond, StartOffset: kafka.FirstOffset})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := r.FetchMessage(ctx); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	for range n - 1 {
		if _, err := r.FetchMessage(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n-1) / time.Since(t0).Seconds()
}

// benchOperator runs an operator on topic with a fresh group until it has
// consumed n messages; it returns messages/s from the first to the last and
// the largest publish latency after window close.
func benchOperator(b *testing.B, brokers []string, topic string, n int) (float64, time.Duration) {
	c := testConfig(brokers, topic, uniqueName("dpstream-bench-out"), uniqueName("dpstream-bench"))
	c.Kafka.CreateTopics = true
	c.Observability.SensitiveMetrics = true // progress is read from events_in_total
	var mu sync.Mutex
	var maxLat time.Duration
	op, err := New(c, WithKey(testKey()), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		// The clock at the real rate (latencies), from the stream's end.
		WithRegistry(prometheus.NewRegistry()), WithClock(slowClock(c.Windows.IdleTimeout, 1)), WithReleaseHook(func(p Published) {
			mu.Lock()
			maxLat = max(maxLat, p.Latency)
			mu.Unlock()
		}))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- op.Run(ctx) }()
	// The first message counts once its fetcher has decoded a chunk of
	// itemChunk messages. (Before fetchers handed over chunks, it counted
	// only after a whole fetch of up to 8 MiB was decoded, which left much
	// of this small input out of the timing: the ratio read 2.0 where
	// it is about 1.)
	for consumed(op, topic) == 0 {
		time.Sleep(time.Millisecond)
	}
	first := time.Now()
	for consumed(op, topic) < float64(n) {
		time.Sleep(time.Millisecond)
	}
	rate := float64(n-1) / time.Since(first).Seconds()
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return rate, maxLat
}
