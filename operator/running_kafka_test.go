package operator

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// TestKafkaRunningSurvivesCrashes: running totals through a real broker.
// A reference run publishes nWindows windows without interruption; a
// second deployment (same input, same namespace and key, its own group and
// output topic) crashes in the middle of a window's publication (completed
// from the intent at the next start), then right after a final state
// record, and is restarted each time. Every release of the second output
// topic, running series included, must equal the reference byte for byte:
// the running totals are carried in the state topic (intent and final
// record), not rebuilt from whatever the restart sees.
func TestKafkaRunningSurvivesCrashes(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-running-in")
	createTopic(t, cl, in, 2)
	const nWindows = 5
	s := genStream(31, nWindows, 40)
	produce(t, brokers, in, s.messages(0, time.Second))
	lastStart := testBase + (nWindows-1)*testSize.Milliseconds()

	config := func(out string) Config {
		c := testConfig(brokers, in, out, uniqueName("dpstream-running"))
		c.Kafka.CreateTopics = true
		c.Windows.Running = true
		c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
		c.Privacy.Horizon = 60 * testSize
		c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = 40, 1e-5
		return c
	}
	outA, outB := uniqueName("dpstream-running-a"), uniqueName("dpstream-running-b")
	op, pub := newTestOperator(t, config(outA))
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("reference run: %v", err)
	}
	want, wantRaw := readReleases(t, cl, outA)

	cb := config(outB)
	for _, stage := range []crashPoint{crashHalf, crashState} {
		op, pub = newTestOperator(t, cb)
		crashAt(op, stage)
		if err := runUntil(t, op, lastStart, pub, 90*time.Second); !errors.Is(err, errCrash) {
			t.Fatalf("crash at %s: got %v", stage, err)
		}
	}
	// The last run publishes what is left (maybe nothing: the crash after
	// a final state record may come after the last window).
	op, _ = newTestOperator(t, cb)
	runUntilOutput(t, op, cl, outB, len(wantRaw), 90*time.Second)
	got, gotRaw := readReleases(t, cl, outB)
	if len(got) != len(want) {
		t.Errorf("%d releases after the crashes, %d in the reference", len(got), len(want))
	}
	running := 0
	for k, r := range want {
		if !bytes.Equal(gotRaw[k], wantRaw[k]) {
			t.Errorf("%s differs after the crashes", k)
		}
		if n := len(r.Series); (r.Kind == schema.KindCount || r.Kind == schema.KindSum) && n > 0 && r.Series[n-1].Name == schema.SeriesRunning {
			running++
			if w := (r.WindowStart-testBase)/testSize.Milliseconds() + 1; r.Series[n-1].Windows != w {
				t.Errorf("%s: running over %d windows, want %d", k, r.Series[n-1].Windows, w)
			}
		}
	}
	if running != nWindows*3*2 {
		t.Errorf("%d releases with a running total, want %d (3 groups × count and sum × %d windows)", running, nWindows*3*2, nWindows)
	}
}
