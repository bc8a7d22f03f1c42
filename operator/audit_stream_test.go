package operator

// The streaming audit's scenarios and tests; the method and its helpers
// are described in audit_test.go.

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/windows"
)

// streamScenario is one neighbouring pair: the extra unit's records.
type streamScenario struct {
	name  string
	extra func(c Config) []auditItem
}

var streamScenarios = []streamScenario{
	{"ordinary", func(Config) []auditItem { return ordinaryUnit(streamAuditWindows) }},
	{"skewed", func(c Config) []auditItem { return skewedUnit(c.Windows.MaxSkew) }},
	{"flood", func(Config) []auditItem { return floodUnit(streamAuditWindows) }},
}

// TestStreamingPrivacyAudit runs the audit (see the top of this file) for
// an ordinary unit, a unit with skewed timestamps in many future windows
// and a flooding unit, with a count and with a histogram: the exact check
// finds no violation and the estimated ε lower bound stays ≤ the claimed
// ε. False-failure rate: ≤ 6 × streamAuditAlpha = 6e-6 for a random test
// key; with the fixed key the outcome is deterministic.
//
// "histogram-total" is the histogram under a total bound of 3 below its 3
// cells × 3 per cell (bounds.max_contributions, issue 20): its noise is
// calibrated on L1 = 3 (discrete Laplace scale 3 instead of 9), and the
// exact check verifies that adding a unit moves the window's coordinates
// by at most 3 in total (the flooding unit tries 9).
func TestStreamingPrivacyAudit(t *testing.T) {
	t.Parallel() // computes alone; no shared state (docs/development.md)
	base := genStream(streamAuditSeed, streamAuditWindows, streamAuditUsers)
	for _, name := range []string{AggCount, AggHistogram, "histogram-total"} {
		agg, total := strings.CutSuffix(name, "-total")
		c := streamAuditConfig(agg)
		if total {
			c.Bounds.MaxBuckets, c.Bounds.MaxPerBucket, c.Bounds.MaxContributions = 3, 3, 3
		}
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatal(err)
		}
		p := o.plan
		if sc := p.aggs[0].noises[0].scale; total && (sc < 3 || sc > 3*(1+1e-12)) {
			t.Fatalf("%s: scale %g, want 3 rounded up (L1 = 3 at ε = 1)", name, sc)
		}
		items := baseItems(base, c.Windows.AllowedLateness)
		d := runWindows(t, c, o, auditMessages(items))
		if len(d.windows) != streamAuditWindows {
			t.Fatalf("%s: D released %d windows, want %d", agg, len(d.windows), streamAuditWindows)
		}
		for _, sc := range streamScenarios {
			t.Run(name+"/"+sc.name, func(t *testing.T) {
				extra := sc.extra(c)
				d1 := runWindows(t, c, o, auditMessages(append(slices.Clone(items), extra...)))
				worst, v0, v1, lost, problems := neighbourDiff(p, d, d1)
				for _, pr := range problems {
					t.Errorf("sensitivity violated: %s", pr)
				}
				if lost != 0 {
					t.Errorf("adding the unit lost %d of the other units' events", lost)
				}
				if v0 == v1 {
					t.Fatalf("the unit changed no released coordinate")
				}
				eps, where, tested := auditCoordinate(t, p, c.Kafka.namespace(), windowAt(t, d, worst.start), windowAt(t, d1, worst.start),
					worst, v0, v1, streamAuditTrials, name+"/"+sc.name)
				t.Logf("%d + %d input events (D': %s); audited window %d, group %v, cell %d: true %d → %d; ε̂ = %.4f (claim ε = %g, δ = %g; event %s; %d event-directions, %d releases per side)",
					len(items), len(extra), statuses(d1.stats), auditWindowIndex(worst.start), mustValues(worst.group), worst.cell, v0, v1,
					eps, p.window.Epsilon, p.window.Delta, where, tested, streamAuditTrials)
				if eps > p.window.Epsilon {
					t.Errorf("privacy loss lower bound %.4f exceeds the claimed ε = %g (event %s)", eps, p.window.Epsilon, where)
				}
			})
		}
	}
}

