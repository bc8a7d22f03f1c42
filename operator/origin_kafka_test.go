package operator

// Broker test of the origin agreement of scale-out instances without
// windows.start (origin.go).

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// TestKafkaOriginFirstProposalWins: eight instances of one scale-out
// deployment without windows.start, each with its own clock (a window
// apart), look for the origin at once in a fresh state topic of 3
// partitions. Each finds none and proposes its own; all return the same
// origin, the proposal first in the topic's lowest partition; an instance
// started later (its clock another hour on) returns it too; and once
// stage 2's state record holds an origin, that one wins. (Before origin.go
// there was no agreement: each instance's stage 1 would have started at
// its own clock's next window, or the configuration was refused.)
func TestKafkaOriginFirstProposalWins(t *testing.T) {
	cl, c, state, newOp := originSetup(t, 3)
	size := testSize.Milliseconds()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	const n = 8
	got := make([]int64, n)
	proposed := map[int64]bool{}
	var wg sync.WaitGroup
	for i := range n {
		now := time.UnixMilli(testBase + int64(i)*size)
		op := newOp(now)
		proposed[op.plan.windowAfter(now)] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := op.agreedOrigin(ctx, cl)
			if err != nil {
				t.Errorf("instance %d: %v", i, err)
			}
			got[i] = o
		}()
	}
	wg.Wait()
	first, err := firstOriginProposal(ctx, cl, state, c.Kafka.GroupID)
	if err != nil {
		t.Fatal(err)
	}
	if !proposed[first] {
		t.Fatalf("the first proposal %s is none of the instances' windows", tsString(first))
	}
	for i, o := range got {
		if o != first {
			t.Errorf("instance %d agreed on %s, the first proposal is %s", i, tsString(o), tsString(first))
		}
	}
	props := 0
	err = cl.scanTopic(ctx, state, nil, func(m kafka.Message) error {
		if m.Partition != 0 {
			t.Errorf("a state record in partition %d: proposals go to the lowest", m.Partition)
		}
		props++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// How many raced (every instance proposes when it finds none).
	t.Logf("%d of %d instances wrote a proposal", props, n)

	late := newOp(time.UnixMilli(testBase + 3600*1000))
	if o, err := late.agreedOrigin(ctx, cl); err != nil || o != first {
		t.Errorf("an instance started an hour later agreed on %s (%v), want %s", tsString(o), err, tsString(first))
	}
	// Stage 2's record of the origin wins over the proposals.
	recorded := first + 5*size
	w := newWriter(cl, c.Kafka)
	defer w.Close()
	st := &runState{cl: cl, w: w, rec: &recovered{closedThrough: noClosedWindow}}
	if err := late.writeState(ctx, st, stateRecord{ClosedThrough: noClosedWindow, Origin: recorded, Digest: late.plan.digest}); err != nil {
		t.Fatal(err)
	}
	if o, err := late.agreedOrigin(ctx, cl); err != nil || o != recorded {
		t.Errorf("with a state record of origin %s, agreed on %s (%v)", tsString(recorded), tsString(o), err)
	}
}

// TestKafkaOriginResetByTombstone: a state reset by hand (a tombstone for
// the group's record, see docs/formats.md) forgets the origin
// proposals before it: the next first start proposes anew instead of
// taking a proposal from before the reset (which could be far in the
// past).
func TestKafkaOriginResetByTombstone(t *testing.T) {
	cl, c, state, newOp := originSetup(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	agree := func(now time.Time) int64 {
		o, err := newOp(now).agreedOrigin(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	before := agree(time.UnixMilli(testBase))
	// The reset: a tombstone for the group's record.
	produce(t, c.Kafka.Brokers, state, []kafka.Message{{Key: []byte(c.Kafka.GroupID)}})
	later := testBase + 3600*1000 // a window boundary, an hour on
	want := later + testSize.Milliseconds()
	if after := agree(time.UnixMilli(later)); after != want {
		t.Errorf("after a reset the origin is %s, want the first window after the new start (%s), not the one before the reset (%s)",
			tsString(after), tsString(want), tsString(before))
	}
}

// originSetup returns the clients, a scale-out configuration without
// windows.start whose state topic is a fresh topic of n partitions, and a
// constructor of its operators with a fixed clock.
func originSetup(t *testing.T, n int) (*clients, Config, string, func(time.Time) *Operator) {
	t.Helper()
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	state := uniqueName("dpstream-origin-state")
	createTopic(t, cl, state, n)
	c := testConfig(brokers, uniqueName("dpstream-origin-in"), uniqueName("dpstream-origin-out"), uniqueName("dpstream-origin"))
	c.Kafka.ScaleOut, c.Kafka.StateTopic, c.Windows.Start = true, state, ""
	// A state record carries the output topic's end offsets, and reading
	// them no longer lets the broker auto-create the topic (a missing
	// topic is retried as ErrTopicMissing): create it, as the operator's
	// setup does.
	createTopic(t, cl, c.Kafka.OutputTopic, 1)
	newOp := func(now time.Time) *Operator {
		op, err := New(c, WithKey(testKey()), WithLogger(slog.New(slog.DiscardHandler)),
			WithRegistry(prometheus.NewRegistry()), WithClock(func() time.Time { return now }))
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	return cl, c, state, newOp
}
