package privacy

// GaussianClassic — STUB: replaced by the calibration work (issue 2).
type GaussianClassic struct{}

// Name implements Mechanism.
func (m GaussianClassic) Name() string { return "gaussian-classic" }

// Calibrate implements Mechanism.
func (m GaussianClassic) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	return Calibration{}, ErrInfeasible
}

// Variance implements Mechanism.
func (m GaussianClassic) Variance(scale float64) float64 { return 0 }

// MeanAbsError implements Mechanism.
func (m GaussianClassic) MeanAbsError(scale float64) float64 { return 0 }

// HalfWidth implements Mechanism.
func (m GaussianClassic) HalfWidth(scale, beta float64) float64 { return 0 }
