package operator

import (
	"bytes"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
)

// runCore feeds msgs (all on one partition of topic "in") through a core
// and releases every closed window, as the Kafka loop does but without a
// broker. The first window released is the one after closedThrough, or
// with noClosedWindow windows.start (the first start of a deployment). It
// returns the releases by key, their bytes, and the core.
func runCore(t *testing.T, c Config, msgs []kafka.Message, published map[string]int64, closedThrough int64) (map[string]schema.Release, map[string][]byte, *core, map[schema.Reason]int) {
	t.Helper()
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	from, ok := c.Windows.startMillis()
	if closedThrough != noClosedWindow {
		from, ok = closedThrough, true
	}
	if !ok {
		t.Fatal("runCore needs windows.start or closedThrough")
	}
	co, err := newCore(c, o.plan, o.key, from)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.assign([]tp{{"in", 0}}); err != nil {
		t.Fatal(err)
	}
	reasons := map[schema.Reason]int{}
	for i := range msgs {
		m := msgs[i]
		m.Topic, m.Partition, m.Offset = "in", 0, int64(i)
		if out, r, _ := co.handle(&m); out == outSkipped {
			reasons[r]++
		}
	}
	// The messages' arrival times (their Time) close the windows.
	ws := co.poll()
	rels := map[string]schema.Release{}
	raw := map[string][]byte{}
	for i := range ws {
		out, _, _, err := o.plan.releaseWindow(&ws[i], o.key, c.Kafka.namespace(), o.instance, published)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out {
			// Through the exported decoder, as a consumer would.
			r, err := schema.DecodeRelease(m.value)
			if err != nil {
				t.Fatal(err)
			}
			rels[m.key], raw[m.key] = r, m.value
		}
	}
	return rels, raw, co, reasons
}

// TestCoreEndToEnd runs the known stream through decode → windows → noise →
// encode → decode without a broker: every window and group present, values
// within their intervals at the stated rate, metadata consistent, bad input
// counted by reason.
func TestCoreEndToEnd(t *testing.T) {
	s := genStream(1, 4, 60)
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	rels, _, co, reasons := runCore(t, c, s.messages(7, c.Windows.AllowedLateness), map[string]int64{}, noClosedWindow)
	if n := checkReleases(t, s, c, rels); n != 96 {
		t.Errorf("checked %d values, want 96 (4 windows × 3 groups × 8 values)", n)
	}
	_, want := badInputs()
	for _, r := range want {
		if reasons[r] == 0 {
			t.Errorf("no bad input counted as %s (counted: %v)", r, reasons)
		}
	}
	// Every window is final once released: only the sentinel's window
	// holds offsets; nothing else blocks the commit.
	co.final(testBase, testBase+10000, testBase+20000, testBase+30000)
	offs := co.commitOffsets()["in"][0]
	sentinel := int64(len(s.messages(7, c.Windows.AllowedLateness)) - 1)
	if offs != sentinel {
		t.Errorf("commit offset %d, want %d (the sentinel's, held by its open window)", offs, sentinel)
	}
}

// TestReleasesAreReproducible: the same key and stream give byte-identical
// releases; keys already published are skipped; a different key gives
// different noise.
func TestReleasesAreReproducible(t *testing.T) {
	s := genStream(2, 2, 30)
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	msgs := s.messages(0, c.Windows.AllowedLateness)
	_, raw1, _, _ := runCore(t, c, msgs, map[string]int64{}, noClosedWindow)
	_, raw2, _, _ := runCore(t, c, msgs, map[string]int64{}, noClosedWindow)
	if len(raw1) == 0 || len(raw1) != len(raw2) {
		t.Fatalf("%d and %d releases", len(raw1), len(raw2))
	}
	for k, b := range raw1 {
		if !bytes.Equal(b, raw2[k]) {
			t.Errorf("release %q differs between two runs", k)
		}
	}
	// Half the keys already published: only the others are produced, with
	// the same bytes.
	pub := map[string]int64{}
	i := 0
	for k := range raw1 {
		if i%2 == 0 {
			pub[k] = 0
		}
		i++
	}
	_, raw3, _, _ := runCore(t, c, msgs, pub, noClosedWindow)
	for k, b := range raw3 {
		if _, ok := pub[k]; ok {
			t.Errorf("already published key %q produced again", k)
		} else if !bytes.Equal(b, raw1[k]) {
			t.Errorf("release %q differs after a partial publication", k)
		}
	}
	if len(raw3)+len(pub) != len(raw1) {
		t.Errorf("%d new + %d published != %d", len(raw3), len(pub), len(raw1))
	}
}

// TestClosedThroughMakesReplayLate: after a restart with closedThrough at
// the end of window 0, window 0's events are late and it is not released
// again, while window 1 is.
func TestClosedThroughMakesReplayLate(t *testing.T) {
	s := genStream(3, 2, 30)
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	rels, _, _, _ := runCore(t, c, s.messages(0, c.Windows.AllowedLateness), map[string]int64{}, testBase+testSize.Milliseconds())
	for _, r := range rels {
		if r.WindowStart != testBase+testSize.Milliseconds() {
			t.Errorf("release of window %d after closedThrough", r.WindowStart)
		}
	}
	if len(rels) != 3*4 {
		t.Errorf("%d releases, want 12 (window 1 only)", len(rels))
	}
}

func TestPartitionID(t *testing.T) {
	topics := []string{"a", "b"}
	id, err := partitionID(topics, tp{"b", 5})
	if err != nil || id != 1<<20|5 {
		t.Fatalf("partitionID = %d, %v", id, err)
	}
	if _, err := partitionID(topics, tp{"c", 0}); err == nil {
		t.Error("unknown topic accepted")
	}
	if _, err := partitionID(topics, tp{"a", 1 << 20}); err == nil {
		t.Error("partition beyond 2^20 accepted")
	}
}
