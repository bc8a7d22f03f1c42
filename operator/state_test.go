package operator

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// stateTestConfig is a valid config for the pure state and ledger tests:
// public groups, a histogram and a count, a per-window budget.
func stateTestConfig() Config {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Windows.Aggregates = []string{AggHistogram, AggCount}
	c.Privacy.Mechanism = "laplace"
	return c
}

// TestReleaseDigest: every setting that shapes a release changes the
// digest; operational settings do not.
func TestReleaseDigest(t *testing.T) {
	base := stateTestConfig()
	d0, err := ReleaseDigest(base)
	if err != nil {
		t.Fatal(err)
	}
	shaping := map[string]func(*Config){
		"epsilon":          func(c *Config) { c.Privacy.Epsilon = 1.25 },
		"delta":            func(c *Config) { c.Privacy.Delta = 1e-7 },
		"mechanism":        func(c *Config) { c.Privacy.Mechanism = "gaussian" },
		"category order":   func(c *Config) { slices.Reverse(c.Schema.Histogram.Categories) },
		"group_by":         func(c *Config) { c.Schema.GroupBy = []string{"cat"} },
		"public groups":    func(c *Config) { c.Privacy.PublicGroups = c.Privacy.PublicGroups[:2] },
		"namespace":        func(c *Config) { c.Kafka.ReleaseNamespace = "other" },
		"bounds":           func(c *Config) { c.Bounds.MaxPerBucket = 2 },
		"total bound":      func(c *Config) { c.Bounds.MaxContributions = 2 },
		"clamp":            func(c *Config) { c.Schema.Upper++ },
		"window size":      func(c *Config) { c.Windows.Size = 2 * c.Windows.Size },
		"lateness":         func(c *Config) { c.Windows.AllowedLateness = 0 },
		"input topics":     func(c *Config) { c.Kafka.InputTopics = []string{"in", "in2"} },
		"aggregates":       func(c *Config) { c.Windows.Aggregates = []string{AggCount} },
		"confidence level": func(c *Config) { c.Privacy.Confidence = 0.9 },
	}
	for name, f := range shaping {
		c := stateTestConfig()
		f(&c)
		if d, err := ReleaseDigest(c); err != nil || d == d0 {
			t.Errorf("%s: digest unchanged (%v)", name, err)
		}
	}
	operational := map[string]func(*Config){
		"brokers":       func(c *Config) { c.Kafka.Brokers = []string{"10.0.0.1:9092"} },
		"output topic":  func(c *Config) { c.Kafka.OutputTopic = "out2" },
		"log level":     func(c *Config) { c.Observability.LogLevel = "debug" },
		"tls":           func(c *Config) { c.Kafka.TLS.Enabled = true },
		"idle timeout":  func(c *Config) { c.Windows.IdleTimeout = time.Hour },
		"windows.start": func(c *Config) { c.Windows.Start = "2020-01-01T00:00:00Z" },
		"input order":   func(c *Config) { c.Kafka.InputTopics = []string{"in"} },
	}
	for name, f := range operational {
		c := stateTestConfig()
		f(&c)
		if d, err := ReleaseDigest(c); err != nil || d != d0 {
			t.Errorf("%s: digest changed (%v)", name, err)
		}
	}
}

