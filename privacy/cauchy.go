package privacy

import "math"

// Cauchy is the Cauchy mechanism: X has density 1/(π(1+x²)), the symmetric
// α-stable law with α = 1.
//
// Guarantee: pure ε-DP. With scale γ and sensitivity Δ the privacy loss
// log(1+((x−Δ)/γ)²) − log(1+(x/γ)²) peaks at ε = 2·asinh(Δ/(2γ)) (Zawacki &
// Abed, Theorem 25), so the smallest scale is γ = Δ/(2·sinh(ε/2)), computed
// in closed form and rounded up. δ is validated and ignored: the returned
// Calibration is pure (Delta = 0) for every requested δ. ε above 1000 is
// rejected (the scale would approach the float64 underflow).
//
// The mean and the variance do not exist: MeanAbsError and Variance are
// +Inf. The useful error figure is the median absolute error, which equals
// the scale (P(|X| > 1) = 1/2); see MedianAbsError and HalfWidth.
type Cauchy struct{}

// Name implements Mechanism.
func (m Cauchy) Name() string { return "cauchy" }

// Calibrate implements Mechanism with the closed form γ = Δ/(2·sinh(ε/2)),
// rounded up by 8 ulps (sinh, the product and the quotient carry a few ulps
// of error) and verified against ε = 2·asinh(Δ/(2γ)) as Epsilon computes it
// (rounded up), so that Epsilon(scale, Δ) ≤ ε always holds.
func (m Cauchy) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	if err := checkBudget(epsilon, delta, sensitivity); err != nil {
		return Calibration{}, err
	}
	if err := checkStableEpsilon(m.Name(), epsilon); err != nil {
		return Calibration{}, err
	}
	unit, err := settle(roundUp(1/(2*math.Sinh(epsilon/2)), 8), func(s float64) bool { return cauchyEpsilonUp(1/s) <= epsilon })
	if err != nil {
		return Calibration{}, err
	}
	s, err := scaleFor(unit, sensitivity)
	if err != nil {
		return Calibration{}, err
	}
	return Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: 0, Sensitivity: sensitivity, Scale: s, Method: ClosedForm}, nil
}

// cauchyEpsilonUp is the exact pure ε at d = Δ/γ, 2·asinh(d/2), rounded up
// by 4 ulps (asinh's error and the scaling).
func cauchyEpsilonUp(d float64) float64 { return roundUp(2*math.Asinh(d/2), 4) }

// Epsilon returns the pure ε of scale·X for the given sensitivity,
// 2·asinh(Δ/(2·scale)), rounded up. It is +Inf for scale 0 and NaN for an
// invalid scale or sensitivity.
func (m Cauchy) Epsilon(scale, sensitivity float64) float64 {
	if !validScale(scale) || !(sensitivity > 0) || math.IsInf(sensitivity, 1) {
		return math.NaN()
	}
	if scale == 0 {
		return math.Inf(1)
	}
	return cauchyEpsilonUp(sensitivity / scale)
}

// PDF returns the standard Cauchy density 1/(π(1+x²)).
func (m Cauchy) PDF(x float64) float64 {
	x = math.Abs(x)
	if x > 1e150 { // x² would overflow
		return 1 / (math.Pi * x) / x
	}
	return 1 / (math.Pi * (1 + x*x))
}

// cauchyLogPDF is log of the standard Cauchy density, without overflow for
// large |x|.
func cauchyLogPDF(x float64) float64 {
	x = math.Abs(x)
	if x > 1 {
		return -math.Log(math.Pi) - 2*math.Log(x) - math.Log1p(1/(x*x))
	}
	return -math.Log(math.Pi) - math.Log1p(x*x)
}

// CDF returns P(X ≤ x) = 1/2 + atan(x)/π, written as atan(1/|x|)/π in the
// tails so that small probabilities keep their relative precision.
func (m Cauchy) CDF(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return x
	case x < -1:
		return math.Atan(-1/x) / math.Pi
	case x > 1:
		return 1 - math.Atan(1/x)/math.Pi
	}
	return 0.5 + math.Atan(x)/math.Pi
}

// Variance implements Mechanism: +Inf (0 for scale 0, NaN for an invalid
// scale).
func (m Cauchy) Variance(scale float64) float64 { return infiniteMoment(scale) }

// MeanAbsError implements Mechanism: +Inf, since E|X| does not exist for
// Cauchy noise (0 for scale 0, NaN for an invalid scale). Use
// MedianAbsError.
func (m Cauchy) MeanAbsError(scale float64) float64 { return infiniteMoment(scale) }

// MedianAbsError returns the median of |scale·X|, which is the scale itself.
func (m Cauchy) MedianAbsError(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return scale
}

// HalfWidth implements Mechanism: P(|X| > q) = (2/π)·atan(1/q), so
// q = cot(πβ/2), rounded up.
func (m Cauchy) HalfWidth(scale, beta float64) float64 {
	return halfWidth(scale, beta, 1/math.Tan(math.Pi*beta/2), func(q float64) float64 { return 2 / math.Pi * math.Atan(1/q) })
}
