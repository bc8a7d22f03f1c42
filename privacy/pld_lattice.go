package privacy

import (
	"fmt"
	"math"
)

// The discrete Gaussian's privacy loss distribution for large parameters.
//
// newDiscretePLD places every atom k of the noise on the loss grid, one at a
// time: about 16σ + Δ atoms. That is exact and fast for counts (σ of a few
// hundred), but the snapped real values of the operator run discrete
// Gaussian noise on a lattice ΛZ with Λ ≈ L∞·2⁻²⁰, so the integer shift Δ is
// about 2²⁰ and σ is 2²⁰ to 2³⁰: 10⁷ to 10¹⁰ atoms, beyond the accountant's
// limit (discreteMaxAtoms) — the calibration then silently fell back to
// basic or advanced composition, with several times the noise.
//
// The loss of the pair (K, K + Δ) is affine in the atom,
//
//	L(k) = log P(K = k) − log P(K = k − Δ) = Δ·(Δ − 2k)/(2σ²),
//
// decreasing in k by Δ/σ² per step, a tiny fraction of a grid spacing when
// σ is large. So the atoms whose losses fall between two grid losses form
// an integer interval, and its P- and Q-masses are differences of tail
// probabilities, which the discrete Gaussian computes in constant time for
// σ ≥ dgEMSigma (Euler–Maclaurin, discrete_gaussian.go). The construction is
// the continuous one (newContinuousPLD) with integer partition points: the
// mass of each interval is placed with the same pessimistic, mass- and
// E[e^{−L}]-preserving split, losses bounded from above and below by the
// interval's end atoms, and the tail-value errors telescope in the same
// Kolmogorov-distance bookkeeping (pldGrid). Work: a few tail evaluations per
// grid point, independent of σ and Δ.

// dgBinnedAtoms is the atom count (≈ 16σ + Δ) above which the discrete
// Gaussian's PLD is built from intervals instead of atoms: 2¹⁶ atoms take a
// few milliseconds, more grow linearly.
const dgBinnedAtoms = 1 << 16

// useBinnedDGauss reports whether the PLD of discrete Gaussian noise f at
// integer shift d is built by newBinnedDGaussPLD: large σ, where the tails
// are computed in constant time, and many atoms.
func useBinnedDGauss(f discreteFamily, d int64) bool {
	g, ok := f.(dgaussFamily)
	return ok && g.sigma >= dgEMSigma && 16*g.sigma+float64(d) > dgBinnedAtoms
}

// dgTailRelErr bounds the relative error of the Euler–Maclaurin tail
// T(a) = P(K ≥ a), a ≥ 1, at u = a/σ: dgRelErr for the sums and the division
// by the normaliser, plus the error of erfc and of e^{−u²/2}, which the
// rounding of the argument u moves by about u²·roundoff (the bound
// gaussFamily.cdfRelErr uses for the continuous normal, with its margin).
func dgTailRelErr(u float64) float64 {
	return dgRelErr + 8*(u*u+8)*roundoff
}

// dgSideTail returns the probability of the tail on x's side — P(K ≤ x) for
// x ≤ 0, P(K > x) for x > 0 — and a bound on its absolute error (the error of
// the CDF it implies, as pldTail). σ must be ≥ dgEMSigma.
func dgSideTail(tl dgTail, x int64) (v, err float64) {
	a := x + 1 // x > 0: P(K > x) = T(x + 1)
	if x <= 0 {
		a = -x // x ≤ 0: P(K ≤ x) = P(K ≥ −x) = T(−x), by symmetry
	}
	if a == 0 {
		// T(0) = 1 − T(1): the rounding of the subtraction on top of T(1)'s error.
		t1 := tl.upper(1)
		return 1 - t1, dgTailRelErr(1/tl.sigma)*t1 + dgEMError + 2*roundoff
	}
	v = tl.upper(float64(a))
	err = dgTailRelErr(float64(a)/tl.sigma)*v + dgEMError + 1e-300
	if x > 0 {
		err += 2 * roundoff // the CDF is 1 − v
	}
	return v, err
}

