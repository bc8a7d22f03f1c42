package privacy

import (
	"fmt"
	"math"
)

// PLD is a pessimistic discretization of a privacy loss distribution (PLD):
// the distribution of L = log(p(Y)/q(Y)) for Y drawn from the output
// distribution p on one of two neighbouring inputs, q being the other.
// Its hockey-stick divergence
//
//	δ(ε) = E[(1 − e^{ε−L})₊] + P(L = +∞)
//
// is the smallest δ for which the pair is (ε, δ)-indistinguishable. For
// symmetric noise the pair (p, q) and the reversed pair (q, p) have the same
// PLD (reflect x ↦ Δ − x), so one PLD covers both neighbouring directions.
//
// Representation: probability masses on the grid of losses off + k·h (h a
// power of two; the offset puts the largest loss of a bounded PLD, such as
// Laplace's atom at Δ/b, exactly on the grid), a mass at +∞ (the δ-term:
// losses that are infinite or were truncated) and a numerical slack. Every approximation moves the represented PLD to one
// that dominates the exact one — for every ε its δ(ε) is at least the exact
// value, and this dominance survives composition:
//
//   - Discretization ("connect the dots"): the probability of losses between
//     two grid points ℓ₀ < ℓ₁ is split between them so that both the total
//     mass and E[e^{−L}] are preserved. δ(ε) = E[(1 − e^ε·e^{−L})₊] is convex
//     in y = e^{−L}, so this mean-preserving spread of y can only increase it
//     (Jensen); under composition e^{−ΣL} is linear in each factor given the
//     others, so the spread of one factor is a spread of the product.
//     Rounding errors in the split are pushed towards the upper point.
//   - Losses moved up (to a grid point above them, or to +∞) decrease y and
//     (1 − e^ε·y)₊ is non-increasing in y, also for products.
//   - Tails: mass above the grid goes to +∞; mass below goes up to the lowest
//     grid point. Each truncation moves at most TailMass.
//   - Numerical error: slack bounds the largest difference of tail sums
//     Σ_{ℓ>c} between the stored masses and an exact-arithmetic run of the
//     same operations (CDF errors, FFT errors, summation; see pldGrid).
//     (1 − e^{ε−ℓ})₊ is non-decreasing in ℓ with values in [0, 1], so adding
//     slack to δ(ε) covers the difference.
//
// Composition is by FFT convolution with repeated squaring; after each step
// the tails are truncated and the grid is coarsened by factors of two when it
// grows past MaxPoints (again with the mass- and E[e^{−L}]-preserving split).
// A PLD is immutable; its methods are safe for concurrent use.
type PLD struct {
	h     float64   // grid spacing, a power of two
	off   float64   // grid offset in (−h, 0]: puts a bounded loss's maximum on the grid
	lo    int64     // mass[i] sits at loss off + (lo+i)·h (see lossAt)
	mass  []float64 // probability of each grid loss
	inf   float64   // probability of loss +∞
	slack float64   // bound on the tail-sum numerical error of (mass, inf)
	pure  bool      // no mass was ever placed at +∞: the grid bounds the loss
	count int       // number of base distributions composed
	opts  PLDOptions
}

// PLDOptions tunes the discretization; the zero value selects the defaults.
type PLDOptions struct {
	// Points is the resolution of a base distribution: its grid spacing h
	// is the power of two that puts about Points to 2·Points grid points
	// across the central 99.8% of the loss distribution (the losses at the
	// 0.1% and 99.9% quantiles of the noise), and at most 1/64 (so δ(ε)
	// resolves ε to that) — unless the whole loss range would then need
	// more than 2^16 points. The grid itself extends over the loss range
	// that holds all but TailMass of the probability. Default 256: h is
	// then about σ_L/40 for Gaussian-like losses, and the discretization (a
	// mean-preserving spread adding at most h²/4 to the loss variance per
	// copy) changes the composed loss by well under 0.1%.
	Points int
	// MaxPoints caps the grid after a composition; a longer grid is
	// coarsened by factors of two. Default 2048.
	MaxPoints int
	// TailMass is the largest probability moved per tail and operation
	// (left tail to +∞ loss, right tail up to the grid). Default 1e-14,
	// above the FFT round-off floor (see convolve) so that truncation
	// removes noise rather than keeping it.
	TailMass float64
}

// Default discretization parameters (see PLDOptions).
const (
	defaultPoints    = 256
	defaultMaxPoints = 2048
	defaultTailMass  = 1e-14

	// maxBasePoints caps a base grid (see PLDOptions.Points).
	maxBasePoints = 1 << 16
	// maxSpacing is the coarsest base spacing in nats (see Points).
	maxSpacing = 1.0 / 64
)

func (o PLDOptions) withDefaults() (PLDOptions, error) {
	if o.Points == 0 {
		o.Points = defaultPoints
	}
	if o.MaxPoints == 0 {
		o.MaxPoints = defaultMaxPoints
	}
	if o.TailMass == 0 {
		o.TailMass = defaultTailMass
	}
	if o.Points < 16 || o.Points > 1<<22 || o.MaxPoints < o.Points || o.MaxPoints > 1<<24 {
		return o, fmt.Errorf("%w: PLD points %d, max points %d: want 16 ≤ points ≤ max points ≤ 2^24",
			ErrInvalidParameter, o.Points, o.MaxPoints)
	}
	if !(o.TailMass > 0 && o.TailMass < 1e-6) {
		return o, fmt.Errorf("%w: PLD tail mass %v: want 0 < tail mass < 1e-6", ErrInvalidParameter, o.TailMass)
	}
	return o, nil
}

// NewPLD returns the privacy loss distribution of mechanism m with noise
// scale `scale` for a query that moves by `shift` between neighbours: the
// pair (scale·X, shift + scale·X). Supported: laplace, logistic, gaussian,
// gaussian-classic (the same noise), subbotin:R, discrete-laplace and
// discrete-gaussian (shift must then be a whole number). Mechanisms without a
// monotone privacy loss (sas:A, cauchy) return an error wrapping
// ErrUnsupported; they are pure ε and composed exactly by PureEpsilon paths.
func NewPLD(m Mechanism, scale, shift float64, opts PLDOptions) (*PLD, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if !(scale > 0) || math.IsInf(scale, 0) {
		return nil, fmt.Errorf("%w: scale %v: want a finite scale > 0", ErrInvalidParameter, scale)
	}
	if !(shift >= 0) || math.IsInf(shift, 0) {
		return nil, fmt.Errorf("%w: shift %v: want a finite shift ≥ 0", ErrInvalidParameter, shift)
	}
	if shift == 0 {
		return &PLD{h: maxSpacing, mass: []float64{1}, pure: true, count: 1, opts: o}, nil
	}
	if pldDiscrete(m) {
		if shift != math.Trunc(shift) || shift > 1<<40 {
			return nil, fmt.Errorf("%w: %s needs a whole-number shift, got %v", ErrInvalidParameter, m.Name(), shift)
		}
		f, err := pldDiscreteFamilyOf(m, scale)
		if err != nil {
			return nil, err
		}
		return newDiscretePLD(f, int64(shift), o)
	}
	f, err := pldFamilyOf(m)
	if err != nil {
		return nil, err
	}
	// t = shift/scale, rounded up: a larger shift gives a dominating PLD.
	t := math.Nextafter(shift/scale, math.Inf(1))
	return newContinuousPLD(f, t, o)
}

// pow2Below returns the largest power of two ≤ x (x > 0).
func pow2Below(x float64) float64 {
	_, e := math.Frexp(x)
	return math.Ldexp(1, e-1)
}