// TestNoiseBindsConfigDigest is the audit's re-ordered categories attack:
// the same window released under two configurations that differ only in
// the order of the histogram's categories. With noise keyed by the release
// key alone (before the digest was bound), every cell's noise was the same
// in both releases, so subtracting them published the exact difference of
// two true counts (the audit measured 1500). With the digest bound, the
// noises are independent: the difference of the releases equals the true
// difference only when two independent noise draws coincide.
//
// Threshold: the cell noise here is discrete Laplace at a scale ≥ 1 (ε = 4
// per window, shared by two parts); two independent draws coincide with
// probability below 0.35 for every scale ≥ 1 (Σ_k p(k)² for the discrete
// Laplace at scale 1 is 0.32), so over 3 groups × 3 cells = 9 cells at most
// 9 coincidences are expected with probability below 0.35^9 ≈ 8e-5; the
// test fails if all 9 coincide. The key and the data are fixed, so the
// outcome is deterministic.
func TestNoiseBindsConfigDigest(t *testing.T) {
	ca := stateTestConfig()
	cb := stateTestConfig()
	cb.Schema.Histogram.Categories = slices.Clone(ca.Schema.Histogram.Categories)
	slices.Reverse(cb.Schema.Histogram.Categories)
	n := len(ca.Schema.Histogram.Categories)

	// The same true data as both configurations see it: group g has count
	// 1000·(i+1) in category i (in A's order).
	start := testBase
	wa := windows.Window{Start: start, End: start + testSize.Milliseconds()}
	wb := wa
	for gi, g := range [][]string{{"east"}, {"north"}, {"south"}} {
		ha := make([]int64, n)
		for i := range ha {
			ha[i] = int64(1000*(i+1) + 7*gi)
		}
		hb := slices.Clone(ha)
		slices.Reverse(hb)
		wa.Groups = append(wa.Groups, windows.Group{Key: schema.MakeGroup(g...), Units: 10, Histogram: ha, Count: 10})
		wb.Groups = append(wb.Groups, windows.Group{Key: schema.MakeGroup(g...), Units: 10, Histogram: hb, Count: 10})
	}
	release := func(c Config, w *windows.Window) map[string]schema.Release {
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatal(err)
		}
		out, _, _, err := o.plan.releaseWindow(w, o.key, c.Kafka.namespace(), o.instance, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]schema.Release{}
		for _, r := range out {
			if r.rel.Aggregate == AggHistogram {
				m[strings.Join(schemaGroupValues(r.rel), ",")] = r.rel
			}
		}
		return m
	}
	ra, rb := release(ca, &wa), release(cb, &wb)
	coincide, cells := 0, 0
	for g, a := range ra {
		b := rb[g]
		for j := range n {
			// Position j holds category j of A and category n−1−j of B.
			trueDiff := int64(1000*(j+1)) - int64(1000*(n-j)) // the group offsets cancel
			if a.Series[0].Ints[j]-b.Series[0].Ints[j] == trueDiff {
				coincide++
			}
			cells++
		}
	}
	if cells != 3*n {
		t.Fatalf("compared %d cells, want %d", cells, 3*n)
	}
	if coincide == cells {
		t.Errorf("all %d cells: the two releases differ by exactly the true difference (the noise was reused across configurations)", cells)
	}
	t.Logf("%d of %d cells coincide", coincide, cells)
}

// schemaGroupValues returns a release's group values in order.
func schemaGroupValues(r schema.Release) []string {
	var out []string
	for _, g := range r.Group {
		out = append(out, g.Value)
	}
	return out
}

// horizonConfig is stateTestConfig with a total budget over a horizon of
// 10 windows.
func horizonConfig(eps float64) Config {
	c := stateTestConfig()
	c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
	c.Privacy.Horizon = 10 * c.Windows.Size
	c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = eps, 1e-6
	return c
}

func testPlan(t *testing.T, c Config) *plan {
	t.Helper()
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	return o.plan
}

// TestLedgerFollowsPlan: a run that publishes every window of a horizon
// under one configuration records exactly what the plan's ledger reports
// for the window index, and a new horizon starts from zero.
func TestLedgerFollowsPlan(t *testing.T) {
	p := testPlan(t, horizonConfig(2))
	hs, he := p.horizonOf(testBase)
	var l *ledgerRecord
	for s := hs; s < he+3*p.size; s += p.size {
		got, _ := p.spentAt(l, s)
		want, _ := p.spent(s)
		if got != want {
			t.Fatalf("window %d: spent %+v, plan says %+v", (s-hs)/p.size, got, want)
		}
		l = p.advance(l, s, s+p.size)
		if l.Spent != got {
			t.Fatalf("window %d: ledger records %+v, release says %+v", (s-hs)/p.size, l.Spent, got)
		}
	}
	if l.Start != he || l.Through != he+3*p.size {
		t.Errorf("ledger after the horizon: %+v", l)
	}
}

