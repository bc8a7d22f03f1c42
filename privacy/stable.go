package privacy

// Stable — STUB: replaced by the calibration work (issue 2).
type Stable struct{ Alpha float64 }

// NewStable returns symmetric α-stable noise, 1 ≤ α < 2.
func NewStable(alpha float64) (Stable, error) { return Stable{Alpha: alpha}, nil }

// Name implements Mechanism.
func (m Stable) Name() string { return "sas" }

// Calibrate implements Mechanism.
func (m Stable) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	return Calibration{}, ErrInfeasible
}

// Variance implements Mechanism.
func (m Stable) Variance(scale float64) float64 { return 0 }

// MeanAbsError implements Mechanism.
func (m Stable) MeanAbsError(scale float64) float64 { return 0 }

// HalfWidth implements Mechanism.
func (m Stable) HalfWidth(scale, beta float64) float64 { return 0 }
