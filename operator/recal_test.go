package operator

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// recalRef is the operator's setting in privacy/testdata/after_reference.json
// (privacy/testdata/gen_after.py, mpmath, independent of the Go code): the
// histogram and count of horizonConfig(2) — two discrete-Laplace parts of
// shift 3 per window — after 4 of 10 windows at scale s1, and the exact
// smallest scale s2_star of the 6 windows left within (2, 1e-6).
func recalRef(t *testing.T) (s1, s2 float64) {
	t.Helper()
	b, err := os.ReadFile("../privacy/testdata/after_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Settings []struct {
			Family string
			Shift  float64
			L0, K  int
			M      int
			S1     float64
			S2Star float64 `json:"s2_star"`
		}
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	for _, s := range ref.Settings {
		if s.Family == "discrete-laplace" && s.Shift == 3 && s.L0 == 2 && s.K == 4 && s.M == 6 {
			return s.S1, s.S2Star
		}
	}
	t.Fatal("after_reference.json has no operator setting (regenerate with privacy/testdata/gen_after.py)")
	return 0, 0
}

// recalWindow is a window of stateTestConfig's public groups with fixed
// exact aggregates.
func recalWindow(start, size int64) *windows.Window {
	w := &windows.Window{Start: start, End: start + size}
	for gi, g := range []string{"east", "north", "south"} {
		h := []int64{int64(10 + gi), 20, 30}
		w.Groups = append(w.Groups, windows.Group{Key: schema.MakeGroup(g), Units: 10, Histogram: h, Count: 60 + int64(gi)})
	}
	return w
}

// publishWindows advances l by p over the windows [from, to).
func publishWindows(p *plan, l *ledgerRecord, from, to int64) *ledgerRecord {
	for s := from; s < to; s += p.size {
		l = p.at(s).advance(l, s, s+p.size)
	}
	return l
}

