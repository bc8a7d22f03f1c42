package privacy

import (
	"fmt"
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
)

// DiscreteLaplace is the discrete Laplace (two-sided geometric) mechanism for
// integer-valued queries: the noise Y is an integer with
//
//	P(Y = k) = tanh(1/(2t)) · e^{−|k|/t},
//
// where the scale t > 0 need not be an integer. Its privacy is exact: there
// is no floating-point sampling error (the sampler, Algorithm 2 of Canonne,
// Kamath & Steinke 2020, uses integer arithmetic only), so outputs can be
// published as they are.
//
// Calibration, for an integer sensitivity Δ (the query moves by at most Δ):
//
//   - δ = 0: t = Δ/ε, rounded up. The privacy loss of any output is at most
//     Δ/t, and exactly Δ/t for outputs ≤ 0, so this is tight.
//   - δ > 0: the smallest t whose exact δ(ε) — the hockey-stick divergence
//     Σ_k max(0, P(k) − e^ε·P(k − Δ)) in closed form (Delta) — is ≤ δ, found
//     by bisection and returned from the upper end. This is never larger
//     than the pure-ε scale Δ/ε and is often much smaller: the discrete
//     analogue of Theorem 3 of Vinterbo (2022) for continuous Laplace.
//
// For vectors (histograms), L1 sensitivity with the pure-ε scale gives pure
// ε-DP exactly as for continuous Laplace; the δ > 0 calibration is one
// dimensional (compose coordinates otherwise, DESIGN.md §3).
type DiscreteLaplace struct{}

// Name implements Mechanism.
func (m DiscreteLaplace) Name() string { return "discrete-laplace" }

// maxDiscreteSensitivity is the largest Δ the discrete calibrations accept:
// integers up to it are exact in float64 with room to spare.
const maxDiscreteSensitivity = 1 << 40

// checkDiscrete validates a calibration request of a discrete mechanism: the
// budget as checkBudget, and an integer sensitivity.
func checkDiscrete(epsilon, delta, sensitivity float64) error {
	if err := checkBudget(epsilon, delta, sensitivity); err != nil {
		return err
	}
	if sensitivity != math.Trunc(sensitivity) || sensitivity > maxDiscreteSensitivity {
		return fmt.Errorf("%w: a discrete mechanism needs an integer sensitivity Δ ≤ 2^40, got %v", ErrInvalidParameter, sensitivity)
	}
	return nil
}

// Precision constants of the discrete calibrations.
const (
	// discreteSolverTol is the relative bracket width at which the scale
	// bisections stop.
	discreteSolverTol = 1e-10
	// discreteMargin is added (relatively) to a bisection result before it is
	// verified. The computed δ(t) of DiscreteLaplace has a relative error
	// below 1e-13 (sums of positive terms from expm1, exp and tanh), and
	// d ln δ / d ln t ≤ −0.5 over the supported range, so a 1e-9 increase of
	// t covers it 5000 times over; it stays far inside the 1e-6 accuracy
	// target of DESIGN.md §2.
	discreteMargin = 1e-9
)

// Calibrate implements Mechanism. The sensitivity must be an integer.
func (m DiscreteLaplace) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	if err := checkDiscrete(epsilon, delta, sensitivity); err != nil {
		return Calibration{}, err
	}
	c := Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity, Method: ClosedForm}
	// The computed quotient is within half an ulp of Δ/ε; one step up is
	// above it.
	pure := math.Nextafter(sensitivity/epsilon, math.Inf(1))
	if pure > rng.MaxDiscreteScale {
		return Calibration{}, fmt.Errorf("%w: discrete-laplace scale %.3g exceeds the supported 2^40 (ε too small for Δ)", ErrInfeasible, pure)
	}
	c.Scale = pure
	if delta == 0 || dlapDelta(epsilon, pure, sensitivity) > delta {
		return c, nil
	}
	ok := func(t float64) bool { return dlapDelta(epsilon, t, sensitivity) <= delta }
	lo := pure / 2
	for ok(lo) {
		lo /= 2
		if lo < rng.MinDiscreteScale {
			return c, nil // pathological: keep the pure-ε scale
		}
	}
	hi := pure
	for hi/lo-1 > discreteSolverTol {
		mid := math.Sqrt(lo * hi)
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	t := math.Min(pure, hi*(1+discreteMargin))
	if !ok(t) {
		t = pure
	}
	c.Scale, c.Method = t, Solver
	return c, nil
}

