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

// pldGrid is a base PLD under construction.
//
// Error bookkeeping. The slack of a PLD bounds ‖m̂ − m‖_K, the largest
// |Σ_{ℓ>c} (m̂ − m)| over thresholds c (the Kolmogorov distance of the
// loss distributions, +∞ included as the top point), between the stored
// masses and those of an exact-arithmetic run of the same construction.
// Because (1 − e^{ε−ℓ})₊ is non-decreasing in ℓ with values in [0, 1],
// |δ̂(ε) − δ(ε)| ≤ ‖m̂ − m‖_K. This norm suits the construction: the mass of
// an x-interval is a difference of two CDF values, so the CDF errors η(x)
// telescope and contribute at most 2·max|η| to every tail sum, plus the
// errors of the intervals split across the threshold (straddle). Discrete
// atoms have independent errors and are summed (an L1 bound).
type pldGrid struct {
	h           float64
	off         float64
	bot         int64
	mass        []float64
	inf         float64
	telescoping bool      // continuous construction (see above)
	etaMax      float64   // max CDF error over partition points
	straddle    []float64 // difference array: errors of intervals split across each cell
	l1          float64   // errors added as an L1 bound
	round       float64   // rounding of the additions themselves
	overflow    bool      // some mass went to +∞ although the loss is bounded
}

// chooseSpacing returns the base spacing for a loss distribution whose
// central 99.8% spans `bulk` and whose grid must span `span` (PLDOptions).
func chooseSpacing(bulk, span float64, points int) float64 {
	h := math.Min(pow2Below(bulk/float64(points)), maxSpacing)
	for span/h > maxBasePoints {
		h *= 2
	}
	return h
}

// newPLDGrid returns an empty grid with spacing h covering [bottom, top].
// If anchor is true, top itself is a grid point: the offset is
// top − k·h for k = ⌈top/h⌉, which is exact (Sterbenz: k·h ∈ [top, 2·top]
// when h ≤ top).
func newPLDGrid(top, bottom, h float64, anchor bool) *pldGrid {
	off := 0.0
	if anchor && top > 0 && h <= top {
		off = top - math.Ceil(top/h)*h
	}
	g := &pldGrid{h: h, off: off}
	iTop := g.ceilIdx(top)
	iBot := int64(math.Floor((bottom - off) / h))
	g.bot = iBot
	n := iTop - iBot + 1
	g.mass = make([]float64, n)
	g.straddle = make([]float64, n+1)
	return g
}

// gridVal is the grid loss of index i as computed in floating point.
func (g *pldGrid) gridVal(i int64) float64 { return g.off + float64(i)*g.h }

// ceilIdx returns the smallest index whose computed grid loss is ≥ l.
func (g *pldGrid) ceilIdx(l float64) int64 {
	i := int64(math.Ceil((l - g.off) / g.h))
	for g.gridVal(i) < l {
		i++
	}
	for g.gridVal(i-1) >= l {
		i--
	}
	return i
}

