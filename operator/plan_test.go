package operator

import (
	"errors"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
)

// TestOutputsAreIntegersAndOnTheGrid: counts, histogram cells and the mean's
// count are published as integers (Ints, never Floats) for every kind of
// noise (exact discrete noise for laplace and gaussian, rounded float noise
// for logistic), and sums and the mean's centred sum are exact multiples of
// their power-of-two grid step; each series names the mechanism that ran.
// Private group selection (no public groups) runs through the same path.
func TestOutputsAreIntegersAndOnTheGrid(t *testing.T) {
	s := genStream(3, 2, 60)
	for _, tc := range []struct {
		mech          string
		ints, reals   string
		publicGroups  bool
		wantIntsExact bool
	}{
		{"laplace", "discrete-laplace", "laplace", true, true},
		{"gaussian", "discrete-gaussian", "gaussian", true, true},
		{"logistic", "logistic", "logistic", true, false},
		{"laplace", "discrete-laplace", "laplace", false, true},
	} {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Privacy.Mechanism = tc.mech
		if !tc.publicGroups {
			c.Privacy.PublicGroups = nil
			c.Privacy.Epsilon = 20 // 20 units per region: enough to pass the threshold
		}
		rels, _, _, _ := runCore(t, c, s.messages(0, c.Windows.AllowedLateness), map[string]int64{}, noClosedWindow)
		if len(rels) == 0 {
			t.Fatalf("%s: no releases", tc.mech)
		}
		steps := map[float64]bool{}
		for k, r := range rels {
			for _, sr := range r.Series {
				switch {
				case sr.Name == schema.SeriesMean:
					continue // derived (post-processing)
				case sr.Name == schema.SeriesSum:
					if sr.Floats == nil || sr.Ints != nil || sr.Mechanism != tc.reals {
						t.Errorf("%s %s: sum series %+v, want Floats from %s", tc.mech, k, sr, tc.reals)
						continue
					}
					// Lower = 0, Upper = 10, max_values 3: L∞ = 30 for a sum,
					// 15 for the centred sum; SnapStep is the power of two
					// ≥ L∞·2⁻²⁰.
					step := privacy.SnapStep(sr.Sensitivity.LInf)
					steps[step] = true
					if step != math.Ldexp(1, -15) && step != math.Ldexp(1, -16) {
						t.Errorf("%s %s: step %v", tc.mech, k, step)
					}
					for _, x := range sr.Floats {
						if q := x / step; q != math.Trunc(q) {
							t.Errorf("%s %s: %v is not a multiple of the grid step %v", tc.mech, k, x, step)
						}
					}
				default:
					if sr.Ints == nil || sr.Floats != nil || sr.Mechanism != tc.ints {
						t.Errorf("%s %s: series %s %+v, want Ints from %s", tc.mech, k, sr.Name, sr, tc.ints)
					}
				}
				for j := range sr.Len() {
					if !(sr.Lo[j] <= sr.Value(j) && sr.Value(j) <= sr.Hi[j]) {
						t.Errorf("%s %s: value outside its own interval", tc.mech, k)
					}
				}
			}
		}
		if len(steps) != 2 {
			t.Errorf("%s: grid steps %v, want one for sums and one for centred sums", tc.mech, steps)
		}
	}
}

