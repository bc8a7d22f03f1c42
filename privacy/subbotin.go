package privacy

// Subbotin — STUB: replaced by the calibration work (issue 2).
type Subbotin struct{ R float64 }

// NewSubbotin returns Subbotin_R noise, R ≥ 1.
func NewSubbotin(r float64) (Subbotin, error) { return Subbotin{R: r}, nil }

// Name implements Mechanism.
func (m Subbotin) Name() string { return "subbotin" }

// Calibrate implements Mechanism.
func (m Subbotin) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	return Calibration{}, ErrInfeasible
}

// Variance implements Mechanism.
func (m Subbotin) Variance(scale float64) float64 { return 0 }

// MeanAbsError implements Mechanism.
func (m Subbotin) MeanAbsError(scale float64) float64 { return 0 }

// HalfWidth implements Mechanism.
func (m Subbotin) HalfWidth(scale, beta float64) float64 { return 0 }
