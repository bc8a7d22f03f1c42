package operator

// plan_calibrate.go turns the noised parts of a window into calibrated
// noise: the mechanism of every part (configured, or chosen by "auto"),
// one joint calibration of all parts over the horizon with the
// floating-point residual of float noise reserved, every part's interval,
// and the threshold of private group selection.

import (
	"fmt"
	"math"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/rng"
)

// resolveNoises is the step of buildPlan that gives every part its
// mechanism and noise kind; "auto" compares candidates for the shape of
// the whole release (all its coordinates, all windows) at the budget
// parts. Automatic choices are appended to p.choices.
func (p *plan) resolveNoises(specs []partSpec, parts privacy.Budget, measure privacy.ErrorMeasure) ([]vectorNoise, error) {
	totalL0 := 0
	for _, s := range specs {
		totalL0 += s.coords(parts.Delta)
	}
	normed := anyNorms(specs, parts.Delta)
	noises := make([]vectorNoise, len(specs))
	for i, s := range specs {
		if !(s.sens.L0 >= 1) || !(s.sens.Linf > 0) || math.IsInf(s.sens.Linf, 0) {
			return nil, fmt.Errorf("operator: %s.%s: sensitivity L0=%g, L∞=%g cannot be calibrated", s.agg, s.series, s.sens.L0, s.sens.Linf)
		}
		n := vectorNoise{series: s.series, part: s.agg + "." + s.series, configured: s.configured, sens: s.sens, step: 1, coords: s.coords(parts.Delta),
			norms: s.norms && parts.Delta > 0}
		if s.selection {
			n.mech, n.kind = privacy.Selection{}, selectExact
			n.configured = n.mech.Name()
			noises[i] = n
			continue
		}
		if !s.integer {
			n.step = privacy.SnapStep(s.sens.Linf)
		}
		if s.configured == Auto {
			choose := func() (privacy.Mechanism, string, error) {
				return autoChoose(parts, p.compose, totalL0, s, measure, p.accounting)
			}
			if normed {
				choose = func() (privacy.Mechanism, string, error) {
					return autoChooseNormed(parts, p.compose, specs, i, measure, p.accounting)
				}
			}
			m, choice, err := choose()
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
			if s.exactOnly != "" && !isDiscrete(m) {
				return nil, fmt.Errorf("%w: %s: %s, not %s", ErrConfig, n.part, s.exactOnly, s.configured)
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
	return noises, nil
}

// applyCalibration is the step of buildPlan that sets every noise's scale
// from its calibration (plans, in the order of noises and specs), its
// clamping bounds and the half-width of its interval at level 1 − β/k (k
// the intervals its aggregate combines, partSpec.intervals), and checks
// that the samplers accept the parameters. It returns the scales and the
// parts as the calibration saw them, for the ledger.
func applyCalibration(noises []vectorNoise, specs []partSpec, plans []privacy.Plan, beta float64) ([]float64, []privacy.Part, error) {
	check := rng.NewStream(rng.Key{}, "dpstream/plan-check/v1") // parameter check only, never published
	var scales []float64
	var pparts []privacy.Part
	for i := range noises {
		n := &noises[i]
		for _, pt := range n.calParts() {
			scales, pparts = append(scales, plans[i].Scale), append(pparts, pt)
		}
		// A derived interval that combines k intervals (the mean's two,
		// the variance's three) gives each β/k.
		n.beta = beta
		if k := specs[i].intervals; k > 1 {
			n.beta = beta / float64(k)
		}
		if n.fact != nil {
			n.linf = n.shift()
			if err := n.setFact(plans[i].Scale); err != nil {
				return nil, nil, err
			}
			continue
		}
		n.scale = plans[i].Scale
		n.linf = n.shift()
		if n.kind == realLattice {
			n.grid = plans[i].Scale
			n.scale = n.grid * n.step // exact: the step is a power of two
		}
		if !(n.scale > 0) || math.IsInf(n.scale, 0) {
			return nil, nil, fmt.Errorf("operator: %s (%s): calibration gave scale %g", n.part, n.mech.Name(), n.scale)
		}
		if n.kind == realSnapped || n.kind == realLattice {
			n.lim = math.Ldexp(n.step, snapBits)
		}
		if n.kind == selectExact {
			n.beta = beta // a selection has no noise interval; its aggregate states its error
			continue
		}
		if err := n.setHalf(); err != nil {
			return nil, nil, err
		}
		// Parameters the samplers accept (e.g. a Laplace scale of at most
		// 2^40 grid steps): checked once here, not at the first window.
		if _, err := n.add(check, 0); err != nil {
			return nil, nil, fmt.Errorf("%w: %s (%s): %w", privacy.ErrInfeasible, n.part, n.mech.Name(), err)
		}
	}
	return scales, pparts, nil
}

// setHalf sets the half-width of n's (1 − n.beta) interval of one released
// value, its rounding included.
func (n *vectorNoise) setHalf() error {
	var h float64
	if n.kind == realLattice {
		h = n.mech.HalfWidth(n.grid, n.beta) * n.step // a whole number of steps
	} else {
		h = n.mech.HalfWidth(n.scale, n.beta)
	}
	if math.IsNaN(h) || math.IsInf(h, 0) {
		return fmt.Errorf("%w: %s (%s): no finite confidence interval at level %g; choose a lighter-tailed mechanism", privacy.ErrInfeasible, n.part, n.mech.Name(), 1-n.beta)
	}
	switch n.kind {
	case intExact, intRounded:
		n.half = math.Ceil(h) // |round(z)| ≤ floor(|z| + ½) ≤ ⌈h⌉ when |z| ≤ h
	case realLattice:
		n.half = h + n.step/2 // the value is rounded by ≤ step/2, the noise is on the lattice
	case realSnapped:
		n.half = math.Nextafter(h+n.step, math.Inf(1)) // value and noise each rounded by ≤ step/2
	}
	return nil
}

// newSelection is the step of buildPlan that sets the threshold of private
// group selection with the calibrated noise n of the groups' unit counts,
// so that a group only the differing unit touches is released with
// probability at most pw per window.
//
// A group only the differing unit touches has at most L∞ units (1) and is
// released iff L∞ + noise ≥ τ. With h the noise's two-sided (1 − β)
// half-width, P(noise > h) ≤ β/2, so τ = L∞ + h + 1 releases each of the
// ≤ L0 such groups with probability ≤ β/2 = pw/L0 (β shaved by 1e-9
// against rounding in the tail formula). Rounded noise exceeds h + ½ only
// if the float noise exceeds h. Float64 noise (intRounded) is within
// η < ½ of the ideal sample except on its failure event (privacy.FloatTail
// bounds that probability), so it reaches h + ½ with probability
// ≤ β/2 + FloatTail: β is lowered by twice that. (Groups present under
// both inputs are coordinates like any other: their residual is in the
// reserve.)
func newSelection(n vectorNoise, pw float64) (*selection, error) {
	b := 2 * (pw/math.Ceil(n.sens.L0) - privacy.FloatTail(n.mech)) * (1 - 1e-9)
	if !(b > 0) {
		return nil, fmt.Errorf("%w: group selection (%s): the floating-point residual leaves no δ for the threshold; use an exact mechanism", privacy.ErrInfeasible, n.mech.Name())
	}
	h := n.mech.HalfWidth(n.scale, b)
	if !(h >= 0) || math.IsInf(h, 0) {
		return nil, fmt.Errorf("%w: group selection (%s): no finite threshold for δ %g", privacy.ErrInfeasible, n.mech.Name(), pw)
	}
	tau := n.sens.Linf + math.Ceil(h) + 1
	return &selection{noise: n, threshold: tau, perWindow: pw}, nil
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
		pparts, owner := expandParts(noises)
		plans, err := privacy.CalibrateParts(acct, ideal, nw, pparts)
		if err != nil {
			return nil, privacy.Budget{}, nil, fmt.Errorf("operator: calibrating %d parts over %d window(s) with %s accounting: %w", len(pparts), nw, acct, err)
		}
		plans = collapsePlans(plans, owner, len(noises))
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