// recheck verifies independently of the calibration that a plan meets its
// budget: the composition over all windows of every part, each coordinate
// shifted by its L∞, certified by at least one valid argument — the
// accountant of the final scales (privacy.AccountantFor: exact Gaussian or
// PLD), exact pure-ε composition for Laplace-type noise (ε of a coordinate
// L∞/scale, summed), or basic composition checked with each mechanism's own
// exact criterion at (ε/n, δ/n).
func recheck(t *testing.T, p *plan) {
	t.Helper()
	l := p.ledger
	n := 0
	for _, pt := range l.parts {
		n += pt.L0 * l.windows
	}
	ok := []string{}
	if l.budget.Delta > 0 {
		acc, err := privacy.AccountantFor(l.parts, l.scales, l.windows)
		if err != nil {
			t.Fatal(err)
		}
		if d := acc.Delta(l.budget.Epsilon); d <= l.budget.Delta {
			ok = append(ok, "accountant")
		}
	}
	pure := 0.0
	for i, pt := range l.parts {
		switch pt.Mechanism.(type) {
		case privacy.Laplace, privacy.DiscreteLaplace, privacy.Logistic:
			pure += float64(pt.L0*l.windows) * pt.Linf / l.scales[i]
		default:
			pure = math.Inf(1)
		}
	}
	if pure <= l.budget.Epsilon*(1+1e-12) {
		ok = append(ok, "pure")
	}
	basic := true
	for i, pt := range l.parts {
		c, isC := pt.Mechanism.(privacy.Criterion)
		if !isC || !(c.Delta(l.budget.Epsilon/float64(n), l.scales[i], pt.Linf) <= l.budget.Delta/float64(n)) {
			basic = false
		}
	}
	if basic {
		ok = append(ok, "basic")
	}
	if len(ok) == 0 {
		t.Errorf("plan (%s) is not certified by any recheck: parts %+v scales %v budget %+v", p.note, l.parts, l.scales, l.budget)
	}
	// The ledger never exceeds the total and grows with k.
	prev := schema.Budget{}
	for k := 1; k <= l.windows; k = 2*k + 1 {
		b := l.spent(k)
		if b.Epsilon < prev.Epsilon || b.Delta < prev.Delta || b.Epsilon > p.total.Epsilon || b.Delta > p.total.Delta {
			t.Errorf("spent(%d) = %+v after %+v, total %+v", k, b, prev, p.total)
		}
		prev = b
	}
	if b := l.spent(l.windows); b.Epsilon > p.total.Epsilon || b.Delta > p.total.Delta {
		t.Errorf("spent over the horizon %+v exceeds %+v", b, p.total)
	}
}

