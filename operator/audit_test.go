package operator

// The empirical privacy audit of the streaming path (issue 13). The
// privacy package's audit (privacy/audit_test.go) checks each mechanism
// alone at input 0 against input Δ. This one checks the windows and the
// operator around it: two neighbouring input streams D and D' = D plus
// every event of one extra privacy unit go through the core (decode →
// windows, by arrival time → Poll), and the closed windows through
// plan.releaseWindow, the path the Kafka loop publishes from.
//
// Two checks per scenario:
//
//   - Exact (deterministic): D and D' release the same windows, and in
//     every window the unit changes at most L0 released coordinates, each
//     by at most L∞, and never lowers one (with no bounds.max_units cap,
//     adding a unit can only add: a lowered coordinate means another
//     unit's events were dropped because of it).
//   - Statistical: the released coordinate with the largest true
//     discrepancy |value(D') − value(D)| (chosen from the true windows,
//     before any noise is drawn) is released streamAuditTrials times from
//     each side, each time under a different noise key (the true windows
//     are built once; only the noise changes). For the fixed family of
//     threshold events {Y ≤ t}, {Y > t} and the bins between them (t on
//     the half-integers within 6 noise scales of both true values), the
//     audit computes the Clopper–Pearson lower confidence bound on the
//     privacy loss log((P₁(E) − δ)/P₀(E)) in both directions,
//     Bonferroni-corrected, and asserts it stays ≤ the window's claimed ε.
//     A correct release fails this with probability ≤ streamAuditAlpha per
//     audited pair.
//
// The configuration makes one coordinate carry the whole claim: one
// aggregate (a count, or a histogram), bounds.max_groups 1 and
// max_buckets 1 (L0 = 1), L∞ = 3, a per-window budget ε = 1, δ = 0, so
// the noise is discrete Laplace with scale t = L∞/ε = 3 on every
// coordinate. A unit changes one coordinate of a window; the others are
// identically distributed and independent under D and D', so they carry
// no information and the audited coordinate's privacy loss is the whole
// window's. A statistic that is one coordinate can in general only show a
// lower bound on the loss; here it is tight when the unit moves its
// coordinate by the full L∞ (then the true loss is exactly ε, and the
// audit's bound comes out a little below it).
//
// The windows' contribution bounding is keyed by a seed derived from the
// key (seedFromKey) and the noise by HMAC(key, digest, release key); the
// two are separate HMAC domains, so the audit fixes the bounding seed
// (testKey) and varies only the noise key. For counts and histogram cells
// the guarantee holds for every seed, and the exact check above is what it
// needs of the bounded windows: they depend only on how many of a unit's
// events are kept and in which groups and cells (keyed by group and cell),
// not on which events, so the offsets D''s extra records shift change no
// other unit's contribution. (Sums and means keep values keyed by the
// event's partition and offset; they are not audited here.)
//
// Self-checks (the audit must be able to fail): the same audit on the
// old event-time watermark rule (simulated: every record's arrival time
// is the largest event time seen so far on its partition, which is what
// the old watermark was) finds the skewed unit dropping the other units'
// events and an ε̂ far above the claim; and releases calibrated for ε = 2
// audited against the claim ε = 1 (half the noise scale) are caught.
//
// The CP helpers below re-implement the ~40 lines of privacy/audit_test.go
// (a test-only helper of another package: duplicated rather than
// exported).

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"gonum.org/v1/gonum/mathext"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

const (
	// streamAuditAlpha is the false-failure probability of one audited
	// pair (D, D'): the Clopper–Pearson bounds are Bonferroni-corrected
	// over every event of the family and both directions.
	streamAuditAlpha = 1e-6
	// streamAuditTrials is the number of noise draws per side of one
	// audited pair (each a whole window released by plan.releaseWindow).
	streamAuditTrials = 10_000
	// streamAuditWindows and streamAuditUsers shape the base stream D
	// (genStream: 1–3 events per user and window, about 120 per window).
	streamAuditWindows = 8
	streamAuditUsers   = 60
	// streamAuditSeed is genStream's seed for D.
	streamAuditSeed = 13
	// streamAuditUnit is the extra unit of D' (no user of D has this name).
	streamAuditUnit = "audit-unit"
	// streamAuditOpenWindows is windows.max_open_windows in the audit: the
	// smallest the validation accepts with the test config (⌈(max_skew 300 s
	// + lateness 1 s + idle 2 s)/10 s⌉ + 2 = 33), so that a unit stamping
	// events up to max_skew ahead reaches every window the cap allows.
	streamAuditOpenWindows = 33
)