// TestRecalibrateMidHorizon: a configuration change after 4 of 10 windows
// (ε 2 → 2.5; the horizon keeps the total 2 its earlier releases claimed)
// is accepted, and the 6 windows left get the scale the independent
// mpmath computation gives for the composition of 4 windows at the old
// scale and 6 at the new one (never below it, at most 5e-4 above: the
// PLD's pessimism and the solver's bracket). The releases' Spent grows to
// exactly the total at the horizon's last window, their Horizon says the
// total held (2, not 2.5), and the next horizon uses the new configuration
// in full. Fails on the old code, which refused the change.
func TestRecalibrateMidHorizon(t *testing.T) {
	s1, s2 := recalRef(t)
	old := testPlan(t, horizonConfig(2))
	if len(old.ledger.scales) != 2 || old.ledger.scales[0] != s1 || old.ledger.scales[1] != s1 {
		t.Fatalf("test premise: the old plan's scales %v, the reference's s1 %v (regenerate the reference)", old.ledger.scales, s1)
	}
	hs, he := old.horizonOf(testBase)
	from := hs + 4*old.size
	l := publishWindows(old, nil, hs, from)

	more := testPlan(t, horizonConfig(2.5))
	got, err := more.reconcile(l, from)
	if err != nil {
		t.Fatalf("ε 2 → 2.5 after 4 of 10 windows: %v", err)
	}
	q := more.at(from)
	if q == more || q.compose != 6 {
		t.Fatalf("no recalibrated plan for the 6 windows left (at: %p, plan %p, windows %d)", q, more, q.compose)
	}
	for i, s := range q.ledger.scales {
		if s < s2*(1-1e-12) || s > s2*(1+5e-4) {
			t.Errorf("part %d: recalibrated scale %.10g, independent %.10g (ratio %.6g)", i, s, s2, s/s2)
		}
	}
	if q.ledger.scales[0] == more.ledger.scales[0] {
		t.Error("the recalibrated scale is the configuration's own")
	}
	if !strings.Contains(q.note, "recalibrated after a configuration change: 6 window(s) left") || !strings.Contains(q.note, "over all 6 windows") ||
		strings.Contains(q.note, "floating-point residual") {
		t.Errorf("the recalibrated plan's note: %q", q.note)
	}
	claim := schema.Budget{Epsilon: 2, Delta: 1e-6}
	if got.Total != claim || got.SegStart != from || got.Log == nil || !got.Log.Recalibrated || len(got.Log.Prior) != 1 || got.Log.Prior[0].Windows != 4 {
		t.Errorf("the segment's ledger %+v (log %+v)", got, got.Log)
	}
	prev := l.Spent
	for s := from; s < he; s += q.size {
		sp, hz := more.at(s).spentAt(got, s)
		if sp.Epsilon < prev.Epsilon || over(sp, claim) || hz.Budget != claim || hz.Start != hs || hz.End != he {
			t.Fatalf("window %d: spent %+v after %+v, horizon %+v; want growing within %+v", (s-hs)/q.size, sp, prev, hz, claim)
		}
		out, _, _, err := more.at(s).releaseWindowAt(recalWindow(s, q.size), testKey(), "ns", "i", nil, got)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out {
			if m.rel.Spent != sp || m.rel.Horizon != hz {
				t.Fatalf("release %s: spent %+v, horizon %+v; the ledger says %+v, %+v", m.key, m.rel.Spent, m.rel.Horizon, sp, hz)
			}
		}
		got = more.at(s).advance(got, s, s+q.size)
		if got.Spent != sp {
			t.Fatalf("window %d: the ledger records %+v, the release says %+v", (s-hs)/q.size, got.Spent, sp)
		}
		prev = sp
	}
	if prev != claim {
		t.Errorf("spent at the horizon's last window %+v, want the total %+v", prev, claim)
	}
	// The next horizon: the configuration's own plan, its full total.
	if more.at(he) != more {
		t.Error("the recalibrated plan releases the next horizon")
	}
	sp, hz := more.at(he).spentAt(more.at(he).advance(got, he, he+more.size), he)
	if want, _ := more.spent(he); sp != want || hz.Budget.Epsilon != 2.5 {
		t.Errorf("next horizon's first window: spent %+v, horizon %+v; want %+v of 2.5", sp, hz, want)
	}
}

