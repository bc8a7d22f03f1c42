package operator

// plan.go decides, once at start, how every window is released: which
// noise runs on which vector (integer noise for counts; for real values
// exact rounded Laplace, exact discrete Gaussian on a lattice, or float
// noise rounded to a grid), the per-coordinate scales from one joint
// calibration of all parts of a window over the whole horizon after the
// floating-point residual of float noise is reserved, the automatic
// mechanism choice, private group selection, and the ledger of the budget
// spent so far. What is released comes from the configured aggregates
// (aggregate.go: one type per aggregate); the calibration is in
// plan_calibrate.go, the accounting note in plan_note.go, the suggestions
// for an infeasible budget in plan_suggest.go.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/rng"
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
//	configured                            integer values              real values (clamped, on a power-of-two grid Λ)
//	laplace, subbotin:1, discrete-laplace discrete-laplace (exact)    laplace: exact rounded Laplace
//	gaussian, subbotin:2, discrete-gaussian discrete-gaussian (exact) discrete-gaussian on the lattice ΛZ (exact)
//	logistic, subbotin:R                  same, rounded to integers   same, rounded to the grid
//	cauchy, sas:A                         refused                     refused
//
// "Exact" means the noise is sampled with integer arithmetic and the
// guarantee has no floating-point residual. The rounded float paths
// (logistic, subbotin:R with R ∉ {1, 2}) are a post-processing of the
// continuous mechanism for an ideal sampler; the plan reserves the residual
// of the float64 sampler (privacy.FloatIdeal: it needs δ > 0). Heavy-tailed
// float noise (cauchy, sas:A) reaches far beyond where float64 sampling is
// accurate, so no residual bound exists for it and it is refused.
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
	case privacy.Cauchy, privacy.Stable:
		return nil, fmt.Errorf("operator: %s: heavy-tailed float noise has no bounded floating-point residual in a release; "+
			"use laplace or gaussian (exact), or logistic or subbotin:R (residual reserved)", m.Name())
	}
	switch {
	case laplaceLike && integer:
		return privacy.DiscreteLaplace{}, nil
	case laplaceLike:
		return privacy.Laplace{}, nil
	case gaussLike:
		return privacy.DiscreteGaussian{}, nil // on integers, or on the lattice of real values
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
	// so rounding them moves nothing and the sensitivity is unchanged). Its
	// floating-point residual is reserved (vectorNoise.res).
	intRounded
	// realSnapped: real values clamped and rounded to a power-of-two grid,
	// noise rounded to the grid (privacy.SnapRelease), calibrated for the
	// shift (⌊L∞/step⌋ + 1)·step ≤ L∞ + step of the rounded values. Exact
	// rounded Laplace for laplace; for logistic and subbotin:R float noise
	// whose residual is reserved, on a grid privacy.FloatStep.
	realSnapped
	// realLattice: real values clamped and rounded to a power-of-two grid,
	// exact discrete Gaussian noise on the lattice (privacy.LatticeRelease),
	// calibrated as a DiscreteGaussian part with the integer sensitivity
	// ⌊L∞/step⌋ + 1 in grid units.
	realLattice
	// selectExact: not noise but a pure ε-DP selection per coordinate
	// (privacy.Selection: the quantiles' permute-and-flip, at ε = L∞/scale
	// each), sampled exactly by the aggregate; no interval of its own.
	selectExact
)

// snapUnits bounds released real values to ±snapUnits grid steps
// (privacy.SnapRelease and privacy.LatticeRelease need finite,
// data-independent bounds and allow at most 2^50 steps). Clamping is
// 1-Lipschitz, so it does not change the sensitivity. With the grid step
// L∞·2^-20 this is ±2^30·L∞: a group sum beyond about 10^9 times the
// largest contribution of one unit is clamped (coarser float grids clamp
// later).
const snapUnits = 1 << snapBits

// snapBits is log2(snapUnits).
const snapBits = 50

