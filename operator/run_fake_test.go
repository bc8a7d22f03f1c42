package operator

// run_fake_test.go runs Operator.Run against the in-process Kafka-protocol
// broker of franz-go (kfake), so that the run loop — consumer group,
// fetch, windows, release, the state topic's protocol, commits — is tested
// without the real broker (the *_kafka_test.go files need one, and skip
// without it).

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestRunFakeBroker: the stream of TestKafkaEndToEnd (bad input mixed in),
// produced to an in-process fake broker, comes out of Operator.Run as
// releases of every expected window and group, with values within their
// intervals at the stated rate (checkReleases); the state topic then says
// the last window is final, with nothing published after it.
func TestRunFakeBroker(t *testing.T) {
	brokers, cl := fakeBroker(t)
	in, out, group := "run-fake-in", "run-fake-out", "run-fake"
	createTopic(t, cl, in, 2)
	s := genStream(11, 4, 60)
	c := testConfig(brokers, in, out, group)
	c.Kafka.CreateTopics = true
	produce(t, brokers, in, s.messages(7, c.Windows.AllowedLateness))

	op, pub := newTestOperator(t, c)
	lastStart := testBase + 3*testSize.Milliseconds()
	// The deadline only bounds a hung run; nothing is timed.
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rels, raw := readReleases(t, cl, out)
	if n := checkReleases(t, s, c, rels); n != 96 {
		t.Errorf("checked %d values, want 96", n)
	}
	ct, err := closedThrough(t.Context(), cl, c.Kafka.stateTopic(), group)
	if err != nil {
		t.Fatal(err)
	}
	if want := lastStart + testSize.Milliseconds(); ct != want {
		t.Errorf("state topic: closed through %d, want %d", ct, want)
	}

	// What a restart would recover: every window final, nothing after.
	rec, err := recoverState(t.Context(), cl, c.Kafka.stateTopic(), group, out, c.Kafka.namespace())
	if err != nil {
		t.Fatal(err)
	}
	if rec.closedThrough != ct || len(rec.published) != 0 || rec.scanned != 0 {
		t.Errorf("recovered: closed through %d, %d keys after it, %d output messages scanned", rec.closedThrough, len(rec.published), rec.scanned)
	}
	if len(raw) != len(rels) {
		t.Errorf("%d release messages, %d distinct releases", len(raw), len(rels))
	}
}

// fakeBroker starts an in-process broker of one node, closed at the end of
// the test, and returns its addresses and clients.
func fakeBroker(t *testing.T) ([]string, *clients) {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	brokers := fake.ListenAddrs()
	return brokers, testClients(t, brokers)
}
