package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/dpstream/dpstream/schema"
)

// eventLevelConfig is testConfig with event-level privacy (no unit field)
// and the total (ε, δ) per horizon of n windows (n = 0: per window). Every
// bound is 1: at event level one event is one contribution.
func eventLevelConfig(n int, eps, delta float64, mech string) Config {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Schema.UnitField = ""
	c.Bounds = BoundsConfig{MaxGroups: 1, MaxBuckets: 1, MaxPerBucket: 1, MaxValues: 1}
	c.Privacy.Mechanism = mech
	if n > 0 {
		c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
		c.Privacy.Horizon = time.Duration(n) * c.Windows.Size
		c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = eps, delta
	} else {
		c.Privacy.Epsilon, c.Privacy.Delta = eps, delta
	}
	return c
}

// planScales returns every noised part's scale of c's plan, by part,
// after recheck has certified the plan independently (with parallel
// composition: one window meets the whole total).
func planScales(t *testing.T, c Config) map[string]float64 {
	t.Helper()
	p := testPlan(t, c)
	recheck(t, p)
	out := map[string]float64{}
	for _, a := range p.aggs {
		for _, n := range a.noises {
			out[n.part] = n.scale
		}
	}
	if len(out) == 0 {
		t.Fatal("test premise: no noised part")
	}
	return out
}

// TestEventLevelHorizonScaleIsOneWindows (issue 20, acceptance): with
// event-level privacy and a horizon of N windows, every window is
// calibrated with the whole horizon budget (parallel composition): every
// part's scale is within 1.01× of a single window's at the same total, for
// N = 16 and 256 and for Laplace, Gaussian and auto. Calibration is
// deterministic, so the test has no false failures. On the code before
// parallel composition it fails (N = 256: every Laplace scale was 30.2×
// one window's, Gaussian 16×).
func TestEventLevelHorizonScaleIsOneWindows(t *testing.T) {
	for _, mech := range []string{"laplace", "gaussian", Auto} {
		one := planScales(t, eventLevelConfig(0, 1, 1e-6, mech))
		for _, n := range []int{16, 256} {
			got := planScales(t, eventLevelConfig(n, 1, 1e-6, mech))
			for part, s1 := range one {
				if r := got[part] / s1; !(r <= 1.01 && r >= 1/1.01) {
					t.Errorf("%s, N = %d: %s scale %g is %.3g× one window's %g", mech, n, part, got[part], r, s1)
				}
			}
		}
	}
}

// TestUserLevelHorizonComposes: with a unit field (one unit's events in
// many windows) the N windows of a horizon still compose sequentially:
// the scale is far above one window's, the note and the plan say nothing
// of parallel composition; at event level they do.
func TestUserLevelHorizonComposes(t *testing.T) {
	user := func(n int) Config {
		c := eventLevelConfig(n, 1, 1e-6, "laplace")
		c.Schema.UnitField = "user"
		return c
	}
	one, many := planScales(t, user(0)), planScales(t, user(256))
	for part, s1 := range one {
		// Laplace over 256 windows at the same total: about 256× less ε
		// per window (the tightest accountant saves a few× at δ = 1e-6),
		// so well above 2×.
		if !(many[part] > 2*s1) {
			t.Errorf("user level, N = 256: %s scale %g, one window's %g: not composed", part, many[part], s1)
		}
	}
	if c := user(256); c.ParallelComposition() {
		t.Error("ParallelComposition with a unit field")
	}
	pu := testPlan(t, user(256))
	if strings.Contains(pu.note, "parallel composition") || pu.sizing(user(256), Sizes{}).Budget.Composition != "" {
		t.Errorf("user level says parallel composition: %q", pu.note)
	}

	ev := eventLevelConfig(256, 1, 1e-6, "laplace")
	pe := testPlan(t, ev)
	if !strings.Contains(pe.note, "parallel composition (event-level)") {
		t.Errorf("event-level note does not name parallel composition: %q", pe.note)
	}
	if strings.Contains(pe.note, "over all 256 windows") {
		t.Errorf("event-level note still calibrates over all windows: %q", pe.note)
	}
	sz := pe.sizing(ev, Sizes{})
	if sz.Budget.Composition != parallelComposition || sz.Budget.WindowsPerHorizon != 256 {
		t.Errorf("plan budget %+v", sz.Budget)
	}
	if sz.Budget.WindowEpsilon != 1 || sz.Budget.WindowDelta != 1e-6 {
		t.Errorf("event-level window budget %g, %g: want the horizon's 1, 1e-6", sz.Budget.WindowEpsilon, sz.Budget.WindowDelta)
	}
	// Without a horizon budget there is nothing to compose.
	if c := eventLevelConfig(0, 1, 1e-6, "laplace"); c.ParallelComposition() {
		t.Error("ParallelComposition without a horizon budget")
	}
}