// TestStreamingAuditCatchesOldWatermark is the audit's self-check on the
// streaming path: under the old watermark rule (simulated by
// eventTimeArrivals) the skewed unit's events drop the other units'
// events, the exact check reports it, and the statistical audit finds an
// ε̂ above the claim — the audit would have caught issue 13's finding.
// Under the current rule the same stream passes (TestStreamingPrivacyAudit,
// "skewed"). The simulation is faithful: the unchanged audit run on the
// code before the fix (with only runWindows adapted to its API) failed
// its "skewed" scenarios with the same 925 events lost and ε̂ ≈ 6.03 for
// the count. Deterministic (fixed stream and keys); with a random key it
// would fail to detect with negligible probability (the true values differ
// by far more than L∞).
func TestStreamingAuditCatchesOldWatermark(t *testing.T) {
	base := genStream(streamAuditSeed, streamAuditWindows, streamAuditUsers)
	c := streamAuditConfig(AggCount)
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	p := o.plan
	items := baseItems(base, c.Windows.AllowedLateness)
	d := runWindows(t, c, o, auditMessages(eventTimeArrivals(items)))
	if ref := runWindows(t, c, o, auditMessages(items)); !slices.EqualFunc(d.windows, ref.windows, func(a, b windows.Window) bool {
		ca, va := coordValues(p, &a)
		cb, vb := coordValues(p, &b)
		return slices.Equal(ca, cb) && slices.Equal(va, vb)
	}) {
		t.Fatal("the simulation changed D, which is in event-time order")
	}
	d1 := runWindows(t, c, o, auditMessages(eventTimeArrivals(append(slices.Clone(items), skewedUnit(c.Windows.MaxSkew)...))))
	worst, v0, v1, lost, problems := neighbourDiff(p, d, d1)
	if len(problems) == 0 || lost == 0 {
		t.Fatalf("the exact check finds nothing under the old rule (%d problems, %d events lost)", len(problems), lost)
	}
	t.Logf("old rule: %d violations of the sensitivity, %d of the other units' events lost from the stream's %d windows (D': %s); first: %s",
		len(problems), lost, streamAuditWindows, statuses(d1.stats), problems[0])
	eps, where, tested := auditCoordinate(t, p, c.Kafka.namespace(), windowAt(t, d, worst.start), windowAt(t, d1, worst.start),
		worst, v0, v1, streamAuditTrials, "old-watermark")
	t.Logf("old rule: audited window %d, group %v: true %d → %d; ε̂ = %.4f (claim ε = %g; event %s; %d event-directions)",
		auditWindowIndex(worst.start), mustValues(worst.group), v0, v1, eps, p.window.Epsilon, where, tested)
	if eps <= p.window.Epsilon {
		t.Errorf("the audit does not detect the old watermark rule: ε̂ = %.4f ≤ ε = %g", eps, p.window.Epsilon)
	}
}

// TestStreamingAuditCatchesHalfScale is the audit's calibration
// self-check: the ordinary unit's releases noised by a plan calibrated for
// ε = 2 (half the discrete Laplace scale) and audited against the claim
// ε = 1 give ε̂ > 1 (the true loss is 2). Deterministic (fixed stream and
// keys).
func TestStreamingAuditCatchesHalfScale(t *testing.T) {
	base := genStream(streamAuditSeed, streamAuditWindows, streamAuditUsers)
	c := streamAuditConfig(AggCount)
	o, o2 := halfScaleOperators(t, c)
	if s1, s2 := o.plan.aggs[0].noises[0].scale, o2.plan.aggs[0].noises[0].scale; s2 > s1/2*(1+1e-6) {
		t.Fatalf("scale at ε = 2 is %g, not half of %g", s2, s1)
	}
	items := baseItems(base, c.Windows.AllowedLateness)
	d := runWindows(t, c, o, auditMessages(items))
	d1 := runWindows(t, c, o, auditMessages(append(slices.Clone(items), ordinaryUnit(streamAuditWindows)...)))
	worst, v0, v1, _, problems := neighbourDiff(o.plan, d, d1)
	if len(problems) != 0 {
		t.Fatalf("sensitivity violated: %v", problems)
	}
	claim := o.plan.window.Epsilon
	eps, where, _ := auditCoordinate(t, o2.plan, c.Kafka.namespace(), windowAt(t, d, worst.start), windowAt(t, d1, worst.start),
		worst, v0, v1, streamAuditTrials, "half-scale")
	t.Logf("half scale: true %d → %d; ε̂ = %.4f (claim ε = %g, true loss %g; event %s)", v0, v1, eps, claim, 2*claim, where)
	if eps <= claim {
		t.Errorf("the audit does not detect half the calibrated scale: ε̂ = %.4f ≤ ε = %g", eps, claim)
	}
}

