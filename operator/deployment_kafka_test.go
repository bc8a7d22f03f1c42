package operator

// Broker test of the deployment identity in the state topic (issue 18).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// TestKafkaStateOfAnotherDeployment: deployment A publishes a window; its
// state record carries its identity. A deployment B with the same key,
// namespace, group and state topic (kafka.state_topic shared by hand) but
// another output topic is refused at start, naming the output topic: it
// would continue A's state (final windows, output offsets, ledger) and
// publish A's windows with A's noise in another topic. Before identities
// were recorded, B started. A restart of A after a cluster migration (the
// recorded cluster id differs) and with another namespace only warns.
func TestKafkaStateOfAnotherDeployment(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-ident-in")
	createTopic(t, cl, in, 1)
	s := genStream(25, 2, 20)
	produce(t, brokers, in, s.messages(0, time.Second))

	a := testConfig(brokers, in, uniqueName("dpstream-ident-out"), uniqueName("dpstream-ident"))
	a.Kafka.CreateTopics = true
	a.Kafka.StateTopic = uniqueName("dpstream-ident-state")
	op, pub := newTestOperator(t, a)
	if err := runUntil(t, op, testBase, pub, 90*time.Second); err != nil {
		t.Fatalf("deployment A: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	last, err := lastState(ctx, cl, a.Kafka.stateTopic(), a.Kafka.GroupID, nil)
	if err != nil || last == nil || last.Deployment == nil {
		t.Fatalf("A's state record: %+v, %v; want one with the deployment's identity", last, err)
	}
	if d := last.Deployment; d.OutputTopic != a.Kafka.OutputTopic || d.Namespace != "test" || d.GroupID != a.Kafka.GroupID || d.ClusterID == "" {
		t.Errorf("recorded identity %+v", *d)
	}

	b := a
	b.Kafka.OutputTopic = uniqueName("dpstream-ident-out-b")
	op, _ = newTestOperator(t, b)
	err = op.Run(ctx)
	if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "kafka.output_topic") || !strings.Contains(err.Error(), a.Kafka.OutputTopic) {
		t.Fatalf("deployment B on A's state with another output topic: Run returned %v, want a refusal naming the output topic", err)
	}

	// A's record as a migration would leave it: another cluster id.
	moved := *last
	d := *last.Deployment
	d.ClusterID = "the-old-cluster"
	moved.Deployment = &d
	v, err := json.Marshal(moved)
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: a.Kafka.stateTopic(), RequiredAcks: kafka.RequireAll, Transport: &kafka.Transport{}}
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(a.Kafka.GroupID), Value: v}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	c := a
	c.Kafka.ReleaseNamespace = "renamed"
	op, _, logs := newLoggedTestOperator(t, c)
	rctx, rcancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- op.Run(rctx) }()
	wants := []string{"another Kafka cluster", "another kafka.release_namespace"}
	for done := false; !done; {
		select {
		case err := <-errc:
			t.Fatalf("restart after a migration, renamed: Run returned %v, want it to run", err)
		case <-ctx.Done():
			rcancel()
			t.Fatalf("no warnings %q within the deadline; log:\n%s", wants, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		done = true
		for _, want := range wants {
			done = done && strings.Contains(logs.String(), want)
		}
	}
	rcancel()
	if err := <-errc; err != nil {
		t.Errorf("restart after a migration, renamed: %v", err)
	}
}