// add places probability m (absolute error ≤ mErr) whose losses lie in
// [lmin, lmax] on the grid. logRatio is log(q/m) where q = E[e^{−L}; piece]
// (the other distribution's mass of the same piece), with absolute error
// ≤ logErr; it is ignored when up is true, in which case all mass goes to the
// grid point at or above lmax (a pessimistic move).
func (g *pldGrid) add(m, mErr, lmin, lmax, logRatio, logErr float64, up bool) {
	if !g.telescoping {
		g.l1 += mErr
	}
	if !(m > 0) {
		return
	}
	g.round += 4 * roundoff * m
	h := g.h
	iu := g.ceilIdx(lmax)
	if iu-g.bot >= int64(len(g.mass)) {
		// Above the grid (cannot happen for correctly sized grids): +∞ is
		// the pessimistic place for it.
		g.inf += m
		g.overflow = true
		return
	}
	if up || iu == g.bot {
		g.mass[iu-g.bot] += m
		return
	}
	il := int64(math.Floor((lmin - g.off) / h))
	if il >= iu {
		g.mass[iu-g.bot] += m
		return
	}
	// Losses just below the next lower grid point are rounded up to it
	// (pessimistic) instead of widening the split; the correction below
	// accounts for them.
	if il < iu-1 && lmin > g.gridVal(iu-1)-1e-3*h {
		il = iu - 1
	}
	if il < g.bot {
		il = g.bot
	}
	dl := float64(iu-il) * h
	lil := g.gridVal(il)
	below := math.Max(0, lil-lmin)
	// Preserve mass and E[e^{−L}]: a·e^{−ℓ_il} + (m−a)·e^{−ℓ_iu} = q, i.e.
	// a = m·(E − e^{−dl})/(1 − e^{−dl}) with E = (q/m)·e^{ℓ_il}.
	lr := logRatio + lil
	if lr > 1 { // q/m ≤ e^{−lmin} ⇒ lr ≤ below; guard against garbage
		lr = 1
	}
	e := math.Exp(lr)
	den := -math.Expm1(-dl)
	a := m * (e - math.Exp(-dl)) / den
	// Error of a: from logRatio (through e), from the losses below ℓ_il,
	// and from the rounding of this formula (a few roundoffs of m·(e+1)).
	errLR := logErr + 4*roundoff*(math.Abs(lil)+math.Abs(logRatio))
	corr := m*(2*e*math.Expm1(errLR)+math.Expm1(below))/den + 16*roundoff*m*(e+1)/den
	a -= corr
	if !(a > 0) {
		a = 0
	} else if a > m {
		a = m
	}
	g.mass[il-g.bot] += a
	g.mass[iu-g.bot] += m - a
	if g.telescoping {
		g.straddle[il-g.bot] += mErr
		g.straddle[iu-g.bot] -= mErr
	}
}

func (g *pldGrid) pld(pure bool, o PLDOptions) *PLD {
	slack := g.l1 + g.round
	if g.telescoping {
		run, worst := 0.0, 0.0
		for _, v := range g.straddle {
			run += v
			worst = math.Max(worst, run)
		}
		slack += 2*g.etaMax + worst*(1+1e-12)
	}
	p := &PLD{h: g.h, off: g.off, lo: g.bot, mass: g.mass, inf: g.inf, slack: slack, pure: pure && !g.overflow, count: 1, opts: o}
	p.trimZeros()
	return p
}

// pldQuantile returns x ≤ 0 with cdf(x) ≤ p, within a relative 1e-9 of the
// exact quantile (bisection on a doubling bracket).
func pldQuantile(f lossFamily, p float64) float64 {
	a := -1.0
	for f.cdf(a) > p {
		a *= 2
		if a < -1e300 {
			return a
		}
	}
	b := a / 2
	if f.cdf(b) <= p {
		return b
	}
	for i := 0; i < 200 && b-a > 1e-9*math.Abs(a); i++ {
		mid := 0.5 * (a + b)
		if f.cdf(mid) > p {
			b = mid
		} else {
			a = mid
		}
	}
	return a
}

// pldLossUp returns an upper bound on the exact loss at x.
func pldLossUp(f lossFamily, x, t float64) float64 {
	l, e := pldLoss(f, x, t)
	return l + e
}

// lossCrossing returns a point x in [a, b] with pldLossUp(x) ≤ target, close to
// the lossCrossing (within 1e-4·h in loss), given pldLossUp(a) > target ≥ pldLossUp(b).
// Safeguarded Newton: bisection whenever a Newton step leaves the bracket.
func lossCrossing(f lossFamily, t, target, a, b, guess, h float64) float64 {
	x := guess
	if !(x > a && x < b) {
		x = 0.5 * (a + b)
	}
	for i := 0; i < 200; i++ {
		g := pldLossUp(f, x, t) - target
		if g > 0 {
			a = x
		} else {
			b = x
			if g > -1e-4*h {
				return x
			}
		}
		if b-a <= 4*roundoff*(math.Abs(a)+math.Abs(b)) {
			break
		}
		d := f.dpsi(x-t) - f.dpsi(x)
		xn := math.NaN()
		if d < 0 {
			xn = x - g/d
		}
		if !(xn > a && xn < b) {
			xn = 0.5 * (a + b)
		}
		x = xn
	}
	return b
}

