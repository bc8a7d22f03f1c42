package operator

// Broker and registry test of output.format avro. It skips unless
// DPSTREAM_TEST_REGISTRY and DPSTREAM_TEST_BROKERS are set (deploy/test.sh
// sets both).

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"testing"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// registrySchema returns the schema registered under id, read with a
// plain GET (not dpstream's client).
func registrySchema(t *testing.T, url string, id uint32) string {
	t.Helper()
	resp, err := http.Get(url + "/schemas/ids/" + strconv.FormatUint(uint64(id), 10))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Schema string `json:"schema"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("schema %d: status %d, %v", id, resp.StatusCode, err)
	}
	return r.Schema
}

// TestKafkaAvroOutput: a deployment with output.format avro on the real
// registry, crashed in the middle of a window's publication and
// restarted, publishes one framed Avro record per released value of an
// uninterrupted msgpack run of the same configuration, each key once;
// every record, decoded with the schema the registry returns for the
// frame's id, equals the JSON record of the same value; all records carry
// one id, which registering the schema again returns too (so replays are
// byte-identical); a restart recognises every record as a release.
func TestKafkaAvroOutput(t *testing.T) {
	url := testRegistry(t)
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, lastStart, refRels := referenceRun(t, brokers, cl, "dpstream-avroout")
	want := map[string]schema.ReleaseRecord{}
	for _, r := range refRels {
		recs, err := schema.ReleaseRecords(&r, schema.JSONOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if want[rec.Key], err = schema.DecodeReleaseRecord(rec.Value); err != nil {
				t.Fatal(err)
			}
		}
	}

	out := crashedRun(t, brokers, cl, in, "dpstream-avroout", OutputConfig{Format: FormatAvro, Registry: schema.RegistryConfig{URL: url}}, lastStart, len(want))
	ids := map[uint32]bool{}
	got := 0
	for _, m := range readAll(t, cl, out) {
		id, ok := schema.AvroSchemaID(m.Value)
		if !ok {
			t.Fatalf("record %q is not framed Avro", m.Key)
		}
		ids[id] = true
		rec, err := schema.DecodeReleaseAvro(m.Value, registrySchema(t, url, id))
		switch w, found := want[string(m.Key)]; {
		case err != nil:
			t.Errorf("record %q: %v", m.Key, err)
		case !found:
			t.Errorf("record %q: not a value of the msgpack run's releases (or published twice)", m.Key)
		case !reflect.DeepEqual(rec, w):
			t.Errorf("record %q:\n%+v\nwant the JSON record's\n%+v", m.Key, rec, w)
		}
		delete(want, string(m.Key))
		got++
		if rb, ok := readRelease(m.Key, m.Value); !ok || rb.windowEnd <= testBase {
			t.Errorf("record %q is not recognised as a release when read back", m.Key)
		}
	}
	if len(want) != 0 {
		t.Errorf("%d values of the msgpack run missing from %d Avro records", len(want), got)
	}
	rc, err := newRegistryClient(schema.RegistryConfig{URL: url}, "schema.registry")
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := schema.NewAvroReleases(testConfig(nil, in, out, "").Schema.GroupBy)
	subject := KafkaConfig{OutputTopic: out}.releaseSubject()
	again, level, _, err := rc.registerRelease(subject, enc.Schema())
	if err != nil || len(ids) != 1 || !ids[again] {
		t.Errorf("records carry schema ids %v; registering again gives %d (%v), want the one id", ids, again, err)
	}
	t.Logf("release schema id %d, subject %s, compatibility %s", again, subject, level)
}