// dgLowerQuantile returns k ≤ 0 with P(K ≤ k) ≤ p (p < 1/2), the largest
// such k up to the tail's error, by bisection on the tail. For p below the
// tails' error floor (about 2e-28) it returns a k far in the tail whose
// probability may exceed p: the constructions that use it stay valid (the
// tail goes to +∞ or up to the grid), only less tight.
func dgLowerQuantile(tl dgTail, p float64) int64 {
	ok := func(k int64) bool {
		v, e := dgSideTail(tl, k)
		return v+e <= p
	}
	hi := int64(-1)
	lo := -int64(math.Ceil(tl.sigma*math.Sqrt(2*(-math.Log(p)+14)))) - 2 // ok(lo): far beyond the quantile
	for i := 0; !ok(lo); i++ {
		if i == 4 {
			return lo
		}
		lo *= 2
	}
	if ok(hi) {
		return hi
	}
	for hi-lo > 1 { // ok(lo), !ok(hi)
		mid := lo + (hi-lo)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// newBinnedDGaussPLD discretizes the PLD of (K, K + d) for discrete Gaussian
// K with σ ≥ dgEMSigma from integer intervals (see above).
func newBinnedDGaussPLD(f dgaussFamily, d int64, o PLDOptions) (*PLD, error) {
	if f.sigma < dgEMSigma || d < 1 {
		return nil, fmt.Errorf("%w: binned discrete-gaussian PLD needs σ ≥ %d and a shift ≥ 1, got σ = %v, Δ = %d",
			ErrInvalidParameter, dgEMSigma, f.sigma, d)
	}
	tl := newDGTail(f.sigma)
	lossUp := func(k int64) float64 { l, e := f.loss(k, d); return l + e }
	lossDown := func(k int64) float64 { l, e := f.loss(k, d); return l - e }

	// Atoms K ≤ kFirst (probability ≤ TailMass) go to +∞; K > kLast, the
	// mirror image, is moved up to the lowest grid loss.
	kFirst := dgLowerQuantile(tl, o.TailMass)
	kLast := d - kFirst
	top, bottom := lossUp(kFirst), lossDown(kLast)
	if !(top > bottom) || math.IsInf(top, 0) || math.IsInf(bottom, 0) {
		return nil, fmt.Errorf("%w: %s: degenerate loss range at shift %d", ErrInvalidParameter, f.name(), d)
	}
	// Spacing from the central 99.8% of the loss distribution, as for the
	// other families.
	kq := dgLowerQuantile(tl, 1e-3)
	g := newPLDGrid(top, bottom, chooseSpacing(lossDown(kq)-lossUp(d-kq), top-bottom, o.Points), false)
	g.telescoping = true

	// Partition points: kFirst, then for every grid loss strictly inside
	// (L(kLast), L(kFirst)) the last atom whose loss (with its error bound)
	// is above it, then kLast. The interval (a, b] holds the atoms a+1 … b,
	// whose losses lie in [L(b), L(a+1)]: one grid cell, up to the error
	// bounds.
	xs := []int64{kFirst}
	iStart := g.ceilIdx(lossDown(kFirst)) - 1
	iEnd := g.ceilIdx(lossUp(kLast))
	sig2 := f.sigma * f.sigma
	for i := iStart; i > iEnd; i-- {
		target := g.gridVal(i)
		// L(k) = target at k = Δ/2 − target·σ²/Δ; step to the last atom
		// whose loss is above target.
		prev := xs[len(xs)-1]
		x := int64(math.Floor(float64(d)/2 - target*sig2/float64(d)))
		x = max(prev, min(kLast, x))
		for x > prev && lossUp(x) <= target {
			x--
		}
		for x+1 < kLast && lossUp(x+1) > target {
			x++
		}
		if x <= prev {
			continue
		}
		if x >= kLast {
			break
		}
		xs = append(xs, x)
	}
	xs = append(xs, kLast)

	// Tail values and their errors under P (K) and Q (K + d).
	n := len(xs)
	vp, ep := make([]float64, n), make([]float64, n)
	vq, eq := make([]float64, n), make([]float64, n)
	for i, x := range xs {
		vp[i], ep[i] = dgSideTail(tl, x)
		vq[i], eq[i] = dgSideTail(tl, x-d)
		g.etaMax = math.Max(g.etaMax, ep[i])
	}
	// Left tail K ≤ kFirst: unbounded loss, to +∞.
	g.inf += vp[0]
	// Interior intervals.
	for i := 0; i+1 < n; i++ {
		a, b := xs[i], xs[i+1]
		m, mErr := pldMass(float64(a), float64(b), vp[i], vp[i+1], ep[i], ep[i+1])
		if m < 0 {
			g.l1 += -m // clamping breaks the telescoping for this interval
			m = 0
		}
		q, qErr := pldMass(float64(a-d), float64(b-d), vq[i], vq[i+1], eq[i], eq[i+1])
		q = math.Max(q, 0)
		g.add(m, mErr, lossDown(b), lossUp(a+1), math.Log(q)-math.Log(m), logErrOf(q, qErr)+logErrOf(m, mErr), false)
	}
	// Right tail K > kLast: losses below L(kLast), moved up to it.
	last := n - 1
	g.add(vp[last], ep[last], math.Inf(-1), lossUp(kLast), 0, 0, true)
	return g.pld(false, o), nil
}
