package operator

// Broker tests of the scale-out topology (kafka.scale_out): several
// instances in one consumer group publish exactly what one instance
// publishes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// spreadMessages returns the stream's events keyed by their index (so a
// unit's events land on every partition), with every 7th event's time
// moved back 800 ms (out of order) and every 13th moved back three windows
// (late by its own arrival), plus a unit "flood" that sends 12 events per
// window in every group and cell, far beyond its bounds, spread over all
// partitions. Arrival times stay increasing in message order.
func spreadMessages(s testStream) []kafka.Message {
	base := s.messages(0, time.Second) // sets testStreamEnd; its last message is the sentinel
	sentinel := base[len(base)-1]
	size := testSize.Milliseconds()
	var out []kafka.Message
	flood := 0
	for i, e := range s.events {
		arrival := e.time + testArrivalDelay
		ev := e
		switch {
		case i%13 == 0:
			ev.time -= 3 * size
		case i%7 == 0:
			ev.time -= 800
		}
		out = append(out, kafka.Message{Key: []byte(strconv.Itoa(i)), Value: ev.encode(i), Time: time.UnixMilli(arrival)})
		if i%3 == 0 { // the flooding unit rides along
			f := testEvent{"flood", testRegions[flood%len(testRegions)], testCategories[flood%len(testCategories)], float64(flood % 11), e.time}
			out = append(out, kafka.Message{Key: []byte("f" + strconv.Itoa(flood)), Value: f.encode(flood), Time: time.UnixMilli(arrival)})
			flood++
		}
	}
	sentinel.Key = []byte("sentinel")
	return append(out, sentinel)
}

// runAllUntilOutput runs the operators together until the output topic
// holds n messages, then stops them all; a Run error fails the test.
// outputCount is the number of messages in topic out, 0 while the topic
// does not exist yet: the instances create it at start, and on a loaded
// machine the first poll can come before they do (it failed the test
// with ErrTopicMissing).
func outputCount(t *testing.T, cl *clients, out string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := 0
	err := cl.scanTopic(ctx, out, nil, func(kafka.Message) error { n++; return nil })
	switch {
	case errors.Is(err, ErrTopicMissing):
		return 0
	case err != nil:
		t.Fatal(err)
	}
	return n
}

func runAllUntilOutput(t *testing.T, ops []*Operator, cl *clients, out string, n int, deadline time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(ops))
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := op.Run(ctx); err != nil {
				errs <- err
			}
		}()
	}
	stop := time.Now().Add(deadline)
	for {
		select {
		case err := <-errs:
			cancel()
			wg.Wait()
			t.Fatalf("an instance failed: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
		if got := outputCount(t, cl, out); got >= n {
			break
		} else if time.Now().After(stop) {
			cancel()
			wg.Wait()
			t.Fatalf("output %s has %d of %d messages after %v", out, got, n, deadline)
		}
	}
	cancel()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("an instance failed: %v", err)
	default:
	}
}

// TestKafkaScaleOutEquivalent: the same input — 4 partitions, 20 windows,
// every unit's events spread over all partitions, late and out-of-order
// events, a unit flooding every partition beyond its bounds — published by
// one instance (without scale-out) and by three instances with scale-out
// gives identical output topics as sets of (key, bytes). Bounds are per
// unit across the whole input: the flooding unit counts no more than its
// bounds in either (and a per-partition merge of finished windows would
// have let it count up to 4 times).
func TestKafkaScaleOutEquivalent(t *testing.T) {
	scaleOutEquivalent(t, 20, 4, func(*Config) {})
}

// TestKafkaScaleOutJoint is TestKafkaScaleOutEquivalent for the quantiles
// by the joint exponential mechanism (with the count), over 8 windows:
// stage 2 merges the exact leaf histograms, so the joint selections are
// byte-identical to one instance's.
func TestKafkaScaleOutJoint(t *testing.T) {
	scaleOutEquivalent(t, 8, 2, func(c *Config) {
		c.Windows.Aggregates = []string{AggCount, AggQuantiles}
		c.Windows.QuantileMechanism = QuantileJoint
	})
}

