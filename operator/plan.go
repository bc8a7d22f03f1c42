package operator

// plan.go decides, once at start, how every window is released: which
// noise runs on which vector (integer noise for counts, snapped noise for
// real values), the per-coordinate scales from one joint calibration of all
// parts of a window over the whole horizon, the automatic mechanism choice,
// private group selection, and the ledger of the budget spent so far.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// ReleaseMechanism returns the mechanism whose noise is actually added to a
// vector of integer values (integer = true: histogram cells, counts, the
// mean's count, unit counts for group selection) or of real values (sums,
// the mean's centred sum) when the configured mechanism is `configured`
// (any name privacy.Parse accepts, except "auto", which the plan resolves,
// and gaussian-classic, a comparison formula only). Naive float noise leaks
// through its low bits (Mironov 2012), so:
//
//	configured                           integer values            real values (snapped to a grid)
//	laplace, subbotin:1, discrete-laplace discrete-laplace (exact)  laplace: exact rounded Laplace
//	gaussian, subbotin:2, discrete-gaussian discrete-gaussian (exact) gaussian: float noise rounded to the grid
//	logistic, subbotin:R, cauchy, sas:A   same, rounded to integers  same, rounded to the grid
//
// "Exact" means the noise is sampled with integer arithmetic and the
// guarantee has no floating-point residual; the rounded float paths are a
// post-processing of the continuous mechanism for an ideal sampler, with
// the residual risk of the float64 sampler documented in privacy/snap.go.
func ReleaseMechanism(configured string, integer bool) (privacy.Mechanism, error) {
	m, err := privacy.Parse(configured)
	if err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	laplaceLike, gaussLike := false, false
	switch v := m.(type) {
	case privacy.Laplace, privacy.DiscreteLaplace:
		laplaceLike = true
	case privacy.Gaussian, privacy.DiscreteGaussian:
		gaussLike = true
	case privacy.Subbotin:
		laplaceLike, gaussLike = v.R == 1, v.R == 2
	case privacy.GaussianClassic:
		return nil, fmt.Errorf("operator: %s is a comparison formula only (loose, ε < 1); use gaussian", m.Name())
	}
	switch {
	case laplaceLike && integer:
		return privacy.DiscreteLaplace{}, nil
	case laplaceLike:
		return privacy.Laplace{}, nil
	case gaussLike && integer:
		return privacy.DiscreteGaussian{}, nil
	case gaussLike:
		return privacy.Gaussian{}, nil
	}
	return m, nil
}

// noiseKind is how a vector's noise is added.
type noiseKind uint8

const (
	// intExact: integer values, exact integer noise (discrete mechanisms).
	intExact noiseKind = iota + 1
	// intRounded: integer values, continuous float noise rounded to a whole
	// number (privacy.SnapRelease with step 1: the values are on the grid,
	// so rounding them moves nothing and the sensitivity is unchanged).
	intRounded
	// realSnapped: real values clamped and rounded to a power-of-two grid,
	// noise rounded to the grid (privacy.SnapRelease), calibrated for
	// L∞ + step.
	realSnapped
)

// snapUnits bounds released real values to ±snapUnits grid steps
// (privacy.SnapRelease needs finite, data-independent bounds and allows at
// most 2^50 steps). Clamping is 1-Lipschitz, so it does not change the
// sensitivity. With the grid step L∞·2^-20 this is ±2^30·L∞: a group sum
// beyond about 10^9 times the largest contribution of one unit is clamped.
const snapUnits = 1 << 50

// selectionDeltaShare is the part of the total δ reserved for private group
// selection: the chance that a group only one unit touches is released,
// summed over the horizon's windows. The rest goes to the noise. (δ enters
// the threshold only logarithmically: a quarter is ample.)
const selectionDeltaShare = 0.25

// vectorNoise is the calibrated noise of one released vector.
type vectorNoise struct {
	series     string // schema series name
	part       string // "<aggregate>.<series>" (or "selection.units"), for notes and logs
	configured string // the configured mechanism name ("auto" resolved to the candidate)
	auto       bool   // chosen automatically
	mech       privacy.Mechanism
	kind       noiseKind
	scale      float64 // per-coordinate noise scale in value units
	step       float64 // grid step (realSnapped); 1 for integers
	lim        float64 // values are clamped to ±lim (realSnapped)
	sens       windows.Sensitivity
	linf       float64 // the per-coordinate shift the scale is calibrated for
	half       float64 // half-width of the (1−β) interval of one value
	beta       float64 // the β the half-width is for
}