// pldTail is the probability of the tail on x's side — P(X ≤ x) for
// x ≤ 0, P(X > x) otherwise — and the error bound of the CDF it implies:
// for x > 0 the CDF is 1 − tail, which adds a rounding.
func pldTail(f lossFamily, x float64) (v, err float64) {
	if x <= 0 {
		v = f.cdf(x)
		return v, f.cdfRelErr(x)*v + 1e-300
	}
	v = f.cdf(-x)
	return v, f.cdfRelErr(-x)*v + 2*roundoff + 1e-300
}

// pldMass returns P(a < X ≤ b) from tail values va, vb (see pldTail) with
// absolute errors ea, eb, and a bound on its error. The result may be
// slightly negative (rounding); callers clamp.
func pldMass(a, b, va, vb, ea, eb float64) (m, err float64) {
	switch {
	case b <= 0:
		m = vb - va
	case a > 0:
		m = va - vb
	default:
		m = 1 - va - vb
	}
	err = ea + eb + 2*roundoff*math.Abs(m)
	return m, err
}

// logErrOf is the absolute error of log(x) given |x̂ − x| ≤ e.
func logErrOf(x, e float64) float64 {
	if !(x > 0) {
		return math.Inf(1)
	}
	r := e / x
	if r >= 0.5 {
		return math.Inf(1)
	}
	return 2 * r
}

