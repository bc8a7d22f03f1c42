package stable

import (
	"errors"
	"math"
)

// Pure-ε calibration of symmetric α-stable (and Cauchy) noise.
//
// For noise scale·X with X standard, shift (sensitivity) Δ and d = Δ/scale,
// the privacy loss at an output u·scale is L(u) = log f(u) − log f(u−d), and
// the mechanism is ε-DP exactly when E(d) = sup_u |L(u)| ≤ ε. L is odd about
// d/2, so sup|L| = sup L, and on u ≥ 0 it decreases (f decreases in |x|). On
// u < 0, L'(u) = ψ(|u|) − ψ(|u|+d) with ψ = −(log f)' the score on (0, ∞).
// The SαS score rises from 0 to a single peak and falls back to 0 like
// (α+1)/x (TestStableScoreUnimodal checks this on a grid); hence L has
// exactly one local maximum, at an interior point u* ∈ (−r_m, 0) where r_m
// is the score's peak, and L → 0 as u → −∞: the supremum is attained, never
// approached at infinity. The reference generator's scans (400 points per
// case, testdata/gen_stable.py) see exactly one interior local maximum in
// every case. E(d) increases strictly in d (for u < 0, f(u−d) decreases in
// d), so ε(scale) decreases in the scale and the solver can bracket it.

// SolveTol is the relative width of the final bracket of the scale
// solver: the returned scale is within this factor of the smallest scale
// whose computed loss bound is ≤ ε, well inside the 1e-6 promise.
const SolveTol = 2e-7

// errSolver reports a numerical failure of a solver (never expected; wrapped
// in ErrInfeasible so callers see a clear error rather than a wrong scale).
var errSolver = errors.New("numerical solver did not converge")

// LossBound returns an upper bound on sup_u log f(u) − log f(u−d) for the
// symmetric density with log-density lf, whose loss is unimodal on u < 0 as
// described above, and the maximiser. relErr bounds the relative error of
// exp(lf). The bound adds, to the largest loss found, the density error
// (2·relErr on a difference of two logarithms), rounding of the logarithms,
// and an estimate of how far the maximum over the final bracket can exceed
// the best point (twice the parabolic curvature estimate times the squared
// bracket width, plus the spread of the values seen in the bracket).
func LossBound(lf func(float64) float64, d, relErr float64) (bound, argmax float64, err error) {
	return LossBoundNear(lf, d, relErr, 0)
}

// LossBoundNear is LossBound with a guess hint < 0 of the maximiser (0 for
// none), typically the maximiser at a nearby d: if L(hint) is at least L at
// hint·(1 ± 1/16), those three points bracket the maximum (L is unimodal on
// u < 0) and the outward search is skipped.
func LossBoundNear(lf func(float64) float64, d, relErr, hint float64) (bound, argmax float64, err error) {
	if !(d > 0) || math.IsInf(d, 1) {
		return 0, 0, errSolver
	}
	// A NaN (a density integral that failed) anywhere in the search makes
	// the result an error: comparisons would silently skip it.
	nan := false
	loss := func(u float64) float64 {
		v := lf(u) - lf(u-d)
		if math.IsNaN(v) {
			nan = true
		}
		return v
	}
	if hint < 0 {
		far, near := hint*(1+1.0/16), hint*(1-1.0/16)
		if lh := loss(hint); lh >= loss(far) && lh >= loss(near) {
			return finishLoss(lf, loss, &nan, d, relErr, far, hint, near, lh)
		}
	}
	// L decreases through u = 0 (L'(0) = −ψ(d) < 0), so a small enough step
	// to the left increases it. Start below the maximiser's scale (≈ −1/d
	// for large d, O(1) for small d).
	h := 0.25 / math.Max(d, 1)
	l0 := loss(0)
	lmid := loss(-h)
	if nan {
		return 0, 0, errSolver
	}
	if lmid == 0 && l0 == 0 {
		// d is below the resolution of u − d near the maximiser (|u| is of
		// order 1 there): the loss is beneath rounding, and the density
		// error term bounds it.
		return 4 * relErr, -h, nil
	}
	if lmid == l0 {
		// Flat to rounding: L(−h) − L(0) ≈ h·ψ(d) with ψ(d) ≈ (α+1)/d
		// falls below an ulp of L only for d ≳ 1e7, where the maximum,
		// about 1/d from 0, exceeds L(0) by O(1/d²) ≤ 1e-14; a relative
		// 1e-12 covers it.
		round := 4 * 0x1p-52 * (math.Abs(lf(0)) + math.Abs(lf(-d)))
		return l0 + 1e-12*math.Abs(l0) + round + 2*relErr/(1-relErr), 0, nil
	}
	for i := 0; !(lmid > l0); i++ {
		if i == 60 || math.IsNaN(lmid) {
			return 0, 0, errSolver
		}
		h /= 4
		lmid = loss(-h)
	}
	// Step out geometrically until L falls: then far < mid < near brackets
	// the maximum.
	near, mid := 0.0, -h
	var far float64
	for i := 0; ; i++ {
		if i == 200 {
			return 0, 0, errSolver
		}
		far = 2 * mid
		lfar := loss(far)
		if math.IsNaN(lfar) {
			return 0, 0, errSolver
		}
		if lfar <= lmid {
			break
		}
		near, mid, lmid = mid, far, lfar
	}
	return finishLoss(lf, loss, &nan, d, relErr, far, mid, near, lmid)
}

