package privacy

import (
	"fmt"
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
)

// Selection is the accounting of a pure ε-DP selection — the exponential
// mechanism or permute-and-flip over a utility of sensitivity Δ — as a
// Part of a release: at "scale" s and sensitivity Δ one selection is
// (Δ/s)-DP (the selection's ε is 1/s per unit of Δ), so a Part of L0
// selections at Linf = Δ composes like pure-ε Laplace noise (ε adds up)
// in the pure accountant, and as randomized response at Δ/s (which
// dominates every ε-DP mechanism, Kairouz, Oh & Viswanath 2017) in the
// PLD accountant (NewPLD does not know it; calPartPLD falls back to
// randomized response through Epsilon).
//
// It adds no noise: Sample and HalfWidth return NaN, Variance and
// MeanAbsError +Inf (the error is the selection's, not a noise's). It is
// not a mechanism Parse knows or "auto" compares; the quantiles aggregate
// uses it for its exponential mechanism (package quantile, Exponential).
type Selection struct{}

// Name implements Mechanism.
func (Selection) Name() string { return "exponential" }

// Calibrate implements Mechanism: the scale Δ/ε, rounded up (pure ε; a
// δ > 0 is not used).
func (m Selection) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	if err := checkBudget(epsilon, delta, sensitivity); err != nil {
		return Calibration{}, err
	}
	s := math.Nextafter(sensitivity/epsilon, math.Inf(1))
	if !(s > 0) || math.IsInf(s, 0) {
		return Calibration{}, fmt.Errorf("%w: selection scale %v", ErrInfeasible, s)
	}
	return Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity, Scale: s, Method: ClosedForm}, nil
}

// Epsilon returns the selection's pure ε at the given scale and
// sensitivity, Δ/s rounded up.
func (Selection) Epsilon(scale, sensitivity float64) float64 {
	return math.Nextafter(sensitivity/scale, math.Inf(1))
}

// Variance implements Mechanism: +Inf (no additive noise).
func (Selection) Variance(float64) float64 { return math.Inf(1) }

// MeanAbsError implements Mechanism: +Inf (no additive noise).
func (Selection) MeanAbsError(float64) float64 { return math.Inf(1) }

// HalfWidth implements Mechanism: NaN (no additive noise).
func (Selection) HalfWidth(float64, float64) float64 { return math.NaN() }

// Sample implements Mechanism: NaN (no additive noise).
func (Selection) Sample(*rng.Stream, float64) float64 { return math.NaN() }
