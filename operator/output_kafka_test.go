package operator

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// TestKafkaJSONOutput: checkJSONOutput on the real broker (skipped
// without DPSTREAM_TEST_BROKERS).
func TestKafkaJSONOutput(t *testing.T) {
	checkJSONOutput(t, kafkatest.Brokers(t))
}

// TestJSONOutputFakeBroker: checkJSONOutput on franz-go's in-process
// fake broker (always runs).
func TestJSONOutputFakeBroker(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	checkJSONOutput(t, fake.ListenAddrs())
}

// checkJSONOutput: a deployment with output.format json and the Connect
// envelope, crashed in the middle of a window's publication and
// restarted, publishes exactly the JSON records of the releases of an
// uninterrupted msgpack run of the same configuration: one record per
// released value, each key once, each record byte-identical to
// schema.ReleaseRecords of the msgpack release (the format changes no
// value, and replays are byte-identical); a restart recognises every
// record as a release (readRelease).
func checkJSONOutput(t *testing.T, brokers []string) {
	cl := testClients(t, brokers)
	in, lastStart, refRels := referenceRun(t, brokers, cl, "dpstream-json")
	opt := schema.JSONOptions{ConnectSchema: true}
	want := map[string][]byte{}
	for _, r := range refRels {
		recs, err := schema.ReleaseRecords(&r, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			want[rec.Key] = rec.Value
		}
	}

	out := crashedRun(t, brokers, cl, in, "dpstream-json", OutputConfig{Format: FormatJSON, ConnectSchema: true}, lastStart, len(want))
	got := map[string][]byte{}
	for _, m := range readAll(t, cl, out) {
		if _, dup := got[string(m.Key)]; dup {
			t.Errorf("record %q published twice", m.Key)
		}
		got[string(m.Key)] = m.Value
		if _, err := schema.DecodeReleaseRecord(m.Value); err != nil {
			t.Errorf("record %q: %v", m.Key, err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d JSON records, want %d (the values of %d releases)", len(got), len(want), len(refRels))
	}
	for k, b := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("record %q missing", k)
		} else if !bytes.Equal(g, b) {
			t.Errorf("record %q differs from the msgpack run's release", k)
		}
	}
	for k, v := range got {
		if rb, ok := readRelease([]byte(k), v); !ok || rb.windowEnd <= testBase {
			t.Errorf("record %q is not recognised as a release when read back", k)
		}
	}
}

// referenceRun produces the test stream (3 windows) to a new input topic
// of 2 partitions and runs the msgpack reference deployment on it: it
// returns the input topic, the last window's start and the releases.
func referenceRun(t *testing.T, brokers []string, cl *clients, prefix string) (string, int64, map[string]schema.Release) {
	t.Helper()
	in := uniqueName(prefix + "-in")
	createTopic(t, cl, in, 2)
	const nWindows = 3
	s := genStream(22, nWindows, 30)
	produce(t, brokers, in, s.messages(0, time.Second))
	lastStart := testBase + (nWindows-1)*testSize.Milliseconds()
	refOut := uniqueName(prefix + "-ref")
	ref := testConfig(brokers, in, refOut, uniqueName(prefix+"-ref"))
	ref.Kafka.CreateTopics = true
	op, pub := newTestOperator(t, ref)
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("reference run: %v", err)
	}
	refRels, _ := readReleases(t, cl, refOut)
	return in, lastStart, refRels
}

// crashedRun runs a deployment with output out on the input topic in,
// crashes it in the middle of a window's publication, restarts it until
// its output topic holds n records, and returns that topic.
func crashedRun(t *testing.T, brokers []string, cl *clients, in, prefix string, output OutputConfig, lastStart int64, n int) string {
	t.Helper()
	out := uniqueName(prefix + "-out")
	c := testConfig(brokers, in, out, uniqueName(prefix))
	c.Kafka.CreateTopics = true
	c.Output = output
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	op, pub := newTestOperator(t, c)
	crashAt(op, crashHalf)
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); !errors.Is(err, errCrash) {
		t.Fatalf("want a simulated crash, got %v", err)
	}
	op, _ = newTestOperator(t, c)
	runUntilOutput(t, op, cl, out, n, 90*time.Second)
	return out
}
