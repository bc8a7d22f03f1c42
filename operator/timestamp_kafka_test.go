package operator

// Integration test of record timestamps (arrival times) against a real
// Apache Kafka broker (deploy/kafka/kafka.sh). It skips when
// DPSTREAM_TEST_BROKERS is unset or the broker is down.

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// TestKafkaLogAppendTime: on an input topic with
// message.timestamp.type=LogAppendTime, the fetcher reports the broker's
// append time as every record's arrival time — not the producer's
// timestamp, here in 2001, which kafka-go alone reports (the old code
// passed it on, so a unit producing directly chose its own arrival time) —
// for plain and compressed batches; a partition read to its end yields a
// caught-up marker after its records. The start-up check warns about a
// CreateTime input topic, naming it, and not about a LogAppendTime one.
func TestKafkaLogAppendTime(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	lat, ct := uniqueName("dpstream-lat-in"), uniqueName("dpstream-ct-in")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.createTopics(ctx, 1, map[string]string{"message.timestamp.type": "LogAppendTime"}, lat); err != nil {
		t.Fatal(err)
	}
	createTopic(t, cl, lat, 1) // exists: waits for the metadata
	createTopic(t, cl, ct, 1)  // the broker's default, CreateTime

	// Producer timestamps far in the past: what a unit producing directly
	// could claim.
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	var msgs []kafka.Message
	for i := range 5 {
		msgs = append(msgs, kafka.Message{Key: []byte{byte(i)}, Value: []byte("{}"), Time: old.Add(time.Duration(i) * time.Hour)})
	}
	before := time.Now()
	produce(t, brokers, lat, msgs)
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: lat, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Compression: kafka.Snappy}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	after := time.Now()

	c := testConfig(brokers, lat, uniqueName("dpstream-lat-out"), uniqueName("dpstream-lat"))
	op, err := New(c, WithKey(testKey()), WithRegistry(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan []item, 64)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go op.fetch(fctx, cl, lat, kafka.PartitionAssignment{ID: 0, Offset: kafka.FirstOffset}, out)
	var got []kafka.Message
	var marker *item
	for marker == nil {
		select {
		case batch := <-out:
			for i := range batch {
				if !batch[i].caughtUp.IsZero() {
					if len(got) == 2*len(msgs) {
						marker = &batch[i]
					}
					continue
				}
				got = append(got, batch[i].m)
			}
		case <-ctx.Done():
			t.Fatalf("read %d of %d records and no caught-up marker after them", len(got), 2*len(msgs))
		}
	}
	stop()
	// The broker runs on this machine: its clock is this one's, up to the
	// millisecond truncation of record timestamps.
	lo, hi := before.Add(-time.Second), after.Add(time.Second)
	for _, m := range got {
		if m.Time.Before(lo) || m.Time.After(hi) {
			t.Errorf("offset %d: arrival time %v, want the append time in [%v, %v]", m.Offset, m.Time, lo, hi)
		}
	}
	if marker.m.Offset != int64(2*len(msgs)) || marker.caughtUp.Before(before) {
		t.Errorf("caught-up marker at offset %d issued %v, want offset %d after %v", marker.m.Offset, marker.caughtUp, 2*len(msgs), before)
	}

	// The start-up check.
	c.Kafka.InputTopics = []string{lat, ct}
	var logs bytes.Buffer
	op, err = New(c, WithKey(testKey()), WithRegistry(prometheus.NewRegistry()),
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	op.checkTimestampTypes(ctx, cl)
	var warns []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "level=WARN") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "CreateTime") || !strings.Contains(warns[0], "topic="+ct) {
		t.Errorf("want one warning about %s (CreateTime), got:\n%s", ct, logs.String())
	}
	if strings.Contains(logs.String(), "topic="+lat) || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("warned about the LogAppendTime topic, or an error:\n%s", logs.String())
	}
}
