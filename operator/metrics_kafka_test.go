package operator

// Integration test of the default observability against a real Apache
// Kafka broker (skips when DPSTREAM_TEST_BROKERS is unset or the broker is
// down). Deterministic in what it asserts: no statistical false-failure
// rate.

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// TestKafkaDefaultObservability: a whole run (fetch, consume, close,
// publish, drain) with the default observability settings, over a stream
// in which one unit is alone in its group (withheld by private group
// selection) and also sends a malformed and a late message: the registry
// serves only operational metrics, and no log line carries the exact
// counts groups_withheld or open_windows. Old code: it served
// events_in_total, groups_not_selected_total … and logged groups_withheld
// on every "window published" and open_windows on "drained".
func TestKafkaDefaultObservability(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName("dpstream-obs-in"), uniqueName("dpstream-obs-out")
	createTopic(t, cl, in, 1)
	c := testConfig(brokers, in, out, uniqueName("dpstream-obs"))
	c.Kafka.CreateTopics = true
	c.Privacy.PublicGroups = nil // private group selection
	c.Windows.Start = time.UnixMilli(testBase).UTC().Format(time.RFC3339)
	c.Observability.LogLevel = "info"
	if c.Observability.SensitiveMetrics {
		t.Fatal("testConfig turns sensitive_metrics on")
	}
	produce(t, brokers, in, neighbourMessages(true, "west"))

	var logs kafkatest.Buffer
	var mu sync.Mutex
	withheld := 0
	pub := make(chan int64, 64)
	op, err := New(c, WithKey(testKey()), WithRegistry(prometheus.NewRegistry()), WithClock(testClock(c.Windows.IdleTimeout)),
		WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))),
		WithReleaseHook(func(p Published) {
			mu.Lock()
			withheld += p.Withheld
			mu.Unlock()
			pub <- p.Window.Start
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(t, op, testBase+2*testSize.Milliseconds(), pub, 90*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	if withheld == 0 {
		t.Error("no group withheld: the lone unit's group should be")
	}
	mu.Unlock()

	mfs, err := op.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !slices.Contains(operationalMetrics, mf.GetName()) {
			t.Errorf("default registry serves %s, which is not an operational metric", mf.GetName())
		}
	}
	if counter(t, op.Registry(), "dpstream_windows_published_total", "") < 3 {
		t.Error("windows_published_total < 3")
	}
	l := logs.String()
	for _, want := range []string{`"msg":"window published"`, `"msg":"drained"`} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %s", want)
		}
	}
	for _, key := range []string{`"groups_withheld"`, `"open_windows"`} {
		if strings.Contains(l, key) {
			t.Errorf("default log carries the exact count %s", key)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", l)
	}
}
