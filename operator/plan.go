package operator

// plan.go decides, once at start, how every window is released: which
// noise runs on which vector (integer noise for counts; for real values
// exact rounded Laplace, exact discrete Gaussian on a lattice, or float
// noise rounded to a grid), the per-coordinate scales from one joint
// calibration of all parts of a window over the whole horizon after the
// floating-point residual of float noise is reserved, the automatic
// mechanism choice, private group selection, and the ledger of the budget
// spent so far.

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/quantile"
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
	linf       float64 // the per-coordinate shift the scale is calibrated for (value units)
	half       float64 // half-width of the (1−β) interval of one value
	beta       float64 // the β the half-width is for
	// res is the floating-point residual reserved per coordinate (zero for
	// exact noise): float64 noise rounded to the grid, intRounded and
	// realSnapped with logistic or subbotin:R.
	res privacy.FloatResidual
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
	if n.kind == intExact || n.kind == intRounded {
		return n.sens.Linf
	}
	return privacy.LatticeSensitivity(n.sens.Linf, n.step) * n.step
}

// calPart is n as the calibration sees it: one unit moves at most L0 of its
// coordinates by at most the shift (in grid units for the lattice, whose
// discrete Gaussian runs on the integers n = value/step).
func (n *vectorNoise) calPart() privacy.Part {
	pt := privacy.Part{Mechanism: n.mech, L0: int(math.Ceil(n.sens.L0)), Linf: n.shift()}
	if n.kind == realLattice {
		pt.Linf = privacy.LatticeSensitivity(n.sens.Linf, n.step)
	}
	return pt
}

// aggPlan is how one aggregate is released.
type aggPlan struct {
	name   string
	kind   schema.Kind
	noises []vectorNoise // one per noised series, in schema order
	// Quantiles: the ranks, their labels, the tree and the half-width H of
	// every noised prefix count at the plan's level (quantile.Tree).
	ranks  []float64
	labels []string
	tree   quantile.Tree
	rankH  float64
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
	// digest is ReleaseDigest of the config: it keys every noise stream
	// (see noiseID) and is recorded in the state topic (see ledger.go).
	digest string
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
		case AggUnits:
			specs = append(specs, partSpec{a, schema.SeriesUnits, m, true, sens.Units})
		case AggVariance:
			specs = append(specs, partSpec{a, schema.SeriesCount, m, true, sens.Values},
				partSpec{a, schema.SeriesSum, m, false, sens.MeanSum},
				partSpec{a, schema.SeriesSumSq, m, false, sens.SumSq})
		case AggQuantiles:
			// Every node below the root of every group's tree: one vector.
			specs = append(specs, partSpec{a, treeSeries, m, true, sens.Tree})
		}
	}
	needSel = len(c.Schema.GroupBy) > 0 && !public
	if needSel {
		specs = append(specs, partSpec{"selection", "units", c.Privacy.Mechanism, true, sens.Units})
	}
	return specs, needSel
}

