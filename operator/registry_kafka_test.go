package operator

// Integration test of framed Avro input against a real schema registry
// (deploy/registry/registry.sh) and broker. It skips unless
// DPSTREAM_TEST_REGISTRY (the URL registry.sh start prints) and
// DPSTREAM_TEST_BROKERS are set; deploy/test.sh sets both.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// envRegistry names the registry's Confluent-compatible base URL.
const envRegistry = "DPSTREAM_TEST_REGISTRY"

// testAvroSchema is the writer schema of the test stream's events (the
// fields of testEvent.encode, with a nested record the config skips).
const testAvroSchema = `{"type": "record", "name": "Reading", "namespace": "dpstream.test", "fields": [
 {"name": "ts", "type": "long"}, {"name": "user", "type": "string"},
 {"name": "meta", "type": {"type": "record", "name": "Meta", "fields": [{"name": "extra", "type": "string"}]}},
 {"name": "region", "type": "string"}, {"name": "cat", "type": "string"},
 {"name": "v", "type": "double"}]}`

// testAvroNoRegion is a schema without the group-by field region.
const testAvroNoRegion = `{"type": "record", "name": "Reading", "namespace": "dpstream.test", "fields": [
 {"name": "ts", "type": "long"}, {"name": "user", "type": "string"},
 {"name": "cat", "type": "string"}, {"name": "v", "type": "double"}]}`

// testRegistry returns the registry's URL, or skips the test saying how
// to start one.
func testRegistry(t *testing.T) string {
	t.Helper()
	url := os.Getenv(envRegistry)
	if url == "" {
		t.Skip(envRegistry + " is not set: run deploy/registry/registry.sh start and export " + envRegistry + " as the URL it prints; deploy/test.sh does both")
	}
	return url
}

// testAvroRecord is e as a record of testAvroSchema.
func testAvroRecord(e testEvent) map[string]any {
	return map[string]any{"ts": e.time, "user": e.user, "meta": map[string]any{"extra": "x"}, "region": e.region, "cat": e.cat, "v": e.value}
}

// registerSchema registers the schema text of schemaType (AVRO,
// PROTOBUF) under subject, with references (nil or
// [{name, subject, version}]), and returns its id.
func registerSchema(t *testing.T, url, subject, schemaType, text string, refs []map[string]any) uint32 {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"schema": text, "schemaType": schemaType, "references": refs})
	resp, err := http.Post(url+"/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		ID uint32 `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("registering %s: status %d, %v", subject, resp.StatusCode, err)
	}
	return r.ID
}

// framedAvro encodes rec with schemaJSON in the Confluent wire format.
func framedAvro(t *testing.T, id uint32, schemaJSON string, rec map[string]any) []byte {
	t.Helper()
	s, err := avro.ParseWithCache(schemaJSON, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := avro.Marshal(s, rec)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, id), b...)
}

// TestKafkaRegistryAvro: the test stream, produced as Confluent-framed
// Avro with a registered schema, releases what the same events in
// JSON/msgpack release (every window and group, values within their
// intervals around the same truth: checkReleases, as TestKafkaEndToEnd),
// every event decoded; messages of a second schema id without the
// group-by field are skipped as schema_mismatch, with one ERROR naming the
// field and the id.
func TestKafkaRegistryAvro(t *testing.T) {
	url, c, cl := registryTest(t, "dpstream-avro")
	in := c.Kafka.InputTopics[0]
	id := registerSchema(t, url, in+"-value", "AVRO", testAvroSchema, nil)
	idNoRegion := registerSchema(t, url, in+"-other-value", "AVRO", testAvroNoRegion, nil)

	c.Schema.Format = schema.FormatAvro
	checkRegistryRun(t, registryRun{c: c, s: genStream(23, 3, 30), cl: cl, idNoRegion: idNoRegion,
		encode: func(e testEvent) []byte {
			return framedAvro(t, id, testAvroSchema, testAvroRecord(e))
		},
		mismatch: func(e testEvent) []byte {
			return framedAvro(t, idNoRegion, testAvroNoRegion, map[string]any{"ts": e.time, "user": e.user, "cat": e.cat, "v": e.value})
		},
	})
}

// registryTest skips t without a registry; else it returns the
// registry's URL, the test config of a new input topic (named after
// prefix) and output topic reading through it (the format still to set),
// and the test clients.
func registryTest(t *testing.T, prefix string) (string, Config, *clients) {
	t.Helper()
	url := testRegistry(t)
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName(prefix+"-in"), uniqueName(prefix+"-out")
	createTopic(t, cl, in, 1)
	c := testConfig(brokers, in, out, uniqueName(prefix))
	c.Schema.Registry.URL = url
	return url, c, cl
}

// registryRun is one run of the framed-input tests: the stream s encoded
// by encode, with after its first event mismatched messages encoded by
// mismatch with the schema id idNoRegion (which lacks the group-by field).
type registryRun struct {
	c                Config // with the input format and registry set
	s                testStream
	cl               *clients
	idNoRegion       uint32
	encode, mismatch func(testEvent) []byte
}

