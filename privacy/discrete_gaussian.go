package privacy

import (
	"fmt"
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
)

// DiscreteGaussian is the discrete Gaussian mechanism for integer-valued
// queries (Canonne, Kamath & Steinke, "The Discrete Gaussian for
// Differential Privacy", NeurIPS 2020): the noise Y is an integer with
//
//	P(Y = k) = e^{−k²/(2σ²)} / Σ_j e^{−j²/(2σ²)},
//
// where the scale is σ > 0 (σ² is a parameter; the variance is slightly
// below σ²). The sampler (their Algorithm 3) is exact, with integer
// arithmetic only, so outputs can be published as they are.
//
// Calibration, for an integer sensitivity Δ and δ > 0: the smallest σ whose
// exact δ(ε) is ≤ δ (their Theorem 7, computed in Delta), by bisection,
// returned from the upper end. There is no pure-ε calibration (δ = 0 is
// infeasible). For vectors, the discrete Gaussian is not a drop-in for the
// analytic Gaussian with L2 sensitivity: compose coordinates or use their
// concentrated-DP bound; this calibration is one dimensional.
type DiscreteGaussian struct{}

// Name implements Mechanism.
func (m DiscreteGaussian) Name() string { return "discrete-gaussian" }

// Constants of the discrete Gaussian's numerics.
const (
	// dgEMSigma is the σ from which tail sums use the Euler–Maclaurin formula
	// (with four correction terms) instead of direct summation. Its remainder
	// is at most |B₈|/8!·∫|f⁽⁸⁾| ≤ (1/1209600)·√(2π·8!)·σ⁻⁷ ≈ 4.2e-4·σ⁻⁷,
	// i.e. below 1.7e-4·σ⁻⁸ ≤ 1.7e-28 in probability for σ ≥ 1000 (dgEMError);
	// below it direct sums take at most ~40σ terms.
	dgEMSigma = 1000
	// dgEMError bounds the Euler–Maclaurin remainder of one tail
	// probability, in absolute terms, for σ ≥ dgEMSigma.
	dgEMError = 1.7e-28
	// dgRelErr bounds the relative rounding error of a computed tail
	// probability (sums of positive terms, erfc, exp: well below 1e-14).
	dgRelErr = 1e-14
	// dgSumStop: direct sums stop when a term falls below this fraction of
	// the sum; the remaining terms, decreasing at least geometrically with
	// ratio e^{−1/(2σ²)}, add below 1e-30·2σ² ≤ 2e-24 of the sum for σ < 1000.
	dgSumStop = 1e-30
)

// Calibrate implements Mechanism. δ must be > 0 and the sensitivity an
// integer.
func (m DiscreteGaussian) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	if err := checkDiscrete(epsilon, delta, sensitivity); err != nil {
		return Calibration{}, err
	}
	if delta == 0 {
		return Calibration{}, errPure(m.Name())
	}
	ok := func(sigma float64) bool { return dgDelta(epsilon, sigma, sensitivity) <= delta }
	// Start from the classic bound Δ·√(2 ln(1.25/δ))/ε and bracket.
	hi := sensitivity * math.Sqrt(2*math.Log(1.25/delta)) / epsilon
	hi = math.Max(hi, rng.MinDiscreteScale)
	lo := hi
	if ok(hi) {
		for ok(lo) {
			hi, lo = lo, lo/2
			if lo < rng.MinDiscreteScale {
				return Calibration{}, fmt.Errorf("%w: discrete-gaussian: no usable σ found", ErrInfeasible)
			}
		}
	} else {
		for !ok(hi) {
			lo, hi = hi, hi*2
			if hi > rng.MaxDiscreteScale {
				return Calibration{}, fmt.Errorf("%w: discrete-gaussian σ exceeds the supported 2^40 (ε or δ too small for Δ)", ErrInfeasible)
			}
		}
	}
	for hi/lo-1 > discreteSolverTol {
		mid := math.Sqrt(lo * hi)
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	sigma := hi * (1 + discreteMargin)
	if !ok(sigma) {
		return Calibration{}, errUnverified
	}
	return Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity, Scale: sigma, Method: Solver}, nil
}