// treeSeries names the quantile tree's noised nodes in notes and logs (the
// nodes themselves are not published; the quantiles derived from them are).
const treeSeries = "tree"

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
	if wcfg.Sum || wcfg.Mean || wcfg.Variance || wcfg.Quantiles {
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
	for i, s := range specs {
		if !(s.sens.L0 >= 1) || !(s.sens.Linf > 0) || math.IsInf(s.sens.Linf, 0) {
			return nil, fmt.Errorf("operator: %s.%s: sensitivity L0=%g, L∞=%g cannot be calibrated", s.agg, s.series, s.sens.L0, s.sens.Linf)
		}
		n := vectorNoise{series: s.series, part: s.agg + "." + s.series, configured: s.configured, sens: s.sens, step: 1}
		if !s.integer {
			n.step = privacy.SnapStep(s.sens.Linf)
		}
		if s.configured == Auto {
			m, choice, err := autoChoose(parts, nw, totalL0, s, measure, acct)
			if err != nil {
				return nil, fmt.Errorf("operator: %s: automatic choice: %w", n.part, err)
			}
			n.mech, n.auto, n.configured = m, true, m.Name()
			p.choices = append(p.choices, n.part+": "+choice)
		} else {
			m, err := ReleaseMechanism(s.configured, s.integer)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrConfig, n.part, err)
			}
			if s.agg == AggQuantiles && !isDiscrete(m) {
				// The tree's intervals need the tail of sums of its noise
				// (quantile.Tree.RankBound): exact integer noise only.
				return nil, fmt.Errorf("%w: %s: quantiles need laplace, gaussian or auto (exact integer noise on the tree), not %s", ErrConfig, n.part, s.configured)
			}
			n.mech = m
		}
		switch {
		case s.integer && isDiscrete(n.mech):
			n.kind = intExact
		case s.integer:
			n.kind = intRounded
		case isDiscrete(n.mech): // discrete-gaussian on the lattice
			n.kind = realLattice
		default:
			n.kind = realSnapped
		}
		if n.float() && !(parts.Delta > 0) {
			return nil, fmt.Errorf("%w: %s: %s float noise needs δ > 0 for its floating-point residual (the noise beyond its analysed reach is charged to δ); "+
				"with δ = 0 use laplace (exact: discrete-laplace on counts, rounded Laplace on sums)", ErrConfig, n.part, n.mech.Name())
		}
		noises[i] = n
	}

	plans, ideal, terms, err := calibrateNoises(acct, parts, nw, noises)
	if err != nil {
		return nil, err
	}
	beta := 1 - c.Privacy.Confidence
	check := rng.NewStream(rng.Key{}, "dpstream/plan-check/v1") // parameter check only, never published
	scales := make([]float64, len(plans))
	pparts := make([]privacy.Part, len(plans))
	for i := range noises {
		n := &noises[i]
		scales[i], pparts[i] = plans[i].Scale, n.calPart()
		n.scale = plans[i].Scale
		n.linf = n.shift()
		if n.kind == realLattice {
			n.grid = plans[i].Scale
			n.scale = n.grid * n.step // exact: the step is a power of two
		}
		if !(n.scale > 0) || math.IsInf(n.scale, 0) {
			return nil, fmt.Errorf("operator: %s (%s): calibration gave scale %g", n.part, n.mech.Name(), n.scale)
		}
		if n.kind == realSnapped || n.kind == realLattice {
			n.lim = math.Ldexp(n.step, snapBits)
		}
		// The mean's interval combines two intervals: give each β/2; the
		// variance's three, each β/3.
		n.beta = beta
		switch specs[i].agg {
		case AggMean:
			n.beta = beta / 2
		case AggVariance:
			n.beta = beta / 3
		}
		var h float64
		if n.kind == realLattice {
			h = n.mech.HalfWidth(n.grid, n.beta) * n.step // a whole number of steps
		} else {
			h = n.mech.HalfWidth(n.scale, n.beta)
		}
		if math.IsNaN(h) || math.IsInf(h, 0) {
			return nil, fmt.Errorf("%w: %s (%s): no finite confidence interval at level %g; choose a lighter-tailed mechanism", privacy.ErrInfeasible, n.part, n.mech.Name(), 1-n.beta)
		}
		switch n.kind {
		case intExact, intRounded:
			n.half = math.Ceil(h) // |round(z)| ≤ floor(|z| + ½) ≤ ⌈h⌉ when |z| ≤ h
		case realLattice:
			n.half = h + n.step/2 // the value is rounded by ≤ step/2, the noise is on the lattice
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
		// noise exceeds h + ½ only if the float noise exceeds h. Float64
		// noise (intRounded) is within η < ½ of the ideal sample except on
		// its failure event (privacy.FloatTail bounds that probability), so
		// it reaches h + ½ with probability ≤ β/2 + FloatTail: β is lowered
		// by twice that. (Groups present under both inputs are coordinates
		// like any other: their residual is in the reserve.)
		b := 2 * (pw/math.Ceil(n.sens.L0) - privacy.FloatTail(n.mech)) * (1 - 1e-9)
		if !(b > 0) {
			return nil, fmt.Errorf("%w: group selection (%s): the floating-point residual leaves no δ for the threshold; use an exact mechanism", privacy.ErrInfeasible, n.mech.Name())
		}
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
		case AggUnits:
			ap.kind = schema.KindUnits
		case AggVariance:
			ap.kind = schema.KindVariance
		case AggQuantiles:
			ap.kind = schema.KindQuantiles
		}
		for k < len(noises) && specs[k].agg == a {
			ap.noises = append(ap.noises, noises[k])
			k++
		}
		if a == AggQuantiles {
			if err := ap.planQuantiles(c, beta); err != nil {
				return nil, err
			}
		}
		p.aggs = append(p.aggs, ap)
	}
	p.ledger = newLedger(pparts, scales, nw, ideal, pw, shift, c.Privacy.Horizon != 0, total)
	p.ledger.float = terms
	p.window = p.ledger.spent(1)
	if c.Privacy.Horizon == 0 {
		p.window = schema.Budget{Epsilon: total.Epsilon, Delta: total.Delta}
	}
	p.note = p.describe(c, plans[0].Accounting, parts, ideal, pw, shift, noises)
	p.note += p.quantileNote()
	p.note += runningNote(c)
	return p, nil
}