// TestPlanMeetsBudget: for per-window and horizon budgets, pure and
// approximate, with and without group selection, and every accountant, the
// calibrated scales pass recheck; the tight accountant never needs more
// noise than basic composition; a horizon's releases carry a growing
// ledger in Spent.
func TestPlanMeetsBudget(t *testing.T) {
	horizon := func(c *Config, n int, eps, delta float64) {
		c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
		c.Privacy.Horizon, c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = time.Duration(n)*c.Windows.Size, eps, delta
	}
	cases := map[string]func(*Config){
		"window laplace":    func(c *Config) {},
		"window gaussian":   func(c *Config) { c.Privacy.Mechanism = "gaussian" },
		"window subbotin:3": func(c *Config) { c.Privacy.Mechanism = "subbotin:3" },
		"window pure":       func(c *Config) { c.Privacy.Delta = 0 },
		"window selection":  func(c *Config) { c.Privacy.PublicGroups = nil },
		"horizon laplace":   func(c *Config) { horizon(c, 60, 5, 1e-6) },
		"horizon gaussian":  func(c *Config) { horizon(c, 60, 5, 1e-6); c.Privacy.Mechanism = "gaussian" },
		"horizon pure":      func(c *Config) { horizon(c, 60, 5, 0) },
		"horizon selection": func(c *Config) { horizon(c, 60, 5, 1e-6); c.Privacy.PublicGroups = nil },
		"horizon basic":     func(c *Config) { horizon(c, 60, 5, 1e-6); c.Privacy.Accounting = "basic" },
		"horizon advanced":  func(c *Config) { horizon(c, 60, 5, 1e-6); c.Privacy.Accounting = "advanced" },
		"horizon pld logistic": func(c *Config) {
			horizon(c, 60, 5, 1e-6)
			c.Privacy.Accounting = "pld"
			c.Privacy.Mechanism = "logistic"
		},
		"horizon mixed override": func(c *Config) { horizon(c, 60, 5, 1e-6); c.Privacy.Mechanisms = map[string]string{"sum": "gaussian"} },
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range cases {
			if !yield(k) {
				return
			}
		}
	})
	scaleOf := map[string]float64{}
	for _, name := range names {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		cases[name](&c)
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		recheck(t, o.plan)
		scaleOf[name] = o.plan.aggs[0].noises[0].scale
		if !strings.Contains(o.Note(), "accounting "+c.Privacy.Accounting) {
			t.Errorf("%s: note %q does not name the accounting", name, o.Note())
		}
	}
	if !(scaleOf["horizon laplace"] <= scaleOf["horizon basic"]) || !(scaleOf["horizon laplace"] <= scaleOf["horizon advanced"]) {
		t.Errorf("tightest scale %v above basic %v or advanced %v", scaleOf["horizon laplace"], scaleOf["horizon basic"], scaleOf["horizon advanced"])
	}

	// The ledger in the releases: 2 windows of a 4-window horizon.
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	horizon(&c, 4, 4, 1e-6)
	s := genStream(5, 2, 30)
	rels, _, _, _ := runCore(t, c, s.messages(0, c.Windows.AllowedLateness), map[string]int64{}, noClosedWindow)
	spent := map[int64]schema.Budget{}
	for k, r := range rels {
		if r.Horizon.Start != testBase || r.Horizon.End != testBase+4*testSize.Milliseconds() || r.Horizon.Budget != (schema.Budget{Epsilon: 4, Delta: 1e-6}) {
			t.Errorf("%s: horizon %+v", k, r.Horizon)
		}
		if b, ok := spent[r.WindowStart]; ok && b != r.Spent {
			t.Errorf("%s: releases of one window disagree on Spent", k)
		}
		spent[r.WindowStart] = r.Spent
		if r.Budget != spent[testBase] && r.WindowStart == testBase {
			t.Errorf("%s: window budget %+v, first window's spent %+v", k, r.Budget, r.Spent)
		}
	}
	a, b := spent[testBase], spent[testBase+testSize.Milliseconds()]
	if !(a.Epsilon > 0 && a.Epsilon < b.Epsilon && b.Epsilon < 4 && b.Delta <= 1e-6) {
		t.Errorf("spent after 1 and 2 windows: %+v, %+v (total ε = 4)", a, b)
	}
}

// TestAutoPicksCompareWinner: with mechanism auto, a window releasing one
// sum over 16 public groups (one unit moves 16 coordinates) at ε = 1,
// δ = 1e-6 gets Subbotin_1.5 noise — the winner `dpstream compare --epsilon
// 1 --delta 1e-6 --l0 16` names (table in /tmp/dpnotes/accounting.md) — and
// the choice agrees with privacy.Compare for the same shape and is recorded
// in the note, the series and the start log's choices.
func TestAutoPicksCompareWinner(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Windows.Aggregates = []string{AggSum}
	c.Bounds.MaxGroups = 16
	c.Privacy.Epsilon, c.Privacy.Delta = 1, 1e-6
	c.Privacy.Mechanism = Auto
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	n := o.plan.aggs[0].noises[0]
	if n.mech.Name() != "subbotin:1.5" || !n.auto {
		t.Errorf("auto chose %s, want subbotin:1.5", n.mech.Name())
	}
	cmp, err := privacy.Compare(privacy.Budget{Epsilon: 1, Delta: 1e-6}, 1, 16, n.linf,
		privacy.CompareOptions{Candidates: privacy.AutoCandidates(1e-6)})
	if err != nil || cmp.Winner != n.mech.Name() {
		t.Errorf("compare's winner %q (%v), auto %q", cmp.Winner, err, n.mech.Name())
	}
	if !strings.Contains(o.Note(), "sum.sum: subbotin:1.5 (auto)") || len(o.plan.choices) != 1 ||
		!strings.Contains(o.plan.choices[0], "smallest variance") {
		t.Errorf("note %q, choices %q", o.Note(), o.plan.choices)
	}
	rels, _, _, _ := runCore(t, c, genStream(4, 1, 20).messages(0, c.Windows.AllowedLateness), map[string]int64{}, noClosedWindow)
	for k, r := range rels {
		if r.Series[0].Mechanism != "subbotin:1.5" {
			t.Errorf("%s: series mechanism %q", k, r.Series[0].Mechanism)
		}
	}
}