// TestEventLevelLedgerDoesNotGrow: with parallel composition the ledger's
// spend after k windows of a horizon is one window's (the horizon total)
// for every k, the releases' Spent agree with it, and a restart in the
// middle of the horizon with the same configuration continues the ledger
// (the same budget identity) without spending more. Fails on the code
// before parallel composition (spent grew with k).
func TestEventLevelLedgerDoesNotGrow(t *testing.T) {
	const n = 10
	c := eventLevelConfig(n, 2, 1e-6, "laplace")
	total := schema.Budget{Epsilon: 2, Delta: 1e-6}
	p := testPlan(t, c)
	if p.window != total {
		t.Fatalf("window budget %+v, want the horizon total %+v", p.window, total)
	}
	hs, he := p.horizonOf(testBase)
	var l *ledgerRecord
	for s := hs; s < hs+4*p.size; s += p.size {
		got, hz := p.spentAt(l, s)
		if got != total || hz.Budget != total || hz.Start != hs || hz.End != he {
			t.Fatalf("window %d: spent %+v, horizon %+v; want %+v", (s-hs)/p.size, got, hz, total)
		}
		l = p.advance(l, s, s+p.size)
		if l.Spent != total {
			t.Fatalf("window %d: ledger records %+v", (s-hs)/p.size, l.Spent)
		}
	}
	// A restart: a new operator with the same configuration.
	from := hs + 4*p.size
	again := testPlan(t, eventLevelConfig(n, 2, 1e-6, "laplace"))
	got, err := again.reconcile(l, from)
	if err != nil || got != l {
		t.Fatalf("restart with the same configuration mid-horizon: %v, %v", got, err)
	}
	for s := from; s < he; s += again.size {
		sp, _ := again.spentAt(got, s)
		if sp != total {
			t.Fatalf("after the restart, window %d: spent %+v, want %+v", (s-hs)/again.size, sp, total)
		}
		got = again.advance(got, s, s+again.size)
	}
	// A user-level plan over the same horizon is another spending: it
	// never continues the event-level segment.
	user := eventLevelConfig(n, 2, 1e-6, "laplace")
	user.Schema.UnitField = "user"
	if testPlan(t, user).budgetID() == p.budgetID() {
		t.Error("user-level and event-level plans share a budget identity")
	}

	// The releases: every window of the horizon says it spent the total.
	s := genStream(5, 2, 30)
	rels, _, _, _ := runCore(t, c, s.messages(0, c.Windows.AllowedLateness), map[string]int64{}, noClosedWindow)
	if len(rels) == 0 {
		t.Fatal("test premise: no releases")
	}
	windows := map[int64]bool{}
	for k, r := range rels {
		windows[r.WindowStart] = true
		if r.Spent != total || r.Budget != total || r.Horizon.Budget != total {
			t.Errorf("%s: budget %+v, spent %+v, horizon %+v; want %+v each", k, r.Budget, r.Spent, r.Horizon, total)
		}
	}
	if len(windows) < 2 {
		t.Errorf("test premise: releases of %d window(s), want several", len(windows))
	}
}