// TestRecalibrateRestartSameConfig: a restart with the changed
// configuration after some of the recalibrated windows continues the same
// segment — the same ledger record, the same scales — and a window
// released again is byte-identical (finality), and its noise stream is
// not the configuration's own; another change recalibrates in turn,
// composed over both earlier segments.
func TestRecalibrateRestartSameConfig(t *testing.T) {
	old := testPlan(t, horizonConfig(2))
	hs, he := old.horizonOf(testBase)
	from := hs + 4*old.size
	l := publishWindows(old, nil, hs, from)
	more := testPlan(t, horizonConfig(2.5))
	rec, err := more.reconcile(l, from)
	if err != nil {
		t.Fatal(err)
	}
	at := from + 2*more.size
	rec = publishWindows(more, rec, from, at)
	w := recalWindow(at, more.size)
	first, _, _, err := more.at(at).releaseWindowAt(w, testKey(), "ns", "i", nil, rec)
	if err != nil {
		t.Fatal(err)
	}

	// What a restart reads: the ledger through the state record's format.
	b, err := encodeState(stateRecord{ClosedThrough: at, Origin: hs, Ledger: rec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.Ledger, rec) {
		t.Fatalf("the ledger through the state record: %+v (log %+v), want %+v (log %+v)", st.Ledger, st.Ledger.Log, rec, rec.Log)
	}
	rec = st.Ledger
	again := testPlan(t, horizonConfig(2.5))
	got, err := again.reconcile(rec, at)
	if err != nil || got != rec {
		t.Fatalf("restart with the same configuration: %+v, %v; want the ledger unchanged", got, err)
	}
	if q := again.at(at); q == again || q.budgetID() != rec.Budget || q.ledger.scales[0] != more.at(at).ledger.scales[0] {
		t.Fatalf("restart: plan %p (budget %s, scales %v), want the recalibration %s %v", q, q.budgetID(), q.ledger.scales, rec.Budget, more.at(at).ledger.scales)
	}
	second, _, _, err := again.at(at).releaseWindowAt(w, testKey(), "ns", "i", nil, got)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) == 0 || len(first) != len(second) {
		t.Fatalf("%d and %d releases", len(first), len(second))
	}
	for i := range first {
		if !bytes.Equal(first[i].value, second[i].value) {
			t.Fatalf("release %s differs after the restart", first[i].key)
		}
	}
	// The same window under the configuration's own calibration draws
	// independent noise (another stream), never the same noise at another
	// scale.
	own, _, _, err := again.releaseWindowAt(w, testKey(), "ns", "i", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.at(at).streamDigest() == again.streamDigest() || bytes.Equal(own[0].value, first[0].value) {
		t.Error("the recalibrated plan shares the configuration's noise streams")
	}

	// The original configuration, restarting now, recalibrates exactly
	// as the changed one did (the recalibration depends on the parts and
	// the horizon's spending, not on the configured total, which the claim
	// caps): it continues the segment.
	if got, err := testPlan(t, horizonConfig(2)).reconcile(rec, at); err != nil || got != rec {
		t.Errorf("back to ε 2 in the recalibrated segment: %+v, %v; want the segment continued", got, err)
	}
	// Other bounds: a third segment, composed over both earlier ones.
	third := horizonConfig(2)
	third.Bounds.MaxPerBucket = 2
	back := testPlan(t, third)
	rec2, err := back.reconcile(rec, at)
	if err != nil {
		t.Fatalf("other bounds after 2 recalibrated windows: %v", err)
	}
	if rec2.Log == nil || len(rec2.Log.Prior) != 2 || rec2.Log.Prior[0].Windows != 4 || rec2.Log.Prior[1].Windows != 2 {
		t.Fatalf("third segment's log %+v: want both earlier segments (4 and 2 windows)", rec2.Log)
	}
	sp, _ := back.at(he-back.size).spentAt(publishWindows(back, rec2, at, he-back.size), he-back.size)
	if sp != (schema.Budget{Epsilon: 2, Delta: 1e-6}) {
		t.Errorf("spent at the horizon's end after three segments: %+v", sp)
	}
}

// TestRecalibrateRefused: a change that cannot fit — the earlier
// configuration spent more than the new total — is refused with the
// budget spent, the total and the reason; so is a move between event-level
// (parallel composition) and user-level privacy in the middle of a horizon
// (another privacy unit: the two guarantees do not compose into either).
func TestRecalibrateRefused(t *testing.T) {
	old := testPlan(t, horizonConfig(2))
	hs, _ := old.horizonOf(testBase)
	from := hs + 9*old.size
	l := publishWindows(old, nil, hs, from)
	_, err := testPlan(t, horizonConfig(0.5)).reconcile(l, from)
	if !errors.Is(err, ErrState) {
		t.Fatalf("ε 2 → 0.5 after 9 of 10 windows: err = %v, want a refusal", err)
	}
	for _, want := range []string{"middle of the horizon", "already spent ε=", "total ε=0.5", "cannot be calibrated within what is left", "windows.start"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}

	ev := eventLevelConfig(10, 2, 1e-6, "laplace")
	user := eventLevelConfig(10, 2, 1e-6, "laplace")
	user.Schema.UnitField = "user"
	pe, pu := testPlan(t, ev), testPlan(t, user)
	from = hs + 3*pe.size
	if _, err := pu.reconcile(publishWindows(pe, nil, hs, from), from); !errors.Is(err, ErrState) {
		t.Errorf("event-level → user-level mid-horizon: err = %v, want a refusal", err)
	}
	if _, err := pe.reconcile(publishWindows(pu, nil, hs, from), from); !errors.Is(err, ErrState) {
		t.Errorf("user-level → event-level mid-horizon: err = %v, want a refusal", err)
	}
}

// TestRecalibrateAfterExponentialQuantiles: a segment whose quantiles
// were selected by the exponential mechanism is logged under the
// selection's name, and a successor composes it (privacy.Selection) rather
// than refusing the ledger it cannot parse (found when the two branches
// met: privacy.Parse does not know "exponential").
func TestRecalibrateAfterExponentialQuantiles(t *testing.T) {
	withQuantiles := func(eps float64) Config {
		c := horizonConfig(eps)
		c.Windows.Aggregates = append(c.Windows.Aggregates, AggQuantiles)
		c.Windows.Quantiles = []float64{0.5}
		c.Windows.QuantileMechanism = QuantileExponential
		return c
	}
	old := testPlan(t, withQuantiles(2))
	hs, _ := old.horizonOf(testBase)
	from := hs + 4*old.size
	l := publishWindows(old, nil, hs, from)
	if l.Log == nil || !slices.ContainsFunc(l.Log.Current.Parts, func(p spendPart) bool { return p.Mechanism == (privacy.Selection{}).Name() }) {
		t.Fatalf("test premise: the segment logs no selection part: %+v", l.Log)
	}
	more := testPlan(t, withQuantiles(2.5))
	if _, err := more.reconcile(l, from); err != nil {
		t.Fatalf("ε 2 → 2.5 after 4 of 10 windows with exponential quantiles: %v", err)
	}
	if q := more.at(from); q == more || q.compose != 6 {
		t.Fatalf("no recalibrated plan for the 6 windows left (windows %d)", q.compose)
	}
}

// TestRecalibrateTotalBoundL1: the ledger logs the L1 and L2 a part was
// calibrated with (spendPart), so a recalibration composes the earlier
// segment as tightly as the live calibration did. Pure ε (horizon δ = 0),
// laplace, a histogram of 3 cells × 3 per cell under a total bound of 3
// (L1 = 3, while L0·L∞ = 9) and the count (1 group × 3): pure ε adds up
// exactly, Σ L1ᵢ/scaleᵢ per window (gen_total.py's Laplace rule), so
// after 4 of 10 windows at scales s the 6 windows left within the same
// total 2 need exactly s again — the recalibrated scales are within 1e-9
// above the configuration's own (the certificate's rounding). On the old
// code, which logged no L1, the earlier windows count the histogram as 9
// and the windows left get more noise (this test fails there).
func TestRecalibrateTotalBoundL1(t *testing.T) {
	cfg := func(eps float64) Config {
		c := horizonConfig(eps)
		c.Privacy.HorizonDelta = 0
		c.Bounds = BoundsConfig{MaxGroups: 1, MaxBuckets: 3, MaxPerBucket: 3, MaxValues: 3, MaxContributions: 3}
		return c
	}
	old := testPlan(t, cfg(2))
	if pt := old.ledger.parts[0]; pt.L1 != 3 || pt.L0*int(pt.Linf) != 9 {
		t.Fatalf("test premise: the histogram's part %+v, want L1 3 and L0·L∞ 9", pt)
	}
	hs, _ := old.horizonOf(testBase)
	from := hs + 4*old.size
	l := publishWindows(old, nil, hs, from)
	if l.Log == nil || l.Log.Current.Parts[0].L1 != 3 {
		t.Fatalf("the ledger's log %+v: want the histogram's L1 3", l.Log)
	}
	more := testPlan(t, cfg(2.5))
	if _, err := more.reconcile(l, from); err != nil {
		t.Fatalf("ε 2 → 2.5 after 4 of 10 windows: %v", err)
	}
	q := more.at(from)
	if q == more || q.compose != 6 {
		t.Fatalf("no recalibrated plan for the 6 windows left (windows %d)", q.compose)
	}
	for i, s := range q.ledger.scales {
		if w := old.ledger.scales[i]; s < w || s > w*(1+1e-9) {
			t.Errorf("part %d: recalibrated scale %.12g, the live calibration's %.12g (ratio %.9g)", i, s, w, s/w)
		}
	}
}