// newContinuousPLD discretizes the PLD of (X, X+t) for a continuous family.
func newContinuousPLD(f lossFamily, t float64, o PLDOptions) (*PLD, error) {
	tau := o.TailMass
	xFirst := pldQuantile(f, tau)
	xLast := t - xFirst
	lFirst, eFirst := pldLoss(f, xFirst, t)
	lLast, eLast := pldLoss(f, xLast, t)
	maxL := f.maxLoss(t)
	bounded := !math.IsInf(maxL, 1)
	top, bottom := lFirst+eFirst, lLast-eLast
	if bounded {
		maxL *= 1 + 4*roundoff
		top, bottom = maxL, -maxL
	}
	if !(top > bottom) || math.IsInf(top, 0) || math.IsInf(bottom, 0) {
		return nil, fmt.Errorf("%w: %s: degenerate loss range at shift/scale %v", ErrInvalidParameter, f.name(), t)
	}
	// Spacing from the central 99.8% of the loss distribution.
	q := pldQuantile(f, 1e-3)
	lq, _ := pldLoss(f, q, t)
	lqr, _ := pldLoss(f, t-q, t)
	h := chooseSpacing(lq-lqr, top-bottom, o.Points)
	g := newPLDGrid(top, bottom, h, bounded)
	g.telescoping = true

	// Partition points: xFirst, then for every grid loss strictly inside
	// (L(xLast), L(xFirst)) a point where the loss has just dropped to it.
	xs := []float64{xFirst}
	iStart := g.ceilIdx(lFirst-eFirst) - 1
	iEnd := g.ceilIdx(lLast + eLast)
	x := xFirst
	for i := iStart; i > iEnd; i-- {
		target := g.gridVal(i)
		guess := x
		if d := f.dpsi(x-t) - f.dpsi(x); d < 0 {
			guess = x + (pldLossUp(f, x, t)-target)/(-d)
		}
		x = lossCrossing(f, t, target, x, xLast, guess, h)
		xs = append(xs, x)
	}
	xs = append(xs, xLast)

	// Tail values and their errors under P (X) and Q (X + t).
	n := len(xs)
	vp, ep := make([]float64, n), make([]float64, n)
	vq, eq := make([]float64, n), make([]float64, n)
	for i, x := range xs {
		vp[i], ep[i] = pldTail(f, x)
		vq[i], eq[i] = pldTail(f, x-t)
		g.etaMax = math.Max(g.etaMax, ep[i])
	}
	// Left tail (−∞, xFirst]: losses in [L(xFirst), sup L].
	if bounded {
		g.add(vp[0], ep[0], math.Min(lFirst-eFirst, maxL), maxL,
			math.Log(vq[0])-math.Log(vp[0]), logErrOf(vq[0], eq[0])+logErrOf(vp[0], ep[0]), false)
	} else {
		g.inf += vp[0]
	}
	// Interior intervals.
	for i := 0; i+1 < n; i++ {
		a, b := xs[i], xs[i+1]
		m, mErr := pldMass(a, b, vp[i], vp[i+1], ep[i], ep[i+1])
		if m < 0 {
			// Clamping breaks the telescoping of CDF errors for this
			// interval: count the change separately.
			g.l1 += -m
			m = 0
		}
		q, qErr := pldMass(a-t, b-t, vq[i], vq[i+1], eq[i], eq[i+1])
		q = math.Max(q, 0)
		la, ea := pldLoss(f, a, t)
		lb, eb := pldLoss(f, b, t)
		lmax, lmin := la+ea, lb-eb
		if bounded { // the exact loss never leaves [−maxL, maxL]
			lmax, lmin = math.Min(lmax, maxL), math.Max(lmin, -maxL)
		}
		g.add(m, mErr, lmin, lmax, math.Log(q)-math.Log(m), logErrOf(q, qErr)+logErrOf(m, mErr), false)
	}
	// Right tail (xLast, ∞): losses in [inf L, L(xLast)]. Its Q-mass is the
	// right tail at xLast − t = −xFirst > 0.
	last := n - 1
	if bounded {
		g.add(vp[last], ep[last], -maxL, math.Max(lLast+eLast, -maxL),
			math.Log(vq[last])-math.Log(vp[last]), logErrOf(vq[last], eq[last])+logErrOf(vp[last], ep[last]), false)
	} else {
		g.add(vp[last], ep[last], math.Inf(-1), lLast+eLast, 0, 0, true)
	}
	return g.pld(bounded, o), nil
}

// discreteMaxAtoms bounds the work of a discrete PLD (about 50 ns per atom).
const discreteMaxAtoms = 1 << 26

