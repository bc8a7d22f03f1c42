package privacy

// compose_after.go calibrates the rest of a horizon after part of it was
// spent by other mechanisms (a configuration changed in the middle of a
// horizon): the composition of what was spent and of the releases left is
// computed — a PLD of the heterogeneous mechanisms, or pure ε added up —
// and the releases left get the smallest noise level for which it meets
// the total.

import (
	"fmt"
	"math"
)

// Spent is a run of releases already made: Windows releases, in each of
// which one unit changes at most L0 coordinates of every Part by at most
// its Linf, noised with the part's mechanism at Scales[i] per coordinate.
type Spent struct {
	Parts   []Part
	Scales  []float64
	Windows int
}

// spentParts validates prior and returns its parts as the accountants see
// them (n = Windows·L0 compositions each) with their scales.
func spentParts(prior []Spent) ([]calPart, []float64, error) {
	var ps []calPart
	var scales []float64
	for j, s := range prior {
		if len(s.Parts) == 0 || len(s.Parts) != len(s.Scales) {
			return nil, nil, fmt.Errorf("%w: spent run %d: %d parts and %d scales", ErrInvalidParameter, j, len(s.Parts), len(s.Scales))
		}
		for i, p := range s.Parts {
			sc := s.Scales[i]
			if !(sc > 0) || math.IsInf(sc, 0) {
				return nil, nil, fmt.Errorf("%w: spent run %d, part %d: scale %v: want a finite scale > 0", ErrInvalidParameter, j, i, sc)
			}
			p.Weight = 0
			c, err := checkParts(Budget{Epsilon: 1}, s.Windows, []Part{p})
			if err != nil {
				return nil, nil, fmt.Errorf("spent run %d: %w", j, err)
			}
			ps = append(ps, c[0])
			scales = append(scales, sc)
		}
	}
	return ps, scales, nil
}

// CalibrateAfter calibrates `windows` releases of parts that follow the
// releases in prior, so that all of them together meet the total budget:
// CalibrateParts with a fixed prefix. Accountant a is Tightest (the
// smaller of the two below), AccountPLD (the composed PLD of the prior's
// and the new parts, δ > 0) or AccountPure (pure ε adds up exactly; every
// mechanism must have a pure ε); others cannot compose a fixed prefix
// (ErrUnsupported). When the prior alone exhausts the budget the error is
// ErrInfeasible. With no prior it is CalibrateParts.
func CalibrateAfter(a Accounting, total Budget, prior []Spent, windows int, parts []Part) ([]Plan, error) {
	if len(prior) == 0 {
		return CalibrateParts(a, total, windows, parts)
	}
	ps, err := checkParts(total, windows, parts)
	if err != nil {
		return nil, err
	}
	pp, psc, err := spentParts(prior)
	if err != nil {
		return nil, err
	}
	pure := func() (calCandidate, error) { return afterPure(total, pp, psc, ps) }
	pld := func() (calCandidate, error) { return afterPLD(total, pp, psc, ps) }
	var tries []func() (calCandidate, error)
	switch a {
	case "", Tightest:
		tries = append(tries, pure)
		if total.Delta > 0 {
			tries = append(tries, pld)
		}
	case AccountPLD:
		tries = append(tries, pld)
	case AccountPure:
		tries = append(tries, pure)
	default:
		return nil, fmt.Errorf("%w: %s accounting cannot compose earlier releases with new ones; use tightest, pld or pure", ErrUnsupported, a)
	}
	best, err := calSmallest(ps, tries)
	if err != nil {
		return nil, err
	}
	return plansOf(best, total, windows, ps), nil
}

// AccountantAfter is AccountantFor of the releases in prior followed by
// `windows` releases of parts at scales, with the accountant a calibration
// by CalibrateAfter reported: AccountPure adds the exact pure ε of every
// coordinate, anything else composes PLDs.
func AccountantAfter(a Accounting, prior []Spent, parts []Part, scales []float64, windows int) (Accountant, error) {
	if len(parts) == 0 || len(parts) != len(scales) {
		return nil, fmt.Errorf("%w: %d parts and %d scales", ErrInvalidParameter, len(parts), len(scales))
	}
	all := append(append([]Spent(nil), prior...), Spent{Parts: parts, Scales: scales, Windows: windows})
	ps, sc, err := spentParts(all)
	if err != nil {
		return nil, err
	}
	if a == AccountPure {
		e, err := pureSum(ps, sc)
		if err != nil {
			return nil, err
		}
		return PureAccountant{Eps0: e}, nil
	}
	return calComposedPLD(ps, sc, PLDOptions{})
}

// afterPure calibrates ps for the pure ε the prior leaves: total ε minus
// the prior's (rounded down), then checks the sum of both certificates,
// lowering the target by its excess if rounding put it a few ulps above
// the total.
func afterPure(total Budget, prior []calPart, priorScales []float64, ps []calPart) (calCandidate, error) {
	e0, err := pureSum(prior, priorScales)
	if err != nil {
		return calCandidate{}, err
	}
	rest := math.Nextafter(total.Epsilon-e0, math.Inf(-1))
	for i := 0; i < pureRetries; i++ {
		if !(rest > 0) {
			return calCandidate{}, fmt.Errorf("%w: the earlier releases spent pure ε %v of %v", ErrInfeasible, e0, total.Epsilon)
		}
		c, err := calibratePure(Budget{Epsilon: rest, Delta: total.Delta}, ps)
		if err != nil {
			return calCandidate{}, err
		}
		e1, err := pureSum(ps, c.scales)
		if err != nil {
			return calCandidate{}, err
		}
		sum := (e0 + e1) * (1 + 2*roundoff)
		if sum <= total.Epsilon {
			return c, nil
		}
		rest -= (sum - total.Epsilon) * (1 + 4*roundoff)
	}
	return calCandidate{}, fmt.Errorf("%w: pure-ε certificate of the earlier and the new releases exceeds ε %v", ErrInfeasible, total.Epsilon)
}

// afterPLD finds the smallest κ for which the PLD of the prior composed
// with ps at κ certifies δ(ε) ≤ δ (as calibratePLD, with the prior's PLD
// composed once and convolved into every evaluation).
func afterPLD(total Budget, prior []calPart, priorScales []float64, ps []calPart) (calCandidate, error) {
	if !(total.Delta > 0) {
		return calCandidate{}, fmt.Errorf("%w: the PLD accountant needs δ > 0; use pure accounting for δ = 0", ErrUnsupported)
	}
	base, err := calComposedPLD(prior, priorScales, PLDOptions{})
	if err != nil {
		return calCandidate{}, err
	}
	if d := base.Delta(total.Epsilon); d >= total.Delta {
		return calCandidate{}, fmt.Errorf("%w: the earlier releases alone reach δ %v at ε %v (the total δ is %v)", ErrInfeasible, d, total.Epsilon, total.Delta)
	}
	// The prior's share of μ² (its Fisher information at its scales), for
	// the solver's first guess.
	used := 0.0
	for i, p := range prior {
		r := p.Linf / priorScales[i]
		used += float64(p.n) * pldFisher(p.Mechanism) * r * r
	}
	return calibratePLDAfter(total, base, used, ps)
}
