package privacy

// Laplace — STUB: replaced by the calibration work (issue 2).
type Laplace struct{}

// Name implements Mechanism.
func (m Laplace) Name() string { return "laplace" }

// Calibrate implements Mechanism.
func (m Laplace) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	return Calibration{}, ErrInfeasible
}

// Variance implements Mechanism.
func (m Laplace) Variance(scale float64) float64 { return 0 }

// MeanAbsError implements Mechanism.
func (m Laplace) MeanAbsError(scale float64) float64 { return 0 }

// HalfWidth implements Mechanism.
func (m Laplace) HalfWidth(scale, beta float64) float64 { return 0 }
