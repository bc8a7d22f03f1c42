package privacy

// Cauchy — STUB: replaced by the calibration work (issue 2).
type Cauchy struct{}

// Name implements Mechanism.
func (m Cauchy) Name() string { return "cauchy" }

// Calibrate implements Mechanism.
func (m Cauchy) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	return Calibration{}, ErrInfeasible
}

// Variance implements Mechanism.
func (m Cauchy) Variance(scale float64) float64 { return 0 }

// MeanAbsError implements Mechanism.
func (m Cauchy) MeanAbsError(scale float64) float64 { return 0 }

// HalfWidth implements Mechanism.
func (m Cauchy) HalfWidth(scale, beta float64) float64 { return 0 }