// calibrateNoises calibrates the noises of one window jointly over nw
// windows so that the whole horizon meets the budget `parts`, and returns
// the calibrations (one per noise), the budget the parts are calibrated for
// and the floating-point residual terms of one window (N = L0 of each float
// part). Without float noise that budget is `parts` and there are no terms.
//
// Float parts (float64 noise rounded to a grid: logistic, subbotin:R) carry
// a residual that depends on their scale and grid (privacy.NewFloatResidual),
// and the scale depends on how much of the budget the residual takes: the
// parts are first calibrated for `parts`, the residual is reserved for
// scales up to floatScaleMargin above those (privacy.FloatIdeal: basic
// composition over the L0·nw coordinates a unit can change, subtracted from
// the budget), the parts are calibrated again for what is left, and the
// residual at the new scales must be within the reserve (else the reserve
// is raised and the calibration repeated). Real values under float noise
// also get the grid their reach needs (privacy.FloatStep: κ ≈ 2⁻²¹), which
// changes their shift, and so the calibration, once.
func calibrateNoises(acct privacy.Accounting, parts privacy.Budget, nw int, noises []vectorNoise) ([]privacy.Plan, privacy.Budget, []privacy.FloatTerm, error) {
	var floats []int
	for i := range noises {
		if noises[i].float() {
			floats = append(floats, i)
		}
	}
	terms := func(windows int) []privacy.FloatTerm {
		t := make([]privacy.FloatTerm, 0, len(floats))
		for _, i := range floats {
			n := &noises[i]
			t = append(t, privacy.FloatTerm{Residual: n.res, N: int64(math.Ceil(n.sens.L0)) * int64(windows)})
		}
		return t
	}
	residual := func(n *vectorNoise, scale float64) (privacy.FloatResidual, error) {
		r, err := privacy.NewFloatResidual(privacy.FloatNoise{Mechanism: n.mech, Scale: scale, Step: n.step}, n.shift())
		if err != nil {
			return r, fmt.Errorf("operator: %s (%s): %w", n.part, n.mech.Name(), err)
		}
		return r, nil
	}
	ideal := parts
	for iter := 0; ; iter++ {
		pparts := make([]privacy.Part, len(noises))
		for i := range noises {
			pparts[i] = noises[i].calPart()
		}
		plans, err := privacy.CalibrateParts(acct, ideal, nw, pparts)
		if err != nil {
			return nil, privacy.Budget{}, nil, fmt.Errorf("operator: calibrating %d parts over %d window(s) with %s accounting: %w", len(pparts), nw, acct, err)
		}
		if len(floats) == 0 {
			return plans, ideal, nil, nil
		}
		settled := iter > 0
		for _, i := range floats {
			n := &noises[i]
			if n.kind == realSnapped {
				st := privacy.FloatStep(n.mech, plans[i].Scale*floatScaleMargin, n.sens.Linf)
				if math.IsNaN(st) {
					return nil, privacy.Budget{}, nil, fmt.Errorf("%w: %s (%s): no grid bounds the floating-point residual", privacy.ErrInfeasible, n.part, n.mech.Name())
				}
				if st > n.step {
					n.step, settled = st, false
				}
			}
			r, err := residual(n, plans[i].Scale)
			if err != nil {
				return nil, privacy.Budget{}, nil, err
			}
			if r.Kappa > n.res.Kappa || r.Epsilon > n.res.Epsilon || r.Tail > n.res.Tail {
				settled = false
			}
		}
		if settled {
			return plans, ideal, terms(1), nil
		}
		if iter >= 6 {
			return nil, privacy.Budget{}, nil, fmt.Errorf("%w: the floating-point reserve did not settle", privacy.ErrInfeasible)
		}
		for _, i := range floats {
			n := &noises[i]
			r, err := residual(n, plans[i].Scale*floatScaleMargin)
			if err != nil {
				return nil, privacy.Budget{}, nil, err
			}
			n.res = privacy.FloatResidual{Kappa: math.Max(r.Kappa, n.res.Kappa), Epsilon: math.Max(r.Epsilon, n.res.Epsilon),
				Tail: math.Max(r.Tail, n.res.Tail), Reach: math.Max(r.Reach, n.res.Reach)}
		}
		if ideal, err = privacy.FloatIdeal(parts, terms(nw)); err != nil {
			return nil, privacy.Budget{}, nil, fmt.Errorf("operator: reserving the floating-point residual of float noise over %d window(s): %w; "+
				"exact noise has none (laplace, gaussian)", nw, err)
		}
	}
}

