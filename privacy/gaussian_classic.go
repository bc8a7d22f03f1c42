package privacy

import (
	"fmt"
	"math"
)

// GaussianClassic is Gaussian noise calibrated with the classic bound
// σ = Δ·√(2·ln(1.25/δ))/ε (Dwork and Roth 2014, Theorem A.1), which is proven
// only for ε < 1 and is loose: it is offered for comparison and labelled as
// such. Use Gaussian for the exact (analytic) scale of the same noise.
type GaussianClassic struct{}

// Name implements Mechanism.
func (m GaussianClassic) Name() string { return "gaussian-classic" }

// Calibrate implements Mechanism with the classic closed form, rounded up.
// It refuses ε ≥ 1, where the bound is not proven, and δ = 0.
func (m GaussianClassic) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	if err := checkBudget(epsilon, delta, sensitivity); err != nil {
		return Calibration{}, err
	}
	if delta == 0 {
		return Calibration{}, errPure(m.Name())
	}
	if epsilon >= 1 {
		return Calibration{}, fmt.Errorf("%w: the classic Gaussian bound is proven only for ε < 1, got ε = %v; use gaussian", ErrInfeasible, epsilon)
	}
	// About 6 roundings (log, two products, sqrt, quotient); rounded up by 8
	// ulps. The exact criterion then confirms the bound (it always holds,
	// with room to spare: the classic bound is loose).
	s := roundUp(sensitivity*math.Sqrt(2*math.Log(1.25/delta))/epsilon, 8)
	if math.IsInf(s, 1) {
		return Calibration{}, fmt.Errorf("%w: the scale overflows float64", ErrInfeasible)
	}
	s, err := settle(s, func(s float64) bool { return m.Delta(epsilon, s, sensitivity) <= delta })
	if err != nil {
		return Calibration{}, err
	}
	return Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity, Scale: s, Method: ClosedForm}, nil
}

// Delta returns the exact smallest δ at this scale: the same as Gaussian's,
// since the noise is the same.
func (m GaussianClassic) Delta(epsilon, scale, sensitivity float64) float64 {
	return Gaussian{}.Delta(epsilon, scale, sensitivity)
}

// CDF returns Φ(x), the standard normal CDF.
func (m GaussianClassic) CDF(x float64) float64 { return Gaussian{}.CDF(x) }

// Variance implements Mechanism: scale².
func (m GaussianClassic) Variance(scale float64) float64 { return Gaussian{}.Variance(scale) }

// MeanAbsError implements Mechanism: √(2/π)·scale.
func (m GaussianClassic) MeanAbsError(scale float64) float64 {
	return Gaussian{}.MeanAbsError(scale)
}

// HalfWidth implements Mechanism: as for Gaussian.
func (m GaussianClassic) HalfWidth(scale, beta float64) float64 {
	return Gaussian{}.HalfWidth(scale, beta)
}