// Delta returns an upper bound, tight to about 1e-14 relative plus 1e-27
// absolute, on the smallest δ for which adding discrete Gaussian noise with
// parameter σ = scale to an integer query with sensitivity Δ is (ε, δ)-DP;
// NaN for invalid arguments.
func (m DiscreteGaussian) Delta(epsilon, scale, sensitivity float64) float64 {
	if !(epsilon >= 0) || !(scale > 0) || math.IsInf(scale, 0) || !(sensitivity >= 0) || sensitivity != math.Trunc(sensitivity) || math.IsInf(sensitivity, 0) {
		return math.NaN()
	}
	return dgDelta(epsilon, scale, sensitivity)
}

// dgDelta is Theorem 7 of Canonne et al.: with Y the discrete Gaussian,
//
//	δ = P(Y > εσ²/Δ − Δ/2) − e^ε·P(Y > εσ²/Δ + Δ/2),
//
// i.e. δ = T(a) − e^ε·T(a+Δ) with a = ⌊εσ²/Δ − Δ/2⌋ + 1 and T(a) = P(Y ≥ a).
// T(a) − e^ε·T(a+Δ) is P(S) − e^ε·Q(S) for the set S = {y ≥ a}, a lower
// bound on δ for every a, equal to δ at the right a; the maximum over a−1,
// a, a+1 is δ even if rounding moved a by one. The result is raised by the
// error bounds of the tail probabilities.
func dgDelta(epsilon, sigma, delta float64) float64 {
	if delta == 0 {
		return 0
	}
	tl := newDGTail(sigma)
	a := math.Floor(epsilon*sigma*sigma/delta-delta/2) + 1
	e := math.Exp(epsilon)
	best, bound := math.Inf(-1), 0.0
	for _, b := range [3]float64{a - 1, a, a + 1} {
		p, q := tl.upper(b), tl.upper(b+delta)
		if d := p - e*q; d > best {
			best = d
			bound = dgRelErr*(p+e*q) + (1+e)*tl.absErr
		}
	}
	if math.IsInf(e, 1) {
		return 0 // e^ε overflows only for ε > 709, where δ is 0 for every σ of interest
	}
	return clamp01(best + bound)
}

// dgTail computes tail probabilities T(a) = P(Y ≥ a) of the discrete
// Gaussian with parameter σ.
type dgTail struct {
	sigma  float64
	z      float64 // the normaliser Σ_j e^{−j²/(2σ²)}
	em     bool    // Euler–Maclaurin (σ ≥ dgEMSigma) or direct sums
	absErr float64 // absolute error bound of upper, beyond rounding
}

func newDGTail(sigma float64) dgTail {
	t := dgTail{sigma: sigma}
	if sigma >= dgEMSigma {
		// Poisson summation: Σ_j e^{−j²/(2σ²)} = σ√(2π)·Σ_k e^{−2π²σ²k²};
		// for σ ≥ 1000 the k ≠ 0 terms are below e^{−1.9e7}.
		t.z = sigma * math.Sqrt(2*math.Pi)
		t.em = true
		t.absErr = dgEMError
		return t
	}
	t.z = 1 + 2*t.sum(1)
	return t
}

// f is the unnormalised mass e^{−y²/(2σ²)}.
func (t dgTail) f(y float64) float64 {
	u := y / t.sigma
	return math.Exp(-0.5 * u * u)
}

// sum returns Σ_{y ≥ a} e^{−y²/(2σ²)} for an integer a ≥ 0 by direct
// summation (terms decrease from a ≥ 0 on).
func (t dgTail) sum(a float64) float64 {
	s := 0.0
	for y := a; ; y++ {
		term := t.f(y)
		s += term
		if term <= dgSumStop*s {
			return s
		}
	}
}

