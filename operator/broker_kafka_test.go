package operator

// Helpers for the tests that need a real Kafka broker (files
// *_kafka_test.go). They skip, with a message saying how to run them, when
// DPSTREAM_TEST_BROKERS is unset or the broker does not answer.
// deploy/test.sh (and so CI) starts the project's broker and sets it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
)

// uniqueName returns prefix plus a random suffix, for topics and groups
// that no earlier test run used.
func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func testClients(t testing.TB, brokers []string) *clients {
	t.Helper()
	c, err := newClients(KafkaConfig{Brokers: brokers, ClientID: "dpstream-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c
}

// createTopic creates a topic with n partitions.
func createTopic(t testing.TB, c *clients, name string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.createTopics(ctx, n, nil, name); err != nil {
		t.Fatal(err)
	}
	// Wait until the metadata shows every partition.
	for ctx.Err() == nil {
		if ps, err := c.partitions(ctx, name); err == nil && len(ps[name]) == n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("topic %s did not appear", name)
}

// produce writes msgs to topic (key-hashed partitioning), all acknowledged.
// The test topics use the broker's default message.timestamp.type,
// CreateTime, so each record keeps the timestamp its message carries
// (kafka-go's writer stamps the current time only when Time is zero): the
// tests set Time to the stream's simulated arrival times (see
// testStream.messages), standing in for LogAppendTime in a live stream.
func produce(t testing.TB, brokers []string, topic string, msgs []kafka.Message) {
	t.Helper()
	produceVia(t, brokers, nil, topic, msgs)
}

// produceVia is produce through transport (nil: kafka-go's default; a
// clients' transport carries its TLS and SASL settings).
func produceVia(t testing.TB, brokers []string, transport kafka.RoundTripper, topic string, msgs []kafka.Message) {
	t.Helper()
	w := &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: topic, Transport: transport, Balancer: kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond, BatchSize: 5000,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A new topic may be unknown to the writer's metadata cache for a
	// moment: retry until the deadline.
	for {
		err := w.WriteMessages(ctx, msgs...)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("producing %d messages to %s: %v", len(msgs), topic, err)
		}
		// Retry only the messages that failed (no duplicates).
		var we kafka.WriteErrors
		if errors.As(err, &we) {
			var failed []kafka.Message
			for i, e := range we {
				if e != nil {
					failed = append(failed, msgs[i])
				}
			}
			msgs = failed
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readAll returns every message of topic up to its current end.
func readAll(t testing.TB, c *clients, topic string) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []kafka.Message
	if err := c.scanTopic(ctx, topic, nil, func(m kafka.Message) error {
		out = append(out, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// readReleases decodes every message of the output topic with the exported
// decoder, failing on any that does not decode or whose key differs.
func readReleases(t testing.TB, c *clients, topic string) (map[string]schema.Release, map[string][]byte) {
	t.Helper()
	rels := map[string]schema.Release{}
	raw := map[string][]byte{}
	for _, m := range readAll(t, c, topic) {
		r, err := schema.DecodeRelease(m.Value)
		if err != nil {
			t.Fatalf("output message at offset %d does not decode: %v", m.Offset, err)
		}
		if r.Key() != string(m.Key) {
			t.Fatalf("message key %q differs from the release's key %q", m.Key, r.Key())
		}
		if _, dup := raw[string(m.Key)]; dup {
			t.Errorf("release key %q published twice", m.Key)
		}
		rels[string(m.Key)] = r
		raw[string(m.Key)] = m.Value
	}
	return rels, raw
}

// commitOffset commits offset for partition 0 of topic in group, as a
// consumer outside any generation (the group must have no members).
func commitOffset(t testing.TB, c *clients, group, topic string, offset int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.client.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: group, GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{topic: {{Partition: 0, Offset: offset}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range res.Topics {
		for _, p := range ps {
			if p.Error != nil {
				t.Fatal(p.Error)
			}
		}
	}
}
