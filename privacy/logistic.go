package privacy

// Logistic — STUB: replaced by the calibration work (issue 2).
type Logistic struct{}

// Name implements Mechanism.
func (m Logistic) Name() string { return "logistic" }

// Calibrate implements Mechanism.
func (m Logistic) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	return Calibration{}, ErrInfeasible
}

// Variance implements Mechanism.
func (m Logistic) Variance(scale float64) float64 { return 0 }

// MeanAbsError implements Mechanism.
func (m Logistic) MeanAbsError(scale float64) float64 { return 0 }

// HalfWidth implements Mechanism.
func (m Logistic) HalfWidth(scale, beta float64) float64 { return 0 }
