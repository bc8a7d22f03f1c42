package operator

// Broker test of backpressure on a schema registry outage
// (registry_outage.go), with an httptest registry. It skips unless
// DPSTREAM_TEST_BROKERS is set.

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// outageRegistry serves testAvroSchema as id 1 and a definite "no such
// schema" (404, error code 40403) for every other id; its first failures
// requests fail: the first half by closing the connection (a transport
// error), the rest with status 500.
func outageRegistry(t *testing.T, failures int32) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch k := n.Add(1); {
		case k <= failures/2:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case k <= failures:
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if r.URL.Path != "/ccompat/schemas/ids/1" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error_code": 40403, "message": "Schema not found"}`))
			return
		}
		b := new(bytes.Buffer)
		b.WriteString(`{"schema": `)
		b.WriteString(jsonString(testAvroSchema))
		b.WriteString(`}`)
		_, _ = w.Write(b.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// TestKafkaRegistryOutage: the test stream as framed Avro, read once with
// a registry that answers at once and once with one whose first 6
// requests fail (3 closed connections, then 3 status 500): the second run
// skips no message, releases byte-identical releases (the same windows,
// groups and noise: same key and release namespace), counts the 6 failed
// requests, logs one WARN naming the registry's URL and ends with no
// partition blocked. In both runs the messages of an id the registry
// definitely does not have (404, error code 40403) are skipped as
// unknown_schema. Old code: a failed fetch was retried 3 times and the
// message skipped as unknown_schema, so the second run lost events.
func TestKafkaRegistryOutage(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-outage-in")
	createTopic(t, cl, in, 1)
	s := genStream(23, 3, 30)
	msgs := s.messages(0, time.Second) // the events, then the sentinel
	const unknown = 2                  // messages of schema id 2, not in the registry
	var avroMsgs []kafka.Message
	for i, m := range msgs {
		e := testEvent{user: "sentinel", region: "north", cat: "a", time: testStreamEnd.Load() - testArrivalDelay}
		if i < len(s.events) {
			e = s.events[i]
		}
		rec := testAvroRecord(e)
		m.Value = framedAvro(t, 1, testAvroSchema, rec)
		avroMsgs = append(avroMsgs, m)
		if i == 1 {
			for range unknown {
				m.Value = framedAvro(t, 2, testAvroSchema, rec)
				avroMsgs = append(avroMsgs, m)
			}
		}
	}
	produce(t, brokers, in, avroMsgs)

	const failures = 6
	var raws [2]map[string][]byte
	for run, fail := range []int32{0, failures} {
		srv, requests := outageRegistry(t, fail)
		out := uniqueName("dpstream-outage-out")
		c := testConfig(brokers, in, out, uniqueName("dpstream-outage"))
		c.Kafka.CreateTopics = true
		c.Kafka.RetryBackoff, c.Kafka.RetryBackoffMax = 50*time.Millisecond, 200*time.Millisecond
		c.Observability.SensitiveMetrics = true // the test reads the skip counters
		c.Schema.Format = schema.FormatAvro
		c.Schema.Registry.URL = srv.URL + "/ccompat"
		op, pub, logs := newLoggedTestOperator(t, c)
		if err := runUntil(t, op, testBase+2*testSize.Milliseconds(), pub, 90*time.Second); err != nil {
			t.Fatalf("run %d: Run: %v", run, err)
		}
		reg := op.Registry()
		if got := counter(t, reg, "dpstream_events_skipped_total", schema.ReasonUnknownSchema.String()); got != unknown {
			t.Errorf("run %d: unknown_schema skips = %v, want %d", run, got, unknown)
		}
		if got := counter(t, reg, "dpstream_events_decoded_total", ""); got != float64(len(msgs)) {
			t.Errorf("run %d: events decoded = %v, want %d (none lost to the outage)", run, got, len(msgs))
		}
		if got := counter(t, reg, "dpstream_registry_errors_total", ""); got != float64(fail) || requests.Load() < fail+2 {
			t.Errorf("run %d: registry_errors_total = %v after %d requests, want %d", run, got, requests.Load(), fail)
		}
		if got := gauge(t, reg, "dpstream_registry_blocked_partitions"); got != 0 {
			t.Errorf("run %d: registry_blocked_partitions = %v at the end, want 0", run, got)
		}
		warns := strings.Count(logs.String(), "decoding waits (the partition that needs a schema from it, and the others with it)")
		if want := min(int(fail), 1); warns != want || (fail > 0 && !strings.Contains(logs.String(), srv.URL)) {
			t.Errorf("run %d: %d WARN lines about the registry, want %d naming %s", run, warns, want, srv.URL)
		}
		rels, raw := readReleases(t, cl, out)
		if n := checkReleases(t, s, c, rels); n != 72 {
			t.Errorf("run %d: checked %d values, want 72", run, n)
		}
		raws[run] = raw
	}
	if len(raws[0]) == 0 || len(raws[0]) != len(raws[1]) {
		t.Fatalf("%d and %d releases", len(raws[0]), len(raws[1]))
	}
	for k, b := range raws[0] {
		if !bytes.Equal(b, raws[1][k]) {
			t.Errorf("release %s differs between the runs without and with the outage", k)
		}
	}
}

// TestKafkaRegistryDown: with a registry that answers every request with
// status 500, the partition blocks (registry_blocked_partitions 1,
// /readyz 503 naming the registry), nothing is decoded nor skipped, and
// Run still returns when its context ends. Old code: the messages were
// skipped as unknown_schema.
func TestKafkaRegistryDown(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-down-in")
	createTopic(t, cl, in, 1)
	s := genStream(23, 1, 5)
	msgs := s.messages(0, time.Second)
	for i := range msgs {
		e := s.events[min(i, len(s.events)-1)]
		msgs[i].Value = framedAvro(t, 1, testAvroSchema, testAvroRecord(e))
	}
	produce(t, brokers, in, msgs)
	srv, _ := outageRegistry(t, 1<<30)
	c := testConfig(brokers, in, uniqueName("dpstream-down-out"), uniqueName("dpstream-down"))
	c.Kafka.CreateTopics = true
	c.Kafka.RetryBackoff, c.Kafka.RetryBackoffMax = 50*time.Millisecond, 200*time.Millisecond
	c.Observability.SensitiveMetrics = true
	c.Schema.Format = schema.FormatAvro
	c.Schema.Registry.URL = srv.URL + "/ccompat"
	op, _, _ := newLoggedTestOperator(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- op.Run(ctx) }()
	reg := op.Registry()
	deadline := time.After(60 * time.Second) // a hang guard, not a timing assertion
	for gauge(t, reg, "dpstream_registry_blocked_partitions") != 1 || counter(t, reg, "dpstream_registry_errors_total", "") < 3 {
		select {
		case err := <-errc:
			t.Fatalf("Run returned %v before the partition blocked", err)
		case <-deadline:
			t.Fatal("the partition did not block within 60 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
	rec := httptest.NewRecorder()
	op.health.handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if body := rec.Body.String(); rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, "schema registry unavailable") || !strings.Contains(body, srv.URL) {
		t.Errorf("/readyz during the outage: %d %q, want 503 naming the registry", rec.Code, body)
	}
	if got := counter(t, reg, "dpstream_events_decoded_total", ""); got != 0 {
		t.Errorf("events decoded during the outage: %v, want 0", got)
	}
	if got := counter(t, reg, "dpstream_events_skipped_total", schema.ReasonUnknownSchema.String()); got != 0 {
		t.Errorf("unknown_schema skips during the outage: %v, want 0", got)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run: %v", err)
	}
}