// Delta returns the smallest δ for which adding discrete Laplace noise of
// scale t to an integer query with sensitivity Δ is (ε, δ)-DP; NaN for
// invalid arguments. The sampler uses t rounded up to a dyadic rational
// (only below 2⁻¹⁰), which can only lower δ.
func (m DiscreteLaplace) Delta(epsilon, scale, sensitivity float64) float64 {
	if !(epsilon >= 0) || !(scale > 0) || !(sensitivity >= 0) || sensitivity != math.Trunc(sensitivity) || math.IsInf(sensitivity, 0) {
		return math.NaN()
	}
	return dlapDelta(epsilon, scale, sensitivity)
}

// dlapDelta is the hockey-stick divergence of discrete Laplace noise with
// scale t and an integer shift Δ. With q = e^{−1/t}, P(k) = c·q^{|k|},
// c = tanh(1/(2t)), the privacy loss log P(k)/P(k−Δ) is Δ/t for k ≤ 0,
// (Δ−2k)/t for 0 < k < Δ and −Δ/t for k ≥ Δ. If Δ/t ≤ ε, δ = 0; otherwise
//
//	δ = (1 − e^{ε−Δ/t})/(1+q)                          [k ≤ 0]
//	  + Σ_{0<k<(Δ−εt)/2} c·q^k·(1 − e^{ε−(Δ−2k)/t})    [0 < k < Δ].
//
// The middle sum is summed in closed form over the terms that are
// certainly positive, (1−q^K)/(1+q) · q · (1 − e^{ε−(Δ−K−1)/t}) for k ≤ K,
// and term by term, each clipped at 0, over the few near the boundary.
// Every factor is a positive quantity from expm1/exp/tanh: no cancellation.
func dlapDelta(epsilon, t, delta float64) float64 {
	d := delta / t
	if d <= epsilon {
		return 0
	}
	q := math.Exp(-1 / t)
	sum := -math.Expm1(epsilon-d) / (1 + q)
	kStar := math.Ceil((delta-epsilon*t)/2) - 1 // last k with (Δ−2k)/t > ε, ±1
	k0 := math.Min(kStar-2, delta-1)
	if k0 >= 1 {
		sum += -math.Expm1(-k0/t) / (1 + q) * q * -math.Expm1(epsilon-(delta-k0-1)/t)
	} else {
		k0 = 0
	}
	c := math.Tanh(1 / (2 * t))
	for k := k0 + 1; k <= math.Min(k0+4, delta-1); k++ {
		if term := -math.Expm1(epsilon - (delta-2*k)/t); term > 0 {
			sum += c * math.Exp(-k/t) * term
		}
	}
	return clamp01(sum)
}

// Variance implements Mechanism: 2q/(1−q)² = 1/(2·sinh²(1/(2t))), q = e^{−1/t}.
func (m DiscreteLaplace) Variance(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	sh := math.Sinh(1 / (2 * scale))
	return 1 / (2 * sh * sh)
}

// MeanAbsError implements Mechanism: E|Y| = 2q/(1−q²) = 1/sinh(1/t).
func (m DiscreteLaplace) MeanAbsError(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return 1 / math.Sinh(1/scale)
}

// HalfWidth implements Mechanism: the smallest integer h with
// P(|Y| > h) = 2q^{h+1}/(1+q) ≤ β.
func (m DiscreteLaplace) HalfWidth(scale, beta float64) float64 {
	if !validScale(scale) || !validBeta(beta) {
		return math.NaN()
	}
	if math.IsInf(scale, 1) {
		return math.Inf(1)
	}
	q := math.Exp(-1 / scale)
	tail := func(h float64) float64 { return 2 * math.Exp(-(h+1)/scale) / (1 + q) }
	h := math.Max(0, math.Ceil(scale*math.Log(2/(beta*(1+q)))-1))
	return smallestHalfWidth(h, tail, beta)
}

// smallestHalfWidth returns the smallest integer h ≥ 0 with tail(h) ≤ beta,
// starting the search at the estimate h0; tail(h) = P(|noise| > h) must be
// non-increasing in h.
func smallestHalfWidth(h0 float64, tail func(float64) float64, beta float64) float64 {
	h := h0
	for h > 0 && tail(h-1) <= beta {
		h--
	}
	for tail(h) > beta {
		h++
	}
	return h
}

// Sample implements Mechanism: an exact discrete Laplace variate (returned
// as a float64, an integer) with scale t rounded up to a dyadic rational
// (exact for every t ≥ 2⁻¹⁰). It returns NaN if scale is outside
// [2⁻³⁰, 2⁴⁰].
func (m DiscreteLaplace) Sample(s *rng.Stream, scale float64) float64 {
	if !rng.DiscreteScaleOK(scale) {
		return math.NaN()
	}
	t, d := rng.DyadicUp(scale)
	return float64(s.DiscreteLaplace(t, d))
}