// finishLoss maximises loss on the bracket far < mid < near with Brent's
// method and returns the bound of LossBound and the maximiser; *nan reports
// whether loss has returned NaN.
func finishLoss(lf, loss func(float64) float64, nan *bool, d, relErr, far, mid, near, lmid float64) (bound, argmax float64, err error) {
	x, fx, lo, hi, fw, fv, curv := brentMax(loss, far, mid, near, lmid)
	if *nan {
		return 0, 0, errSolver
	}
	spread := math.Abs(fx-fw) + math.Abs(fx-fv)
	slack := math.Abs(curv)*(hi-lo)*(hi-lo) + spread
	// Rounding of log f at the two points, 4 ulps each.
	round := 4 * 0x1p-52 * (math.Abs(lf(x)) + math.Abs(lf(x-d)))
	return fx + slack + round + 2*relErr/(1-relErr), x, nil
}

// brentMax maximises f on the bracket a < b < c with f(b) ≥ f(a), f(c) by
// Brent's method (golden section with parabolic steps; Brent, "Algorithms for
// Minimization without Derivatives", 1973, ch. 5), to relative tolerance
// 3e-8 in x (about the square root of the float64 epsilon: beyond it the
// function values no longer discriminate). It returns the best point and its
// value, the final bracket, the values at the two next-best points, and an
// estimate of the second derivative from the parabola through the three best points.
func brentMax(f func(float64) float64, a, b, c, fb float64) (x, fx, lo, hi, fw, fv, curv float64) {
	const (
		cgold = 0.3819660112501051 // (3 − √5)/2, the golden-section fraction
		rel   = 1e-6
		tiny  = 1e-300
	)
	lo, hi = math.Min(a, c), math.Max(a, c)
	x, fx = b, fb
	w, v := x, x
	fw, fv = fx, fx
	var e, dd float64
	for it := 0; it < 200; it++ {
		m := 0.5 * (lo + hi)
		tol1 := rel*math.Abs(x) + tiny
		tol2 := 2 * tol1
		if math.Abs(x-m) <= tol2-0.5*(hi-lo) {
			break
		}
		parabolic := false
		if math.Abs(e) > tol1 {
			// Parabola through x, w, v (maximising f = minimising −f).
			r := (x - w) * (fv - fx)
			q := (x - v) * (fw - fx)
			p := (x-v)*q - (x-w)*r
			q = 2 * (q - r)
			if q > 0 {
				p = -p
			}
			q = math.Abs(q)
			etemp := e
			e = dd
			if math.Abs(p) < math.Abs(0.5*q*etemp) && p > q*(lo-x) && p < q*(hi-x) {
				dd = p / q
				u := x + dd
				if u-lo < tol2 || hi-u < tol2 {
					dd = math.Copysign(tol1, m-x)
				}
				parabolic = true
			}
		}
		if !parabolic {
			if x >= m {
				e = lo - x
			} else {
				e = hi - x
			}
			dd = cgold * e
		}
		u := x + dd
		if math.Abs(dd) < tol1 {
			u = x + math.Copysign(tol1, dd)
		}
		fu := f(u)
		if fu >= fx {
			if u >= x {
				lo = x
			} else {
				hi = x
			}
			v, fv = w, fw
			w, fw = x, fx
			x, fx = u, fu
		} else {
			if u < x {
				lo = u
			} else {
				hi = u
			}
			if fu >= fw || w == x {
				v, fv = w, fw
				w, fw = u, fu
			} else if fu >= fv || v == x || v == w {
				v, fv = u, fu
			}
		}
	}
	// Twice the second divided difference of the three best points: the
	// second derivative of their parabola.
	if x != w && x != v && w != v {
		curv = 2 * ((fw-fx)/(w-x) - (fv-fx)/(v-x)) / (w - v)
	}
	return x, fx, lo, hi, fw, fv, curv
}

