package privacy

import (
	"fmt"
	"math"
)

// This file holds Lemma 1 of Vinterbo, "Differential privacy for symmetric
// log-concave mechanisms" (AISTATS 2022), the numerical machinery shared by
// every log-concave mechanism, and Convex, the generic solver for any even
// convex potential ψ.
//
// Notation. The standard variate X has density f = e^{−ψ} with ψ even and
// convex, support (−a, a), CDF F and survival function S(x) = P(X > x) =
// F(−x). For scale s and sensitivity Δ let d = Δ/s. Dividing (1) and (2) of
// Lemma 1 by s, with u = z/s:
//
//	u* = sup{u < a : L(u) ≤ ε},   L(u) = ψ(u) − ψ(u − d),
//	δ(s) = S(u* − d) − e^ε·S(u*).
//
// L is non-decreasing (ψ is convex) and L(d/2) = 0 (ψ is even), so u* ≥ d/2.
// δ(s) = max_u g(u) for g(u) = S(u − d) − e^ε·S(u) (g' ≥ 0 exactly where
// L ≤ ε), so for any bracket lo ≤ u* ≤ hi
//
//	δ(s) ≤ S(lo − d) − e^ε·S(hi),
//
// which is what lemma1 returns: a bracket that is slightly too wide can only
// overstate δ, never understate it.

const (
	// minDelta is the smallest positive δ accepted. Below it the tail
	// probabilities that δ is compared with are subnormal float64 numbers
	// (the normal range ends at 2.2e-308) and lose their relative precision.
	minDelta = 1e-300

	// solverTol is the relative width hi/lo − 1 at which the scale bisection
	// stops. It is far below the 1e-6 accuracy promised for solvers, so that
	// evalMargin fits in between.
	solverTol = 1e-10

	// evalMargin is added (relatively) to every solver result. lemma1
	// already bounds δ from above (it rounds against itself and adds
	// survivalErr's slack), so the margin is a second line of defence
	// against an error that bound misses, such as a survival function
	// outside its measured accuracy. TestCalibrateReference checks that it
	// is not load-bearing: without it the solvers are still above the exact
	// minimum (by ≥ 5.7e-14 relative on the mpmath reference grid). At
	// 1e-8 it leaves the 1e-6 promise untouched.
	evalMargin = 1e-8

	// maxBracketSteps bounds the doubling search for a scale bracket: 2^1100
	// spans every positive float64.
	maxBracketSteps = 1100
)

// pureMechanisms lists the mechanisms that can give pure ε-DP (δ = 0), for
// error messages.
const pureMechanisms = "laplace, logistic, cauchy, sas:A, discrete-laplace"

// checkBudget validates a calibration request: ε > 0 finite, δ = 0 or
// minDelta ≤ δ < 1, Δ > 0 finite. The error wraps ErrInvalidParameter.
func checkBudget(epsilon, delta, sensitivity float64) error {
	switch {
	case math.IsNaN(epsilon) || math.IsInf(epsilon, 0) || epsilon <= 0:
		return fmt.Errorf("%w: ε must be finite and > 0, got %v", ErrInvalidParameter, epsilon)
	case math.IsNaN(delta) || delta < 0 || delta >= 1:
		return fmt.Errorf("%w: δ must satisfy 0 ≤ δ < 1, got %v", ErrInvalidParameter, delta)
	case delta > 0 && delta < minDelta:
		return fmt.Errorf("%w: δ must be 0 or at least %v, got %v", ErrInvalidParameter, minDelta, delta)
	case math.IsNaN(sensitivity) || math.IsInf(sensitivity, 0) || sensitivity <= 0:
		return fmt.Errorf("%w: sensitivity Δ must be finite and > 0, got %v", ErrInvalidParameter, sensitivity)
	}
	return nil
}

// errPure is the error for δ = 0 with noise that is MLR-unbounded (Theorem 6:
// its scale grows without bound as δ → 0).
func errPure(name string) error {
	return fmt.Errorf("%w: %s noise cannot give pure ε-DP (δ = 0); use δ > 0 or one of: %s",
		ErrInfeasible, name, pureMechanisms)
}

