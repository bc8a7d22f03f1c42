package operator

import (
	"errors"
	"maps"
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
// their power-of-two grid step (for gaussian: discrete Gaussian noise on
// that lattice); each series names the mechanism that ran.
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
		{"gaussian", "discrete-gaussian", "discrete-gaussian", true, true}, // sums on the lattice (issue 13 item 4)
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
	t.Parallel() // computes alone; no shared state (docs/development.md)
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
	t.Parallel() // computes alone; no shared state (docs/development.md)
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
	cmp, err := privacy.Compare(privacy.Horizon{Total: privacy.Budget{Epsilon: 1, Delta: 1e-6}, Windows: 1, L0: 16, Linf: n.linf}, privacy.CompareOptions{Candidates: privacy.AutoCandidates(1e-6)})
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
	t.Parallel() // computes alone; no shared state (docs/development.md)
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

// TestGaussianRealValuesRunOnLattice: with gaussian configured, the sums and
// the mean's centred sum run exact discrete Gaussian noise on their lattice
// (privacy.LatticeRelease), calibrated in the joint calibration as a
// DiscreteGaussian part with the integer sensitivity ⌊L∞/Λ⌋ + 1 in grid
// units — not float64 Gaussian noise rounded to the grid, whose residual was
// not charged. The release names what ran ("discrete-gaussian"), its values
// are multiples of Λ, its scale is σ·Λ in the value's units, and the plan
// passes recheck (per window and over a horizon, certified by the PLD).
func TestGaussianRealValuesRunOnLattice(t *testing.T) {
	for _, horizon := range []bool{false, true} {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Privacy.Mechanism = "gaussian"
		if horizon {
			c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
			c.Privacy.Horizon, c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = 60*c.Windows.Size, 5, 1e-6
		}
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatal(err)
		}
		p := o.plan
		recheck(t, p)
		lattice := 0
		for _, ap := range p.aggs {
			for _, n := range ap.noises {
				if n.series != schema.SeriesSum {
					continue
				}
				lattice++
				if _, ok := n.mech.(privacy.DiscreteGaussian); !ok {
					t.Errorf("%s: %s noise, want discrete-gaussian on the lattice", n.part, n.mech.Name())
				}
				if n.step != privacy.SnapStep(n.sens.Linf) {
					t.Errorf("%s: step %v, want SnapStep(L∞) = %v", n.part, n.step, privacy.SnapStep(n.sens.Linf))
				}
			}
		}
		if lattice != 2 {
			t.Fatalf("%d real-valued parts, want 2 (sum, mean)", lattice)
		}
		// The ledger's parts (what the calibration certified): the real
		// parts are discrete Gaussian with integer L∞ = ⌊L∞/Λ⌋ + 1.
		found := 0
		for i, pt := range p.ledger.parts {
			if _, ok := pt.Mechanism.(privacy.DiscreteGaussian); !ok || pt.Linf < 1<<19 {
				continue
			}
			found++
			if pt.Linf != math.Trunc(pt.Linf) {
				t.Errorf("part %d: lattice L∞ %v is not an integer", i, pt.Linf)
			}
		}
		if found != 2 {
			t.Errorf("ledger parts %+v: want two lattice parts (integer L∞ ≈ 2^20)", p.ledger.parts)
		}
		if !strings.Contains(p.note, "lattice 2^") || !strings.Contains(p.note, "sum.sum: discrete-gaussian") {
			t.Errorf("note %q does not say the sums run on the lattice", p.note)
		}
		if horizon {
			continue
		}
		rels, _, _, _ := runCore(t, c, genStream(3, 2, 40).messages(0, c.Windows.AllowedLateness), map[string]int64{}, noClosedWindow)
		if len(rels) == 0 {
			t.Fatal("no releases")
		}
		for k, r := range rels {
			for _, sr := range r.Series {
				if sr.Name != schema.SeriesSum {
					continue
				}
				step := privacy.SnapStep(sr.Sensitivity.LInf)
				if sr.Mechanism != "discrete-gaussian" || sr.Floats == nil {
					t.Errorf("%s: sum series %s %+v", k, sr.Mechanism, sr)
				}
				for _, x := range sr.Floats {
					if q := x / step; q != math.Trunc(q) {
						t.Errorf("%s: %v is not on the lattice %v", k, x, step)
					}
				}
				if q := sr.Scale / step; !(q > 1<<19) {
					t.Errorf("%s: scale %v is not σ·Λ with σ ≥ 2^19 grid steps", k, sr.Scale)
				}
			}
		}
	}
}

// floatTerms recomputes, from the plan's calibrated scales and grids alone,
// the floating-point residual of every part whose noise is float64 noise
// rounded to a grid (privacy.NewFloatResidual with the shift one unit can
// cause in grid units, times the step), over the horizon: L0·windows
// coordinates each.
func floatTerms(t *testing.T, p *plan) []privacy.FloatTerm {
	t.Helper()
	var terms []privacy.FloatTerm
	all := []vectorNoise{}
	for _, ap := range p.aggs {
		all = append(all, ap.noises...)
	}
	if p.sel != nil {
		all = append(all, p.sel.noise)
	}
	for _, n := range all {
		if privacy.FloatExact(n.mech) {
			continue
		}
		shift := n.sens.Linf // integers: on the grid 1
		if n.series == schema.SeriesSum {
			shift = privacy.LatticeSensitivity(n.sens.Linf, n.step) * n.step
		}
		r, err := privacy.NewFloatResidual(privacy.FloatNoise{Mechanism: n.mech, Scale: n.scale, Step: n.step}, shift)
		if err != nil {
			t.Fatalf("%s: %v", n.part, err)
		}
		terms = append(terms, privacy.FloatTerm{Residual: r, N: int64(math.Ceil(n.sens.L0)) * int64(p.windows)})
	}
	return terms
}