// floatScaleMargin: the floating-point residual is reserved for noise
// scales up to 1% above the ones calibrated without it, so that the
// calibration with the reserve (slightly more noise) is still covered.
const floatScaleMargin = 1.01

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
	grid       float64 // realLattice: the discrete Gaussian σ in grid units (scale = grid·step)
	step       float64 // grid step (realSnapped, realLattice); 1 for integers
	lim        float64 // values are clamped to ±lim (realSnapped, realLattice)
	sens       windows.Sensitivity
	coords     int     // coordinates the calibration composes per window (partSpec.coords)
	norms      bool    // partSpec.norms under a budget with δ > 0: L1 and L2 reach the calibration
	linf       float64 // the per-coordinate shift the scale is calibrated for (value units)
	half       float64 // half-width of the (1−β) interval of one value
	beta       float64 // the β the half-width is for
	// res is the floating-point residual reserved per coordinate (zero for
	// exact noise): float64 noise rounded to the grid, intRounded and
	// realSnapped with logistic or subbotin:R.
	res privacy.FloatResidual
	// fact is the factorization of a running aggregate's noise
	// (running_factor.go); nil: plain per-window noise.
	fact *factNoise
}

// float reports whether n's noise is float64 noise rounded to a grid (and
// so carries a floating-point residual).
func (n *vectorNoise) float() bool {
	return (n.kind == intRounded || n.kind == realSnapped) && !privacy.FloatExact(n.mech)
}

// shift is the largest change of one coordinate's grid value between
// neighbours, in value units: L∞ for integers, (⌊L∞/step⌋ + 1)·step for
// real values (rounding to the grid can add up to one step).
func (n *vectorNoise) shift() float64 {
	if n.kind == intExact || n.kind == intRounded || n.kind == selectExact {
		return n.sens.Linf
	}
	return privacy.LatticeSensitivity(n.sens.Linf, n.step) * n.step
}

// calPart is n as the calibration sees it: one unit moves at most L0 of its
// coordinates (n.coords: fewer where L1 binds, partSpec.pureL0) by at most the shift (in grid units for the lattice, whose
// discrete Gaussian runs on the integers n = value/step).
func (n *vectorNoise) calPart() privacy.Part {
	pt := privacy.Part{Mechanism: n.mech, L0: n.coords, Linf: n.shift()}
	if n.kind == realLattice {
		pt.Linf = privacy.LatticeSensitivity(n.sens.Linf, n.step)
	}
	n.totalNorms(&pt)
	return pt
}

// aggPlan is how one aggregate is released.
type aggPlan struct {
	name   string
	kind   schema.Kind
	agg    aggregator    // the aggregate's type (aggregate.go)
	lane   *lane         // the extra measure or histogram it releases (lanes.go); nil: the primary
	noises []vectorNoise // one per noised series, in schema order
	// quantilePlan is filled by the quantiles aggregate only
	// (quantilesAgg.complete).
	quantilePlan
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
	compose      int            // windows the calibration composes: 1 with parallel composition, else windows
	parallel     bool           // Config.ParallelComposition: the whole total per window
	accounting   privacy.Accounting
	ledger       *ledger
	note         string
	choices      []string // automatic choices, for the start log
	labels       []string // histogram bucket labels
	groupFields  []string
	publicGroups []string // canonical group keys, sorted; nil if not public
	unit         string
	bounds       schema.Bounds
	maxContrib   int     // bounds.max_contributions (0: unset), which schema.Bounds does not carry
	mid          float64 // centre of the value range (means)
	lower, upper float64
	sens         windows.Sensitivities
	horizon      time.Duration
	horizonB     schema.Budget
	offset, size int64 // ms
	// digest is ReleaseDigest of the config: it keys every noise stream
	// (see noiseID) and is recorded in the state topic (see ledger.go).
	digest string
	// recal is set on a plan recalibrated for the windows left in a
	// horizon after a configuration change (ledger_after.go).
	recal *recalSpec
	// after is the recalibrated plan of the horizon a run took over in the
	// middle (reconcile); at picks it for that horizon's windows.
	after atomic.Pointer[plan]
	// build builds this configuration's plan recalibrated by a recalSpec
	// (newPlan's inputs).
	build func(*recalSpec) (*plan, error)
	// log is what the ledger records of this plan's spending (advance).
	log *spendLog
	// stream keys the noise streams of a recalibrated plan instead of
	// digest (see streamDigest).
	stream string
	// fcache holds the decoded noise of factorized series across windows
	// (running_factor_cache.go; nil: none).
	fcache *factCache
}