// aggPlan is how one aggregate is released.
type aggPlan struct {
	name   string
	kind   schema.Kind
	noises []vectorNoise // one per noised series, in schema order
}

// selection is DP group selection by thresholding the noisy number of
// units per group: a group is released only if units + noise ≥ threshold.
// The noisy unit counts are not published.
type selection struct {
	noise     vectorNoise
	threshold float64
	perWindow float64 // δ of releasing a group only one unit touches, per window
}

// plan is everything decided at start about releasing a window.
type plan struct {
	aggs         []aggPlan
	sel          *selection // nil: groups are public (no group-by, or a public list)
	window       schema.Budget
	total        privacy.Budget // the configured total (per window or per horizon)
	windows      int            // windows the total covers
	accounting   privacy.Accounting
	ledger       *ledger
	note         string
	choices      []string // automatic choices, for the start log
	labels       []string // histogram bucket labels
	groupFields  []string
	publicGroups []string // canonical group keys, sorted; nil if not public
	unit         string
	bounds       schema.Bounds
	mid          float64 // centre of the value range (means)
	lower, upper float64
	sens         windows.Sensitivities
	horizon      time.Duration
	horizonB     schema.Budget
	offset, size int64 // ms
}

// partSpec is one noised vector before calibration.
type partSpec struct {
	agg, series string
	configured  string
	integer     bool
	sens        windows.Sensitivity
}

// specsOf lists the noised vectors of a window in release order, and
// whether private group selection is needed.
func specsOf(c Config, sens windows.Sensitivities, public bool) (specs []partSpec, needSel bool) {
	for _, a := range c.Windows.Aggregates {
		m := c.Privacy.MechanismFor(a)
		switch a {
		case AggHistogram:
			specs = append(specs, partSpec{a, schema.SeriesCounts, m, true, sens.Histogram})
		case AggCount:
			specs = append(specs, partSpec{a, schema.SeriesCount, m, true, sens.Count})
		case AggSum:
			specs = append(specs, partSpec{a, schema.SeriesSum, m, false, sens.Sum})
		case AggMean:
			specs = append(specs, partSpec{a, schema.SeriesSum, m, false, sens.MeanSum},
				partSpec{a, schema.SeriesCount, m, true, sens.Values})
		}
	}
	needSel = len(c.Schema.GroupBy) > 0 && !public
	if needSel {
		specs = append(specs, partSpec{"selection", "units", c.Privacy.Mechanism, true, sens.Units})
	}
	return specs, needSel
}