// newDiscretePLD discretizes the PLD of (K, K+d) for integer noise K.
func newDiscretePLD(f discreteFamily, d int64, o PLDOptions) (*PLD, error) {
	if useBinnedDGauss(f, d) { // large σ: intervals of atoms (pld_lattice.go)
		return newBinnedDGaussPLD(f.(dgaussFamily), d, o)
	}
	maxL := f.maxLoss(d)
	bounded := !math.IsInf(maxL, 1)
	var kFirst, kLast int64
	if _, ok := f.(dlaplaceFamily); ok {
		// The loss is constant for k ≤ 0 and for k ≥ d: two exact pieces.
		kFirst, kLast = 0, d
	} else {
		kFirst = f.quantile(o.TailMass)
		kLast = d - kFirst
	}
	if kLast-kFirst > discreteMaxAtoms {
		return nil, fmt.Errorf("%w: %s: %d atoms exceed the accountant's limit of %d; use the continuous mechanism",
			ErrInvalidParameter, f.name(), kLast-kFirst, discreteMaxAtoms)
	}
	lFirst, eFirst := f.loss(kFirst, d)
	lLast, eLast := f.loss(kLast, d)
	top, bottom := lFirst+eFirst, lLast-eLast
	if bounded {
		maxL *= 1 + 4*roundoff
		top, bottom = maxL, -maxL
	}
	kq := f.quantile(1e-3)
	lq, _ := f.loss(kq, d)
	lqr, _ := f.loss(d-kq, d)
	bulk := lq - lqr
	if bounded {
		bulk = top - bottom
	}
	g := newPLDGrid(top, bottom, chooseSpacing(bulk, top-bottom, o.Points), bounded)
	// pmfErr bounds the error of exp(log pmf): the log carries a few
	// roundoffs of its terms, exp one more.
	pmfErr := func(m float64, logp float64) float64 { return m * roundoff * (4*math.Abs(logp) + 8) }
	const tailRel = 1e-13 // relative error of the tail sums (≤ a few hundred terms of exp)

	// Left piece K ≤ kFirst: loss in [L(kFirst), sup L].
	mL := f.lowerTail(kFirst)
	if bounded {
		qL := f.lowerTail(kFirst - d)
		g.add(mL, tailRel*mL, lFirst-eFirst, maxL, math.Log(qL)-math.Log(mL), 4*tailRel, false)
	} else {
		g.inf += mL
		g.l1 += tailRel * mL
	}
	// Atoms strictly between.
	for k := kFirst + 1; k < kLast; k++ {
		lp := f.logPMF(k)
		m := math.Exp(lp)
		l, e := f.loss(k, d)
		g.add(m, pmfErr(m, lp), l-e, l+e, -l, e, false)
	}
	// Right piece K ≥ kLast: loss in [inf L, L(kLast)].
	mR := f.lowerTail(-kLast)
	if bounded {
		qR := f.lowerTail(d - kLast)
		g.add(mR, tailRel*mR, -maxL, lLast+eLast, math.Log(qR)-math.Log(mR), 4*tailRel, false)
	} else {
		g.add(mR, tailRel*mR, math.Inf(-1), lLast+eLast, 0, 0, true)
	}
	return g.pld(bounded, o), nil
}

// trimZeros drops exact zeros at the low end (and at the high end unless the
// grid must keep bounding the support for PureEpsilon).
func (p *PLD) trimZeros() {
	i := 0
	for i < len(p.mass)-1 && p.mass[i] == 0 {
		i++
	}
	p.mass = p.mass[i:]
	p.lo += int64(i)
	if !p.pure {
		j := len(p.mass)
		for j > 1 && p.mass[j-1] == 0 {
			j--
		}
		p.mass = p.mass[:j]
	}
}

// truncate moves at most TailMass from the top of the grid to +∞ and at most
// TailMass from the bottom up to the lowest remaining grid point.
func (p *PLD) truncate() {
	tau := p.opts.TailMass
	n := len(p.mass)
	j, cum := n, 0.0
	for j > 1 && cum+p.mass[j-1] <= tau {
		cum += p.mass[j-1]
		j--
	}
	if j < n {
		p.inf += cum
		p.pure = false
		p.mass = p.mass[:j]
	}
	i, low := 0, 0.0
	for i < len(p.mass)-1 && low+p.mass[i] <= tau {
		low += p.mass[i]
		i++
	}
	if i > 0 {
		p.mass = p.mass[i:]
		p.mass[0] += low
		p.lo += int64(i)
	}
}

// coarsen2 doubles the grid spacing, splitting every odd point between its
// two even neighbours so that mass and E[e^{−L}] are preserved. For the odd
// point (2J+1)h the share of (2J)h is w = 1/(1+e^h); it is rounded down
// (more mass to the upper point) to stay pessimistic.
func (p *PLD) coarsen2() {
	w := 1 / (1 + math.Exp(p.h)) * (1 - 8*roundoff)
	lo := p.lo >> 1
	hi := (p.lo + int64(len(p.mass))) >> 1 // ceil((lo+len−1)/2)
	out := make([]float64, hi-lo+1)
	for i, m := range p.mass {
		idx := p.lo + int64(i)
		j := (idx >> 1) - lo
		if idx&1 == 0 {
			out[j] += m
		} else {
			a := w * m
			out[j] += a
			out[j+1] += m - a
		}
	}
	// The split is a mixture of two monotone maps (round down, round up),
	// which cannot increase a tail-sum norm; only its rounding adds.
	p.slack += 4 * roundoff * norm1(p.mass)
	p.mass = out
	p.lo = lo
	p.h *= 2
	p.trimZeros()
}