// autoChoose resolves "auto" for one part: the candidate with the smallest
// error (measure) for the shape of the whole release (totalL0 coordinates
// per window, nw windows), among autoCandidates as they would run. Exact
// candidates are calibrated for `parts`; float candidates for `parts` less
// the δ their residual costs on all totalL0·nw coordinates (the
// scale-independent part of the reserve, privacy.FloatTail; the ε part,
// about 1e-6 per coordinate, is left out of the ranking). Real values are
// compared in grid units at the integer shift ⌊L∞/Λ⌋ + 1 (Λ = SnapStep(L∞)),
// where the lattice discrete Gaussian and the continuous mechanisms
// (whose scales are linear in the shift) meet on equal terms. It returns
// the mechanism and the sentence for the start log.
func autoChoose(parts privacy.Budget, nw, totalL0 int, s partSpec, measure privacy.ErrorMeasure, acct privacy.Accounting) (privacy.Mechanism, string, error) {
	cands := autoCandidates(parts.Delta, s.integer, s.agg == "selection" || s.agg == AggQuantiles)
	linf := s.sens.Linf
	if !s.integer {
		linf = privacy.LatticeSensitivity(s.sens.Linf, privacy.SnapStep(s.sens.Linf))
	}
	// Group the candidates by the δ their residual costs.
	type group struct {
		tail  float64
		names []string
	}
	var groups []group
	for _, name := range cands {
		m, err := privacy.Parse(name)
		if err != nil {
			return nil, "", err
		}
		tail := privacy.FloatTail(m)
		k := slices.IndexFunc(groups, func(g group) bool { return g.tail == tail })
		if k < 0 {
			groups, k = append(groups, group{tail: tail}), len(groups)
		}
		groups[k].names = append(groups[k].names, name)
	}
	type scored struct {
		m   privacy.Mechanism
		err float64
		idx int
	}
	var opts []scored
	var infeasible []string
	for _, g := range groups {
		b := parts
		if g.tail > 0 {
			b.Delta = parts.Delta - float64(totalL0)*float64(nw)*g.tail*(1+math.Exp(parts.Epsilon))
			if !(b.Delta > 0) || math.IsInf(g.tail, 1) {
				infeasible = append(infeasible, g.names...)
				continue
			}
		}
		cmp, err := privacy.Compare(privacy.Horizon{Total: b, Windows: nw, L0: totalL0, Linf: linf}, privacy.CompareOptions{Candidates: g.names, Measure: measure, Accounting: acct})
		if err != nil {
			return nil, "", err
		}
		infeasible = append(infeasible, cmp.Infeasible...)
		for _, o := range cmp.Options {
			e := o.Error(measure)
			if math.IsNaN(e) || math.IsInf(e, 0) {
				continue
			}
			opts = append(opts, scored{m: o.Mechanism, err: e, idx: slices.Index(cands, o.Mechanism.Name())})
		}
	}
	if len(opts) == 0 {
		return nil, "", fmt.Errorf("%w: no candidate has a finite %s (infeasible: %s)", privacy.ErrInfeasible, measure, strings.Join(infeasible, ", "))
	}
	best := slices.MinFunc(opts, func(a, b scored) int {
		if c := cmp.Compare(a.err, b.err); c != 0 {
			return c
		}
		return a.idx - b.idx
	})
	return best.m, fmt.Sprintf("%s (smallest %s among %s for %d coordinates × %d windows)",
		best.m.Name(), measure, strings.Join(cands, ", "), totalL0, nw), nil
}

