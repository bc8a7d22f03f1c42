package operator

// Broker tests of the state topic's guarantees: a crashed publication is
// completed from its recorded intent, a configuration change cannot
// overspend the horizon's budget, and a lost state record cannot lead to
// re-releasing windows.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// crashAt makes op's publication crash once at stage.
func crashAt(op *Operator, stage crashPoint) {
	var once sync.Once
	op.crash = func(s crashPoint) bool {
		fired := false
		if s == stage {
			once.Do(func() { fired = true })
		}
		return fired
	}
}

// TestKafkaCrashCompletedFromIntent: a publication crashes after half of a
// window's releases were written, and the next start runs with another
// configuration (another ε). Every key of every window must come from one
// snapshot under one configuration: before the intent was recorded, the
// restarted operator rebuilt the window and published the missing keys
// under the new configuration, so one window mixed two budgets (and, had
// the rebuilt window differed, two snapshots).
func TestKafkaCrashCompletedFromIntent(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName("dpstream-intent-in"), uniqueName("dpstream-intent-out")
	createTopic(t, cl, in, 2)
	const nWindows = 4
	s := genStream(21, nWindows, 40)
	produce(t, brokers, in, s.messages(0, time.Second))
	lastStart := testBase + (nWindows-1)*testSize.Milliseconds()

	ca := testConfig(brokers, in, out, uniqueName("dpstream-intent"))
	ca.Kafka.CreateTopics = true
	op, pub := newTestOperator(t, ca)
	crashAt(op, crashHalf)
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); !errors.Is(err, errCrash) {
		t.Fatalf("first run: want the simulated crash, got %v", err)
	}
	half := len(readAll(t, cl, out))
	if half == 0 {
		t.Fatal("the crash wrote no release: the test needs a partly published window")
	}

	cb := ca
	cb.Privacy.Epsilon = ca.Privacy.Epsilon / 2
	op, pub = newTestOperator(t, cb)
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("second run: %v", err)
	}
	rels, _ := readReleases(t, cl, out) // fails on a key published twice
	budgets := map[string]map[float64]int{}
	for _, r := range rels {
		if budgets[r.ReleaseID] == nil {
			budgets[r.ReleaseID] = map[float64]int{}
		}
		budgets[r.ReleaseID][r.Budget.Epsilon]++
	}
	if len(budgets) != nWindows {
		t.Errorf("releases of %d windows, want %d", len(budgets), nWindows)
	}
	sawA, sawB := false, false
	for id, bs := range budgets {
		if len(bs) != 1 {
			t.Errorf("window %s mixes budgets %v: its keys come from two configurations", id, bs)
		}
		for e := range bs {
			sawA = sawA || e == ca.Privacy.Epsilon
			sawB = sawB || e == cb.Privacy.Epsilon
		}
	}
	if !sawA || !sawB {
		t.Errorf("budgets seen: first configuration %v, second %v; want both (the crashed window under the first, later ones under the second)", sawA, sawB)
	}
	if n := len(rels); n != nWindows*3*4 {
		t.Errorf("%d releases, want %d", n, nWindows*3*4)
	}
	// Every release carries its window's scheduled publication time as
	// its record timestamp, those the restart completed from the intent
	// too (issue 18).
	for _, m := range readAll(t, cl, out) {
		r := rels[string(m.Key)]
		if want := scheduledAt(ca, r.WindowEnd); !m.Time.Equal(want) {
			t.Errorf("release %s: record timestamp %v, want its schedule %v", m.Key, m.Time.UTC(), want.UTC())
		}
	}
}

