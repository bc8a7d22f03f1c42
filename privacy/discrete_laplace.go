package privacy

// DiscreteLaplace — STUB: replaced by the calibration work (issue 2).
type DiscreteLaplace struct{}

// Name implements Mechanism.
func (m DiscreteLaplace) Name() string { return "discrete-laplace" }

// Calibrate implements Mechanism.
func (m DiscreteLaplace) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	return Calibration{}, ErrInfeasible
}

// Variance implements Mechanism.
func (m DiscreteLaplace) Variance(scale float64) float64 { return 0 }

// MeanAbsError implements Mechanism.
func (m DiscreteLaplace) MeanAbsError(scale float64) float64 { return 0 }

// HalfWidth implements Mechanism.
func (m DiscreteLaplace) HalfWidth(scale, beta float64) float64 { return 0 }