var boundRE = regexp.MustCompile(`(privacy\.[a-z_]+) must be ≥ ([0-9.e+-]+)`)

// TestInfeasibleBudgetRefused: a budget no noise can meet is refused at
// start (New, which --check-config runs too) with the smallest feasible
// change, and each suggested bound is right: at the bound the operator
// starts, 2% below it (the search stops within 1%) it refuses.
func TestInfeasibleBudgetRefused(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Privacy.Mechanism, c.Privacy.Delta = "gaussian", 0
	_, err := New(c, WithKey(testKey()))
	if !errors.Is(err, ErrConfig) || !errors.Is(err, privacy.ErrInfeasible) || !strings.Contains(err.Error(), "privacy.delta must be > 0") {
		t.Errorf("gaussian with δ = 0: %v", err)
	}

	// ε = 1e-9 over a 50-window horizon: the Laplace noise of the sums
	// would exceed 2^40 grid steps.
	c = testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
	c.Privacy.Horizon, c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = 50*c.Windows.Size, 1e-9, 1e-6
	_, err = New(c, WithKey(testKey()))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "smallest feasible change") {
		t.Fatalf("tiny ε: %v", err)
	}
	msg := err.Error()
	t.Log(msg)
	found := 0
	for _, m := range boundRE.FindAllStringSubmatch(msg, -1) {
		v, perr := strconv.ParseFloat(m[2], 64)
		if perr != nil {
			t.Fatalf("%q: %v", m[0], perr)
		}
		set := func(x float64) Config {
			d := c
			switch m[1] {
			case "privacy.horizon_epsilon":
				d.Privacy.HorizonEpsilon = x
			case "privacy.horizon_delta":
				d.Privacy.HorizonDelta = x
			default:
				t.Fatalf("unexpected key in %q", m[0])
			}
			return d
		}
		if _, err := New(set(v), WithKey(testKey())); err != nil {
			t.Errorf("%s = %g (suggested) still refused: %v", m[1], v, err)
		}
		if _, err := New(set(v/1.02), WithKey(testKey())); err == nil {
			t.Errorf("%s = %g (2%% below the suggestion) accepted: the suggestion is not the smallest", m[1], v/1.02)
		}
		found++
	}
	if found != 2 {
		t.Errorf("found %d bounds in %q, want ε and δ", found, msg)
	}
	sizeRE := regexp.MustCompile(`windows\.size of at least ([0-9hms.]+) \((\d+) window`)
	m := sizeRE.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no window size suggested in %q", msg)
	}
	size, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	d := c
	d.Windows.Size = size
	if _, err := New(d, WithKey(testKey())); err != nil {
		t.Errorf("windows.size = %s (suggested) still refused: %v", size, err)
	}
}

// TestLedgerGrid: the ledger reports the guarantee of at least as many
// windows as were released (an upper bound), never more than the horizon
// holds, with few distinct evaluations per horizon.
func TestLedgerGrid(t *testing.T) {
	for _, n := range []int{1, 31, 32, 33, 100, 1440, 10080} {
		distinct := map[int]bool{}
		prev := 0
		for k := 1; k <= n; k++ {
			g := ledgerGrid(k, n)
			if g < k || g > n || g < prev || (k <= ledgerExact && g != k) {
				t.Fatalf("n=%d: ledgerGrid(%d) = %d after %d", n, k, g, prev)
			}
			prev = g
			distinct[g] = true
		}
		// 32 exact, then one per 5% step: 32 + ⌈ln(n/32)/ln 1.05⌉.
		if limit := ledgerExact + 1 + int(math.Ceil(math.Log(math.Max(1, float64(n)/ledgerExact))/math.Log(ledgerStep))); len(distinct) > limit {
			t.Errorf("n=%d: %d distinct evaluations, want ≤ %d", n, len(distinct), limit)
		}
	}
}