// errUnverified reports a scale that no upward step could verify; it means a
// numerical failure, and the scale is withheld rather than returned unchecked.
var errUnverified = fmt.Errorf("%w: the criterion could not be verified numerically", ErrInfeasible)

// roundUp returns x·(1 + n·2⁻⁵²) rounded upwards, a bound for a result that
// carries at most n ulps of rounding error.
func roundUp(x float64, n int) float64 {
	return math.Nextafter(x*(1+float64(n)*0x1p-52), math.Inf(1))
}

// settle returns the first s' in s, s+h, s+3h, s+7h, … (h = s·2⁻⁵²) with
// ok(s'): the smallest upward correction, within factor 2, that makes a
// computed criterion hold. It fails after 64 steps.
func settle(s float64, ok func(float64) bool) (float64, error) {
	step := s * 0x1p-52
	for i := 0; i < 64; i++ {
		if ok(s) {
			return s, nil
		}
		s += step
		step *= 2
	}
	return 0, errUnverified
}

// expTimes returns e^ε·p without overflowing for large ε.
func expTimes(epsilon, p float64) float64 {
	if p == 0 {
		return 0
	}
	if epsilon < 700 { // e^700 ≈ 1e304 is still finite
		return math.Exp(epsilon) * p
	}
	return math.Exp(epsilon + math.Log(p))
}

// clamp01 clamps a computed probability to [0, 1].
func clamp01(p float64) float64 {
	return math.Max(0, math.Min(1, p))
}

// logConcave is what Lemma 1 needs from a symmetric log-concave standard
// density.
type logConcave interface {
	// threshold returns lo ≤ u* ≤ hi for the given ε and d = Δ/s (hi may be
	// +Inf, and lo = +Inf means u* = +Inf).
	threshold(epsilon, d float64) (lo, hi float64)
	// survival returns S(x) = P(X > x), accurate in the upper tail.
	survival(x float64) float64
}

// survivalErr bounds the relative error of a computed tail probability
// S(x) = p, per unit of its tail exponent: |error| ≤ survivalErr·(1 + |ln p|)·p.
// A tail probability is e^{−y} times a slowly varying factor, and rounding
// the argument y costs y ulps; the functions themselves add a few ulps
// (gonum's regularized incomplete gamma function up to about 1e-14 in the
// body of the distribution). TestSurvivalAccuracy checks the bound against
// mpmath for every survival function of this package; the worst case
// measured, Subbotin_2 at x = ±1 (9.3e-15), uses a third of it.
const survivalErr = 1e-14

// lemma1 returns an upper bound on the smallest δ for which adding s·X with
// d = Δ/s is (ε, δ)-DP: Lemma 1's left side S(u*−d) − e^ε·S(u*), evaluated
// as S(lo−d) − e^ε·S(hi) on a bracket lo ≤ u* ≤ hi, with lo − d rounded
// down and survivalErr's bound on the error of both tail probabilities
// added. Callers round d upwards (dOf): δ grows with d.
func lemma1(m logConcave, epsilon, d float64) float64 {
	switch {
	case math.IsNaN(epsilon) || math.IsNaN(d) || epsilon < 0 || d < 0:
		return math.NaN()
	case d == 0:
		return 0
	case math.IsInf(d, 1):
		return 1
	}
	lo, hi := m.threshold(epsilon, d)
	if math.IsInf(lo, 1) {
		return 0
	}
	p := m.survival(math.Nextafter(lo-d, math.Inf(-1)))
	if p == 0 {
		return 0
	}
	slack := p * (1 - math.Log(p))
	q := 0.0
	if !math.IsInf(hi, 1) {
		if sh := m.survival(hi); sh > 0 {
			q = expTimes(epsilon, sh)
			slack += q * (1 - math.Log(sh))
		}
	}
	return clamp01(p - q + survivalErr*slack)
}

