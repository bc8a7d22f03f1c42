package privacy

import (
	"errors"
	"fmt"
	"math"
)

// ErrUnsupported: the accountant cannot analyse this mechanism or request
// (for example the PLD of a mechanism without a monotone privacy loss).
var ErrUnsupported = errors.New("privacy: unsupported by the accountant")

// Accountant answers privacy questions about one fixed (possibly composed)
// mechanism. Both directions are upper bounds, never optimistic.
type Accountant interface {
	// Delta returns a δ for which the mechanism is (ε, δ)-DP.
	Delta(eps float64) float64
	// Epsilon returns an ε ≥ 0 for which the mechanism is (ε, delta)-DP,
	// +Inf if none is known.
	Epsilon(delta float64) float64
}

// Budget is a privacy budget (ε, δ).
type Budget struct {
	Epsilon float64 // ε > 0
	Delta   float64 // 0 ≤ δ < 1
}

// Validate checks 0 < ε < ∞ and 0 ≤ δ < 1 (NaN rejected).
func (b Budget) Validate() error {
	if !(b.Epsilon > 0) || math.IsInf(b.Epsilon, 0) {
		return fmt.Errorf("%w: epsilon %v: want a finite ε > 0", ErrInvalidParameter, b.Epsilon)
	}
	if !(b.Delta >= 0 && b.Delta < 1) {
		return fmt.Errorf("%w: delta %v: want 0 ≤ δ < 1", ErrInvalidParameter, b.Delta)
	}
	return nil
}

// GaussianAccountant is the exact accountant of Gaussian noise: adding
// N(0, σ²) to a query with L2 sensitivity Δ₂ is μ-GDP with μ = Δ₂/σ, and
// composing k such releases with sensitivities Δᵢ and noise σᵢ is μ-GDP with
// μ² = Σ (Δᵢ/σᵢ)² (Dong, Roth & Su 2022, Cor. 3.3). Its privacy profile is
//
//	δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2)
//
// (Balle & Wang 2018, Thm 8; Dong, Roth & Su Cor. 2.13), which is exact: a
// vector release whose unit can move L0 coordinates by L∞ each, over W
// windows, is one Gaussian with shift L∞·√(L0·W).
type GaussianAccountant struct {
	Mu float64 // μ = Δ₂/σ ≥ 0
}

// Delta implements Accountant; a bound on the rounding error of the two
// terms is added.
func (g GaussianAccountant) Delta(eps float64) float64 {
	if math.IsNaN(eps) || math.IsNaN(g.Mu) || g.Mu < 0 {
		return 1
	}
	return math.Min(1, gdpDelta(g.Mu, eps)+1e-300)
}

