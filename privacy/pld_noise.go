package privacy

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mathext"
)

// This file holds the accountant's own description of the standard noise
// densities: the convex potential ψ (density ∝ e^{−ψ}), its derivative, and an
// accurate CDF. They are deliberately independent of the calibration code in
// laplace.go, gaussian.go, … so that the accountant and the one-dimensional
// calibrations check each other.

// roundoff is the unit roundoff of float64, 2^−53 (IEEE 754 binary64).
const roundoff = 0x1p-53

// lossFamily is a standard (scale 1) symmetric log-concave noise density
// e^{−ψ(x)}/C with ψ even and convex. With shift t = Δ/scale the privacy loss
// of the pair (X, X+t) is L(x) = ψ(x−t) − ψ(x), non-increasing in x.
type lossFamily interface {
	// name identifies the family in errors and cache keys.
	name() string
	// psi is ψ(x).
	psi(x float64) float64
	// dpsi is ψ'(x) (a subgradient where ψ is not differentiable).
	dpsi(x float64) float64
	// cdf is P(X ≤ x), with relative accuracy cdfRelErr for x ≤ 0 (by
	// symmetry P(X > x) = cdf(−x) is then accurate for x ≥ 0).
	cdf(x float64) float64
	// cdfRelErr bounds the relative error of cdf(x) for x ≤ 0.
	cdfRelErr(x float64) float64
	// maxLoss is sup_x L(x) for shift t > 0, +Inf when unbounded.
	maxLoss(t float64) float64
	// fisher is the Fisher information E[ψ'(X)²]; the variance of the
	// privacy loss is ≈ t²·fisher for small t (used only for first guesses).
	fisher() float64
}

// loss returns L(x) = ψ(x−t) − ψ(x) and a bound on its absolute rounding
// error. The bound is generous: 16 roundoffs of every term that enters,
// including the error of forming x−t propagated through ψ'.
func pldLoss(f lossFamily, x, t float64) (l, err float64) {
	if _, ok := f.(gaussFamily); ok {
		// ((x−t)² − x²)/2 = t·(t/2 − x), computed without cancellation.
		l = t * (0.5*t - x)
		return l, 8 * roundoff * (math.Abs(l) + t*(0.5*t+math.Abs(x)))
	}
	a, b := f.psi(x-t), f.psi(x)
	l = a - b
	err = 16 * roundoff * (math.Abs(a) + math.Abs(b) +
		math.Abs(x-t)*math.Abs(f.dpsi(x-t)) + math.Abs(x)*math.Abs(f.dpsi(x)) + math.Abs(l))
	return l, err
}

// laplaceFamily: ψ(x) = |x|, density e^{−|x|}/2.
type laplaceFamily struct{}