// streamAuditConfig is the test config reduced to one aggregate (AggCount
// or AggHistogram) with a per-window budget ε = 1, δ = 0 (discrete
// Laplace, scale 3 for L∞ = 3).
func streamAuditConfig(agg string) Config {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Windows.Aggregates = []string{agg}
	c.Windows.MaxOpenWindows = streamAuditOpenWindows
	c.Privacy.Epsilon, c.Privacy.Delta = 1, 0
	return c
}

// auditItem is one input record: an event and its arrival time (the Kafka
// record timestamp, Unix ms).
type auditItem struct {
	e       testEvent
	arrival int64
}

// baseItems is s with every event arriving testArrivalDelay after its
// event time, and the sentinel that closes the stream's last window.
func baseItems(s testStream, lateness time.Duration) []auditItem {
	var out []auditItem
	for _, e := range s.events {
		out = append(out, auditItem{e, e.time + testArrivalDelay})
	}
	end := testBase + int64(s.windows)*testSize.Milliseconds() + lateness.Milliseconds()
	return append(out, auditItem{testEvent{"sentinel", "north", "a", 0, end}, end + testArrivalDelay})
}

// auditMessages returns the items as one partition's Kafka messages, in
// arrival order (stable: items arriving together keep their order).
func auditMessages(items []auditItem) []kafka.Message {
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b auditItem) int { return cmp.Compare(a.arrival, b.arrival) })
	out := make([]kafka.Message, len(items))
	for i, it := range items {
		out[i] = kafka.Message{Key: []byte(it.e.user), Value: it.e.encode(i), Time: time.UnixMilli(it.arrival)}
	}
	return out
}

// eventTimeArrivals simulates the old watermark rule (before issue 13):
// a partition's watermark was the largest event time seen on it, so any
// event (within max_skew) advanced it. Giving every record, in arrival
// order, the arrival time "largest event time so far + testArrivalDelay"
// makes the current arrival-time rule behave exactly like that: the
// windows close, and events are judged late, by the running maximum of
// the event times. A stream in event-time order is unchanged by it.
func eventTimeArrivals(items []auditItem) []auditItem {
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b auditItem) int { return cmp.Compare(a.arrival, b.arrival) })
	hi := int64(math.MinInt64)
	for i := range items {
		hi = max(hi, items[i].e.time+testArrivalDelay)
		items[i].arrival = hi
	}
	return items
}

// ordinaryUnit sends max_values (3) events in one group in every window
// of the stream, at ordinary times: the full L∞ of the count and of one
// histogram cell.
func ordinaryUnit(nWindows int) []auditItem {
	var out []auditItem
	size := testSize.Milliseconds()
	for w := range nWindows {
		for j := range 3 {
			tm := testBase + int64(w)*size + 1000 + int64(j)*3000
			out = append(out, auditItem{testEvent{streamAuditUnit, "north", "a", 5, tm}, tm + testArrivalDelay})
		}
	}
	return out
}

