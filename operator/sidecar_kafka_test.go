package operator

// Broker test of the Kubernetes sidecar manifest's configuration
// (deploy/k8s/sidecar/configmap.yaml): several replicas with scale-out and
// no windows.start, through a rolling update.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/internal/shipped"
	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// sidecarConfig is the sidecar manifest's dpstream configuration, loaded
// as dpstream run loads it, pointed at the test's brokers, topics and
// group, without a listener and with topics created (the manifest expects
// them provisioned).
func sidecarConfig(t *testing.T, brokers []string, in, out, group string) Config {
	t.Helper()
	sc, err := shipped.Find("..", "k8s-sidecar")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dpstream.yaml")
	if err := os.WriteFile(f, []byte(sc.Text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(f, nil)
	if err != nil {
		t.Fatalf("%s: %v", sc.Source, err)
	}
	c.Kafka.Brokers, c.Kafka.InputTopics, c.Kafka.OutputTopic, c.Kafka.GroupID = brokers, []string{in}, out, group
	c.Kafka.CreateTopics = true
	c.Kafka.RetryBackoff = 100 * time.Millisecond
	c.Observability.Listen = ""
	return c
}

// simClock is a shared simulated clock: frozen at t0 until start, then
// running speed times faster than real time.
type simClock struct {
	t0      time.Time
	speed   time.Duration
	started atomic.Pointer[time.Time]
}

func (c *simClock) start() { now := time.Now(); c.started.Store(&now) }

func (c *simClock) now() time.Time {
	s := c.started.Load()
	if s == nil {
		return c.t0
	}
	return c.t0.Add(time.Since(*s) * c.speed)
}

// meterReadings returns the JSON readings of meters meters (region i%4 of
// regions, tariff i%3 of tariffs, a fixed kWh), one every 15 s each in
// every window from first for n windows of size ms, keyed by meter, with
// the record time the event time.
func meterReadings(meters int, regions, tariffs []string, first, size int64, n int) []kafka.Message {
	const every = 15000 // ms between two readings of a meter
	var msgs []kafka.Message
	for w := range int64(n) {
		for i := range meters {
			phase := int64(i*997) % every
			for at := first + w*size + phase; at < first+(w+1)*size; at += every {
				m := fmt.Sprintf("m-%04d", i)
				v, _ := json.Marshal(map[string]any{"ts": at, "meter": m, "region": regions[i%len(regions)],
					"tariff": tariffs[i%len(tariffs)], "kwh": 0.05 + float64(i%8)*0.05})
				msgs = append(msgs, kafka.Message{Key: []byte(m), Value: v, Time: time.UnixMilli(at)})
			}
		}
	}
	return msgs
}

// TestKafkaSidecarRollingUpdate: two instances of the sidecar manifest's
// configuration (kafka.scale_out, no windows.start) start together on a
// 4-partition input; they agree on the origin (the first window after
// their clock, recorded in the state topic), and a rolling update — stop
// one, start a replacement with changed non-privacy settings (log level,
// commit interval, client id), then the same for the other — leaves every
// window from the origin through the last one with data released
// completely (every public region and aggregate), exactly once, final in
// the state topic, and byte-identical to one instance without scale-out
// given windows.start = that origin; no log line shows the epoch as the
// origin of a first start. On the old code the configuration is refused
// (scale_out needed windows.start), and a first start logged origin
// 1970-01-01.
func TestKafkaSidecarRollingUpdate(t *testing.T) {
	t.Parallel() // waits on the broker mostly; own topics and groups (docs/development.md)
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out, group := uniqueName("dpstream-sidecar-in"), uniqueName("dpstream-sidecar-out"), uniqueName("dpstream-sidecar")
	createTopic(t, cl, in, 4)
	c := sidecarConfig(t, brokers, in, out, group)
	size := c.Windows.Size.Milliseconds()
	// The clock: a whole window every 2 s once started (2 s leaves the
	// instances time to rebalance between windows; correctness does not
	// depend on it).
	clock := &simClock{t0: time.Now().Truncate(time.Minute), speed: c.Windows.Size / (2 * time.Second)}
	const nData = 6 // windows with data
	p := &plan{offset: c.Windows.Offset.Milliseconds(), size: size}
	wantOrigin := p.windowAfter(clock.t0)
	first := wantOrigin + size // the first window with data
	last := first + (nData-1)*size
	regions := make([]string, len(c.Privacy.PublicGroups))
	for i, g := range c.Privacy.PublicGroups {
		regions[i] = g[0]
	}
	produce(t, brokers, in, meterReadings(80, regions, c.Schema.Histogram.Categories, first, size, nData))

	r := newInstances(t, clock)
	stopA := r.start("a", c)
	stopB := r.start("b", c)
	origin := r.waitOrigin(cl, c.Kafka.stateTopic(), group)
	if origin != wantOrigin {
		t.Fatalf("origin %s, want the first window after the instances' clock %s", tsString(origin), tsString(wantOrigin))
	}
	clock.start()

	// The rolling update: a changed non-privacy setting in the new pods.
	next := c
	next.Observability.LogLevel = "debug"
	next.Kafka.CommitInterval = 2 * time.Second
	next.Kafka.ClientID = "dpstream-v2"
	r.waitFor("before the update", first+size)
	stopA()
	stopA2 := r.start("a2", next)
	r.waitFor("after replacing a", first+3*size)
	stopB()
	stopB2 := r.start("b2", next)
	r.waitFor("after replacing b", last)
	stopA2()
	stopB2()
	select {
	case err := <-r.errs:
		t.Fatal(err)
	default:
	}

	// A first start logs no epoch for an origin not recorded yet.
	if strings.Contains(r.sink.String(), "1970-01-01") {
		t.Error("a log line shows the epoch (1970-01-01) as a time")
	}
	raw := checkSidecarOutput(t, cl, c, origin, last, regions)
	compareWithReference(t, cl, c, r.sink, origin, last, raw)
}

// instances runs operators of one test on a shared simulated clock,
// collecting the windows they publish, their Run errors and their logs.
type instances struct {
	t         *testing.T
	clock     *simClock
	published chan int64
	errs      chan error
	sink      *logSink
	running   sync.WaitGroup
}

func newInstances(t *testing.T, clock *simClock) *instances {
	r := &instances{t: t, clock: clock, published: make(chan int64, 1<<12), errs: make(chan error, 8), sink: &logSink{}}
	t.Cleanup(func() { scanLogs(t, r.sink) })
	t.Cleanup(r.running.Wait)
	return r
}

// start runs an instance of c called name; the function returned stops it
// (as SIGTERM does) and waits until it has.
func (r *instances) start(name string, c Config) func() {
	op, err := New(c, WithKey(testKey()), WithLogger(r.sink.logger(r.t).With("instance", name)),
		WithRegistry(prometheus.NewRegistry()), WithClock(r.clock.now),
		WithReleaseHook(func(p Published) { r.published <- p.Window.Start }))
	if err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.running.Add(1)
	done := make(chan struct{})
	go func() {
		defer r.running.Done()
		defer close(done)
		if err := op.Run(ctx); err != nil {
			r.errs <- fmt.Errorf("%s: %w", name, err)
		}
	}()
	return func() { cancel(); <-done }
}

// waitFor returns once window w (or a later one) is published; an
// instance's error or 120 s fail the test.
func (r *instances) waitFor(what string, w int64) {
	r.t.Helper()
	timeout := time.After(120 * time.Second)
	for {
		select {
		case s := <-r.published:
			if s >= w {
				return
			}
		case err := <-r.errs:
			r.t.Fatal(err)
		case <-timeout:
			r.t.Fatalf("%s: window %s not published within 120 s", what, tsString(w))
		}
	}
}

// waitOrigin returns the first origin proposal of group in stateTopic once
// there is one (60 s at most).
func (r *instances) waitOrigin(cl *clients, stateTopic, group string) int64 {
	r.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		o, err := firstOriginProposal(ctx, cl, stateTopic, group)
		cancel()
		if err == nil && o != 0 {
			return o
		}
	}
	r.t.Fatal("no origin recorded in the state topic within 60 s")
	return 0
}

// checkSidecarOutput checks that the state topic records origin and every
// window through last as final, and that the output topic holds every
// release of every window from origin through last (each public region
// and aggregate), once, and none before origin; it returns the output's
// messages by key.
func checkSidecarOutput(t *testing.T, cl *clients, c Config, origin, last int64, regions []string) map[string][]byte {
	t.Helper()
	size := c.Windows.Size.Milliseconds()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec, err := lastState(ctx, cl, c.Kafka.stateTopic(), c.Kafka.GroupID, nil)
	if err != nil || rec == nil {
		t.Fatalf("state record: %v %v", rec, err)
	}
	if rec.Origin != origin || rec.ClosedThrough < last+size {
		t.Errorf("state record: origin %s closed through %s, want origin %s and at least %s",
			tsString(rec.Origin), tsString(rec.ClosedThrough), tsString(origin), tsString(last+size))
	}
	rels, raw := readReleases(t, cl, c.Kafka.OutputTopic) // fails on a key published twice
	ns := c.Kafka.namespace()
	for w := origin; w <= last; w += size {
		for _, r := range regions {
			for _, a := range c.Windows.Aggregates {
				if _, ok := rels[schema.ReleaseKey(releaseID(ns, w), a, r)]; !ok {
					t.Errorf("release %s %s of window %s missing", a, r, tsString(w))
				}
			}
		}
	}
	for k, r := range rels {
		if r.WindowStart < origin {
			t.Errorf("release %s is before the origin %s", k, tsString(origin))
		}
	}
	return raw
}

// compareWithReference runs one instance of c without scale-out, with
// windows.start = origin and scale-out's release namespace and instance
// name, and checks that its releases of the windows through last are
// exactly raw's, byte for byte.
func compareWithReference(t *testing.T, cl *clients, c Config, sink *logSink, origin, last int64, raw map[string][]byte) {
	t.Helper()
	size := c.Windows.Size.Milliseconds()
	ref := c
	ref.Kafka.ScaleOut = false
	ref.Kafka.GroupID, ref.Kafka.OutputTopic = uniqueName("dpstream-sidecar-ref"), uniqueName("dpstream-sidecar-ref-out")
	ref.Kafka.ReleaseNamespace, ref.Kafka.Instance = c.Kafka.namespace(), c.Kafka.GroupID // scale-out's instance name is the group id
	ref.Windows.Start = time.UnixMilli(origin).UTC().Format(time.RFC3339)
	refPub := make(chan int64, 1<<12)
	refClock := time.UnixMilli(last + 3*size + c.Windows.AllowedLateness.Milliseconds() + c.Windows.IdleTimeout.Milliseconds())
	op, err := New(ref, WithKey(testKey()), WithLogger(sink.logger(t).With("instance", "ref")), WithRegistry(prometheus.NewRegistry()),
		WithClock(func() time.Time { return refClock }), WithReleaseHook(func(p Published) { refPub <- p.Window.Start }))
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(t, op, last, refPub, 120*time.Second); err != nil {
		t.Fatalf("reference instance: %v", err)
	}
	_, refRaw := readReleases(t, cl, ref.Kafka.OutputTopic)
	compared := 0
	for k, b := range refRaw {
		if w, _ := schema.DecodeRelease(b); w.WindowStart > last {
			continue
		}
		compared++
		if got, ok := raw[k]; !ok {
			t.Errorf("release %q of the reference missing after the rolling update", k)
		} else if !bytes.Equal(got, b) {
			t.Errorf("release %q differs from the reference", k)
		}
	}
	regions := len(c.Privacy.PublicGroups)
	if want := int((last-origin)/size+1) * regions * len(c.Windows.Aggregates); compared != want {
		t.Errorf("compared %d releases with the reference, want %d", compared, want)
	}
}