// TestKafkaConfigChangeCannotOverspend: a horizon budget, three windows
// published, then restarts with another ε in the middle of the horizon.
// Before the ledger was persisted, the new configuration started and the
// horizon's releases spent more than its total. A total the windows left
// cannot fit in (ε 40 → 0.5: the first two windows alone spent more) is
// refused with a message naming the way out; a larger ε (40 → 60) starts,
// recalibrated for what the first configuration left of the total its
// releases claimed (40): every release says so, and none spends beyond it.
func TestKafkaConfigChangeCannotOverspend(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName("dpstream-ledger-in"), uniqueName("dpstream-ledger-out")
	createTopic(t, cl, in, 1)
	const nWindows = 3
	s := genStream(22, nWindows, 30)
	produce(t, brokers, in, s.messages(0, time.Second))

	ca := testConfig(brokers, in, out, uniqueName("dpstream-ledger"))
	ca.Kafka.CreateTopics = true
	ca.Privacy.Epsilon, ca.Privacy.Delta = 0, 0
	ca.Privacy.Horizon = 60 * testSize // 60 windows; the test publishes the first 3, then 2
	ca.Privacy.HorizonEpsilon, ca.Privacy.HorizonDelta = 40, 1e-5
	op, pub := newTestOperator(t, ca)
	if err := runUntil(t, op, testBase+testSize.Milliseconds(), pub, 90*time.Second); err != nil {
		t.Fatalf("first run: %v", err)
	}

	cc := ca
	cc.Privacy.HorizonEpsilon = 0.5
	op, _ = newTestOperator(t, cc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := op.Run(ctx)
	if !errors.Is(err, ErrState) {
		t.Fatalf("restart with ε 40 → 0.5 mid-horizon: Run returned %v, want a refusal (ErrState)", err)
	}
	for _, want := range []string{"middle of the horizon", "cannot be calibrated within what is left"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not explain itself (%q): %v", want, err)
		}
	}

	// Two more windows of events (the first three are final: their
	// events in this stream are dropped as late).
	var more []kafka.Message
	first := testBase + nWindows*testSize.Milliseconds()
	for _, m := range genStream(24, nWindows+2, 30).messages(0, time.Second) {
		if m.Time.UnixMilli() >= first {
			more = append(more, m)
		}
	}
	produce(t, brokers, in, more)
	cb := ca
	cb.Privacy.HorizonEpsilon = 60
	op, pub = newTestOperator(t, cb)
	last := first + testSize.Milliseconds()
	if err := runUntil(t, op, last, pub, 90*time.Second); err != nil {
		t.Fatalf("restart with ε 40 → 60 mid-horizon: %v", err)
	}

	// Every release respects the total the horizon's first releases
	// claimed; the recalibrated window spends on top of the earlier ones.
	rels, _ := readReleases(t, cl, out)
	claim := schema.Budget{Epsilon: 40, Delta: 1e-5}
	spent := map[int64]float64{}
	for k, r := range rels {
		if r.Horizon.Budget != claim || over(r.Spent, claim) {
			t.Errorf("%s: spent %+v of the horizon's %+v, want within %+v", k, r.Spent, r.Horizon.Budget, claim)
		}
		spent[r.WindowStart] = r.Spent.Epsilon
		if r.WindowStart >= first && !strings.Contains(r.Note, "recalibrated after a configuration change") {
			t.Errorf("%s: the note does not say the window was recalibrated: %q", k, r.Note)
		}
	}
	if len(spent) != nWindows+2 || !(spent[last] > spent[first]) || !(spent[first] > spent[first-testSize.Milliseconds()]) {
		t.Errorf("spent by window %v: want %d windows, growing", spent, nWindows+2)
	}
}