// scaleOutEquivalent publishes genStream's nWindows windows (3 regions,
// perWindow releases per window and region) with the configuration set
// changes, by one instance and by three with scale-out, and fails t
// unless both output topics hold the same releases byte for byte.
func scaleOutEquivalent(t *testing.T, nWindows, perWindow int, set func(*Config)) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-scale-in")
	createTopic(t, cl, in, 4)
	s := genStream(31, nWindows, 30)
	produce(t, brokers, in, spreadMessages(s))

	refOut := uniqueName("dpstream-scale-ref")
	ref := testConfig(brokers, in, refOut, uniqueName("dpstream-scale-ref"))
	ref.Kafka.CreateTopics = true
	set(&ref)
	op, pub := newTestOperator(t, ref)
	lastStart := testBase + int64(nWindows-1)*testSize.Milliseconds()
	if err := runUntil(t, op, lastStart, pub, 120*time.Second); err != nil {
		t.Fatalf("single instance: %v", err)
	}
	refRels, refRaw := readReleases(t, cl, refOut)
	if len(refRels) != nWindows*3*perWindow {
		t.Fatalf("single instance published %d releases, want %d", len(refRels), nWindows*3*perWindow)
	}

	out := uniqueName("dpstream-scale-out")
	c := testConfig(brokers, in, out, uniqueName("dpstream-scale"))
	c.Kafka.CreateTopics = true
	c.Kafka.ScaleOut = true
	c.Observability.SensitiveMetrics = true // dpstream_partials_written_total
	set(&c)
	var ops []*Operator
	for range 3 {
		op, _ := newTestOperator(t, c)
		ops = append(ops, op)
	}
	runAllUntilOutput(t, ops, cl, out, len(refRels), 180*time.Second)
	partials := 0.0
	for _, op := range ops {
		partials += counter(t, op.reg, "dpstream_partials_written_total", "")
	}
	if partials < float64(nWindows*4) { // at least one partial per window and input partition
		t.Errorf("dpstream_partials_written_total over the instances = %v, want ≥ %d", partials, nWindows*4)
	}
	_, raw := readReleases(t, cl, out) // fails on a key published twice
	sameReleases(t, refRaw, raw, "one instance", "three instances")
}

// sameReleases fails t unless got (key → release bytes, of run b) holds
// exactly the releases of want (of run a), byte for byte.
func sameReleases(t *testing.T, want, got map[string][]byte, a, b string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s published %d releases, %s %d", b, len(got), a, len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("release %q missing in %s", k, b)
		} else if !bytes.Equal(g, w) {
			t.Errorf("release %q differs between %s and %s", k, a, b)
		}
	}
}

