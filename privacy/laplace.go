package privacy

import "math"

// Laplace is the Laplace mechanism: X has density e^{−|x|}/2 (Subbotin_1),
// variance 2 and E|X| = 1.
//
// Calibrate uses Theorem 3 of Vinterbo (2022), necessary and sufficient:
// s = Δ / (ε − 2·log(1 − δ)). With δ = 0 it is the classic pure ε-DP scale
// Δ/ε. For a vector, Laplace noise with L1 sensitivity gives pure ε-DP (the
// paper's (ε, δ) claim for vectors, Remark 7, is part of the invalid
// Section 4 and is not used).
type Laplace struct{}

// Name implements Mechanism.
func (m Laplace) Name() string { return "laplace" }

// Calibrate implements Mechanism with Theorem 3's closed form, rounded up and
// verified with Delta.
func (m Laplace) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	if err := checkBudget(epsilon, delta, sensitivity); err != nil {
		return Calibration{}, err
	}
	s, err := laplaceScale(epsilon, delta, sensitivity)
	if err != nil {
		return Calibration{}, err
	}
	return Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity, Scale: s, Method: ClosedForm}, nil
}

// laplaceScale is Theorem 3 for validated arguments: the closed form carries
// at most 3 ulps of rounding error (log1p, the sum, the quotient), so it is
// rounded up by 4 ulps and then verified.
func laplaceScale(epsilon, delta, sensitivity float64) (float64, error) {
	s := roundUp(sensitivity/(epsilon-2*math.Log1p(-delta)), 4)
	if math.IsInf(s, 1) {
		return 0, errUnverified
	}
	return settle(s, func(s float64) bool { return laplaceDelta(epsilon, dOf(sensitivity, s)) <= delta })
}

// laplaceDelta is Lemma 1 for Laplace noise with d = Δ/s: L(u) = 2u − d on
// [d/2, d] and d beyond, so δ = 0 if d ≤ ε and otherwise u* = (ε+d)/2 and
// δ = S((ε−d)/2) − e^ε·S((ε+d)/2) = 1 − e^{(ε−d)/2}.
func laplaceDelta(epsilon, d float64) float64 {
	switch {
	case math.IsNaN(epsilon) || math.IsNaN(d) || epsilon < 0 || d < 0:
		return math.NaN()
	case d <= epsilon:
		return 0
	}
	return clamp01(-math.Expm1((epsilon - d) / 2))
}

// Delta returns the smallest δ for which adding scale·X to a query with the
// given sensitivity is (ε, δ)-DP: 1 − e^{(ε − Δ/scale)/2}, or 0 when
// scale ≥ Δ/ε. It is NaN for invalid arguments.
func (m Laplace) Delta(epsilon, scale, sensitivity float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return laplaceDelta(epsilon, dOf(sensitivity, scale))
}

// CDF returns P(X ≤ x) for the standard Laplace variate.
func (m Laplace) CDF(x float64) float64 {
	if x < 0 {
		return math.Exp(x) / 2
	}
	return 1 - math.Exp(-x)/2
}

// Variance implements Mechanism: 2·scale².
func (m Laplace) Variance(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return 2 * scale * scale
}

// MeanAbsError implements Mechanism: E|scale·X| = scale.
func (m Laplace) MeanAbsError(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return scale
}

// HalfWidth implements Mechanism: P(|X| > q) = e^{−q}, so q = ln(1/β).
func (m Laplace) HalfWidth(scale, beta float64) float64 {
	return halfWidth(scale, beta, -math.Log(beta), func(q float64) float64 { return math.Exp(-q) })
}