func (p *PLD) clone() *PLD {
	c := *p
	c.mass = append([]float64(nil), p.mass...)
	return &c
}

// Compose returns the PLD of running the mechanisms of p and q on the same
// input (independent noise): the convolution of the two loss distributions.
// Both must come from NewPLD (or composition) with the same options.
func (p *PLD) Compose(q *PLD) (*PLD, error) {
	if p == nil || q == nil {
		return nil, fmt.Errorf("%w: nil PLD", ErrInvalidParameter)
	}
	if p.opts != q.opts {
		return nil, fmt.Errorf("%w: composing PLDs built with different options", ErrInvalidParameter)
	}
	return compose(p, q), nil
}

func compose(a, b *PLD) *PLD {
	if a.h < b.h {
		a = a.clone()
		for a.h < b.h {
			a.coarsen2()
		}
	} else if b.h < a.h {
		b = b.clone()
		for b.h < a.h {
			b.coarsen2()
		}
	}
	var c []float64
	var ferr float64
	if a == b {
		c, ferr = convolve(a.mass, a.mass)
	} else {
		c, ferr = convolve(a.mass, b.mass)
	}
	ma, mb := norm1(a.mass), norm1(b.mass)
	na, nb := ma+a.inf, mb+b.inf
	r := &PLD{
		h: a.h,
		// Offsets add; rounded up so grid losses never fall below the
		// exact sums.
		off: a.off + b.off + 4*roundoff*(math.Abs(a.off)+math.Abs(b.off)),
		lo:  a.lo + b.lo,
		// +∞ is the top grid point: the product measure puts there
		// inf_a·(all of b) + (finite a)·inf_b.
		mass: c,
		inf:  (a.inf*nb + ma*b.inf) * (1 + 4*roundoff),
		// For E = â − a, F = b̂ − b and non-negative b̂, a:
		// ‖â∗b̂ − a∗b‖_K ≤ ‖E‖_K·‖b̂‖₁ + ‖a‖₁·‖F‖_K (a tail sum of E∗b̂ is
		// an average of tail sums of E), and ‖a‖₁ ≤ ‖â‖₁ + ‖E‖_K.
		// convolve's L1 bound covers its own error and its clamping.
		slack: a.slack*nb + (na+a.slack)*b.slack + ferr + 4*roundoff*(na*nb),
		pure:  a.pure && b.pure,
		count: a.count + b.count,
		opts:  a.opts,
	}
	r.trimZeros()
	r.truncate()
	for len(r.mass) > r.opts.MaxPoints {
		r.coarsen2()
		r.truncate()
	}
	return r
}

// SelfCompose returns the n-fold composition of p with itself (n ≥ 1), by
// repeated squaring: about 2·log2(n) convolutions.
func (p *PLD) SelfCompose(n int) (*PLD, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil PLD", ErrInvalidParameter)
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: composition count %d: want n ≥ 1", ErrInvalidParameter, n)
	}
	var res *PLD
	base := p
	for {
		if n&1 == 1 {
			if res == nil {
				res = base
			} else {
				res = compose(res, base)
			}
		}
		n >>= 1
		if n == 0 {
			break
		}
		base = compose(base, base)
	}
	return res, nil
}

// lossAt is the loss of grid index i, rounded up by a few roundoffs of its
// terms, so that it is never below the exact grid loss off + i·h even after
// offsets were added in composition.
func (p *PLD) lossAt(i int64) float64 {
	ih := float64(i) * p.h
	v := p.off + ih
	return v + 4*roundoff*(math.Abs(p.off)+math.Abs(ih))
}