// skewedUnit sends, in two bursts arriving in windows 0 and 3, events
// stamped 1 to 29 windows ahead of their arrival (10 s to almost 5
// minutes, within windows.max_skew), 7 per window — over its bounds, in
// two groups and two cells — and one event exactly max_skew ahead
// (accepted), so that it has events in every window max_skew reaches
// (with max_open_windows at its smallest valid value, every window the
// cap lets open); one event 1 ms beyond max_skew (too far ahead); and one
// event stamped in window 0 arriving in window 5 (late). Under the old
// rule the first burst's events moved the watermark minutes ahead and the
// other units' later events were all late.
func skewedUnit(skew time.Duration) []auditItem {
	var out []auditItem
	size, sk := testSize.Milliseconds(), skew.Milliseconds()
	add := func(region, cat string, tm, arrival int64) {
		out = append(out, auditItem{testEvent{streamAuditUnit, region, cat, 7, tm}, arrival})
	}
	for _, a := range []int64{testBase + 2_500, testBase + 3*size + 4_000} {
		for k := int64(1); k*size < sk; k++ {
			tm := a + k*size
			for j, ev := range [][2]string{{"north", "a"}, {"north", "a"}, {"north", "a"}, {"north", "a"}, {"north", "b"}, {"east", "c"}, {"east", "c"}} {
				add(ev[0], ev[1], tm+int64(j)*7, a)
			}
		}
		add("north", "a", a+sk, a)   // exactly max_skew ahead: accepted
		add("north", "a", a+sk+1, a) // 1 ms beyond: too far ahead
	}
	add("north", "a", testBase+500, testBase+5*size+100) // late
	return out
}

// floodUnit sends, in every window of the stream, 5 events in each of the
// 3 groups and 3 categories (45 per window, 15× its bounds).
func floodUnit(nWindows int) []auditItem {
	var out []auditItem
	size := testSize.Milliseconds()
	for w := range nWindows {
		start := testBase + int64(w)*size
		j := int64(0)
		for _, reg := range testRegions {
			for ci, cat := range testCategories {
				for k := range 5 {
					tm := start + 100 + j*200
					j++
					out = append(out, auditItem{testEvent{streamAuditUnit, reg, cat, float64(ci + k), tm}, tm + testArrivalDelay})
				}
			}
		}
	}
	return out
}

// auditRun is what one input stream produced: the windows released, in
// start order, and the windows package's counters.
type auditRun struct {
	windows []windows.Window
	stats   windows.Stats
}

// auditCore returns a core releasing from windows.start with the one
// partition "in"/0 assigned.
func auditCore(t *testing.T, c Config, o *Operator) *core {
	t.Helper()
	from, ok := c.Windows.startMillis()
	if !ok {
		t.Fatal("the audit needs windows.start")
	}
	co, err := newCore(c, o.plan, o.key, from)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.assign([]tp{{"in", 0}}); err != nil {
		t.Fatal(err)
	}
	return co
}

// runWindows feeds msgs (one partition) through a core releasing from
// windows.start, polling after every message as the Kafka loop does on its
// ticks, and returns the closed windows (as runCore does, without the
// releases: the audit releases each window many times).
func runWindows(t *testing.T, c Config, o *Operator, msgs []kafka.Message) auditRun {
	t.Helper()
	co := auditCore(t, c, o)
	var ws []windows.Window
	for i := range msgs {
		m := msgs[i]
		m.Topic, m.Partition, m.Offset = "in", 0, int64(i)
		if out, r, _ := co.handle(&m); out == outSkipped {
			t.Fatalf("message %d skipped as %s", i, r)
		}
		ws = append(ws, co.poll()...)
	}
	return auditRun{ws, co.agg.Stats()}
}

// statuses lists the non-zero event counts of st by status, e.g.
// "accepted 989, late 1".
func statuses(st windows.Stats) string {
	var parts []string
	for i, n := range st.Events {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", windows.Status(i), n))
		}
	}
	return strings.Join(parts, ", ")
}

// auditCoord is one released coordinate: a window, a public group and a
// cell of the release's series (0 for a count).
type auditCoord struct {
	start int64
	group string
	cell  int
}

// coordValues returns the true (bounded, exact) value of every released
// coordinate of w — the values plan.releaseWindow adds noise to — in
// release order.
func coordValues(p *plan, w *windows.Window) ([]auditCoord, []int64) {
	var cs []auditCoord
	var vs []int64
	for _, g := range p.groupsOf(w) {
		switch p.aggs[0].kind {
		case schema.KindCount:
			cs, vs = append(cs, auditCoord{w.Start, g.Key, 0}), append(vs, g.Count)
		case schema.KindHistogram:
			for i := range p.labels {
				v := int64(0)
				if i < len(g.Histogram) {
					v = g.Histogram[i]
				}
				cs, vs = append(cs, auditCoord{w.Start, g.Key, i}), append(vs, v)
			}
		}
	}
	return cs, vs
}