// dOf returns d = Δ/s rounded upwards: every criterion here is
// non-decreasing in d, so rounding d up can only overstate δ.
func dOf(sensitivity, scale float64) float64 {
	return math.Nextafter(sensitivity/scale, math.Inf(1))
}

// ulps returns the bracket u ∓ n ulps of u, for a threshold computed in
// closed form with at most n ulps of error.
func ulps(u float64, n int) (lo, hi float64) {
	lo, hi = u, u
	for range n {
		lo, hi = math.Nextafter(lo, math.Inf(-1)), math.Nextafter(hi, math.Inf(1))
	}
	return lo, hi
}

// bisectLoss brackets u* = sup{u < a : loss(u) ≤ ε} for a loss that is
// non-decreasing on [d/2, a) with loss(d/2) = 0. surv is S; the upward search
// of an infinite support stops once S(lo − d) underflows, because then δ ≤
// S(lo − d) = 0 whatever u* is. The bracket is bisected to adjacent floats.
func bisectLoss(loss func(u float64) float64, surv func(x float64) float64, epsilon, d, a float64) (lo, hi float64) {
	lo = d / 2
	if math.IsInf(a, 1) {
		hi = math.Max(2*lo, 1)
		for loss(hi) <= epsilon {
			lo = hi
			hi *= 2
			if math.IsInf(hi, 1) || surv(lo-d) == 0 {
				return lo, math.Inf(1)
			}
		}
	} else {
		// The support edge acts as a point where the loss exceeds ε: if the
		// loss stays ≤ ε up to a, the bracket closes on a (Remark 1).
		hi = a
	}
	for i := 0; i < 2100; i++ { // 2100 halvings reach adjacent floats from any bracket
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if loss(mid) <= epsilon {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, hi
}

// solveScale returns the smallest unit-sensitivity scale s with crit(s) ≤ δ,
// where crit is non-increasing in s (Lemma 1's last sentence): the upper end
// of a bisection bracket of relative width ≤ solverTol, times 1 + evalMargin,
// and re-verified. guess is any positive starting point.
func solveScale(crit func(s float64) float64, delta, guess float64) (float64, error) {
	if !(guess > 0) || math.IsInf(guess, 1) {
		guess = 1
	}
	lo, hi := guess, guess
	if crit(guess) <= delta {
		for i := 0; ; i++ {
			lo /= 2
			if i == maxBracketSteps || lo == 0 {
				return 0, fmt.Errorf("%w: the criterion holds for every scale, which no proper noise density allows", ErrInvalidParameter)
			}
			if crit(lo) > delta {
				break
			}
			hi = lo
		}
	} else {
		for i := 0; ; i++ {
			hi *= 2
			if i == maxBracketSteps || math.IsInf(hi, 1) {
				return 0, fmt.Errorf("%w: no finite scale meets δ = %v", ErrInfeasible, delta)
			}
			if crit(hi) <= delta {
				break
			}
			lo = hi
		}
	}
	for hi/lo-1 > solverTol {
		mid := math.Sqrt(lo) * math.Sqrt(hi) // geometric midpoint, no overflow
		if mid <= lo || mid >= hi {
			break
		}
		if crit(mid) <= delta {
			hi = mid
		} else {
			lo = mid
		}
	}
	return settle(roundUp(hi*(1+evalMargin), 1), func(s float64) bool { return crit(s) <= delta })
}

// scaleFor turns a unit-sensitivity scale into the scale for sensitivity Δ
// (Lemma 2: s(ε, δ, Δ) = Δ·s(ε, δ, 1)), rounded up by one ulp.
func scaleFor(unit, sensitivity float64) (float64, error) {
	s := math.Nextafter(unit*sensitivity, math.Inf(1))
	switch {
	case math.IsInf(s, 1):
		return 0, fmt.Errorf("%w: the scale overflows float64", ErrInfeasible)
	case s < 0x1p-1022: // subnormal: the rounding above is no longer relative
		return 0, fmt.Errorf("%w: sensitivity %v is too small to represent the scale", ErrInvalidParameter, sensitivity)
	}
	return s, nil
}

// finishScale turns a verified unit-sensitivity scale into the scale for
// sensitivity Δ (scaleFor) and checks the exact criterion once more at the
// actual Δ, stepping up if the rounding of Δ/s moved it.
func finishScale(unit, epsilon, delta, sensitivity float64, deltaAt func(epsilon, scale, sensitivity float64) float64) (float64, error) {
	s, err := scaleFor(unit, sensitivity)
	if err != nil {
		return 0, err
	}
	return settle(s, func(s float64) bool { return deltaAt(epsilon, s, sensitivity) <= delta })
}

// Convex is noise with a symmetric log-concave density f = e^{−ψ}, given by
// its potential ψ and CDF F: the generic form of Lemma 1 of Vinterbo (2022),
// including densities with bounded support (−a, a) (Remark 1).
//
// Convex calibrates any such noise, which makes it useful for noise shapes
// the package does not name and as an independent check of the named
// mechanisms. It has no sampler, so it is not a Mechanism.
type Convex struct {
	// Label names the noise in a Calibration; "convex" if empty.
	Label string
	// Psi is ψ = −log f up to an additive constant: even, convex, finite on
	// (−a, a) and +Inf outside it.
	Psi func(x float64) float64
	// F is the CDF of the standard variate, accurate in its lower tail
	// (the tail probabilities S(x) = F(−x) decide δ).
	F func(x float64) float64
	// Support is a, the half-width of the support; 0 or +Inf means the
	// whole real line.
	Support float64
	// LossLimit, optional, is lim_{u→∞} ψ(u) − ψ(u − d) for d > 0 (+Inf
	// or nil for MLR-unbounded noise, Definition 3). Only pure ε-DP (δ = 0)
	// needs it: noise supported on the whole line is ε-DP exactly when the
	// limit is ≤ ε.
	LossLimit func(d float64) float64
}

// Name returns the label, or "convex".
func (c Convex) Name() string {
	if c.Label == "" {
		return "convex"
	}
	return c.Label
}

// CDF returns F(x).
func (c Convex) CDF(x float64) float64 { return c.F(x) }

// support returns a, +Inf for the whole line.
func (c Convex) support() float64 {
	if c.Support == 0 || math.IsInf(c.Support, 1) {
		return math.Inf(1)
	}
	return c.Support
}

func (c Convex) check() error {
	if c.Psi == nil || c.F == nil {
		return fmt.Errorf("%w: Convex needs both Psi and F", ErrInvalidParameter)
	}
	if math.IsNaN(c.Support) || c.Support < 0 {
		return fmt.Errorf("%w: Convex support must be > 0, got %v", ErrInvalidParameter, c.Support)
	}
	return nil
}

func (c Convex) survival(x float64) float64 { return c.F(-x) }

func (c Convex) threshold(epsilon, d float64) (lo, hi float64) {
	loss := func(u float64) float64 {
		l := c.Psi(u) - c.Psi(u-d)
		if math.IsNaN(l) { // ∞ − ∞: both points outside the support
			return math.Inf(-1)
		}
		return l
	}
	return bisectLoss(loss, c.survival, epsilon, d, c.support())
}

// Delta returns the smallest δ for which adding scale·X to a query with the
// given sensitivity is (ε, δ)-DP: the left side of Lemma 1, rounded upwards.
// It is 1 when no δ < 1 works (bounded support and Δ ≥ 2a·scale), and NaN
// for invalid arguments.
func (c Convex) Delta(epsilon, scale, sensitivity float64) float64 {
	if c.check() != nil || !validScale(scale) || math.IsNaN(sensitivity) || sensitivity < 0 {
		return math.NaN()
	}
	d := dOf(sensitivity, scale)
	if a := c.support(); !math.IsInf(a, 1) && d >= 2*a {
		return 1
	}
	return lemma1(c, epsilon, d)
}

// Calibrate returns the smallest scale (upper end of a bisection bracket,
// within 1e-6 relative) for which adding scale·X to a query with the given
// sensitivity is (ε, δ)-DP. δ = 0 needs noise on the whole line and a
// LossLimit.
func (c Convex) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	if err := c.check(); err != nil {
		return Calibration{}, err
	}
	if err := checkBudget(epsilon, delta, sensitivity); err != nil {
		return Calibration{}, err
	}
	var unit float64
	var err error
	if delta == 0 {
		if !math.IsInf(c.support(), 1) || c.LossLimit == nil {
			return Calibration{}, errPure(c.Name())
		}
		// Pure ε: the smallest s with LossLimit(1/s) ≤ ε. The limit is
		// non-decreasing in d (ψ is convex), so crit is a step function
		// that bisection handles like any other criterion.
		crit := func(s float64) float64 {
			if l := c.LossLimit(dOf(1, s)); l <= epsilon {
				return 0
			}
			return 1
		}
		if crit(1e300) > 0 {
			return Calibration{}, errPure(c.Name())
		}
		unit, err = solveScale(crit, 0, 1/epsilon)
	} else {
		unit, err = solveScale(func(s float64) float64 { return c.Delta(epsilon, s, 1) }, delta, 1/epsilon)
	}
	if err != nil {
		return Calibration{}, err
	}
	s, err := scaleFor(unit, sensitivity)
	if err == nil {
		ok := func(s float64) bool { return c.Delta(epsilon, s, sensitivity) <= delta }
		if delta == 0 {
			ok = func(s float64) bool { return c.LossLimit(dOf(sensitivity, s)) <= epsilon }
		}
		s, err = settle(s, ok)
	}
	if err != nil {
		return Calibration{}, err
	}
	return Calibration{Mechanism: c.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity, Scale: s, Method: Solver}, nil
}

// validScale reports whether scale is a usable noise scale: ≥ 0, not NaN
// (+Inf is allowed and means infinite noise).
func validScale(scale float64) bool { return !math.IsNaN(scale) && scale >= 0 }

// validBeta reports whether beta is a usable tail probability, 0 < β ≤ 1.
func validBeta(beta float64) bool { return beta > 0 && beta <= 1 }

// halfWidth returns scale·q rounded up, where q is the smallest float64 with
// tail(q) ≤ β (tail(q) = P(|X| > q), non-increasing), found by bisection to
// adjacent floats from a bracket around the estimate q0 (inverse CDFs such
// as math.Erfcinv are only accurate to about 1e-7 in the far tail); it is
// the shared tail of every HalfWidth method.
func halfWidth(scale, beta, q0 float64, tail func(q float64) float64) float64 {
	if !validScale(scale) || !validBeta(beta) {
		return math.NaN()
	}
	if beta == 1 || scale == 0 {
		return 0
	}
	ok := func(q float64) bool { return tail(q) <= beta }
	q := math.Inf(1)
	if q0 > 0 && !math.IsInf(q0, 1) {
		lo, hi := q0*(1-1e-6), q0*(1+1e-6)
		for i := 0; i < 20 && (ok(lo) || !ok(hi)); i++ {
			lo, hi = lo*0.5, hi*2
		}
		if !ok(lo) && ok(hi) {
			q = bisectUp(lo, hi, ok)
		}
	}
	if math.IsInf(q, 1) {
		q = firstTrue(ok)
	}
	return math.Nextafter(scale*q, math.Inf(1))
}

// bisectUp narrows [lo, hi] with !ok(lo) and ok(hi) to adjacent floats and
// returns hi.
func bisectUp(lo, hi float64, ok func(float64) bool) float64 {
	for i := 0; i < 2100; i++ {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// firstTrue returns the smallest positive float64 q, to adjacent floats and
// from above, with ok(q), for ok false near 0 and true from some point on; it
// returns +Inf if ok never holds.
func firstTrue(ok func(q float64) bool) float64 {
	lo, hi := 0.0, 1.0
	for !ok(hi) {
		lo, hi = hi, 2*hi
		if math.IsInf(hi, 1) {
			return hi
		}
	}
	return bisectUp(lo, hi, ok)
}
