package operator

import (
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// laneSpread is the lanes stream with every reading keyed by its index, so
// that a unit's readings spread over the input partitions, and a flooding
// unit riding along beyond every bound (in every region, every tariff and
// appliance), so that the merge must re-apply each lane's bounds per unit
// across the whole input.
func laneSpread(s laneStream) []kafka.Message {
	base := s.messages(time.Second) // sets testStreamEnd; its last message is the sentinel
	sentinel := base[len(base)-1]
	var out []kafka.Message
	for i, m := range base[:len(base)-1] {
		m.Key = []byte(strconv.Itoa(i))
		out = append(out, m)
		if i%3 == 0 {
			e := s.events[i]
			f := laneEvent{"flood", testRegions[i%3], laneTariffs[i%3], laneAppliances[(i/3)%3], 0.5, 260, e.time}
			fm := laneStream{events: []laneEvent{f}}.messages(time.Second)[0]
			fm.Key = []byte("f" + strconv.Itoa(i))
			out = append(out, fm)
		}
	}
	testStreamEnd.Store(sentinel.Time.UnixMilli())
	return append(out, sentinel)
}

// TestKafkaScaleOutLanes: two measures and two histograms, published by one
// instance and by three instances with scale-out, give identical output
// topics as sets of (key, bytes): stage 1 carries every lane's partial
// state, stage 2 merges each lane with its own bounds per unit across the
// input (the flooding unit counts no more than its bounds in any lane).
func TestKafkaScaleOutLanes(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in := uniqueName("dpstream-lanes-scale-in")
	createTopic(t, cl, in, 4)
	const nWindows = 6
	s := genLaneStream(24, nWindows, 30)
	produce(t, brokers, in, laneSpread(s))
	lastStart := testBase + (nWindows-1)*testSize.Milliseconds()

	refOut := uniqueName("dpstream-lanes-scale-ref")
	ref := laneConfig(brokers, in, refOut, uniqueName("dpstream-lanes-scale-ref"))
	ref.Kafka.CreateTopics = true
	op, pub := newTestOperator(t, ref)
	if err := runUntil(t, op, lastStart, pub, 120*time.Second); err != nil {
		t.Fatalf("single instance: %v", err)
	}
	refRels, refRaw := readReleases(t, cl, refOut)
	if want := nWindows * 3 * len(laneAggregates); len(refRels) != want {
		t.Fatalf("single instance published %d releases, want %d", len(refRels), want)
	}

	out := uniqueName("dpstream-lanes-scale-out")
	c := laneConfig(brokers, in, out, uniqueName("dpstream-lanes-scale"))
	c.Kafka.CreateTopics = true
	c.Kafka.ScaleOut = true
	var ops []*Operator
	for range 3 {
		op, _ := newTestOperator(t, c)
		ops = append(ops, op)
	}
	runAllUntilOutput(t, ops, cl, out, len(refRels), 180*time.Second)
	_, raw := readReleases(t, cl, out) // fails on a key published twice
	sameReleases(t, refRaw, raw, "one instance", "three instances")
}