// registryMismatched is how many messages of the schema without the
// group-by field a registryRun produces.
const registryMismatched = 3

// checkRegistryRun produces r's messages, runs the operator on them and
// checks that the releases are those of the stream (every window and
// group, values within their intervals around the same truth:
// checkReleases, as TestKafkaEndToEnd), every message was read, the
// mismatched ones were skipped as schema_mismatch, and one ERROR named
// region and the schema id.
func checkRegistryRun(t *testing.T, r registryRun) {
	t.Helper()
	c := r.c
	c.Kafka.CreateTopics = true
	c.Observability.SensitiveMetrics = true // the test reads the decode and skip counters
	in, out := c.Kafka.InputTopics[0], c.Kafka.OutputTopic
	msgs := r.s.messages(0, c.Windows.AllowedLateness) // the events, then the sentinel
	var framed []kafka.Message
	for i, m := range msgs {
		e := testEvent{user: "sentinel", region: "north", cat: "a", time: testStreamEnd.Load() - testArrivalDelay}
		if i < len(r.s.events) {
			e = r.s.events[i]
		}
		m.Value = r.encode(e)
		framed = append(framed, m)
		if i == 0 {
			for range registryMismatched {
				m.Value = r.mismatch(e)
				framed = append(framed, m)
			}
		}
	}
	produce(t, c.Kafka.Brokers, in, framed)

	op, pub, logs := newLoggedTestOperator(t, c)
	if err := runUntil(t, op, testBase+2*testSize.Milliseconds(), pub, 90*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rels, _ := readReleases(t, r.cl, out)
	if n := checkReleases(t, r.s, c, rels); n != 72 {
		t.Errorf("checked %d values, want 72", n)
	}
	reg := op.Registry()
	if got := counter(t, reg, "dpstream_events_skipped_total", schema.ReasonSchemaMismatch.String()); got != registryMismatched {
		t.Errorf("schema_mismatch skips = %v, want %d", got, registryMismatched)
	}
	if got := counter(t, reg, "dpstream_events_in_total", in); got != float64(len(framed)) {
		t.Errorf("events_in_total = %v, want %d", got, len(framed))
	}
	if errs := errorLines(logs.String()); len(errs) != 1 || !strings.Contains(errs[0], `region`) || !strings.Contains(errs[0], "schema_id") ||
		!strings.Contains(errs[0], strconv.FormatUint(uint64(r.idNoRegion), 10)) {
		t.Errorf("ERROR lines %q, want one naming region and schema id %d", errs, r.idNoRegion)
	}
}

// errorLines returns the ERROR lines of a log (text or JSON handler).
func errorLines(log string) []string {
	var errs []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "level=ERROR") {
			errs = append(errs, line)
		}
	}
	return errs
}

// TestKafkaCheckAvro: Check on framed Avro input with the real registry
// samples the records with their registered schemas (the input shape is
// ok); with an unreachable registry it fails naming the registry; with a
// schema id lacking the group-by field it fails naming the id and the
// field. Old code: the shape check decoded without the registry, so
// every configured field was "absent in every sampled record".
func TestKafkaCheckAvro(t *testing.T) {
	url := testRegistry(t)
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	s := genStream(23, 1, 10)
	produceAvro := func(topic, schemaJSON string, rec func(e testEvent) map[string]any) {
		createTopic(t, cl, topic, 1)
		id := registerSchema(t, url, topic+"-value", "AVRO", schemaJSON, nil)
		msgs := s.messages(0, time.Second)
		for i := range msgs {
			msgs[i].Value = framedAvro(t, id, schemaJSON, rec(s.events[min(i, len(s.events)-1)]))
		}
		produce(t, brokers, topic, msgs)
	}
	good, noRegion := uniqueName("dpstream-checkavro"), uniqueName("dpstream-checkavro-noregion")
	produceAvro(good, testAvroSchema, testAvroRecord)
	produceAvro(noRegion, testAvroNoRegion, func(e testEvent) map[string]any {
		return map[string]any{"ts": e.time, "user": e.user, "cat": e.cat, "v": e.value}
	})
	for _, c := range []struct {
		name, topic, url, want string
	}{
		{"registered schema", good, url, "ok    input shape: every configured field is present"},
		{"registry down", good, "http://127.0.0.1:1/ccompat", "FAIL  schema registry: cannot fetch the input's writer schemas"},
		{"schema without region", noRegion, url, `"region"`},
	} {
		cfg := testConfig(brokers, c.topic, c.topic+".out", uniqueName("dpstream-checkavro"))
		cfg.Schema.Format = schema.FormatAvro
		cfg.Schema.Registry.URL = c.url
		var text strings.Builder
		for _, r := range Check(context.Background(), cfg, CheckOptions{}) {
			text.WriteString(r.String() + "\n")
		}
		if !strings.Contains(text.String(), c.want) {
			t.Errorf("%s: no line with %q:\n%s", c.name, c.want, text.String())
		}
	}
}