// TestKafkaLostStateNotRepublished: after the state record is tombstoned,
// a restart with windows.start set (which would re-publish the history)
// is refused because the consumer group has consumed before; without
// windows.start the operator starts, and releases only windows after now,
// so no window is published a second time.
func TestKafkaLostStateNotRepublished(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName("dpstream-lost-in"), uniqueName("dpstream-lost-out")
	createTopic(t, cl, in, 1)
	const nWindows = 3
	s := genStream(23, nWindows, 30)
	produce(t, brokers, in, s.messages(0, time.Second))
	lastStart := testBase + (nWindows-1)*testSize.Milliseconds()

	c := testConfig(brokers, in, out, uniqueName("dpstream-lost"))
	c.Kafka.CreateTopics = true
	c.Kafka.CommitInterval = 50 * time.Millisecond
	op, pub := newTestOperator(t, c)
	if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
		t.Fatalf("first run: %v", err)
	}
	before := len(readAll(t, cl, out))

	loseStateExpectRefusal(t, brokers, c)

	c2 := c
	c2.Windows.Start = ""
	op, pub = newTestOperator(t, c2)
	ctx2, cancel2 := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- op.Run(ctx2) }()
	// Give it time to consume the whole input (a few polls).
	select {
	case s := <-pub:
		t.Errorf("window %s published again after the state was lost", tsString(s))
	case err := <-errc:
		t.Fatalf("restart without windows.start: %v", err)
	case <-time.After(5 * time.Second):
	}
	cancel2()
	if err := <-errc; err != nil {
		t.Fatalf("restart without windows.start: %v", err)
	}
	if after := len(readAll(t, cl, out)); after != before {
		t.Errorf("output topic grew from %d to %d messages after the state was lost", before, after)
	}
	readReleases(t, cl, out) // fails on a key published twice
}

// TestKafkaFirstWindowIndependentOfData: two fresh deployments whose inputs
// differ by one unit with an early event (three windows before the others).
// Before the first window was fixed by configuration, emission started at
// the earliest window with an event, so the unit's one event made three
// more (empty-looking) windows appear — infinite privacy loss once per
// deployment. Now both deployments release exactly the same windows.
func TestKafkaFirstWindowIndependentOfData(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	const nWindows = 3
	s := genStream(24, nWindows, 20)
	lastStart := testBase + (nWindows-1)*testSize.Milliseconds()
	windowsOf := func(early bool) map[string]bool {
		in, out := uniqueName("dpstream-first-in"), uniqueName("dpstream-first-out")
		createTopic(t, cl, in, 1)
		msgs := s.messages(0, time.Second)
		if early {
			e := testEvent{"early-unit", "north", "a", 1, testBase - 3*testSize.Milliseconds()}
			m := kafka.Message{Key: []byte(e.user), Value: e.encode(1), Time: time.UnixMilli(e.time + testArrivalDelay)}
			msgs = append([]kafka.Message{m}, msgs...)
		}
		produce(t, brokers, in, msgs)
		c := testConfig(brokers, in, out, uniqueName("dpstream-first"))
		c.Kafka.CreateTopics = true
		op, pub := newTestOperator(t, c)
		if err := runUntil(t, op, lastStart, pub, 90*time.Second); err != nil {
			t.Fatalf("run (early event %v): %v", early, err)
		}
		rels, _ := readReleases(t, cl, out)
		ids := map[string]bool{}
		for _, r := range rels {
			ids[r.ReleaseID] = true
		}
		return ids
	}
	without, with := windowsOf(false), windowsOf(true)
	if len(without) != nWindows {
		t.Errorf("without the early event: %d windows released, want %d", len(without), nWindows)
	}
	for id := range with {
		if !without[id] {
			t.Errorf("window %s is released only because one unit had an early event", id)
		}
	}
	if len(with) != len(without) {
		t.Errorf("%d windows with the early event, %d without", len(with), len(without))
	}
}

// loseStateExpectRefusal tombstones the state record of c's group (as
// after a reset by hand, or a new kafka.state_topic) and checks that a
// restart with c (windows.start set, the group has consumed) is refused.
func loseStateExpectRefusal(t *testing.T, brokers []string, c Config) {
	t.Helper()
	// Its own transport: kafka-go's shared default one may still cache
	// metadata from before the operator created the state topic.
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: c.Kafka.stateTopic(), RequiredAcks: kafka.RequireAll, Transport: &kafka.Transport{}}
	if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte(c.Kafka.GroupID), Value: nil}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	op, _ := newTestOperator(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := op.Run(ctx); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "committed offsets") {
		t.Fatalf("restart after the state was lost, windows.start set: Run returned %v, want a refusal", err)
	}
}
