package privacy

import (
	"fmt"
	"math"
)

// calPureLoss is implemented by mechanisms that report their exact pure ε at a
// scale (Stable, Cauchy).
type calPureLoss interface {
	Epsilon(scale, sensitivity float64) float64
}

// calPureEpsilon returns the exact pure ε of one coordinate with noise `scale`
// and shift linf, rounded up, or an error for mechanisms without pure ε.
func calPureEpsilon(m Mechanism, scale, linf float64) (float64, error) {
	switch s := m.(type) {
	case Laplace, Logistic, DiscreteLaplace:
		// sup of the privacy loss: Δ/s (Laplace, logistic: §3.3 of the
		// log-concave paper; discrete Laplace: |k−Δ|−|k| ≤ Δ).
		return math.Nextafter(linf/scale, math.Inf(1)), nil
	case Subbotin:
		if s.R == 1 {
			return math.Nextafter(linf/scale, math.Inf(1)), nil
		}
	}
	if pl, ok := m.(calPureLoss); ok {
		e := pl.Epsilon(scale, linf)
		if e > 0 && !math.IsInf(e, 1) {
			return e, nil
		}
		return 0, fmt.Errorf("%w: %s: no finite pure ε at scale %v", ErrInfeasible, m.Name(), scale)
	}
	return 0, fmt.Errorf("%w: %s has no pure ε-DP guarantee (δ must be > 0); pure ε: %s",
		ErrInfeasible, m.Name(), pureMechanisms)
}

// calLinearPure reports whether the pure ε of m is exactly Linf/scale.
func calLinearPure(m Mechanism) bool {
	switch v := m.(type) {
	case Laplace, Logistic, DiscreteLaplace:
		return true
	case Subbotin:
		return v.R == 1
	}
	return false
}

// pureRetries is how often calibratePure widens κ by the certificate's
// own excess before it refuses: each widening lands within a few ulps of
// ε, so two suffice in practice; four leave room.
const pureRetries = 4

// calibratePure: every coordinate is ε_i-DP and pure ε adds up exactly:
// Σ nᵢ·ε_i(scaleᵢ) ≤ ε. For Laplace-like noise ε_i = 1/(κ·wᵢ), so
// κ = Σ(nᵢ/wᵢ)/ε (nᵢ replaced by windows·L1ᵢ/Linfᵢ for a part with an
// L1 bound; see pureSpent); otherwise κ is found by bisection.
func calibratePure(total Budget, ps []calPart) (calCandidate, error) {
	spent := func(scales []float64) (float64, error) {
		s := 0.0
		for i, p := range ps {
			e, err := p.pureSpent(scales[i])
			if err != nil {
				return 0, err
			}
			s += e
		}
		return s * pldSumFactor(len(ps)), nil
	}
	linear := true
	for _, p := range ps {
		linear = linear && calLinearPure(p.Mechanism)
	}
	var kappa float64
	if linear {
		s := 0.0
		for _, p := range ps {
			s += p.pureCount() / p.w
		}
		kappa = s / total.Epsilon * (1 + 8*roundoff)
	} else {
		// Bracket and bisect κ: spent(κ) is non-increasing in κ.
		hi := 1.0
		var err error
		ok := func(k float64) bool {
			var e float64
			e, err = spent(calScales(k, ps))
			return err == nil && e <= total.Epsilon
		}
		for !ok(hi) {
			if err != nil {
				return calCandidate{}, err
			}
			hi *= 2
			if hi > 1e300 {
				return calCandidate{}, fmt.Errorf("%w: no pure-ε scale found", ErrInfeasible)
			}
		}
		lo := hi / 2
		for ok(lo) {
			hi, lo = lo, lo/2
			if lo < 1e-300 {
				break
			}
		}
		for i := 0; i < 200 && hi-lo > 1e-9*hi; i++ {
			mid := 0.5 * (lo + hi)
			if ok(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		kappa = hi
	}
	scales := calScales(kappa, ps)
	e, err := spent(scales)
	if err != nil {
		return calCandidate{}, err
	}
	// The certificate rounds every term and the sum up (pldSumFactor), so
	// the closed-form κ can miss ε by a few ulps (1.0000000000000002 for
	// six parts at ε = 1). Spending is non-increasing in κ (proportional
	// to 1/κ for Laplace-like noise), so κ·(e/ε) certifies up to rounding:
	// widen κ by that factor and a few ulps more, and certify again. Only
	// a certified κ is returned, so this only ever adds noise: at most
	// pureRetries·(4 + parts + 4)·2⁻⁵³ relative, far below the solvers'
	// 1e-6 tolerance.
	for i := 0; e > total.Epsilon && i < pureRetries; i++ {
		kappa *= e / total.Epsilon * (1 + 4*roundoff)
		scales = calScales(kappa, ps)
		if e, err = spent(scales); err != nil {
			return calCandidate{}, err
		}
	}
	if e > total.Epsilon {
		return calCandidate{}, fmt.Errorf("%w: pure-ε certificate %v exceeds ε %v", ErrInfeasible, e, total.Epsilon)
	}
	return calCandidate{acct: AccountPure, method: ClosedForm, scales: scales, cert: 0}, nil
}

// pureSpent is the pure ε the part spends over the horizon at the given
// scale: windows·L0 coordinates at shift Linf, or, for Laplace-like noise
// with an L1 bound, windows times the loss of one shift of L1 — the loss
// of a Laplace-like vector is Σ ψ(xᵢ − cᵢ) − ψ(xᵢ) ≤ Σ|cᵢ|/scale, ψ being
// 1-Lipschitz (Laplace, logistic; |k − c| − |k| ≤ |c| for the discrete
// Laplace), and the bound is attained when one coordinate carries all of
// L1.
func (p calPart) pureSpent(scale float64) (float64, error) {
	if p.L1 > 0 && calLinearPure(p.Mechanism) {
		e, err := calPureEpsilon(p.Mechanism, scale, p.L1)
		return float64(p.win) * e, err
	}
	e, err := calPureEpsilon(p.Mechanism, scale, p.Linf)
	return float64(p.n) * e, err
}

// pureCount is the number of unit shifts (at Linf) the part's pure ε
// adds up over the horizon with Laplace-like noise: windows·L0, or
// windows·L1/Linf with an L1 bound (rounded up; pureSpent certifies).
func (p calPart) pureCount() float64 {
	if p.L1 > 0 {
		return math.Nextafter(float64(p.win)*(p.L1/p.Linf), math.Inf(1))
	}
	return float64(p.n)
}

// checkNorms reports an L1 or L2 bound that is set but not a finite
// positive number.
func (p Part) checkNorms() error {
	for _, x := range [...]float64{p.L1, p.L2} {
		if x != 0 && (!(x > 0) || math.IsInf(x, 0)) {
			return fmt.Errorf("L1 %v, L2 %v: want 0 (unset) or a finite bound > 0", p.L1, p.L2)
		}
	}
	return nil
}