// newPlan calibrates everything at start; an infeasible budget is an error
// here, not at the first window, and names the smallest feasible change.
func newPlan(c Config, dec *schema.Decoder, wcfg windows.Config) (*plan, error) {
	p, err := buildPlan(c, dec, wcfg)
	if err != nil && (errors.Is(err, privacy.ErrInfeasible) || errors.Is(err, privacy.ErrUnsupported)) {
		if hint := suggest(c, dec, wcfg); hint != "" {
			return nil, fmt.Errorf("%w: %w; %s", ErrConfig, err, hint)
		}
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return p, err
}

// buildPlan is newPlan without the suggestions.
func buildPlan(c Config, dec *schema.Decoder, wcfg windows.Config) (*plan, error) {
	sens, err := wcfg.Sensitivities()
	if err != nil {
		return nil, err
	}
	total, nw := c.TotalBudget()
	if err := total.Validate(); err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	acct, err := privacy.ParseAccounting(c.Privacy.Accounting)
	if err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	measure, err := privacy.ParseErrorMeasure(c.Privacy.ErrorMeasure)
	if err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	p := &plan{
		total: total, windows: nw, accounting: acct, sens: sens,
		groupFields: slices.Clone(c.Schema.GroupBy),
		unit:        c.Schema.UnitField,
		offset:      c.Windows.Offset.Milliseconds(),
		size:        c.Windows.Size.Milliseconds(),
		horizon:     c.Privacy.Horizon,
		horizonB:    schema.Budget{Epsilon: c.Privacy.HorizonEpsilon, Delta: c.Privacy.HorizonDelta},
	}
	if h := dec.Config().Histogram; h != nil {
		p.labels = h.Labels()
	}
	p.bounds = schema.Bounds{
		MaxGroups: int64(c.Bounds.MaxGroups), MaxBuckets: int64(c.Bounds.MaxBuckets),
		MaxPerBucket: int64(c.Bounds.MaxPerBucket), MaxValues: int64(c.Bounds.MaxValues),
	}
	if wcfg.Sum || wcfg.Mean {
		p.bounds.Lower, p.bounds.Upper = c.Schema.Lower, c.Schema.Upper
		p.lower, p.upper = c.Schema.Lower, c.Schema.Upper
		p.mid = c.Schema.Lower/2 + c.Schema.Upper/2
	}
	if len(c.Privacy.PublicGroups) > 0 {
		for _, g := range c.Privacy.PublicGroups {
			p.publicGroups = append(p.publicGroups, schema.MakeGroup(g...))
		}
		slices.Sort(p.publicGroups)
		p.publicGroups = slices.Compact(p.publicGroups)
	}
	specs, needSel := specsOf(c, sens, p.publicGroups != nil)

	// Group selection: a group that only the differing unit touches is
	// released with probability ≤ pw per window (the threshold below). With
	// A the rest of the release, the pair of output distributions is
	// (A(D) ⊗ Bern(pw), A(D') ⊗ Bern(0)); its hockey-stick divergence is at
	// most δ_A(ε) + pw in one direction and δ_A(ε − ln(1/(1−pw))) in the
	// other, and over N windows the pw add up and so do the ε shifts. So the
	// noise is calibrated for (ε − N·ln(1/(1−pw)), δ − N·pw).
	parts := total
	var pw, shift float64
	if needSel {
		if !(total.Delta > 0) {
			return nil, fmt.Errorf("%w: group_by without privacy.public_groups needs δ > 0 for private group selection (or list the public groups)", ErrConfig)
		}
		dsel := total.Delta * selectionDeltaShare
		pw = dsel / float64(nw)
		shift = math.Nextafter(float64(nw)*-math.Log1p(-pw), math.Inf(1)) * (1 + 1e-12)
		parts = privacy.Budget{Epsilon: total.Epsilon - shift, Delta: total.Delta - dsel}
		if !(parts.Epsilon > 0) {
			return nil, fmt.Errorf("%w: ε is too small for private group selection", privacy.ErrInfeasible)
		}
	}

	// Resolve the mechanism of every part; "auto" compares candidates for
	// the shape of the whole release (all its coordinates, all windows).
	totalL0 := 0
	for _, s := range specs {
		totalL0 += int(math.Ceil(s.sens.L0))
	}
	noises := make([]vectorNoise, len(specs))
	pparts := make([]privacy.Part, len(specs))
	for i, s := range specs {
		if !(s.sens.L0 >= 1) || !(s.sens.Linf > 0) || math.IsInf(s.sens.Linf, 0) {
			return nil, fmt.Errorf("operator: %s.%s: sensitivity L0=%g, L∞=%g cannot be calibrated", s.agg, s.series, s.sens.L0, s.sens.Linf)
		}
		n := vectorNoise{series: s.series, part: s.agg + "." + s.series, configured: s.configured, sens: s.sens, step: 1, linf: s.sens.Linf}
		if !s.integer {
			n.step = privacy.SnapStep(s.sens.Linf)
			n.linf = s.sens.Linf + n.step // rounding the value can add a step
			n.lim = math.Ldexp(n.step, 50)
		}
		if s.configured == Auto {
			cands := autoCandidates(parts.Delta, s.integer, s.agg == "selection")
			best, err := privacy.Choose(parts, nw, totalL0, n.linf, privacy.CompareOptions{
				Candidates: cands, Measure: measure, Accounting: acct})
			if err != nil {
				return nil, fmt.Errorf("operator: %s: automatic choice: %w", n.part, err)
			}
			n.mech, n.auto, n.configured = best.Mechanism, true, best.Mechanism.Name()
			p.choices = append(p.choices, fmt.Sprintf("%s: %s (smallest %s among %s for %d coordinates × %d windows)",
				n.part, n.mech.Name(), measure, strings.Join(cands, ", "), totalL0, nw))
		} else {
			m, err := ReleaseMechanism(s.configured, s.integer)
			if err != nil {
				return nil, err
			}
			n.mech = m
		}
		switch {
		case !s.integer:
			n.kind = realSnapped
		case isDiscrete(n.mech):
			n.kind = intExact
		default:
			n.kind = intRounded
		}
		noises[i] = n
		pparts[i] = privacy.Part{Mechanism: n.mech, L0: int(math.Ceil(s.sens.L0)), Linf: n.linf}
	}

	plans, err := privacy.CalibrateParts(acct, parts, nw, pparts)
	if err != nil {
		return nil, fmt.Errorf("operator: calibrating %d parts over %d window(s) with %s accounting: %w", len(pparts), nw, acct, err)
	}
	beta := 1 - c.Privacy.Confidence
	check := privacy.NewStream(privacy.Key{}, "dpstream/plan-check/v1") // parameter check only, never published
	scales := make([]float64, len(plans))
	for i := range noises {
		n := &noises[i]
		n.scale = plans[i].Scale
		scales[i] = n.scale
		if !(n.scale > 0) || math.IsInf(n.scale, 0) {
			return nil, fmt.Errorf("operator: %s (%s): calibration gave scale %g", n.part, n.mech.Name(), n.scale)
		}
		// The mean's interval combines two intervals: give each β/2.
		n.beta = beta
		if specs[i].agg == AggMean {
			n.beta = beta / 2
		}
		h := n.mech.HalfWidth(n.scale, n.beta)
		if math.IsNaN(h) || math.IsInf(h, 0) {
			return nil, fmt.Errorf("%w: %s (%s): no finite confidence interval at level %g; choose a lighter-tailed mechanism", privacy.ErrInfeasible, n.part, n.mech.Name(), 1-n.beta)
		}
		switch n.kind {
		case intExact, intRounded:
			n.half = math.Ceil(h) // |round(z)| ≤ floor(|z| + ½) ≤ ⌈h⌉ when |z| ≤ h
		case realSnapped:
			n.half = math.Nextafter(h+n.step, math.Inf(1)) // value and noise each rounded by ≤ step/2
		}
		// Parameters the samplers accept (e.g. a Laplace scale of at most
		// 2^40 grid steps): checked once here, not at the first window.
		if _, err := n.add(check, 0); err != nil {
			return nil, fmt.Errorf("%w: %s (%s): %w", privacy.ErrInfeasible, n.part, n.mech.Name(), err)
		}
	}
	if needSel {
		n := noises[len(noises)-1]
		noises = noises[:len(noises)-1]
		// A group only the differing unit touches has at most L∞ units (1)
		// and is released iff L∞ + noise ≥ τ. With h the noise's two-sided
		// (1 − β) half-width, P(noise > h) ≤ β/2, so τ = L∞ + h + 1 releases
		// each of the ≤ L0 such groups with probability ≤ β/2 = pw/L0 (β
		// shaved by 1e-9 against rounding in the tail formula). Rounded
		// noise exceeds h + ½ only if the float noise exceeds h.
		b := 2 * pw / math.Ceil(n.sens.L0) * (1 - 1e-9)
		h := n.mech.HalfWidth(n.scale, b)
		if !(h >= 0) || math.IsInf(h, 0) {
			return nil, fmt.Errorf("%w: group selection (%s): no finite threshold for δ %g", privacy.ErrInfeasible, n.mech.Name(), pw)
		}
		tau := n.sens.Linf + math.Ceil(h) + 1
		p.sel = &selection{noise: n, threshold: tau, perWindow: pw}
	}
	k := 0
	for _, a := range c.Windows.Aggregates {
		ap := aggPlan{name: a}
		switch a {
		case AggHistogram:
			ap.kind = schema.KindHistogram
		case AggCount:
			ap.kind = schema.KindCount
		case AggSum:
			ap.kind = schema.KindSum
		case AggMean:
			ap.kind = schema.KindMean
		}
		for k < len(noises) && specs[k].agg == a {
			ap.noises = append(ap.noises, noises[k])
			k++
		}
		p.aggs = append(p.aggs, ap)
	}
	p.ledger = newLedger(pparts, scales, nw, parts, pw, shift, c.Privacy.Horizon != 0, total)
	p.window = p.ledger.spent(1)
	if c.Privacy.Horizon == 0 {
		p.window = schema.Budget{Epsilon: total.Epsilon, Delta: total.Delta}
	}
	p.note = p.describe(c, plans[0].Accounting, parts, pw, shift, noises)
	return p, nil
}

// autoCandidates are the mechanisms "auto" compares for one part, as they
// run on its values (see ReleaseMechanism), without repeats. Group
// selection uses only the exact integer mechanisms.
func autoCandidates(delta float64, integer, sel bool) []string {
	if sel {
		if delta > 0 {
			return []string{"discrete-laplace", "discrete-gaussian"}
		}
		return []string{"discrete-laplace"}
	}
	var out []string
	for _, name := range privacy.AutoCandidates(delta) {
		m, err := ReleaseMechanism(name, integer)
		if err != nil {
			continue
		}
		if !slices.Contains(out, m.Name()) {
			out = append(out, m.Name())
		}
	}
	return out
}

func isDiscrete(m privacy.Mechanism) bool {
	switch m.(type) {
	case privacy.DiscreteLaplace, privacy.DiscreteGaussian:
		return true
	}
	return false
}

// describe is the accounting note every release carries.
func (p *plan) describe(c Config, used privacy.Accounting, parts privacy.Budget, pw, shift float64, noises []vectorNoise) string {
	var b strings.Builder
	if c.Privacy.Horizon != 0 {
		fmt.Fprintf(&b, "budget ε=%g, δ=%g per horizon of %s (%d windows)", p.total.Epsilon, p.total.Delta, c.Privacy.Horizon, p.windows)
	} else {
		fmt.Fprintf(&b, "budget ε=%g, δ=%g per window", p.total.Epsilon, p.total.Delta)
	}
	if p.sens.ReplaceOne {
		fmt.Fprintf(&b, "; at most %d units per window (a random subset beyond), so sensitivities for replacing one unit", c.Bounds.MaxUnits)
	}
	fmt.Fprintf(&b, "; one calibration of all %d noised parts", len(noises)+btoi(p.sel != nil))
	if p.windows > 1 {
		fmt.Fprintf(&b, " over all %d windows", p.windows)
	}
	fmt.Fprintf(&b, ", accounting %s", p.accounting)
	if used != p.accounting {
		fmt.Fprintf(&b, " (certified by %s)", used)
	}
	if p.sel != nil {
		fmt.Fprintf(&b, "; group selection reserves δ=%.3g and ε=%.3g", float64(p.windows)*pw, shift)
	}
	all := noises
	if p.sel != nil {
		all = append(slices.Clone(noises), p.sel.noise)
	}
	for _, n := range all {
		fmt.Fprintf(&b, "; %s: %s", n.part, n.mech.Name())
		if n.auto {
			b.WriteString(" (auto)")
		}
		switch n.kind {
		case intExact:
			b.WriteString(" integer noise")
		case intRounded:
			b.WriteString(" rounded to integers")
		case realSnapped:
			fmt.Fprintf(&b, " snapped to step 2^%d", int(math.Round(math.Log2(n.step))))
		}
		fmt.Fprintf(&b, ", scale %.6g per coordinate (L0=%g, L∞=%g", n.scale, n.sens.L0, n.sens.Linf)
		if n.kind == realSnapped {
			b.WriteString("+step")
		}
		b.WriteString(")")
	}
	if p.sel != nil {
		fmt.Fprintf(&b, "; groups released if units + noise ≥ %g", p.sel.threshold)
	}
	return b.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// add releases one value with n's noise drawn from s: an integer (as a
// float64) for integer kinds, a multiple of the grid step for real values.
func (n *vectorNoise) add(s *privacy.Stream, v float64) (float64, error) {
	switch n.kind {
	case intExact:
		z := n.mech.Sample(s, n.scale)
		if math.IsNaN(z) {
			return 0, fmt.Errorf("operator: %s: invalid noise scale", n.mech.Name())
		}
		return v + z, nil // both integers below 2^53: exact
	case intRounded:
		return privacy.SnapRelease(n.mech, s, n.scale, 1, -snapUnits, snapUnits, v)
	default:
		return privacy.SnapRelease(n.mech, s, n.scale, n.step, -n.lim, n.lim, v)
	}
}

// ledger reports the budget spent after k windows of a horizon: the
// tightest accountant's ε for the k-fold composition of the window's parts
// at the parts' δ, plus group selection's share. Results are cached per k.
type ledger struct {
	parts   []privacy.Part
	scales  []float64
	windows int
	budget  privacy.Budget // what the parts are calibrated for over all windows
	pw      float64        // group selection δ per window
	shift   float64        // group selection ε over all windows
	horizon bool
	total   privacy.Budget

	mu    sync.Mutex
	cache map[int]schema.Budget
}

func newLedger(parts []privacy.Part, scales []float64, windows int, budget privacy.Budget, pw, shift float64, horizon bool, total privacy.Budget) *ledger {
	return &ledger{parts: parts, scales: scales, windows: windows, budget: budget, pw: pw, shift: shift,
		horizon: horizon, total: total, cache: map[int]schema.Budget{}}
}

// spent returns the (ε, δ) guarantee of the first k windows of a horizon
// (k is clamped to [1, windows]). δ is the parts' δ plus k windows of group
// selection; ε the smallest the accountant certifies for k windows at that
// δ, never above what the calibration certified for all windows (k windows
// are part of them), plus the selection's ε shift. With δ = 0 pure ε adds
// up exactly: k/N of the total.
//
// Each evaluation composes k windows (milliseconds to a few hundred for
// discrete Gaussian noise), so k is first rounded up to a grid — exact up to
// ledgerExact windows, then steps of ledgerStep — and the guarantee of
// those (more) windows is reported, an upper bound: 32 + ln(N/32)/ln 1.05
// evaluations per horizon of N windows (111 for a day of 1-minute windows,
// 150 for a week).
func (l *ledger) spent(k int) schema.Budget {
	k = ledgerGrid(min(max(k, 1), l.windows), l.windows)
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.cache[k]; ok {
		return b
	}
	kf, nf := float64(k), float64(l.windows)
	var b schema.Budget
	if l.budget.Delta == 0 {
		b.Epsilon = math.Nextafter(l.budget.Epsilon*kf/nf, math.Inf(1))
		if k == l.windows {
			b.Epsilon = l.budget.Epsilon
		}
	} else {
		e := l.budget.Epsilon
		if k < l.windows {
			if acc, err := privacy.AccountantFor(l.parts, l.scales, k); err == nil {
				if v := acc.Epsilon(l.budget.Delta); v <= e {
					e = v
				}
			}
		}
		e += l.shift * kf / nf
		b = schema.Budget{Epsilon: e, Delta: l.budget.Delta + kf*l.pw}
		if k == l.windows && l.horizon {
			// Exactly what the calibration certified: the configured total.
			b = schema.Budget{Epsilon: l.total.Epsilon, Delta: l.total.Delta}
		}
	}
	if !(b.Epsilon > 0) {
		b.Epsilon = math.SmallestNonzeroFloat64 // (0, δ) implies (ε, δ) for every ε > 0
	}
	b.Delta = math.Min(b.Delta, l.total.Delta)
	l.cache[k] = b
	return b
}

// The ledger's grid of window counts: exact up to ledgerExact, then
// geometric with ratio ledgerStep.
const (
	ledgerExact = 32
	ledgerStep  = 1.05
)

// ledgerGrid rounds k up to the ledger's grid, at most n.
func ledgerGrid(k, n int) int {
	if k <= ledgerExact {
		return k
	}
	g := float64(ledgerExact)
	for int(math.Ceil(g)) < k {
		g *= ledgerStep
	}
	return min(int(math.Ceil(g)), n)
}

// suggest finds the smallest single change that makes an infeasible budget
// feasible: a larger δ, a larger ε, fewer (longer) windows in the horizon,
// or fewer aggregates. It returns "" when none of these helps.
func suggest(c Config, dec *schema.Decoder, wcfg windows.Config) string {
	ok := func(c Config) bool {
		_, err := buildPlan(c, dec, windowsConfig(c, dec.NumBuckets()))
		return err == nil
	}
	horizon := c.Privacy.Horizon != 0
	ekey, dkey := "privacy.epsilon", "privacy.delta"
	if horizon {
		ekey, dkey = "privacy.horizon_epsilon", "privacy.horizon_delta"
	}
	total, nw := c.TotalBudget()
	with := func(eps, delta float64) Config {
		d := c
		if horizon {
			d.Privacy.HorizonEpsilon, d.Privacy.HorizonDelta = eps, delta
		} else {
			d.Privacy.Epsilon, d.Privacy.Delta = eps, delta
		}
		return d
	}
	var hints []string
	// δ: with δ = 0 only the pure-ε mechanisms work; otherwise bisect on a
	// log scale between the configured δ and 0.5 (larger δ never needs
	// more noise, so every trial is cheaper than the configuration itself).
	if total.Delta == 0 {
		if ok(with(total.Epsilon, 1e-6)) {
			hints = append(hints, fmt.Sprintf("%s must be > 0 (δ = 0 needs pure-ε mechanisms: laplace, logistic, discrete-laplace, cauchy, sas:A)", dkey))
		}
	} else if lo, hi := total.Delta, 0.5; lo < hi && ok(with(total.Epsilon, hi)) {
		for range 40 {
			mid := math.Sqrt(lo * hi)
			if ok(with(total.Epsilon, mid)) {
				hi = mid
			} else {
				lo = mid
			}
			if hi/lo < 1.01 {
				break
			}
		}
		hints = append(hints, fmt.Sprintf("%s must be ≥ %s", dkey, ceil3(hi)))
	}
	// ε: bisect on a log scale up to 10^6 times the configured ε.
	if lo, hi := total.Epsilon, total.Epsilon*1e6; ok(with(hi, total.Delta)) {
		for range 60 {
			mid := math.Sqrt(lo * hi)
			if ok(with(mid, total.Delta)) {
				hi = mid
			} else {
				lo = mid
			}
			if hi/lo < 1.01 {
				break
			}
		}
		hints = append(hints, fmt.Sprintf("%s must be ≥ %s", ekey, ceil3(hi)))
	}
	// Fewer, longer windows per horizon: the largest feasible number of
	// windows among the divisors of the current number (each a whole
	// multiple of the current window size), by bisection (fewer windows
	// never need more noise).
	if horizon && nw > 1 {
		var divs []int
		for n := 1; n*n <= nw; n++ {
			if nw%n == 0 {
				divs = append(divs, n, nw/n)
			}
		}
		slices.Sort(divs)
		divs = slices.Compact(divs)
		feasible := func(n int) bool {
			d := c
			d.Windows.Size = c.Privacy.Horizon / time.Duration(n)
			return ok(d)
		}
		if feasible(1) {
			lo, hi := 0, len(divs)-1 // feasible(divs[lo]), !feasible(divs[hi])
			for hi-lo > 1 {
				mid := (lo + hi) / 2
				if feasible(divs[mid]) {
					lo = mid
				} else {
					hi = mid
				}
			}
			n := divs[lo]
			hints = append(hints, fmt.Sprintf("use windows.size of at least %s (%d window(s) per horizon)", c.Privacy.Horizon/time.Duration(n), n))
		}
	}
	// Fewer aggregates.
	if len(c.Windows.Aggregates) > 1 {
		var drop []string
		for _, a := range c.Windows.Aggregates {
			d := c
			d.Windows.Aggregates = slices.DeleteFunc(slices.Clone(c.Windows.Aggregates), func(x string) bool { return x == a })
			if ok(d) {
				drop = append(drop, a)
			}
		}
		if len(drop) > 0 {
			hints = append(hints, fmt.Sprintf("release fewer aggregates (feasible without %s)", strings.Join(drop, " or without ")))
		}
	}
	if len(hints) == 0 {
		return ""
	}
	return "smallest feasible change: " + strings.Join(hints, "; or ")
}

// ceil3 formats x > 0 with three significant digits, rounded up: the
// printed bound is never below x (a suggested minimum must be feasible).
func ceil3(x float64) string {
	p := math.Pow(10, math.Floor(math.Log10(x))-2)
	v := math.Ceil(x/p) * p
	for range 4 {
		str := strconv.FormatFloat(v, 'g', 3, 64)
		if y, err := strconv.ParseFloat(str, 64); err == nil && y >= x {
			return str
		}
		v += p
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}