// streamDigest is the digest that keys the plan's noise streams (noiseID):
// the release digest, extended for a recalibrated plan by its budget id,
// so that a window released under a recalibration and under any other
// calibration draws independent noise.
func (p *plan) streamDigest() string {
	if p.stream != "" {
		return p.stream
	}
	return p.digest
}

// at returns the plan that releases the window starting at start: the
// recalibrated plan within its horizon, else p.
func (p *plan) at(start int64) *plan {
	if q := p.after.Load(); q != nil && start >= q.recal.from && start < q.recal.he {
		return q
	}
	return p
}

// specsOf lists the noised vectors of a window in release order — the
// parts of every released aggregate (aggs: releasedAggregates), then
// private group selection's — and whether private group selection is
// needed. A lane's aggregate takes the mechanism configured for its
// aggregate type (privacy.mechanisms.sum for sum:voltage).
func specsOf(c Config, aggs []aggregator, sens windows.Sensitivities, public bool) (specs []partSpec, needSel bool) {
	for _, a := range aggs {
		for _, s := range a.parts(sens) {
			s.agg, s.configured = a.name(), c.Privacy.MechanismFor(baseAggregate(a.name()))
			specs = append(specs, s)
		}
	}
	needSel = len(c.Schema.GroupBy) > 0 && !public
	if needSel {
		specs = append(specs, partSpec{agg: selectionPart, series: "units", configured: c.Privacy.Mechanism,
			integer: true, sens: sens.Units, exactAuto: true})
	}
	return specs, needSel
}

// selectionPart names private group selection's noised vector (the units
// of every group, not published) in notes and logs.
const selectionPart = "selection"