// TestKafkaScaleOutMergerShare: with two instances on an 8-partition
// input, the instance that merges (stage 2) settles with 3 input
// partitions and the other with 5 (balance.go; kafka-go's default
// "range" gives 4 and 4, so this fails without the dpstream balancers).
func TestKafkaScaleOutMergerShare(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-share-in")
	createTopic(t, cl, in, 8)
	c := testConfig(brokers, in, uniqueName("dpstream-share-out"), uniqueName("dpstream-share"))
	c.Kafka.CreateTopics = true
	c.Kafka.ScaleOut = true
	c.Observability.SensitiveMetrics = true // the merge gauges
	// No input, and the operators' clock (testClock) at the first window
	// (not after a stream an earlier test produced): no window closes, so
	// stage 1 writes no partial and the merge gauges below are fixed.
	testStreamEnd.Store(testBase)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var ops []*Operator
	for range 2 {
		op, _ := newTestOperator(t, c)
		ops = append(ops, op)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := op.Run(ctx); err != nil {
				t.Errorf("instance: %v", err)
			}
		}()
	}
	// Both groups settle within a few heartbeats; the deadline is far
	// beyond that (the session timeout is 10 s).
	deadline := time.Now().Add(60 * time.Second)
	var last []string
	for time.Now().Before(deadline) {
		last = last[:0]
		merger, shares := -1, map[int]string{}
		for i, op := range ops {
			s := op.health.stageLines()
			last = append(last, s)
			if strings.Contains(s, "merge: merging") {
				merger = i
			}
			if _, rest, ok := strings.Cut(s, "partial: "); ok {
				shares[i], _, _ = strings.Cut(rest, "\n")
			}
		}
		if merger >= 0 && shares[merger] == "3 of 8 input partitions" && shares[1-merger] == "5 of 8 input partitions" {
			// The metrics say the same. No input yet: the merger waits
			// for every partition's partial of the first window.
			for i, op := range ops {
				want := map[string]float64{"dpstream_merging": 0, "dpstream_input_partitions_assigned": 5}
				if i == merger {
					want = map[string]float64{"dpstream_merging": 1, "dpstream_input_partitions_assigned": 3,
						"dpstream_merge_partitions_missing": 8, "dpstream_merge_windows_waiting": 0}
				}
				for name, v := range want {
					if got := gauge(t, op.reg, name); got != v {
						t.Errorf("instance %d (merger %d): %s = %v, want %v", i, merger, name, got, v)
					}
				}
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the instances did not settle with the merger on 3 of 8 partitions; their stages:\n%s", strings.Join(last, "---\n"))
}

// TestKafkaScaleOutRejectsReplayedPartials: deployment B (same key,
// another namespace and input topic, so another configuration) runs with
// scale-out on its own data; its partials are then replayed into the
// partials topic of deployment A before A starts, so they come first.
// A rejects every one (counted as "mac", logged without data) and
// publishes exactly what a single instance publishes on A's input. Before
// the partials' MAC was bound to the deployment, B's partials passed A's
// check and, "the first complete partial wins", replaced A's data.
func TestKafkaScaleOutRejectsReplayedPartials(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	const nWindows = 2
	inA, inB := uniqueName("dpstream-replay-in-a"), uniqueName("dpstream-replay-in-b")
	createTopic(t, cl, inA, 1)
	createTopic(t, cl, inB, 1)
	produce(t, brokers, inB, genStream(41, nWindows, 30).messages(0, time.Second))
	sA := genStream(42, nWindows, 30)
	produce(t, brokers, inA, sA.messages(0, time.Second))
	releases := nWindows * 3 * 4 // windows × public groups × aggregates

	b := testConfig(brokers, inB, uniqueName("dpstream-replay-out-b"), uniqueName("dpstream-replay-b"))
	b.Kafka.CreateTopics, b.Kafka.ScaleOut = true, true
	b.Kafka.ReleaseNamespace = "staging"
	opB, _ := newTestOperator(t, b)
	runAllUntilOutput(t, []*Operator{opB}, cl, b.Kafka.OutputTopic, releases, 120*time.Second)
	replayed := readAll(t, cl, b.Kafka.partialsTopic())
	if len(replayed) < nWindows {
		t.Fatalf("deployment B wrote %d partials messages, want ≥ %d", len(replayed), nWindows)
	}

	ref := testConfig(brokers, inA, uniqueName("dpstream-replay-ref"), uniqueName("dpstream-replay-ref"))
	ref.Kafka.CreateTopics = true
	op, pub := newTestOperator(t, ref)
	if err := runUntil(t, op, testBase+(nWindows-1)*testSize.Milliseconds(), pub, 90*time.Second); err != nil {
		t.Fatalf("reference: %v", err)
	}
	_, refRaw := readReleases(t, cl, ref.Kafka.OutputTopic)

	a := testConfig(brokers, inA, uniqueName("dpstream-replay-out-a"), uniqueName("dpstream-replay-a"))
	a.Kafka.CreateTopics, a.Kafka.ScaleOut = true, true
	createTopic(t, cl, a.Kafka.partialsTopic(), 1)
	msgs := make([]kafka.Message, len(replayed))
	for i, m := range replayed {
		msgs[i] = kafka.Message{Key: m.Key, Value: m.Value}
	}
	produce(t, brokers, a.Kafka.partialsTopic(), msgs)
	opA, _, logs := newLoggedTestOperator(t, a)
	runAllUntilOutput(t, []*Operator{opA}, cl, a.Kafka.OutputTopic, len(refRaw), 120*time.Second)
	_, raw := readReleases(t, cl, a.Kafka.OutputTopic)
	if len(raw) != len(refRaw) {
		t.Errorf("deployment A published %d releases, the reference %d", len(raw), len(refRaw))
	}
	for k, v := range refRaw {
		if !bytes.Equal(raw[k], v) {
			t.Errorf("release %q differs from the single instance's: B's replayed partial replaced A's data", k)
		}
	}
	if n := counter(t, opA.reg, "dpstream_partials_rejected_total", "mac"); n != float64(len(replayed)) {
		t.Errorf("dpstream_partials_rejected_total{reason=mac} = %v, want %d (every replayed partial)", n, len(replayed))
	}
	if !strings.Contains(logs.String(), "rejecting a partial state that this deployment did not write") {
		t.Errorf("no log line for the rejected partials:\n%s", logs.String())
	}
}

// TestKafkaScaleOutUpgradeReadsOldPartials: a deployment upgraded from the
// version that wrote dpp2 partials (not bound to the deployment): its state
// record has no partials cutoff, the partials of the windows in flight are
// dpp2 and stage 1 will not write them again (its input offsets are
// committed at the end: it writes empty partials of those windows after
// them, which lose to the first complete partial). The upgraded merger
// records the cutoff, accepts those dpp2 partials (windows before it) and
// publishes exactly what a single instance publishes; nothing is rejected
// and no window waits for ever (with a cutoff at the deployment's first
// window, every window would).
func TestKafkaScaleOutUpgradeReadsOldPartials(t *testing.T) {
	runOnInFlightPartials(t, "upgrade", func(_ Config, m partialChunk) []kafka.Message {
		return partialMessagesMagic(partialMagicV2, "", partialMACKeyV2(testKey()), m.id.start, m.id.pid, m.data)
	}, func(c Config, digest string) map[string]any {
		// The previous version's record: no partials cutoff, no identity.
		return map[string]any{"v": 2, "closed_through": int64(noClosedWindow), "output_offsets": map[string]int64{}, "origin": testBase, "digest": digest}
	})
}

// TestKafkaScaleOutConfigChangeReadsInFlightPartials: a scale-out
// deployment restarted with another configuration (another ε: another
// release digest) while windows are in flight: their partials were
// written under the previous binding, and stage 1 will not write them
// again. The merger accepts them (the state record names the previous
// digest and identity) for the windows in flight, instead of rejecting
// them and waiting for ever.
func TestKafkaScaleOutConfigChangeReadsInFlightPartials(t *testing.T) {
	runOnInFlightPartials(t, "config", func(c Config, m partialChunk) []kafka.Message {
		c.Privacy.Epsilon *= 2
		d, err := ReleaseDigest(c)
		if err != nil {
			t.Fatal(err)
		}
		return partialMessages("", partialMACKey(testKey(), partialBindingOf(c.Kafka, d)), m.id.start, m.id.pid, m.data)
	}, func(c Config, _ string) map[string]any {
		c.Privacy.Epsilon *= 2
		d, err := ReleaseDigest(c)
		if err != nil {
			t.Fatal(err)
		}
		op, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"v": 2, "closed_through": int64(noClosedWindow), "output_offsets": map[string]int64{}, "origin": testBase,
			"digest": d, "partials_bound_from": testBase, "deployment": op.deployment("")}
	})
}

// runOnInFlightPartials runs a scale-out deployment whose partials topic
// holds the partials of every window of a small stream as rewrite makes
// them from this version's, whose state record is record's (given the
// deployment's config and digest), and whose stage 1 has committed its
// input to the end, and checks that it publishes exactly what a single
// instance publishes, rejecting nothing.
func runOnInFlightPartials(t *testing.T, name string, rewrite func(Config, partialChunk) []kafka.Message, record func(Config, string) map[string]any) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	const nWindows = 2
	in := uniqueName("dpstream-" + name + "-in")
	createTopic(t, cl, in, 1)
	produce(t, brokers, in, genStream(43, nWindows, 30).messages(0, time.Second))
	releases := nWindows * 3 * 4 // windows × public groups × aggregates

	ref := testConfig(brokers, in, uniqueName("dpstream-"+name+"-ref"), uniqueName("dpstream-"+name+"-ref"))
	ref.Kafka.CreateTopics = true
	op, pub := newTestOperator(t, ref)
	if err := runUntil(t, op, testBase+(nWindows-1)*testSize.Milliseconds(), pub, 90*time.Second); err != nil {
		t.Fatalf("reference: %v", err)
	}
	_, refRaw := readReleases(t, cl, ref.Kafka.OutputTopic)

	// This version's partials of the stream, rewritten.
	first := testConfig(brokers, in, uniqueName("dpstream-"+name+"-first"), uniqueName("dpstream-"+name+"-first"))
	first.Kafka.CreateTopics, first.Kafka.ScaleOut = true, true
	op, _ = newTestOperator(t, first)
	runAllUntilOutput(t, []*Operator{op}, cl, first.Kafka.OutputTopic, releases, 120*time.Second)

	c := testConfig(brokers, in, uniqueName("dpstream-"+name+"-out"), uniqueName("dpstream-"+name))
	c.Kafka.CreateTopics, c.Kafka.ScaleOut = true, true
	var old []kafka.Message
	for _, m := range readAll(t, cl, first.Kafka.partialsTopic()) {
		ch, err := decodePartialChunk(m.Value)
		if err != nil || ch.n != 1 {
			t.Fatalf("partial message: %v (%d chunks)", err, ch.n)
		}
		old = append(old, rewrite(c, ch)...)
	}
	createTopic(t, cl, c.Kafka.partialsTopic(), 1)
	produce(t, brokers, c.Kafka.partialsTopic(), old)
	// Stage 1 committed its input behind the old partials: it does not
	// write them again.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, end, err := cl.endOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	commitOffset(t, cl, c.Kafka.GroupID, in, end[0])
	digest, err := ReleaseDigest(c)
	if err != nil {
		t.Fatal(err)
	}
	createTopic(t, cl, c.Kafka.stateTopic(), 1)
	prev, err := json.Marshal(record(c, digest))
	if err != nil {
		t.Fatal(err)
	}
	produce(t, brokers, c.Kafka.stateTopic(), []kafka.Message{{Key: []byte(c.Kafka.GroupID), Value: prev}})

	op, _ = newTestOperator(t, c)
	runAllUntilOutput(t, []*Operator{op}, cl, c.Kafka.OutputTopic, len(refRaw), 120*time.Second)
	_, raw := readReleases(t, cl, c.Kafka.OutputTopic)
	for k, v := range refRaw {
		if !bytes.Equal(raw[k], v) {
			t.Errorf("release %q differs from the single instance's (the in-flight partials were not merged)", k)
		}
	}
	for _, reason := range []string{"mac", "old_format", "damaged", "not_partial"} {
		if n := counter(t, op.reg, "dpstream_partials_rejected_total", reason); n != 0 {
			t.Errorf("dpstream_partials_rejected_total{reason=%s} = %v, want 0", reason, n)
		}
	}
	last, err := lastState(ctx, cl, c.Kafka.stateTopic(), c.Kafka.GroupID, nil)
	if err != nil || last == nil || last.PartialsBoundFrom < testBase || last.Deployment == nil || last.Digest != digest {
		t.Errorf("state record after the run: %+v, %v; want a partials cutoff, the identity and this configuration's digest", last, err)
	}
}