// TestReconcileConfigChange: a configuration that spends more per window,
// taking over in the middle of a horizon, is refused (before the ledger
// was persisted it started and the horizon's spend exceeded its total);
// the same configuration, or one that spends the same (another namespace),
// continues; a change at the horizon's end is accepted.
func TestReconcileConfigChange(t *testing.T) {
	old := testPlan(t, horizonConfig(2))
	hs, he := old.horizonOf(testBase)
	var l *ledgerRecord
	for s := hs; s < hs+4*old.size; s += old.size {
		l = old.advance(l, s, s+old.size)
	}
	from := hs + 4*old.size

	if got, err := old.reconcile(l, from); err != nil || got != l {
		t.Errorf("same configuration: %v, %v", got, err)
	}
	ns := horizonConfig(2)
	ns.Kafka.ReleaseNamespace = "renamed"
	if got, err := testPlan(t, ns).reconcile(l, from); err != nil || got != l {
		t.Errorf("same spending, other namespace: %v, %v", got, err)
	}

	more := testPlan(t, horizonConfig(2.5))
	_, err := more.reconcile(l, from)
	if !errors.Is(err, ErrState) {
		t.Fatalf("ε 2 → 2.5 after 4 of 10 windows: err = %v, want a refusal", err)
	}
	for _, want := range []string{"middle of the horizon", "windows.start"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}
	// Without the refusal the horizon would overspend: what the earlier
	// configuration spent plus what the new one spends on the rest.
	rest, _ := more.spentAt(nil, hs+5*more.size) // 6 windows of the new plan
	if l.Spent.Epsilon+rest.Epsilon <= 2 {
		t.Errorf("test premise: %g + %g does not exceed the total 2", l.Spent.Epsilon, rest.Epsilon)
	}

	if got, err := more.reconcile(l, he); err != nil || got != nil {
		t.Errorf("change at the horizon's end: %v, %v (want a fresh horizon)", got, err)
	}
	// Another horizon length in the middle of the old horizon: refused.
	long := horizonConfig(2)
	long.Privacy.Horizon = 20 * long.Windows.Size
	if _, err := testPlan(t, long).reconcile(l, from); !errors.Is(err, ErrState) {
		t.Errorf("horizon 10 → 20 windows mid-horizon: err = %v, want a refusal", err)
	}
	// A change that fits: pure ε (δ = 0), the same total, other bounds
	// (so other scales and another budget identity). One window at ε = 2
	// of ten spent 0.2; the new plan spends 1.8 on the nine left: the
	// horizon ends exactly at its total. (With δ > 0 the δ of the two
	// segments add up by basic composition and no change fits.)
	pure := func(perBucket int) Config {
		c := horizonConfig(2)
		c.Privacy.HorizonDelta = 0
		c.Bounds.MaxPerBucket = perBucket
		return c
	}
	p1 := testPlan(t, pure(3))
	l1 := p1.advance(nil, hs, hs+p1.size)
	p2 := testPlan(t, pure(2))
	if p2.budgetID() == p1.budgetID() {
		t.Fatal("test premise: other bounds, same budget identity")
	}
	got, err := p2.reconcile(l1, hs+p1.size)
	if err != nil {
		t.Fatalf("a change that fits: %v", err)
	}
	sp, _ := p2.spentAt(got, he-p2.size)
	if sp.Epsilon > 2*(1+1e-12) || sp.Epsilon < 1.999 {
		t.Errorf("spent at the horizon's end after the change: %+v (base %+v), want 2", sp, l1.Spent)
	}
	if _, err := p2.reconcile(old.advance(l1, hs+old.size, hs+2*old.size), hs+2*old.size); !errors.Is(err, ErrState) {
		t.Errorf("δ > 0 before, δ = 0 after: the earlier δ cannot be added again; err = %v", err)
	}
}

// TestIntentRoundTrip: release messages survive the chunked intent
// encoding, and a missing or stale chunk is detected.
func TestIntentRoundTrip(t *testing.T) {
	var msgs []kafka.Message
	for i := range 40 {
		msgs = append(msgs, kafka.Message{Key: []byte("k" + string(rune('a'+i%26))), Value: bytes.Repeat([]byte{byte(i)}, 30<<10)})
	}
	chunks, sum := encodeIntent(msgs)
	if len(chunks) < 2 {
		t.Fatalf("%d chunks for %d KiB: the test needs several", len(chunks), 40*30)
	}
	in := &intentRecord{Through: testBase, Chunks: len(chunks), Messages: len(msgs), SHA256: sum}
	have := map[int][]byte{}
	for i, c := range chunks {
		have[i] = c
	}
	have[len(chunks)] = []byte("a stale chunk of an older, larger intent")
	got, err := readIntent(in, have)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("%d messages back, want %d", len(got), len(msgs))
	}
	for i := range msgs {
		if !bytes.Equal(got[i].Key, msgs[i].Key) || !bytes.Equal(got[i].Value, msgs[i].Value) {
			t.Fatalf("message %d differs", i)
		}
	}
	delete(have, 1)
	if _, err := readIntent(in, have); err == nil {
		t.Error("a missing chunk was not detected")
	}
	have[1] = chunks[0]
	if _, err := readIntent(in, have); err == nil {
		t.Error("a wrong chunk was not detected")
	}
}
