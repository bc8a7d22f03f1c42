package operator

// Integration test of the dead-letter topic against a real Apache Kafka
// broker (deploy/kafka/kafka.sh). It skips when DPSTREAM_TEST_BROKERS is
// unset or the broker is down.

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// header returns the value of a message header, and whether it is there.
func header(m kafka.Message, key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestKafkaDeadLetter: a known stream with bad input mixed in (the five
// kinds of badInputs) goes through a real broker with
// kafka.dead_letter_topic set. Every bad input message — and nothing else —
// reaches the dead-letter topic with its raw bytes and key, a
// dpstream-reason header naming the decoder's reason and a dpstream-source
// header naming the input topic, partition and offset (checked against the
// input topic); the skips are counted per reason and the dead-lettered
// messages in dpstream_events_dead_lettered_total; the good events still
// give every expected release (checkReleases). Delivery to the dead-letter
// topic is at least once: a replay after a rebalance may repeat a message,
// so exact counts are required only when the run had one generation.
func TestKafkaDeadLetter(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out, dlq := uniqueName("dpstream-dlq-in"), uniqueName("dpstream-dlq-out"), uniqueName("dpstream-dlq-dead")
	createTopic(t, cl, in, 2)
	s := genStream(13, 4, 60)
	c := testConfig(brokers, in, out, uniqueName("dpstream-dlq"))
	c.Kafka.DeadLetterTopic = dlq
	c.Kafka.CreateTopics = true // creates the output and dead-letter topics
	// The test reads the skip and dead-letter counters.
	c.Observability.SensitiveMetrics = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	msgs := s.messages(7, c.Windows.AllowedLateness)
	// Which messages are bad, and why, by the schema decoder (badInputs'
	// msgpack maps are not byte-stable across calls, so no byte matching).
	dec, err := schema.NewDecoder(c.Schema)
	if err != nil {
		t.Fatal(err)
	}
	reasonOf := func(v []byte) (schema.Reason, bool) {
		it := item{m: kafka.Message{Value: v}}
		decode(dec, &it)
		return it.reason, it.reason != schema.ReasonNone
	}
	_, reasons := badInputs()
	wantByReason := map[schema.Reason]int{}
	for _, m := range msgs {
		if r, ok := reasonOf(m.Value); ok {
			wantByReason[r]++
		}
	}
	for _, r := range reasons {
		if wantByReason[r] == 0 {
			t.Fatalf("the stream mixes in no bad input of reason %s (have %v)", r, wantByReason)
		}
	}
	produce(t, brokers, in, msgs)

	op, pub := newTestOperator(t, c)
	lastStart := testBase + 3*testSize.Milliseconds()
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}

	// The input as stored, by source position, to check the dead letters
	// against.
	input := map[string]kafka.Message{}
	wantSources := map[string]bool{}
	for _, m := range readAll(t, cl, in) {
		src := fmt.Sprintf("%s/%d/%d", in, m.Partition, m.Offset)
		input[src] = m
		if _, ok := reasonOf(m.Value); ok {
			wantSources[src] = true
		}
	}
	gotSources := map[string]int{}
	dead := readAll(t, cl, dlq)
	for _, m := range dead {
		src, ok := header(m, "dpstream-source")
		if !ok {
			t.Errorf("dead letter at offset %d has no dpstream-source header", m.Offset)
			continue
		}
		gotSources[src]++
		orig, ok := input[src]
		if !ok {
			t.Errorf("dead letter source %q is not an input message", src)
			continue
		}
		if !bytes.Equal(m.Value, orig.Value) || !bytes.Equal(m.Key, orig.Key) {
			t.Errorf("dead letter from %s: key/value differ from the input message (raw bytes expected)", src)
		}
		want, isBad := reasonOf(orig.Value)
		if !isBad {
			t.Errorf("dead letter from %s is a good event", src)
			continue
		}
		if got, _ := header(m, "dpstream-reason"); got != want.String() {
			t.Errorf("dead letter from %s: dpstream-reason %q, want %q", src, got, want)
		}
	}
	for src := range wantSources {
		if gotSources[src] == 0 {
			t.Errorf("bad input %s not dead-lettered", src)
		}
	}
	dups := len(dead) - len(gotSources)
	if dups > 0 {
		t.Logf("%d dead letters repeated (at-least-once after a replay)", dups)
	}

	reg := op.Registry()
	exact := counter(t, reg, "dpstream_rebalances_total", "") == 1
	nBad := 0
	for r, n := range wantByReason {
		nBad += n
		got := counter(t, reg, "dpstream_events_skipped_total", r.String())
		if got < float64(n) || (exact && got != float64(n)) {
			t.Errorf("events_skipped_total{reason=%q} = %v, want %d", r, got, n)
		}
	}
	if got := counter(t, reg, "dpstream_events_dead_lettered_total", ""); got < float64(nBad) || (exact && got != float64(nBad)) {
		t.Errorf("events_dead_lettered_total = %v, want %d", got, nBad)
	}
	if exact && (len(dead) != nBad || dups != 0) {
		t.Errorf("%d dead letters (%d repeated) in one generation, want exactly the %d bad inputs", len(dead), dups, nBad)
	}

	rels, _ := readReleases(t, cl, out)
	if n := checkReleases(t, s, c, rels); n != 96 {
		t.Errorf("checked %d values, want 96 (4 windows × 3 groups × 8 values)", n)
	}
	for k := range rels {
		if !strings.HasPrefix(k, "test/") {
			t.Errorf("release key %q outside the test namespace", k)
		}
	}
}