func (laplaceFamily) name() string          { return "laplace" }
func (laplaceFamily) psi(x float64) float64 { return math.Abs(x) }
func (laplaceFamily) dpsi(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
func (laplaceFamily) cdf(x float64) float64 {
	if x <= 0 {
		return 0.5 * math.Exp(x)
	}
	return 1 - 0.5*math.Exp(-x)
}

// cdfRelErr: Go's Exp is accurate to 1 ulp; 8 roundoffs leave a wide margin
// (checked against mpmath in tests).
func (laplaceFamily) cdfRelErr(float64) float64 { return 8 * roundoff }
func (laplaceFamily) maxLoss(t float64) float64 { return t }
func (laplaceFamily) fisher() float64           { return 1 }

// logisticFamily: density e^{−x}/(1+e^{−x})², ψ(x) = |x| + 2·log1p(e^{−|x|}).
type logisticFamily struct{}

func (logisticFamily) name() string { return "logistic" }
func (logisticFamily) psi(x float64) float64 {
	a := math.Abs(x)
	return a + 2*math.Log1p(math.Exp(-a))
}
func (logisticFamily) dpsi(x float64) float64 { return math.Tanh(x / 2) }
func (logisticFamily) cdf(x float64) float64 {
	if x <= 0 {
		e := math.Exp(x)
		return e / (1 + e)
	}
	return 1 / (1 + math.Exp(-x))
}
func (logisticFamily) cdfRelErr(float64) float64 { return 8 * roundoff }

// maxLoss: the density ratio e^{L} is bounded by e^{t} (MLR-bounded, §3.3 of
// the log-concave paper), attained as x → −∞.
func (logisticFamily) maxLoss(t float64) float64 { return t }

// fisher: the Fisher information of the logistic location family is 1/3.
func (logisticFamily) fisher() float64 { return 1.0 / 3 }

// gaussFamily: standard normal, ψ(x) = x²/2.
type gaussFamily struct{}

func (gaussFamily) name() string           { return "gaussian" }
func (gaussFamily) psi(x float64) float64  { return 0.5 * x * x }
func (gaussFamily) dpsi(x float64) float64 { return x }
func (gaussFamily) cdf(x float64) float64  { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// cdfRelErr: the rounding of the argument x/√2 (relative u) moves log erfc
// by about 2z²·u = x²·u, and Go's Erfc itself was measured against mpmath
// at 51 ulps at x = −8 and 1.2e-13 relative at x = −30. 8·(x² + 8)·u covers
// both with a margin of 6 or more (TestFamilyCDFAccuracy re-checks it).
func (gaussFamily) cdfRelErr(x float64) float64 { return 8 * (x*x + 8) * roundoff }
func (gaussFamily) maxLoss(t float64) float64   { return math.Inf(1) }
func (gaussFamily) fisher() float64             { return 1 }

// subbotinFamily: ψ(x) = |x|^r/r, r > 1 (r = 1 is laplaceFamily).
type subbotinFamily struct{ r float64 }

func (f subbotinFamily) name() string { return fmt.Sprintf("subbotin:%g", f.r) }
func (f subbotinFamily) psi(x float64) float64 {
	return math.Pow(math.Abs(x), f.r) / f.r
}
func (f subbotinFamily) dpsi(x float64) float64 {
	v := math.Pow(math.Abs(x), f.r-1)
	if x < 0 {
		return -v
	}
	return v
}

// cdf: for x ≤ 0, P(X ≤ x) = Q(1/r, |x|^r/r)/2 with Q the regularized upper
// incomplete gamma function (substitute v = u^r/r in ∫ e^{−u^r/r} du).
func (f subbotinFamily) cdf(x float64) float64 {
	if x <= 0 {
		return 0.5 * mathext.GammaIncRegComp(1/f.r, math.Pow(-x, f.r)/f.r)
	}
	return 1 - 0.5*mathext.GammaIncRegComp(1/f.r, math.Pow(x, f.r)/f.r)
}

// cdfRelErr: measured against mpmath (40 digits) for 1/50 ≤ a ≤ 1/1.1 and
// 1e-8 ≤ y ≤ 700, gonum's GammaIncRegComp(a, y) (a Cephes igamc port) has
// relative error below 9·(8 + y)·u; the argument y = |x|^r/r carries about
// 3u relative, which moves log Q by about 3u·y. 64·(8 + y)·u covers both
// with a factor of about six (tests re-check the CDF against mpmath).
func (f subbotinFamily) cdfRelErr(x float64) float64 {
	return 64 * (8 + math.Pow(math.Abs(x), f.r)/f.r) * roundoff
}
func (subbotinFamily) maxLoss(t float64) float64 { return math.Inf(1) }

// fisher: E|X|^k = r^{k/r} Γ((k+1)/r)/Γ(1/r) with k = 2r−2.
func (f subbotinFamily) fisher() float64 {
	k := 2*f.r - 2
	lg1, _ := math.Lgamma((k + 1) / f.r)
	lg0, _ := math.Lgamma(1 / f.r)
	return math.Exp(k/f.r*math.Log(f.r) + lg1 - lg0)
}

// discreteFamily is integer noise with a log-concave, symmetric pmf.
type discreteFamily interface {
	name() string
	// logPMF is log P(K = k).
	logPMF(k int64) float64
	// lowerTail is P(K ≤ k) for k ≤ 0, with relative error ≤ 1e-13.
	lowerTail(k int64) float64
	// loss is L(k) = log P(K=k) − log P(K=k−d) for integer shift d ≥ 1,
	// non-increasing in k, with an absolute error bound.
	loss(k, d int64) (l, err float64)
	// maxLoss is sup_k L(k), +Inf when unbounded.
	maxLoss(d int64) float64
	// quantile returns k ≤ 0 with P(K ≤ k) ≤ p (p < 1/2), not far below
	// the exact quantile.
	quantile(p float64) int64
	fisher() float64
}

// dlaplaceFamily: P(K = k) = tanh(1/(2s))·e^{−|k|/s} (two-sided geometric).
type dlaplaceFamily struct{ s float64 }

func (f dlaplaceFamily) name() string { return fmt.Sprintf("discrete-laplace(%g)", f.s) }
func (f dlaplaceFamily) logPMF(k int64) float64 {
	return math.Log(math.Tanh(0.5/f.s)) - math.Abs(float64(k))/f.s
}

// lowerTail: Σ_{j≥|k|} (1−q)/(1+q)·q^j = q^{|k|}/(1+q), q = e^{−1/s}.
func (f dlaplaceFamily) lowerTail(k int64) float64 {
	q := math.Exp(-1 / f.s)
	return math.Exp(-math.Abs(float64(k))/f.s) / (1 + q)
}
func (f dlaplaceFamily) loss(k, d int64) (float64, float64) {
	a := math.Abs(float64(k - d))
	b := math.Abs(float64(k))
	l := (a - b) / f.s
	return l, 4 * roundoff * (a + b) / f.s
}
func (f dlaplaceFamily) maxLoss(d int64) float64 { return float64(d) / f.s }
func (f dlaplaceFamily) quantile(p float64) int64 {
	// q^{j}/(1+q) ≤ p  ⇐  j ≥ −s·log(p).
	return -int64(math.Ceil(-f.s*math.Log(p))) - 1
}
func (f dlaplaceFamily) fisher() float64 { return 1 / (f.s * f.s) }

// dgaussFamily: P(K = k) = e^{−k²/(2σ²)}/Z (Canonne–Kamath–Steinke 2020).
type dgaussFamily struct {
	sigma float64
	logZ  float64
}

func newDgaussFamily(sigma float64) dgaussFamily {
	return dgaussFamily{sigma: sigma, logZ: math.Log(dgaussNorm(sigma))}
}

// dgaussNorm is Z = Σ_k e^{−k²/(2σ²)}: by Poisson summation
// Z = σ√(2π)·(1 + 2Σ_{m≥1} e^{−2π²σ²m²}) for σ ≥ 1 (the correction is below
// 6e-9 and its terms fall super-exponentially), direct summation otherwise.
func dgaussNorm(sigma float64) float64 {
	if sigma >= 1 {
		c := 1.0
		for m := 1.0; m < 10; m++ {
			term := 2 * math.Exp(-2*math.Pi*math.Pi*sigma*sigma*m*m)
			if term < 1e-18 {
				break
			}
			c += term
		}
		return sigma * math.Sqrt(2*math.Pi) * c
	}
	z := 1.0
	for k := 1.0; ; k++ {
		term := 2 * math.Exp(-k*k/(2*sigma*sigma))
		z += term
		if term < 1e-18*z {
			break
		}
	}
	return z
}

func (f dgaussFamily) name() string { return fmt.Sprintf("discrete-gaussian(%g)", f.sigma) }
func (f dgaussFamily) logPMF(k int64) float64 {
	x := float64(k)
	return -x*x/(2*f.sigma*f.sigma) - f.logZ
}

// lowerTail sums the pmf from k downwards until the terms no longer matter
// (relative 1e-17; the terms fall faster than geometrically).
func (f dgaussFamily) lowerTail(k int64) float64 {
	s := 0.0
	for j := k; ; j-- {
		term := math.Exp(f.logPMF(j))
		s += term
		if term < 1e-17*s || term == 0 {
			break
		}
	}
	return s
}
func (f dgaussFamily) loss(k, d int64) (float64, float64) {
	// ((k−d)² − k²)/(2σ²) = d·(d − 2k)/(2σ²).
	df, kf := float64(d), float64(k)
	l := df * (df - 2*kf) / (2 * f.sigma * f.sigma)
	return l, 8 * roundoff * (math.Abs(l) + df*(df+2*math.Abs(kf))/(2*f.sigma*f.sigma))
}
func (f dgaussFamily) maxLoss(d int64) float64 { return math.Inf(1) }
func (f dgaussFamily) quantile(p float64) int64 {
	// Start where even the continuous bound on the tail is far below p
	// (e^{−k²/(2σ²)} ≤ p·1e-6), then accumulate the pmf upwards.
	k := -int64(math.Ceil(f.sigma*math.Sqrt(2*(-math.Log(p)+14)))) - 2
	cum := 0.0
	for ; k < 0; k++ {
		next := cum + math.Exp(f.logPMF(k))
		if next > p {
			return k - 1
		}
		cum = next
	}
	return -1
}
func (f dgaussFamily) fisher() float64 { return 1 / (f.sigma * f.sigma) }

// pldFamilyOf maps a Mechanism to the accountant's description of its noise.
// It returns (continuous, nil), (nil, discrete) or an error wrapping
// ErrUnsupported for mechanisms whose privacy loss is not monotone (SαS,
// Cauchy) — those have the pure-ε path only.
func pldFamilyOf(m Mechanism) (lossFamily, error) {
	switch v := m.(type) {
	case Laplace:
		return laplaceFamily{}, nil
	case Logistic:
		return logisticFamily{}, nil
	case Gaussian, GaussianClassic:
		return gaussFamily{}, nil
	case Subbotin:
		r := v.R
		if math.IsNaN(r) || r < 1 || math.IsInf(r, 0) {
			return nil, fmt.Errorf("%w: subbotin r = %v, want 1 ≤ r < ∞", ErrInvalidParameter, r)
		}
		switch r {
		case 1:
			return laplaceFamily{}, nil
		case 2:
			return gaussFamily{}, nil
		}
		return subbotinFamily{r: r}, nil
	case nil:
		return nil, fmt.Errorf("%w: nil mechanism", ErrInvalidParameter)
	}
	return nil, fmt.Errorf("%w: %s has no monotone privacy loss distribution", ErrUnsupported, m.Name())
}

// pldDiscrete reports whether m adds integer noise.
func pldDiscrete(m Mechanism) bool {
	switch m.(type) {
	case DiscreteLaplace, DiscreteGaussian:
		return true
	}
	return false
}

// pldDiscreteFamilyOf returns the integer noise of m at the given scale.
func pldDiscreteFamilyOf(m Mechanism, scale float64) (discreteFamily, error) {
	switch m.(type) {
	case DiscreteLaplace:
		return dlaplaceFamily{s: scale}, nil
	case DiscreteGaussian:
		return newDgaussFamily(scale), nil
	}
	return nil, fmt.Errorf("%w: %s is not an integer mechanism", ErrUnsupported, m.Name())
}

// pldFisher returns the Fisher information per unit shift at unit scale, for
// first guesses only (never for a guarantee).
func pldFisher(m Mechanism) float64 {
	if f, err := pldFamilyOf(m); err == nil {
		return f.fisher()
	}
	switch m.(type) {
	case DiscreteLaplace:
		return 1
	case DiscreteGaussian:
		return 1
	}
	return 1
}