// newPlan calibrates everything at start; an infeasible budget is an error
// here, not at the first window, and names the smallest feasible change.
func newPlan(c Config, dec *schema.Decoder, wcfg windows.Config) (*plan, error) {
	p, err := buildPlan(c, dec, wcfg, nil)
	if err == nil {
		p.build = func(r *recalSpec) (*plan, error) { return buildPlan(c, dec, wcfg, r) }
	}
	if err != nil && (errors.Is(err, privacy.ErrInfeasible) || errors.Is(err, privacy.ErrUnsupported)) {
		if hint := suggest(c, dec, wcfg); hint != "" {
			return nil, fmt.Errorf("%w: %w; %s", ErrConfig, err, hint)
		}
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return p, err
}

// buildPlan is newPlan without the suggestions. Its steps: the plan's
// frame (budget, accounting, bounds, groups), the noised parts of the
// configured aggregates, the budget left after group selection, the
// mechanism of every part, one joint calibration, every part's interval,
// the selection threshold, the aggregates' plans, the ledger and the note.
// With a recalibration r the joint calibration covers the windows left in
// r's horizon after the spending it carries (plan.recalibrate), with the
// mechanisms the configuration's own plan has.
func buildPlan(c Config, dec *schema.Decoder, wcfg windows.Config, r *recalSpec) (*plan, error) {
	if c.Windows.quantileMechanism() == QuantileAuto && slices.Contains(c.Windows.Aggregates, AggQuantiles) {
		return autoQuantilePlan(c, dec, wcfg, r)
	}
	return buildPlanWith(c, dec, wcfg, r)
}

// buildPlanWith is buildPlan once every choice of the configuration is
// made (windows.quantile_mechanism is not "auto").
func buildPlanWith(c Config, dec *schema.Decoder, wcfg windows.Config, r *recalSpec) (*plan, error) {
	p, measure, err := planFrame(c, dec, wcfg)
	if err != nil {
		return nil, err
	}
	aggs, err := releasedAggregates(c)
	if err != nil {
		return nil, err
	}
	specs, needSel := specsOf(c, aggs, p.sens, p.publicGroups != nil)
	parts, pw, shift, err := selectionBudget(p.total, p.compose, needSel)
	if err != nil {
		return nil, err
	}
	fact, err := useFactorization(c, specs)
	if err != nil {
		return nil, err
	}
	noises, err := p.resolveNoises(specs, parts, measure)
	if err != nil {
		return nil, err
	}
	for i := range noises {
		if a := aggregateNamed(baseAggregate(specs[i].agg)); fact != nil && a != nil && a.running() {
			noises[i].fact = &factNoise{f: fact}
			if noises[i].kind == realLattice {
				// A coarser lattice keeps σ_z = K·σ within the sampler's
				// 2^40 (see factLatticeBits).
				noises[i].step = math.Ldexp(noises[i].step, factLatticeBits)
			}
		}
	}
	plans, ideal, terms, err := calibrateNoises(p.accounting, parts, p.compose, noises)
	if err != nil {
		return nil, err
	}
	var after *ledgerAfter
	if r != nil {
		nw := p.compose
		if plans, ideal, err = p.recalibrate(r, noises, pw, shift/float64(nw)); err != nil {
			return nil, err
		}
		prior, _ := spentRuns(r.prior) // parsed by recalibrate
		after = &ledgerAfter{prior: prior, sel: selectionOf(r.prior), base: r.base, acct: plans[0].Accounting, claim: r.claim}
		shift = shift / float64(nw) * float64(p.compose)
	}
	beta := 1 - c.Privacy.Confidence
	scales, pparts, err := applyCalibration(noises, specs, plans, beta)
	if err != nil {
		return nil, err
	}
	if needSel {
		n := noises[len(noises)-1]
		noises = noises[:len(noises)-1]
		if p.sel, err = newSelection(n, pw); err != nil {
			return nil, err
		}
	}
	if err := p.planAggregates(c, aggs, specs, noises, beta); err != nil {
		return nil, err
	}
	p.ledger = newLedger(pparts, scales, p.compose, ideal, pw, shift, c.Privacy.Horizon != 0, p.total)
	p.ledger.float = terms
	p.window = p.ledger.spent(1)
	if c.Privacy.Horizon == 0 {
		p.window = schema.Budget{Epsilon: p.total.Epsilon, Delta: p.total.Delta}
	}
	p.log = &spendLog{Current: segmentOf(p, len(terms) > 0)}
	if r != nil {
		// p.window stays one window of this plan alone; from here on the
		// ledger composes the earlier segments too.
		p.ledger.after = after
		clear(p.ledger.cache)
		p.log.Prior, p.log.Recalibrated = r.prior, true
	}
	if r != nil {
		parts = ideal // what the windows left were calibrated for; no float reserve
	}
	p.note = p.describe(c, plans[0].Accounting, parts, ideal, pw, shift, noises)
	if r != nil {
		p.note += "; " + p.recalNote()
	}
	for i := range p.aggs {
		p.note += p.aggs[i].agg.note(&p.aggs[i])
	}
	if fact != nil {
		p.note += factNote(c)
	} else {
		p.note += runningNote(c)
	}
	return p, nil
}

// planFrame is the first step of buildPlan: the plan's budget, accounting,
// window geometry, bounds and public groups, and the error measure "auto"
// ranks by.
func planFrame(c Config, dec *schema.Decoder, wcfg windows.Config) (*plan, privacy.ErrorMeasure, error) {
	sens, err := treeSensitivities(wcfg, c)
	if err != nil {
		return nil, "", err
	}
	total, nw := c.TotalBudget()
	if err := total.Validate(); err != nil {
		return nil, "", fmt.Errorf("operator: %w", err)
	}
	acct, err := privacy.ParseAccounting(c.Privacy.Accounting)
	if err != nil {
		return nil, "", fmt.Errorf("operator: %w", err)
	}
	measure, err := privacy.ParseErrorMeasure(c.Privacy.ErrorMeasure)
	if err != nil {
		return nil, "", fmt.Errorf("operator: %w", err)
	}
	p := &plan{
		total: total, windows: nw, compose: nw, accounting: acct, sens: sens,
		groupFields: slices.Clone(c.Schema.GroupBy),
		unit:        c.Schema.UnitField,
		offset:      c.Windows.Offset.Milliseconds(),
		size:        c.Windows.Size.Milliseconds(),
		horizon:     c.Privacy.Horizon,
		horizonB:    schema.Budget{Epsilon: c.Privacy.HorizonEpsilon, Delta: c.Privacy.HorizonDelta},
		fcache:      newFactCache(factCacheMaxValues),
	}
	if c.ParallelComposition() {
		// Each event lies in one window and changes no other: every
		// window may spend the whole horizon budget.
		p.compose, p.parallel = 1, true
	}
	if h := dec.Config().Histogram; h != nil {
		p.labels = h.Labels()
	}
	p.bounds = schema.Bounds{
		MaxGroups: int64(c.Bounds.MaxGroups), MaxBuckets: int64(c.Bounds.MaxBuckets),
		MaxPerBucket: int64(c.Bounds.MaxPerBucket), MaxValues: int64(c.Bounds.MaxValues),
	}
	p.maxContrib = c.Bounds.MaxContributions
	if readsValues(c) {
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
	return p, measure, nil
}

// selectionBudget returns the budget left to the noised parts after
// private group selection (needSel) takes its share of the total over nw
// windows, the δ selection spends per window (pw) and the ε it shifts
// over all windows.
//
// A group that only the differing unit touches is released with
// probability ≤ pw per window (the threshold, newSelection). With A the
// rest of the release, the pair of output distributions is
// (A(D) ⊗ Bern(pw), A(D') ⊗ Bern(0)); its hockey-stick divergence is at
// most δ_A(ε) + pw in one direction and δ_A(ε − ln(1/(1−pw))) in the
// other, and over N windows the pw add up and so do the ε shifts. So the
// noise is calibrated for (ε − N·ln(1/(1−pw)), δ − N·pw).
func selectionBudget(total privacy.Budget, nw int, needSel bool) (parts privacy.Budget, pw, shift float64, err error) {
	if !needSel {
		return total, 0, 0, nil
	}
	if !(total.Delta > 0) {
		return parts, 0, 0, fmt.Errorf("%w: group_by without privacy.public_groups needs δ > 0 for private group selection (or list the public groups)", ErrConfig)
	}
	dsel := total.Delta * selectionDeltaShare
	pw = dsel / float64(nw)
	// The ε shift rounded up (Nextafter, then a relative 1e-12 above the
	// rounding of Log1p) so that it is never below N·ln(1/(1−pw)).
	shift = math.Nextafter(float64(nw)*-math.Log1p(-pw), math.Inf(1)) * (1 + 1e-12)
	parts = privacy.Budget{Epsilon: total.Epsilon - shift, Delta: total.Delta - dsel}
	if !(parts.Epsilon > 0) {
		return parts, 0, 0, fmt.Errorf("%w: ε is too small for private group selection", privacy.ErrInfeasible)
	}
	return parts, pw, shift, nil
}

// planAggregates is the step of buildPlan that gives every released
// aggregate (aggs) its plan: its kind, its lane, its calibrated noises (the
// next of noises, in the order of specs) and what the aggregate completes
// (the quantiles' tree).
func (p *plan) planAggregates(c Config, aggs []aggregator, specs []partSpec, noises []vectorNoise, beta float64) error {
	k := 0
	for _, a := range aggs {
		ap := aggPlan{name: a.name(), kind: a.kind(), agg: a, lane: laneOf(a)}
		for k < len(noises) && specs[k].agg == ap.name {
			ap.noises = append(ap.noises, noises[k])
			k++
		}
		if err := a.complete(&ap, c, beta); err != nil {
			return err
		}
		p.aggs = append(p.aggs, ap)
	}
	return nil
}

func isDiscrete(m privacy.Mechanism) bool {
	switch m.(type) {
	case privacy.DiscreteLaplace, privacy.DiscreteGaussian:
		return true
	}
	return false
}

// add releases one value with n's noise drawn from s: an integer (as a
// float64) for integer kinds, a multiple of the grid step for real values.
func (n *vectorNoise) add(s *rng.Stream, v float64) (float64, error) {
	switch n.kind {
	case intExact:
		z := n.mech.Sample(s, n.scale)
		if math.IsNaN(z) {
			return 0, fmt.Errorf("operator: %s: invalid noise scale", n.mech.Name())
		}
		return v + z, nil // both integers below 2^53: exact
	case intRounded:
		return privacy.SnapRelease(s, privacy.SnapNoise{Mechanism: n.mech, Scale: n.scale, Step: 1, Lower: -snapUnits, Upper: snapUnits}, v)
	case realLattice:
		return privacy.LatticeRelease(s, privacy.LatticeNoise{Sigma: n.grid, Step: n.step, Lower: -n.lim, Upper: n.lim}, v)
	default:
		return privacy.SnapRelease(s, privacy.SnapNoise{Mechanism: n.mech, Scale: n.scale, Step: n.step, Lower: -n.lim, Upper: n.lim}, v)
	}
}
