package privacy

import "math"

// Gaussian is the analytic Gaussian mechanism of Balle and Wang (2018): X is
// standard normal, variance 1 and E|X| = √(2/π).
//
// Calibrate solves condition (3) of Theorem 5 in Vinterbo (2022), necessary
// and sufficient:
//
//	Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) ≤ δ,
//
// for the smallest σ, by table lookup on the generated grid and by bisection
// elsewhere. The condition is also exact for a vector with L2 sensitivity Δ.
// Gaussian noise is MLR-unbounded, so δ must be > 0 (Theorem 6).
type Gaussian struct{}

// Name implements Mechanism.
func (m Gaussian) Name() string { return "gaussian" }

// Calibrate implements Mechanism: a verified table lookup where (ε, δ) is on
// the table's grid, the bisection solver elsewhere.
func (m Gaussian) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	if err := checkBudget(epsilon, delta, sensitivity); err != nil {
		return Calibration{}, err
	}
	if delta == 0 {
		return Calibration{}, errPure(m.Name())
	}
	s, method, err := calibrateScale(gaussianKey, epsilon, delta, sensitivity, gaussianSolve, m.Delta)
	if err != nil {
		return Calibration{}, err
	}
	return Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity, Scale: s, Method: method}, nil
}

// gaussianKey names the Gaussian scale table.
var gaussianKey = tableKey{family: "gaussian"}

// gaussianSolve is the unit-sensitivity solver of condition (3).
func gaussianSolve(epsilon, delta float64) (float64, error) {
	// Starting point: the classic bound √(2 ln(1.25/δ))/ε; the bracket
	// search corrects it where it is off.
	guess := math.Sqrt(2*math.Log(1.25/delta)) / epsilon
	return solveScale(func(s float64) float64 { return lemma1(Gaussian{}, epsilon, dOf(1, s)) }, delta, guess)
}

// Delta returns the smallest δ for which adding scale·X to a query with the
// given sensitivity is (ε, δ)-DP: the left side of condition (3). It is NaN
// for invalid arguments.
func (m Gaussian) Delta(epsilon, scale, sensitivity float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return lemma1(m, epsilon, dOf(sensitivity, scale))
}

// threshold: ψ(x) = x²/2, so L(u) = u·d − d²/2 and u* = ε/d + d/2 in closed
// form (one rounding, bracketed by 2 ulps); (3) is Lemma 1 at this u*.
func (m Gaussian) threshold(epsilon, d float64) (lo, hi float64) {
	return ulps(epsilon/d+d/2, 2)
}

// survival returns P(Z > x) = erfc(x/√2)/2.
func (m Gaussian) survival(x float64) float64 { return math.Erfc(x/math.Sqrt2) / 2 }

// CDF returns Φ(x), the standard normal CDF.
func (m Gaussian) CDF(x float64) float64 { return m.survival(-x) }

// Variance implements Mechanism: scale².
func (m Gaussian) Variance(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return scale * scale
}

// MeanAbsError implements Mechanism: E|scale·Z| = √(2/π)·scale.
func (m Gaussian) MeanAbsError(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return math.Sqrt(2/math.Pi) * scale
}

// HalfWidth implements Mechanism: P(|Z| > q) = erfc(q/√2), so
// q = √2·erfcinv(β).
func (m Gaussian) HalfWidth(scale, beta float64) float64 {
	return halfWidth(scale, beta, math.Sqrt2*math.Erfcinv(beta), gaussianTail)
}

// gaussianTail is P(|Z| > q).
func gaussianTail(q float64) float64 { return math.Erfc(q / math.Sqrt2) }