// autoCandidates are the mechanisms "auto" compares for one part, as they
// run on its values (see ReleaseMechanism), without repeats: heavy-tailed
// noise never (no residual bound), float noise only with δ > 0 (its
// residual needs δ). Group selection and the quantile tree (sel) use only
// the exact integer mechanisms.
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
		if err != nil || (!privacy.FloatExact(m) && !(delta > 0)) {
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
func (p *plan) describe(c Config, used privacy.Accounting, parts, ideal privacy.Budget, pw, shift float64, noises []vectorNoise) string {
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
		step := int(math.Round(math.Log2(n.step)))
		switch {
		case n.kind == intExact:
			b.WriteString(" integer noise")
		case n.kind == intRounded:
			b.WriteString(" float noise rounded to integers")
		case n.kind == realLattice:
			fmt.Fprintf(&b, " on the lattice 2^%d (exact)", step)
		case n.float():
			fmt.Fprintf(&b, " float noise rounded to step 2^%d", step)
		default:
			fmt.Fprintf(&b, " snapped to step 2^%d (exact)", step)
		}
		fmt.Fprintf(&b, ", scale %.6g per coordinate (L0=%g, L∞=%g", n.scale, n.sens.L0, n.sens.Linf)
		if n.kind == realSnapped || n.kind == realLattice {
			b.WriteString("+step")
		}
		b.WriteString(")")
	}
	if parts != ideal {
		var names []string
		coords, kappa := 0, 0.0
		for _, n := range all {
			if n.float() {
				names = append(names, n.part)
				coords += int(math.Ceil(n.sens.L0)) * p.windows
				kappa = math.Max(kappa, n.res.Kappa)
			}
		}
		fmt.Fprintf(&b, "; floating-point residual of the float noise (%s: %d coordinates, κ ≤ %.2g) reserved: ε=%.3g, δ=%.3g",
			strings.Join(names, ", "), coords, kappa, parts.Epsilon-ideal.Epsilon, parts.Delta-ideal.Delta)
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

// ledger reports the budget spent after k windows of a horizon: the
// tightest accountant's ε for the k-fold composition of the window's parts
// at the parts' δ, plus the floating-point residual of k windows of float
// noise, plus group selection's share. Results are cached per k.
type ledger struct {
	parts   []privacy.Part
	scales  []float64
	windows int
	budget  privacy.Budget // what the parts are calibrated for over all windows
	pw      float64        // group selection δ per window
	shift   float64        // group selection ε over all windows
	horizon bool
	total   privacy.Budget
	// float is the floating-point residual reserved for one window (N =
	// L0 of each float part; k windows: k·N), added by
	// privacy.FloatGuarantee. Empty without float noise.
	float []privacy.FloatTerm

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
// are part of them), plus the selection's ε shift. The floating-point
// residual of k windows of float noise is added to the parts' (ε, δ) by
// privacy.FloatGuarantee. With δ = 0 (no float noise then) pure ε adds up
// exactly: k/N of the total.
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
		g := privacy.FloatGuarantee(privacy.Budget{Epsilon: e, Delta: l.budget.Delta}, l.floatTerms(k))
		b = schema.Budget{Epsilon: g.Epsilon + l.shift*kf/nf, Delta: g.Delta + kf*l.pw}
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

// floatTerms returns the floating-point residual terms of k windows.
func (l *ledger) floatTerms(k int) []privacy.FloatTerm {
	t := slices.Clone(l.float)
	for i := range t {
		t[i].N *= int64(k)
	}
	return t
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
			hints = append(hints, fmt.Sprintf("%s must be > 0 (δ = 0 needs exact pure-ε noise: laplace or discrete-laplace)", dkey))
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

// planQuantiles completes the plan of the quantiles aggregate: its ranks
// and labels, the tree, and the half-width H of its noised prefix counts
// at level 1 − β (quantile.Tree.RankBound), which gives every
// quantile's interval and rank error.
func (ap *aggPlan) planQuantiles(c Config, beta float64) error {
	if len(ap.noises) != 1 {
		return fmt.Errorf("operator: quantiles: %d noised parts, want 1", len(ap.noises))
	}
	b, d := c.Windows.quantileTree()
	ap.tree = quantile.Tree{Branching: b, Depth: d, Lower: c.Schema.Lower, Upper: c.Schema.Upper}
	ap.ranks = slices.Clone(c.Windows.quantileRanks())
	for _, r := range ap.ranks {
		ap.labels = append(ap.labels, strconv.FormatFloat(r, 'g', -1, 64))
	}
	n := &ap.noises[0]
	h, err := ap.tree.RankBound(n.mech, n.scale, beta)
	if err != nil {
		return fmt.Errorf("%w: quantiles: %w", ErrConfig, err)
	}
	ap.rankH = h
	return nil
}