// Epsilon implements Accountant.
func (g GaussianAccountant) Epsilon(delta float64) float64 {
	if math.IsNaN(delta) || delta <= 0 {
		return math.Inf(1)
	}
	if g.Delta(0) <= delta {
		return 0
	}
	lo, hi := 0.0, 1.0
	for g.Delta(hi) > delta {
		lo, hi = hi, 2*hi
		if hi > 1e6 {
			return math.Inf(1)
		}
	}
	for i := 0; i < 200 && hi-lo > 1e-13*hi; i++ {
		mid := 0.5 * (lo + hi)
		if g.Delta(mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// normCDF is Φ(x) = erfc(−x/√2)/2, accurate in the lower tail.
func gdpPhi(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// gdpDelta is the μ-GDP privacy profile at ε, evaluated as
// Φ(a) − exp(ε + log Φ(b)) with a = −ε/μ + μ/2, b = −ε/μ − μ/2, so that
// e^ε never overflows against a tiny Φ(b).
func gdpDelta(mu, eps float64) float64 {
	if mu == 0 {
		return 0
	}
	if math.IsInf(mu, 1) {
		return 1
	}
	a := -eps/mu + mu/2
	b := -eps/mu - mu/2
	pa := gdpPhi(a)
	pb := gdpPhi(b)
	t := 0.0
	if pb > 0 {
		t = math.Exp(eps + math.Log(pb))
	} // else Φ(b) underflowed: dropping the subtracted term keeps an upper bound
	// Both terms carry the relative error of Φ (gaussFamily.cdfRelErr), the
	// second also that of exp/log; the difference can cancel, so the bound
	// is absolute.
	g := gaussFamily{}
	d := pa - t + g.cdfRelErr(a)*pa + (g.cdfRelErr(b)+4*roundoff*(math.Abs(eps)+math.Abs(math.Log(pb))+1))*t
	if d < 0 {
		d = 0
	}
	return d
}

// gdpMu returns the largest μ (rounded down, so conservative) with
// δ_μ(ε) ≤ delta: the GDP parameter a Gaussian release may have.
func gdpMu(eps, delta float64) (float64, error) {
	if !(delta > 0) {
		return 0, fmt.Errorf("%w: Gaussian noise needs δ > 0", ErrInfeasible)
	}
	ok := func(mu float64) bool { return GaussianAccountant{Mu: mu}.Delta(eps) <= delta }
	lo, hi := 0.0, 1.0
	for ok(hi) {
		lo, hi = hi, 2*hi
		if hi > 1e8 {
			return lo, nil
		}
	}
	for i := 0; i < 200 && hi-lo > 1e-12*hi; i++ {
		mid := 0.5 * (lo + hi)
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	if !(lo > 0) {
		return 0, fmt.Errorf("%w: no Gaussian noise meets ε = %v, δ = %v", ErrInfeasible, eps, delta)
	}
	return lo, nil
}

// PureAccountant is the accountant of an ε₀-DP mechanism (δ = 0), composed
// exactly: k mechanisms that are ε₀-DP each are (k·ε₀)-DP, and no better
// pure-ε bound holds for all of them (randomized response attains it). For
// ε < ε₀ it uses the tight bound for any ε₀-DP mechanism,
// δ(ε) = (e^{ε₀} − e^ε)/(1 + e^{ε₀}) (Kairouz, Oh & Viswanath 2017, attained
// by randomized response).
type PureAccountant struct {
	Eps0 float64 // the pure ε of the whole mechanism
}

// Delta implements Accountant.
func (p PureAccountant) Delta(eps float64) float64 {
	if math.IsNaN(eps) || math.IsNaN(p.Eps0) {
		return 1
	}
	if eps >= p.Eps0 {
		return 0
	}
	// (e^{ε₀} − e^ε)/(1 + e^{ε₀}) = −expm1(ε − ε₀)/(1 + e^{−ε₀}).
	d := -math.Expm1(eps-p.Eps0) / (1 + math.Exp(-p.Eps0))
	return math.Min(1, d*(1+8*roundoff))
}

// Epsilon implements Accountant.
func (p PureAccountant) Epsilon(delta float64) float64 {
	if math.IsNaN(delta) || math.IsNaN(p.Eps0) {
		return math.Inf(1)
	}
	if delta <= 0 {
		return p.Eps0
	}
	// Solve −expm1(ε − ε₀) = δ(1 + e^{−ε₀}).
	x := delta * (1 + math.Exp(-p.Eps0))
	if x >= 1 {
		return 0
	}
	eps := p.Eps0 + math.Log1p(-x)
	eps = math.Nextafter(math.Max(eps, 0), math.Inf(1))
	for p.Delta(eps) > delta {
		eps = math.Nextafter(eps*(1+1e-15), math.Inf(1))
	}
	return eps
}

// BasicComposition returns the budget of k mechanisms that are (ε₀, δ₀)-DP
// each: (k·ε₀, k·δ₀) (Dwork & Roth 2014, Thm 3.16). It is exact for pure
// ε (δ₀ = 0) in the worst case and loose otherwise.
func BasicComposition(per Budget, k int) Budget {
	return Budget{Epsilon: float64(k) * per.Epsilon, Delta: math.Min(1, float64(k)*per.Delta)}
}

// AdvancedComposition returns the budget of the k-fold adaptive composition
// of (ε₀, δ₀)-DP mechanisms by the advanced composition theorem (Dwork,
// Rothblum & Vadhan 2010; Dwork & Roth 2014, Thm 3.20): for any δ' > 0 it is
// (ε', k·δ₀ + δ')-DP with
//
//	ε' = √(2k·ln(1/δ'))·ε₀ + k·ε₀·(e^{ε₀} − 1).
//
// The seed notes (003) quote the simplified ε' = 2ε₀·√(2k·ln(1/δ')), which
// is an upper bound of this only when k·ε₀·(e^{ε₀} − 1) ≤ √(2k·ln(1/δ'))·ε₀;
// the full statement is used here.
func AdvancedComposition(per Budget, k int, deltaPrime float64) Budget {
	kf := float64(k)
	e0 := per.Epsilon
	eps := math.Sqrt(2*kf*math.Log(1/deltaPrime))*e0 + kf*e0*math.Expm1(e0)
	return Budget{Epsilon: eps * (1 + 8*roundoff), Delta: math.Min(1, kf*per.Delta+deltaPrime)}
}

// advancedPerStep returns the largest per-step ε₀ (rounded down) for which
// k-fold advanced composition with slack δ' stays within total ε.
func advancedPerStep(eps float64, k int, deltaPrime float64) float64 {
	ok := func(e0 float64) bool {
		return AdvancedComposition(Budget{Epsilon: e0}, k, deltaPrime).Epsilon <= eps
	}
	lo, hi := 0.0, eps
	for i := 0; i < 200 && hi-lo > 1e-13*hi; i++ {
		mid := 0.5 * (lo + hi)
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