// SolveIncreasing finds, for an increasing positive function g of d > 0, a
// bracket lo < hi with g(lo) ≤ target < g(hi) and hi ≤ lo·(1+tol), starting
// from the guess d0. It works in log coordinates with secant steps
// safeguarded by bisection, and closes the bracket by probing either side of
// a converged secant estimate.
func SolveIncreasing(g func(float64) (float64, error), target, d0, tol float64) (lo, hi float64, err error) {
	width := math.Log1p(tol)
	var tlo, thi float64 = math.Inf(-1), math.Inf(1)
	eval := func(t float64) (float64, error) {
		v, err := g(math.Exp(t))
		if err != nil {
			return 0, err
		}
		y := math.Log(v) - math.Log(target)
		if y <= 0 {
			tlo = math.Max(tlo, t)
		} else {
			thi = math.Min(thi, t)
		}
		return y, nil
	}
	t0 := math.Log(d0)
	y0, err := eval(t0)
	if err != nil {
		return 0, 0, err
	}
	// First step: E(d) ≈ d·(Lipschitz constant) for small d, so slope 1 in
	// log-log coordinates.
	t1 := t0 - y0
	for it := 0; it < 100; it++ {
		if thi-tlo <= width {
			return math.Exp(tlo), math.Exp(thi), nil
		}
		// Keep inside the bracket; bisect when a secant step leaves it.
		if !(t1 > tlo && t1 < thi) || math.IsNaN(t1) {
			switch {
			case math.IsInf(tlo, -1):
				t1 = thi - 2
			case math.IsInf(thi, 1):
				t1 = tlo + 2
			default:
				t1 = 0.5 * (tlo + thi)
			}
		}
		y1, err := eval(t1)
		if err != nil {
			return 0, 0, err
		}
		step := -y1 * (t1 - t0) / (y1 - y0)
		t0, y0 = t1, y1
		if math.Abs(step) < width/4 && !math.IsInf(tlo, 0) && !math.IsInf(thi, 0) {
			// Converged estimate: probe both sides so that the bracket
			// closes around it.
			est := t1 + step
			for _, t := range [2]float64{est - width/3, est + width/3} {
				if t > tlo && t < thi {
					if _, err := eval(t); err != nil {
						return 0, 0, err
					}
				}
			}
			t1 = est
			continue
		}
		if math.Abs(step) < width/4 {
			// One side still open: step through the root.
			step = math.Copysign(width/3, step)
		}
		t1 = t0 + math.Max(-3, math.Min(3, step))
	}
	return 0, 0, errSolver
}