// neighbourDiff compares the windows of D (r0) and D' (r1): it returns
// the coordinate with the largest |Δ| (the first in window, group and cell
// order on ties) with its two true values, the total by which coordinates
// went down (other units' events lost), and the violations of the
// sensitivity the noise is calibrated for: a window released under only
// one input, more than L0 coordinates changed in a window, a change larger
// than L∞, a total change larger than L1, a coordinate lowered by adding a
// unit.
func neighbourDiff(p *plan, r0, r1 auditRun) (worst auditCoord, v0, v1, lost int64, problems []string) {
	sens := p.aggs[0].noises[0].sens
	by1 := map[int64]*windows.Window{}
	for i := range r1.windows {
		by1[r1.windows[i].Start] = &r1.windows[i]
	}
	best := int64(-1)
	for i := range r0.windows {
		w0 := &r0.windows[i]
		w1 := by1[w0.Start]
		if w1 == nil {
			problems = append(problems, fmt.Sprintf("window %d released for D only", auditWindowIndex(w0.Start)))
			continue
		}
		delete(by1, w0.Start)
		cs, a := coordValues(p, w0)
		cs1, b := coordValues(p, w1)
		if !slices.Equal(cs, cs1) {
			problems = append(problems, fmt.Sprintf("window %d: different coordinates", auditWindowIndex(w0.Start)))
			continue
		}
		changed, l1 := 0, int64(0)
		for j := range cs {
			d := b[j] - a[j]
			if d != 0 {
				changed++
			}
			l1 += max(d, -d)
			if d < 0 {
				lost -= d
				problems = append(problems, fmt.Sprintf("window %d group %v cell %d: %d → %d (lowered by adding a unit)", auditWindowIndex(w0.Start), mustValues(cs[j].group), cs[j].cell, a[j], b[j]))
			} else if float64(d) > sens.Linf {
				problems = append(problems, fmt.Sprintf("window %d group %v cell %d: %d → %d (more than L∞ = %g)", auditWindowIndex(w0.Start), mustValues(cs[j].group), cs[j].cell, a[j], b[j], sens.Linf))
			}
			if ad := max(d, -d); ad > best {
				best, worst, v0, v1 = ad, cs[j], a[j], b[j]
			}
		}
		if float64(changed) > sens.L0 {
			problems = append(problems, fmt.Sprintf("window %d: %d coordinates changed (more than L0 = %g)", auditWindowIndex(w0.Start), changed, sens.L0))
		}
		if float64(l1) > sens.L1 {
			problems = append(problems, fmt.Sprintf("window %d: coordinates changed by %d in total (more than L1 = %g)", auditWindowIndex(w0.Start), l1, sens.L1))
		}
	}
	for s := range by1 {
		problems = append(problems, fmt.Sprintf("window %d released for D' only", auditWindowIndex(s)))
	}
	slices.Sort(problems)
	return worst, v0, v1, lost, problems
}

// auditWindowIndex is the index of the window starting at start in the
// test streams (0: the first, at testBase).
func auditWindowIndex(start int64) int64 { return (start - testBase) / testSize.Milliseconds() }

// auditKey is the noise key of trial i of one side of one audit, derived
// from the test key: every trial draws independent noise.
func auditKey(tag string, side, i int) rng.Key {
	s := rng.NewStream(testKey(), fmt.Sprintf("dpstream/test/stream-audit/%s/%d/%d", tag, side, i))
	var k rng.Key
	for j := 0; j < len(k); j += 8 {
		binary.LittleEndian.PutUint64(k[j:], s.Uint64())
	}
	return k
}

// windowAt returns the window of r starting at start.
func windowAt(t *testing.T, r auditRun, start int64) *windows.Window {
	t.Helper()
	for i := range r.windows {
		if r.windows[i].Start == start {
			return &r.windows[i]
		}
	}
	t.Fatalf("no window at %d", start)
	return nil
}

