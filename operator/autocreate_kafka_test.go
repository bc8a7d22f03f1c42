package operator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// topicExists reports whether the broker knows topic, from a metadata
// request for every topic: a request that names no topic creates none,
// whatever the code under test does.
func topicExists(t *testing.T, brokers []string, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := (&kafka.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	ps, err := conn.ReadPartitions() // no topic and none on conn: all topics
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(ps, func(p kafka.Partition) bool { return p.Topic == topic })
}

// TestKafkaMissingInputNotCreated: on the development broker, which
// creates a topic on a metadata request (auto.create.topics.enable=true,
// deploy/kafka/kafka.sh), a misspelt input topic is never created: the
// operator stays up, not ready, retrying, with /readyz and an ERROR line
// naming the topic, and the topic still does not exist afterwards (before
// the fix the setup's metadata request created it and the operator
// consumed the new, empty topic). The output topic, with
// kafka.create_topics, is created as before.
func TestKafkaMissingInputNotCreated(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	in := uniqueName("dpstream-misspelt-in")
	c := testConfig(brokers, in, uniqueName("dpstream-misspelt-out"), uniqueName("dpstream-misspelt"))
	c.Kafka.CreateTopics = true
	sink := &logSink{}
	op, _ := secureOperator(t, c, sink)
	want := []string{`topic does not exist: "` + in + `"`, "never creates input topics"}
	_, stop, errc := waitNotReady(t, op, want)
	stop()
	if err := <-errc; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
	if topicExists(t, brokers, in) {
		t.Errorf("the missing input topic %s was created", in)
	}
	if !topicExists(t, brokers, c.Kafka.OutputTopic) {
		t.Errorf("the output topic %s was not created (kafka.create_topics is on)", c.Kafka.OutputTopic)
	}
	var errLine bool
	for _, l := range strings.Split(sink.String(), "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, in) {
			errLine = true
		}
	}
	if !errLine {
		t.Errorf("no ERROR line names the missing input topic %s; log:\n%s", in, sink.String())
	}
}
