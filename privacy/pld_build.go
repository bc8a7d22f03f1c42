package privacy

import (
	"fmt"
	"math"
)

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