// TestFloatResidualReserved: parts whose noise is float64 noise rounded to
// a grid (logistic and subbotin:R on counts, histogram cells and sums; what
// auto picks) get their floating-point residual reserved: the noise is
// calibrated for a budget strictly below the configured one, and, checked
// independently — the privacy accountant of the final scales
// (privacy.AccountantFor) for the parts' guarantee, plus the residual
// recomputed from the final scales and grids (floatTerms) composed by
// privacy.FloatGuarantee, plus group selection's share — the release meets
// the configured total. Real values under float noise sit on a grid
// Λ ≥ reach·2⁻²² (privacy.FloatStep), so κ stays below 2⁻²⁰. The ledger
// reports the same guarantee at the end of the horizon.
func TestFloatResidualReserved(t *testing.T) {
	horizon := func(c *Config, n int, eps, delta float64) {
		c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
		c.Privacy.Horizon, c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = time.Duration(n)*c.Windows.Size, eps, delta
	}
	cases := map[string]func(*Config){
		"window logistic":   func(c *Config) { c.Privacy.Mechanism = "logistic" },
		"window subbotin:3": func(c *Config) { c.Privacy.Mechanism = "subbotin:3" },
		"horizon subbotin:1.5": func(c *Config) {
			horizon(c, 60, 4, 1e-6)
			c.Privacy.Mechanism = "subbotin:1.5"
		},
		"horizon logistic selection": func(c *Config) {
			horizon(c, 60, 5, 1e-6)
			c.Privacy.Mechanism = "logistic"
			c.Privacy.PublicGroups = nil
		},
		"window auto wide": func(c *Config) { // auto picks subbotin:1.5 (see TestAutoPicksCompareWinner)
			c.Privacy.Mechanism = Auto
			c.Windows.Aggregates = []string{AggCount}
			c.Bounds.MaxGroups = 16
			c.Privacy.Epsilon = 1
		},
	}
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		cases[name](&c)
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := o.plan
		l := p.ledger
		terms := floatTerms(t, p)
		if len(terms) == 0 {
			t.Fatalf("%s: no float parts (note %q)", name, p.note)
		}
		// The budget of the parts before the residual: the total less
		// group selection's share.
		parts := privacy.Budget{Epsilon: p.total.Epsilon - l.shift, Delta: p.total.Delta - float64(p.windows)*l.pw}
		if !(l.budget.Epsilon < parts.Epsilon && l.budget.Delta < parts.Delta) {
			t.Errorf("%s: parts calibrated for %+v, budget before the residual %+v: nothing reserved", name, l.budget, parts)
		}
		acc, err := privacy.AccountantFor(l.parts, l.scales, p.windows)
		if err != nil {
			t.Fatal(err)
		}
		ideal := privacy.Budget{Epsilon: l.budget.Epsilon, Delta: acc.Delta(l.budget.Epsilon)}
		if ideal.Delta > l.budget.Delta {
			t.Errorf("%s: accountant δ %v above the calibrated %v", name, ideal.Delta, l.budget.Delta)
		}
		g := privacy.FloatGuarantee(ideal, terms)
		got := privacy.Budget{Epsilon: g.Epsilon + l.shift, Delta: g.Delta + float64(p.windows)*l.pw}
		if got.Epsilon > p.total.Epsilon || got.Delta > p.total.Delta {
			t.Errorf("%s: parts %+v + residual + selection = %+v exceeds the total %+v", name, ideal, got, p.total)
		}
		for _, r := range terms {
			if r.Residual.Kappa > 0x1p-20 {
				t.Errorf("%s: κ = %v", name, r.Residual.Kappa)
			}
		}
		if s := l.spent(p.windows); s.Epsilon > p.total.Epsilon || s.Delta > p.total.Delta || s.Epsilon < got.Epsilon*(1-1e-9) {
			t.Errorf("%s: ledger over the horizon %+v, independent %+v, total %+v", name, s, got, p.total)
		}
		if !strings.Contains(p.note, "floating-point residual") {
			t.Errorf("%s: note %q does not report the reserve", name, p.note)
		}
		t.Logf("%s: reserved ε %.3g, δ %.3g; %s", name, parts.Epsilon-l.budget.Epsilon, parts.Delta-l.budget.Delta, p.note)
	}
}

// TestFloatNoiseRefused: float noise the operator cannot bound is refused
// at start with a message naming the exact alternatives: heavy-tailed noise
// (cauchy, sas:α, whose reach is far beyond float64 accuracy) on any
// aggregate, and float noise with δ = 0 (its tails are charged to δ); with
// δ = 0, auto picks exact noise only.
func TestFloatNoiseRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
	}{
		{"cauchy count", func(c *Config) { c.Privacy.Delta = 0; c.Privacy.Mechanisms = map[string]string{"count": "cauchy"} }},
		{"sas sum", func(c *Config) { c.Privacy.Mechanisms = map[string]string{"sum": "sas:1.5"} }},
		{"logistic pure", func(c *Config) { c.Privacy.Delta = 0; c.Privacy.Mechanism = "logistic" }},
	} {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		tc.set(&c)
		_, err := New(c, WithKey(testKey()))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "laplace") {
			t.Errorf("%s: %v, want a config error naming the exact mechanisms", tc.name, err)
		}
	}
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Privacy.Delta, c.Privacy.Mechanism = 0, Auto
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	for _, ap := range o.plan.aggs {
		for _, n := range ap.noises {
			if !privacy.FloatExact(n.mech) {
				t.Errorf("δ = 0, auto: %s runs %s (float noise)", n.part, n.mech.Name())
			}
		}
	}
}
