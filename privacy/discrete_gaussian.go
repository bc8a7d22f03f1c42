package privacy

// DiscreteGaussian — STUB: replaced by the calibration work (issue 2).
type DiscreteGaussian struct{}

// Name implements Mechanism.
func (m DiscreteGaussian) Name() string { return "discrete-gaussian" }

// Calibrate implements Mechanism.
func (m DiscreteGaussian) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	return Calibration{}, ErrInfeasible
}

// Variance implements Mechanism.
func (m DiscreteGaussian) Variance(scale float64) float64 { return 0 }

// MeanAbsError implements Mechanism.
func (m DiscreteGaussian) MeanAbsError(scale float64) float64 { return 0 }

// HalfWidth implements Mechanism.
func (m DiscreteGaussian) HalfWidth(scale, beta float64) float64 { return 0 }