// pldSumFactor inflates a sum of n non-negative terms to cover its rounding.
func pldSumFactor(n int) float64 { return 1 + float64(n+4)*roundoff }

// Delta returns δ(ε), an upper bound on the hockey-stick divergence of the
// exact PLD at ε: the smallest δ for which the mechanism is (ε, δ)-DP is at
// most this value. It is non-increasing in ε. NaN gives the trivial bound 1.
func (p *PLD) Delta(eps float64) float64 {
	if math.IsNaN(eps) {
		return 1
	}
	s := 0.0
	for i := len(p.mass) - 1; i >= 0; i-- {
		l := p.lossAt(p.lo + int64(i))
		if l <= eps {
			break
		}
		s += p.mass[i] * -math.Expm1(eps-l)
	}
	d := s*pldSumFactor(len(p.mass)) + p.inf + p.slack
	return math.Min(1, d)
}

// Floor is the part of δ(ε) that no ε removes: the probability of infinite
// (or truncated) loss plus the numerical slack.
func (p *PLD) Floor() float64 { return p.inf + p.slack }

// Epsilon returns the smallest ε ≥ 0 with Delta(ε) ≤ delta, rounded up; +Inf
// if even ε → ∞ leaves more than delta (delta below Floor) or delta is NaN.
func (p *PLD) Epsilon(delta float64) float64 {
	if math.IsNaN(delta) {
		return math.Inf(1)
	}
	if p.Delta(0) <= delta {
		return 0
	}
	c := pldSumFactor(len(p.mass))
	rest := (delta - p.inf - p.slack) / c // budget for Σ m(1 − e^{ε−ℓ})
	if !(rest >= 0) {
		return math.Inf(1)
	}
	// Scan downwards. With the points i..top above ε,
	// Σ m(1 − e^{ε−ℓ}) = A − e^{ε−ℓ_i}·B with A = Σm, B = Σ m·e^{ℓ_i−ℓ}.
	A, B := 0.0, 0.0
	eh := math.Exp(-p.h)
	for i := len(p.mass) - 1; i >= 0; i-- {
		li := p.lossAt(p.lo + int64(i))
		B = B*eh + p.mass[i]
		A += p.mass[i]
		if li <= 0 {
			break // ε = 0 was checked above
		}
		// For ε in [ℓ_{i−1}, ℓ_i) the points above ε are exactly i..top.
		lower := li - p.h
		if i > 0 && A-eh*B <= rest {
			continue // still within budget at ℓ_{i−1}: look lower
		}
		if i == 0 {
			lower = math.Inf(-1)
		}
		eps := lower
		if A > rest {
			eps = math.Max(lower, li+math.Log((A-rest)/B))
		}
		eps = math.Min(math.Max(eps, 0), li)
		eps = math.Nextafter(eps, math.Inf(1)) * (1 + 4*roundoff)
		for k := 0; k < 64 && p.Delta(eps) > delta; k++ {
			eps += math.Max(eps*1e-12, 1e-15) * float64(int64(1)<<k)
		}
		return eps
	}
	return 0
}

// PureEpsilon returns the largest loss the PLD can take and true when it is
// finite — then the mechanism is ε-DP (δ = 0) for that ε, up to the
// grid rounding (at most one spacing per composed distribution). It returns
// (+Inf, false) when any mass is at +∞ (unbounded loss or truncation).
func (p *PLD) PureEpsilon() (float64, bool) {
	if !p.pure || p.inf > 0 {
		return math.Inf(1), false
	}
	return p.lossAt(p.lo + int64(len(p.mass)-1)), true
}

// Spacing is the current grid spacing h of the losses.
func (p *PLD) Spacing() float64 { return p.h }

// Len is the number of grid points.
func (p *PLD) Len() int { return len(p.mass) }

// Compositions is the number of base distributions composed into p.
func (p *PLD) Compositions() int { return p.count }
