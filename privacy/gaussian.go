package privacy

// Gaussian — STUB: replaced by the calibration work (issue 2).
type Gaussian struct{}

// Name implements Mechanism.
func (m Gaussian) Name() string { return "gaussian" }

// Calibrate implements Mechanism.
func (m Gaussian) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	return Calibration{}, ErrInfeasible
}

// Variance implements Mechanism.
func (m Gaussian) Variance(scale float64) float64 { return 0 }

// MeanAbsError implements Mechanism.
func (m Gaussian) MeanAbsError(scale float64) float64 { return 0 }

// HalfWidth implements Mechanism.
func (m Gaussian) HalfWidth(scale, beta float64) float64 { return 0 }
