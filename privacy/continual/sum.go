package continual

import (
	"fmt"
	"math"
)

// Noise kinds whose moment generating function SumHalfWidth knows (the
// names are privacy.Mechanism names).
const (
	laplaceName          = "laplace"           // M(λ) = 1/(1 − b²λ²), |λ| < 1/b
	discreteLaplaceName  = "discrete-laplace"  // q = e^{−1/t}: M(λ) = (1−q)²/((1−q·e^λ)(1−q·e^{−λ})), |λ| < 1/t
	discreteGaussianName = "discrete-gaussian" // M(λ) ≤ e^{λ²σ²/2}
	gaussianName         = "gaussian"          // M(λ) = e^{λ²σ²/2}
)

// Term is n independent draws of one noise: the mechanism's name (a
// privacy.Mechanism name), its scale and its variance at that scale.
type Term struct {
	Mechanism string
	Scale     float64
	Variance  float64
	N         int64
}

// SumHalfWidth returns h ≥ 0 such that the sum S of the independent,
// symmetric noises of terms satisfies P(|S| ≥ h) ≤ beta. It is a valid
// bound, not an approximation: the smaller of
//
//   - Chebyshev: P(|S| ≥ h) ≤ V/h², V = Σ n·variance (any noise with a
//     finite variance), and
//   - Chernoff, when every term's moment generating function is known:
//     P(|S| ≥ h) ≤ 2·exp(−(λh − Σ n·log M(λ))) for any λ > 0 in the
//     domain (S is symmetric), with M the exact MGF of Laplace and discrete Laplace
//     noise, and e^{λ²σ²/2} for Gaussian noise and for discrete Gaussian
//     noise with parameter σ (which is σ²-subgaussian: Canonne, Kamath &
//     Steinke, "The Discrete Gaussian for Differential Privacy", 2020).
//
// Any λ gives a valid Chernoff bound, so the numerical maximisation over λ
// only ever loosens it; h is found by bisection and returned from the upper
// end (never below the smallest h whose bound is ≤ beta, at most a
// relative 1e-9 above it). For Gaussian terms
// alone this is h = σ_S·√(2 ln(2/β)) (σ_S² = Σ n·σ²): about 2.72σ_S at
// β = 0.05, where the normal quantile is 1.96σ_S, so the stated level is a
// lower bound on the coverage.
func SumHalfWidth(terms []Term, beta float64) (float64, error) {
	if !(beta > 0 && beta < 1) {
		return 0, fmt.Errorf("%w: β = %g is not in (0, 1)", ErrArgs, beta)
	}
	s, err := newSumNoise(terms)
	if err != nil {
		return 0, err
	}
	if s.v == 0 {
		return 0, nil
	}
	if s.mgf && math.IsInf(s.lmax, 1) {
		// Gaussian terms only: sup_λ λh − λ²σ_S²/2 = h²/(2σ_S²), so the
		// Chernoff bound is β at h = σ_S·√(2 ln(2/β)); Chebyshev at √(V/β).
		s2 := 0.0
		for _, t := range terms {
			s2 += float64(t.N) * t.Scale * t.Scale
		}
		h := math.Min(math.Sqrt(2*s2*math.Log(2/beta)), math.Sqrt(s.v/beta))
		return math.Nextafter(h, math.Inf(1)), nil
	}
	lo, hi := 0.0, math.Sqrt(s.v/beta) // Chebyshev: bound(hi) ≤ β
	for range 200 {
		mid := (lo + hi) / 2
		if s.bound(mid) <= beta {
			hi = mid
		} else {
			lo = mid
		}
		if hi-lo <= 1e-9*hi {
			break
		}
	}
	return hi, nil
}

// sumNoise is the sum S of the noises of some terms, as SumHalfWidth
// bounds it.
type sumNoise struct {
	terms []Term
	v     float64 // V = Σ n·variance
	mgf   bool    // every term's moment generating function is known
	lmax  float64 // the MGF is finite for λ < lmax (+Inf: everywhere)
}

// newSumNoise checks the terms and summarises them.
func newSumNoise(terms []Term) (sumNoise, error) {
	s := sumNoise{terms: terms, mgf: true, lmax: math.Inf(1)}
	for _, t := range terms {
		if t.N < 0 || !(t.Scale > 0) || math.IsInf(t.Scale, 0) || !(t.Variance >= 0) || math.IsInf(t.Variance, 0) {
			return sumNoise{}, fmt.Errorf("%w: term %s scale %g variance %g n %d", ErrArgs, t.Mechanism, t.Scale, t.Variance, t.N)
		}
		if t.N == 0 {
			continue
		}
		s.v += float64(t.N) * t.Variance
		switch t.Mechanism {
		case laplaceName, discreteLaplaceName:
			s.lmax = math.Min(s.lmax, 1/t.Scale)
		case gaussianName, discreteGaussianName:
		default:
			s.mgf = false
		}
	}
	return s, nil
}

// logM returns log M_S(λ) = Σ n·log M_i(λ), +Inf outside the domain.
func (s *sumNoise) logM(l float64) float64 {
	sum := 0.0
	for _, t := range s.terms {
		if t.N == 0 {
			continue
		}
		n := float64(t.N)
		switch t.Mechanism {
		case laplaceName:
			bl := t.Scale * l
			if bl >= 1 {
				return math.Inf(1)
			}
			sum -= n * math.Log1p(-bl*bl)
		case discreteLaplaceName:
			if l*t.Scale >= 1 {
				return math.Inf(1)
			}
			q := math.Exp(-1 / t.Scale)
			// (1−q)² / ((1 − q e^λ)(1 − q e^{−λ})), each factor in (0, 1].
			sum += n * (2*math.Log1p(-q) - math.Log1p(-q*math.Exp(l)) - math.Log1p(-q*math.Exp(-l)))
		default: // gaussian, discrete-gaussian
			sum += n * l * l * t.Scale * t.Scale / 2
		}
	}
	return sum
}

// bound returns a valid upper bound on P(|S| ≥ h): Chebyshev, and Chernoff
// maximised over λ by golden-section search when the MGF is known.
func (s *sumNoise) bound(h float64) float64 {
	v := s.v
	b := math.Min(1, v/(h*h))
	if !s.mgf {
		return b
	}
	// λ* solves logM'(λ) = h; logM'(λ) ≥ λ·V, so λ* ≤ h/V.
	hi := math.Min(h/v, s.lmax*(1-1e-12))
	f := func(l float64) float64 { return l*h - s.logM(l) } // concave
	const g = 0.6180339887498949                            // (√5 − 1)/2, golden section
	a, c := 0.0, hi
	x1, x2 := c-g*(c-a), a+g*(c-a)
	f1, f2 := f(x1), f(x2)
	for range 80 { // 0.618^80 ≈ 2e-17 of the bracket
		if f1 < f2 {
			a, x1, f1 = x1, x2, f2
			x2 = a + g*(c-a)
			f2 = f(x2)
		} else {
			c, x2, f2 = x2, x1, f1
			x1 = c - g*(c-a)
			f1 = f(x1)
		}
	}
	best := math.Max(f1, f2)
	if best > 0 && !math.IsNaN(best) {
		b = math.Min(b, 2*math.Exp(-best))
	}
	return b
}
