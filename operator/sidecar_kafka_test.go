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

	published := make(chan int64, 1<<12)
	sink := &logSink{}
	t.Cleanup(func() { scanLogs(t, sink) })
	var running sync.WaitGroup
	errs := make(chan error, 8)
	start := func(name string, c Config) context.CancelFunc {
		op, err := New(c, WithKey(testKey()), WithLogger(sink.logger(t).With("instance", name)),
			WithRegistry(prometheus.NewRegistry()), WithClock(clock.now),
			WithReleaseHook(func(p Published) { published <- p.Window.Start }))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		running.Add(1)
		done := make(chan struct{})
		go func() {
			defer running.Done()
			defer close(done)
			if err := op.Run(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
		return func() { cancel(); <-done }
	}
	t.Cleanup(running.Wait)
	waitFor := func(what string, w int64) {
		t.Helper()
		timeout := time.After(120 * time.Second)
		for {
			select {
			case s := <-published:
				if s >= w {
					return
				}
			case err := <-errs:
				t.Fatal(err)
			case <-timeout:
				t.Fatalf("%s: window %s not published within 120 s", what, tsString(w))
			}
		}
	}

	stopA := start("a", c)
	stopB := start("b", c)
	var origin int64
	for deadline := time.Now().Add(60 * time.Second); origin == 0; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		o, err := firstOriginProposal(ctx, cl, c.Kafka.stateTopic(), group)
		cancel()
		if err == nil {
			origin = o
		}
		if time.Now().After(deadline) {
			t.Fatal("no origin recorded in the state topic within 60 s")
		}
	}
	if origin != wantOrigin {
		t.Fatalf("origin %s, want the first window after the instances' clock %s", tsString(origin), tsString(wantOrigin))
	}
	clock.start()

	// The rolling update: a changed non-privacy setting in the new pods.
	next := c
	next.Observability.LogLevel = "debug"
	next.Kafka.CommitInterval = 2 * time.Second
	next.Kafka.ClientID = "dpstream-v2"
	waitFor("before the update", first+size)
	stopA()
	stopA2 := start("a2", next)
	waitFor("after replacing a", first+3*size)
	stopB()
	stopB2 := start("b2", next)
	waitFor("after replacing b", last)
	stopA2()
	stopB2()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	// A first start logs no epoch for an origin not recorded yet.
	if strings.Contains(sink.String(), "1970-01-01") {
		t.Error("a log line shows the epoch (1970-01-01) as a time")
	}

	// Final, with the same origin, in the state topic.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec, err := lastState(ctx, cl, c.Kafka.stateTopic(), group, nil)
	if err != nil || rec == nil {
		t.Fatalf("state record: %v %v", rec, err)
	}
	if rec.Origin != origin || rec.ClosedThrough < last+size {
		t.Errorf("state record: origin %s closed through %s, want origin %s and at least %s",
			tsString(rec.Origin), tsString(rec.ClosedThrough), tsString(origin), tsString(last+size))
	}
	// Complete and exactly once (readReleases fails on a key published twice).
	rels, raw := readReleases(t, cl, out)
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

	// Byte-identical to one instance without scale-out from that origin.
	ref := c
	ref.Kafka.ScaleOut = false
	ref.Kafka.GroupID, ref.Kafka.OutputTopic = uniqueName("dpstream-sidecar-ref"), uniqueName("dpstream-sidecar-ref-out")
	ref.Kafka.ReleaseNamespace, ref.Kafka.Instance = ns, group // scale-out's instance name is the group id
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
	if want := int((last-origin)/size+1) * len(regions) * len(c.Windows.Aggregates); compared != want {
		t.Errorf("compared %d releases with the reference, want %d", compared, want)
	}
}