// emSum returns Σ_{y ≥ a} e^{−y²/(2σ²)} for an integer a ≥ 0 by the
// Euler–Maclaurin formula with p = 4:
//
//	Σ_{y≥a} f(y) = ∫_a^∞ f + f(a)/2 − Σ_{k=1..4} B_{2k}/(2k)!·f^{(2k−1)}(a) + R,
//
// where f^{(n)}(y) = (−1)^n σ^{−n} He_n(y/σ) f(y) (probabilists' Hermite
// polynomials), so the correction is f(a)·Σ_k B_{2k}/(2k)!·σ^{1−2k}·He_{2k−1}(a/σ).
func (t dgTail) emSum(a float64) float64 {
	s := t.sigma
	u := a / s
	u2 := u * u
	fa := t.f(a)
	integral := s * math.Sqrt(math.Pi/2) * math.Erfc(u/math.Sqrt2)
	he1 := u
	he3 := u * (u2 - 3)
	he5 := u * (u2*(u2-10) + 15)
	he7 := u * (u2*(u2*(u2-21)+105) - 105)
	// B2/2! = 1/12, B4/4! = −1/720, B6/6! = 1/30240, B8/8! = −1/1209600.
	corr := he1/(12*s) - he3/(720*s*s*s) + he5/(30240*math.Pow(s, 5)) - he7/(1209600*math.Pow(s, 7))
	return integral + fa/2 + fa*corr
}

// upper returns T(a) = P(Y ≥ a) for an integer a.
func (t dgTail) upper(a float64) float64 {
	if a <= 0 {
		// P(Y ≥ a) = 1 − P(Y ≤ a−1) = 1 − P(Y ≥ 1−a).
		return 1 - t.upper(1-a)
	}
	if t.em {
		return t.emSum(a) / t.z
	}
	return t.sum(a) / t.z
}

// Variance implements Mechanism: Σ y²·P(y), which is below σ² (and equal to
// it to float64 precision for σ ≥ 1000, by Poisson summation).
func (m DiscreteGaussian) Variance(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	if scale >= dgEMSigma || math.IsInf(scale, 1) {
		return scale * scale
	}
	t := newDGTail(scale)
	s := 0.0
	for y := 1.0; ; y++ {
		term := y * y * t.f(y)
		s += term
		if term <= dgSumStop*s || term == 0 {
			break
		}
	}
	return 2 * s / t.z
}

// MeanAbsError implements Mechanism: E|Y| = 2·Σ_{y≥1} y·P(y); for σ ≥ 1000
// by Euler–Maclaurin, Σ_{y≥0} y·e^{−y²/(2σ²)} = σ² − 1/12 − 1/(240σ²) + O(σ⁻⁴).
func (m DiscreteGaussian) MeanAbsError(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	if math.IsInf(scale, 1) {
		return scale
	}
	if scale >= dgEMSigma {
		return 2 * (scale*scale - 1.0/12 - 1/(240*scale*scale)) / (scale * math.Sqrt(2*math.Pi))
	}
	t := newDGTail(scale)
	s := 0.0
	for y := 1.0; ; y++ {
		term := y * t.f(y)
		s += term
		if term <= dgSumStop*s || term == 0 {
			break
		}
	}
	return 2 * s / t.z
}

// HalfWidth implements Mechanism: the smallest integer h with
// P(|Y| > h) = 2·T(h+1) ≤ β.
func (m DiscreteGaussian) HalfWidth(scale, beta float64) float64 {
	if !validScale(scale) || !validBeta(beta) {
		return math.NaN()
	}
	if math.IsInf(scale, 1) {
		return math.Inf(1)
	}
	if beta == 1 {
		return 0
	}
	t := newDGTail(scale)
	tail := func(h float64) float64 { return 2 * t.upper(h+1) }
	h := math.Max(0, math.Floor(scale*math.Sqrt2*math.Erfcinv(beta)))
	return smallestHalfWidth(h, tail, beta)
}

// Sample implements Mechanism: an exact discrete Gaussian variate (returned
// as a float64, an integer) with parameter σ = scale taken exactly (σ² is a
// dyadic rational). It returns NaN if scale is outside [2⁻³⁰, 2⁴⁰].
func (m DiscreteGaussian) Sample(s *rng.Stream, scale float64) float64 {
	if !rng.DiscreteScaleOK(scale) {
		return math.NaN()
	}
	return float64(s.DiscreteGaussian(rng.NewDGParams(scale)))
}