// auditCoordinate releases w0 (from D) and w1 (from D') n times each
// through p.releaseWindow, each time under its own noise key, reads
// coordinate c of each release, and returns the largest lower confidence
// bound on the privacy loss over the threshold events around the true
// values v0 and v1 (see streamLoss), where it was found, and the number
// of (event, direction) pairs tested.
func auditCoordinate(t *testing.T, p *plan, ns string, w0, w1 *windows.Window, c auditCoord, v0, v1 int64, n int, tag string) (float64, string, int) {
	t.Helper()
	key := schema.ReleaseKey(releaseID(ns, c.start), p.aggs[0].name, mustValues(c.group)...)
	draw := func(w *windows.Window, side int) []float64 {
		ys := make([]float64, n)
		for i := range ys {
			out, _, _, err := p.releaseWindow(w, auditKey(tag, side, i), ns, "audit", nil)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, m := range out {
				if m.key == key {
					ys[i], found = float64(m.rel.Series[0].Ints[c.cell]), true
					break
				}
			}
			if !found {
				t.Fatalf("release %q missing", key)
			}
		}
		slices.Sort(ys)
		return ys
	}
	y0, y1 := draw(w0, 0), draw(w1, 1)
	reach := math.Ceil(6 * p.aggs[0].noises[0].scale)
	var th []float64
	for v := float64(min(v0, v1)) - reach - 0.5; v <= float64(max(v0, v1))+reach+0.5; v++ {
		th = append(th, v)
	}
	return streamLoss(y0, y1, th, p.window.Delta, streamAuditAlpha)
}

// auditCPLower and auditCPUpper are one-sided Clopper–Pearson bounds at
// level a for k successes in n trials (as cpLower and cpUpper in
// privacy/audit_test.go).
func auditCPLower(k, n int, a float64) float64 {
	if k == 0 {
		return 0
	}
	return mathext.InvRegIncBeta(float64(k), float64(n-k+1), a)
}

func auditCPUpper(k, n int, a float64) float64 {
	if k == n {
		return 1
	}
	return mathext.InvRegIncBeta(float64(k+1), float64(n-k), 1-a)
}

// streamLoss returns the largest lower confidence bound on the privacy
// loss log((P₁(E) − δ)/P₀(E)), in both directions, over the events
// {Y ≤ t}, {Y > t} and the bins between consecutive thresholds, for the
// sorted outputs y0 and y1 (as auditLoss in privacy/audit_test.go), with
// the bounds Bonferroni-corrected so that a mechanism meeting (ε, δ)
// gives a value > ε with probability ≤ alpha. It also returns the event
// where the largest bound was found and the number of (event, direction)
// pairs tested.
func streamLoss(y0, y1, thresholds []float64, delta, alpha float64) (worst float64, where string, tested int) {
	n := len(y0)
	below := func(y []float64, t float64) int { return sort.SearchFloat64s(y, math.Nextafter(t, math.Inf(1))) }
	type event struct {
		c0, c1 int
		name   string
	}
	var events []event
	for i, t := range thresholds {
		b0, b1 := below(y0, t), below(y1, t)
		events = append(events, event{b0, b1, fmt.Sprintf("Y ≤ %g", t)}, event{n - b0, n - b1, fmt.Sprintf("Y > %g", t)})
		if i > 0 {
			p0, p1 := below(y0, thresholds[i-1]), below(y1, thresholds[i-1])
			events = append(events, event{b0 - p0, b1 - p1, fmt.Sprintf("%g < Y ≤ %g", thresholds[i-1], t)})
		}
	}
	a := alpha / float64(4*len(events)) // two bounds per direction, two directions
	worst = math.Inf(-1)
	for _, e := range events {
		for dir, d := range [2][2]int{{e.c1, e.c0}, {e.c0, e.c1}} {
			num := auditCPLower(d[0], n, a) - delta
			den := auditCPUpper(d[1], n, a)
			if num <= 0 {
				continue
			}
			if l := math.Log(num / den); l > worst {
				worst, where = l, e.name
				if dir == 1 {
					where += " (D over D')"
				}
			}
		}
	}
	return worst, where, 2 * len(events)
}
