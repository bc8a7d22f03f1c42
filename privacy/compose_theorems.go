package privacy

import (
	"fmt"
)

// calibrateBasic gives every one of the N = Σ nᵢ coordinates the budget
// (ε/N, δ/N) and calibrates each part with its own exact one-dimensional
// calibration.
func calibrateBasic(total Budget, ps []calPart) (calCandidate, error) {
	n := 0
	for _, p := range ps {
		n += p.n
	}
	per := Budget{Epsilon: total.Epsilon / float64(n) * (1 - 4*roundoff), Delta: total.Delta / float64(n) * (1 - 4*roundoff)}
	scales := make([]float64, len(ps))
	for i, p := range ps {
		c, err := p.Mechanism.Calibrate(per.Epsilon, per.Delta, p.Linf)
		if err != nil {
			return calCandidate{}, err
		}
		scales[i] = c.Scale
	}
	return calCandidate{acct: AccountBasic, method: Solver, scales: scales, cert: total.Delta}, nil
}

// advancedSplits are the fractions of δ given to the per-coordinate δ₀
// (the rest is the theorem's δ'); the best is kept.
var advancedSplits = []float64{0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9}

// calibrateAdvanced applies the advanced composition theorem over the
// N = Σ nᵢ coordinates: each is (ε₀, δ₀)-DP with N·δ₀ + δ' = δ and
// √(2N·ln(1/δ'))·ε₀ + N·ε₀·(e^{ε₀} − 1) = ε.
func calibrateAdvanced(total Budget, ps []calPart) (calCandidate, error) {
	if !(total.Delta > 0) {
		return calCandidate{}, fmt.Errorf("%w: advanced composition needs δ > 0", ErrInfeasible)
	}
	n := 0
	for _, p := range ps {
		n += p.n
	}
	var best calCandidate
	found := false
	var lastErr error
	for _, f := range advancedSplits {
		dPrime := total.Delta * (1 - f) * (1 - 4*roundoff)
		d0 := total.Delta * f / float64(n) * (1 - 4*roundoff)
		e0 := advancedPerStep(total.Epsilon, n, dPrime)
		if !(e0 > 0) {
			continue
		}
		scales := make([]float64, len(ps))
		ok := true
		for i, p := range ps {
			c, err := p.Mechanism.Calibrate(e0, d0, p.Linf)
			if err != nil {
				lastErr = err
				ok = false
				break
			}
			scales[i] = c.Scale
		}
		if !ok {
			continue
		}
		c := calCandidate{acct: AccountAdvanced, method: Solver, scales: scales, cert: total.Delta}
		if !found || calLevel(c, ps) < calLevel(best, ps) {
			best, found = c, true
		}
	}
	if !found {
		if lastErr == nil {
			lastErr = fmt.Errorf("%w: advanced composition leaves no per-step ε", ErrInfeasible)
		}
		return calCandidate{}, lastErr
	}
	return best, nil
}
