package privacy

import (
	"fmt"
	"math"
)

// calClassic handles gaussian-classic, which exists only as a documented
// comparison: one part, calibrated by its own (loose, ε < 1) formula to the
// L2 sensitivity of the whole horizon, Linf·√(windows·L0) — Gaussian noise
// composes exactly in L2. ok reports whether ps is such a request.
func calClassic(total Budget, ps []calPart) (c calCandidate, ok bool, err error) {
	classic := 0
	for _, p := range ps {
		if _, is := p.Mechanism.(GaussianClassic); is {
			classic++
		}
	}
	if classic == 0 {
		return calCandidate{}, false, nil
	}
	if len(ps) != 1 {
		return calCandidate{}, true, fmt.Errorf("%w: gaussian-classic is a single-part comparison; use gaussian", ErrUnsupported)
	}
	p := ps[0]
	cal, err := p.Mechanism.Calibrate(total.Epsilon, total.Delta, p.Linf*math.Sqrt(float64(p.n))*(1+4*roundoff))
	if err != nil {
		return calCandidate{}, true, err
	}
	return calCandidate{acct: AccountGaussian, method: cal.Method, scales: []float64{cal.Scale}, cert: total.Delta}, true, nil
}

// calibrateGaussian: all parts Gaussian; the release over the horizon is
// μ-GDP with μ² = Σ nᵢ·(Linfᵢ/scaleᵢ)² = Σ nᵢ/(κ·wᵢ)² (nᵢ replaced by
// windows·(L2ᵢ/Linfᵢ)² for a part with an L2 bound; see gaussCount).
func calibrateGaussian(total Budget, ps []calPart) (calCandidate, error) {
	if !calAllGaussian(ps) {
		return calCandidate{}, fmt.Errorf("%w: exact Gaussian accounting needs Gaussian noise in every calPart", ErrUnsupported)
	}
	mu, err := gdpMu(total.Epsilon, total.Delta)
	if err != nil {
		return calCandidate{}, err
	}
	s := 0.0
	for _, p := range ps {
		s += p.gaussCount() / (p.w * p.w)
	}
	kappa := math.Sqrt(s) / mu * (1 + 8*roundoff)
	scales := calScales(kappa, ps)
	cert := GaussianAccountant{Mu: gaussMu(ps, scales)}.Delta(total.Epsilon)
	if cert > total.Delta {
		return calCandidate{}, fmt.Errorf("%w: Gaussian certificate %v exceeds δ %v", ErrInfeasible, cert, total.Delta)
	}
	return calCandidate{acct: AccountGaussian, method: ClosedForm, scales: scales, cert: cert}, nil
}

// gaussMu is μ = √(Σ nᵢ·(Linfᵢ/scaleᵢ)²), rounded up; a part with an
// L2 bound contributes windows·(L2ᵢ/scaleᵢ)² instead (one Gaussian vector
// shifted by at most L2 is one Gaussian at shift L2, by rotation
// invariance).
func gaussMu(ps []calPart, scales []float64) float64 {
	s := 0.0
	for i, p := range ps {
		if p.L2 > 0 {
			r := p.L2 / scales[i]
			s += float64(p.win) * r * r
			continue
		}
		r := p.Linf / scales[i]
		s += float64(p.n) * r * r
	}
	return math.Sqrt(s) * (1 + 8*roundoff)
}

// gaussCount is the number of unit shifts (at Linf) that the part's change
// over the horizon weighs in μ-GDP: windows·L0, or windows·(L2/Linf)² with
// an L2 bound (rounded up; gaussMu certifies the result exactly).
func (p calPart) gaussCount() float64 {
	if p.L2 > 0 {
		r := p.L2 / p.Linf
		return math.Nextafter(float64(p.win)*r*r, math.Inf(1))
	}
	return float64(p.n)
}