// releaseMoments simulates the live Kafka loop on the one partition of
// msgs, which the operator reads as its records arrive (arrival order):
// the operator's clock ticks every tickInterval from testBase to until
// (Unix ms); a record is read at its arrival time; at every tick the
// fetcher has just read the partition to its end (a caught-up marker
// issued at the tick), and the loop's tick runs: core.release with the
// clock minus one tick, then applyCaughtUp. It returns, per window start, the clock time (Unix ms)
// at which the window was handed to the publisher.
func releaseMoments(t *testing.T, c Config, o *Operator, msgs []kafka.Message, until int64) map[int64]int64 {
	t.Helper()
	co := auditCore(t, c, o)
	step := tickInterval(c).Milliseconds()
	out := map[int64]int64{}
	i := 0
	for now := testBase; now <= until; now += step {
		for ; i < len(msgs) && msgs[i].Time.UnixMilli() <= now; i++ {
			m := msgs[i]
			m.Topic, m.Partition, m.Offset = "in", 0, int64(i)
			if res, r, _ := co.handle(&m); res == outSkipped {
				t.Fatalf("message %d skipped as %s", i, r)
			}
		}
		co.handleItem(&item{m: kafka.Message{Topic: "in", Partition: 0}, caughtUp: time.UnixMilli(now)})
		ws, _ := co.release(now - step)
		for _, w := range ws {
			out[w.Start] = now
		}
		co.applyCaughtUp()
	}
	return out
}

// TestStreamingAuditReleaseTiming is the audit's timing scenario (issue 18
// §1): D is the base stream with nothing after its last window (a sparse
// partition: the operator closes the last window when the clock passes
// it, idle_timeout after its end + allowed_lateness); D' adds one event
// of the extra unit arriving 1 ms after that window's end + allowed
// lateness, which closes it on arrival. The moment (by the operator's
// clock) at which every window, the neighbour's own included, is handed
// to the publisher must be the same under D and D', and never before its
// schedule (end + allowed_lateness + idle_timeout). On the code before
// the change (where the loop's tick handed over whatever the watermark
// closed: core.poll) the last window went out under D' about idle_timeout
// earlier than under D. Deterministic (no noise, simulated clock).
func TestStreamingAuditReleaseTiming(t *testing.T) {
	base := genStream(streamAuditSeed, streamAuditWindows, streamAuditUsers)
	c := streamAuditConfig(AggCount)
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	var items []auditItem
	for _, e := range base.events {
		items = append(items, auditItem{e, e.time + testArrivalDelay})
	}
	size, lateness := testSize.Milliseconds(), c.Windows.AllowedLateness.Milliseconds()
	lastEnd := testBase + int64(streamAuditWindows)*size
	at := lastEnd + lateness + 1
	neighbour := auditItem{testEvent{streamAuditUnit, "north", "a", 1, at}, at}
	delay, step := publicationDelay(c), tickInterval(c).Milliseconds()
	until := lastEnd + size + delay + 2*step // the neighbour's window too
	d := releaseMoments(t, c, o, auditMessages(items), until)
	d1 := releaseMoments(t, c, o, auditMessages(append(slices.Clone(items), neighbour)), until)
	if want := streamAuditWindows + 1; len(d) != want {
		t.Fatalf("D released %d windows by the end of the simulation, want %d", len(d), want)
	}
	for _, s := range slices.Sorted(maps.Keys(d)) {
		sched := s + size + delay
		if d[s] < sched+step {
			t.Errorf("window %d released at %+d ms of its schedule under D (the loop releases a tick after it)", auditWindowIndex(s), d[s]-sched)
		}
		if m1, ok := d1[s]; !ok {
			t.Errorf("window %d released under D only", auditWindowIndex(s))
		} else if m1 != d[s] {
			t.Errorf("window %d released at %+d ms of its schedule under D, %+d ms under D' (the neighbour shows in the timing)",
				auditWindowIndex(s), d[s]-sched, m1-sched)
		}
	}
	for s := range d1 {
		if _, ok := d[s]; !ok {
			t.Errorf("window %d released under D' only", auditWindowIndex(s))
		}
	}
}

// halfScaleOperators returns operators of c and of c at twice its ε (half
// the noise scale), for the audits that must catch a halved scale.
func halfScaleOperators(t *testing.T, c Config) (o, o2 *Operator) {
	t.Helper()
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	c2 := c
	c2.Privacy.Epsilon = 2 * c.Privacy.Epsilon
	if o2, err = New(c2, WithKey(testKey())); err != nil {
		t.Fatal(err)
	}
	return o, o2
}
