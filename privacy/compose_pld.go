package privacy

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// calRRPLD is the PLD of randomized response with parameter ε₀, which
// dominates every ε₀-DP mechanism (Kairouz, Oh & Viswanath 2017): loss +ε₀
// with probability e^{ε₀}/(1+e^{ε₀}), −ε₀ otherwise. It stands in for the
// pure-ε mechanisms without a monotone loss (SαS, Cauchy) in a composition.
func calRRPLD(eps0 float64, o PLDOptions) (*PLD, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	top := eps0 * (1 + 4*roundoff)
	g := newPLDGrid(top, -top, chooseSpacing(2*top, 2*top, o.Points), true)
	p := 1 / (1 + math.Exp(-eps0))
	// Mass p at +ε₀ (Q-mass 1−p = p·e^{−ε₀}), mass 1−p at −ε₀.
	g.add(p, 2*roundoff, eps0, top, -eps0, 4*roundoff*eps0, false)
	g.add(1-p, 2*roundoff, -top, -eps0, eps0, 4*roundoff*eps0, false)
	return g.pld(true, o), nil
}

// calPartPLD returns the PLD of one coordinate of part p at the given scale.
func calPartPLD(p calPart, scale float64, o PLDOptions) (*PLD, error) {
	pl, err := NewPLD(p.Mechanism, scale, p.Linf, o)
	if errors.Is(err, ErrUnsupported) {
		e, perr := calPureEpsilon(p.Mechanism, scale, p.Linf)
		if perr != nil {
			return nil, err
		}
		return calRRPLD(e, o)
	}
	return pl, err
}

// calComposedPLD is the PLD of the whole horizon at noise level κ: the
// parts' PLDs (each self-composed n times) composed in the order of ps.
// The parts' PLDs are independent computations, built concurrently in
// chunks (the next chunk while this goroutine composes the current one);
// the composition stays sequential and in order, so the result is the
// sequential one bit for bit and so is the error: the first part's that
// fails (TestComposedPLDChunksSequential).
func calComposedPLD(ps []calPart, scales []float64, o PLDOptions) (*PLD, error) {
	chunk := 2 * min(runtime.GOMAXPROCS(0), calMaxWorkers)
	var total *PLD
	cur := calBuildParts(ps, scales, o, 0, min(chunk, len(ps)))
	for lo := 0; lo < len(ps); lo += chunk {
		hi := min(lo+chunk, len(ps))
		var next []calPartResult
		var wg sync.WaitGroup
		if hi < len(ps) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next = calBuildParts(ps, scales, o, hi, min(hi+chunk, len(ps)))
			}()
		}
		for _, r := range cur {
			if r.err != nil {
				wg.Wait()
				return nil, r.err
			}
			if total == nil {
				total = r.pld
			} else {
				total = compose(total, r.pld)
			}
		}
		wg.Wait()
		cur = next
	}
	return total, nil
}

// calMaxWorkers bounds the parts whose PLDs calComposedPLD builds at once
// (it holds at most 4·calMaxWorkers of them): 8, a bound on memory.
const calMaxWorkers = 8

// calPartResult is one part's self-composed PLD, or its error.
type calPartResult struct {
	pld *PLD
	err error
}

// calBuildParts returns the self-composed PLDs of the parts lo…hi−1 of
// ps, built by one goroutine each.
func calBuildParts(ps []calPart, scales []float64, o PLDOptions, lo, hi int) []calPartResult {
	res := make([]calPartResult, hi-lo)
	var wg sync.WaitGroup
	for i := lo; i < hi; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base, err := calPartPLD(ps[i], scales[i], o)
			if err != nil {
				res[i-lo].err = err
				return
			}
			res[i-lo].pld, res[i-lo].err = base.SelfCompose(ps[i].n)
		}()
	}
	wg.Wait()
	return res
}

// calibratePLD finds the smallest κ whose composed PLD certifies δ(ε) ≤ δ.
func calibratePLD(total Budget, ps []calPart) (calCandidate, error) {
	return calibratePLDAfter(total, nil, 0, ps)
}

// calibratePLDAfter is calibratePLD after fixed earlier releases: base is
// their composed PLD (nil: none), convolved into every evaluation, and
// used their share of μ² (for the first guess only).
func calibratePLDAfter(total Budget, base *PLD, used float64, ps []calPart) (calCandidate, error) {
	if !(total.Delta > 0) {
		return calCandidate{}, fmt.Errorf("%w: the PLD accountant needs δ > 0; use pure accounting for δ = 0", ErrUnsupported)
	}
	var o PLDOptions
	pats := patternCombos(ps) // non-nil: one window with a total bound (compose_total.go)
	eval := func(kappa float64) (float64, []float64, error) {
		pldEvaluations.Add(1)
		scales := calScales(kappa, ps)
		if pats != nil {
			d, err := patternDelta(ps, pats, scales, total.Epsilon, o)
			return d, scales, err
		}
		p, err := calComposedPLD(ps, scales, o)
		if err != nil {
			return 0, nil, err
		}
		if base != nil {
			p = compose(base, p)
		}
		return p.Delta(total.Epsilon), scales, nil
	}
	// First guess: the privacy loss of nᵢ coordinates at shift/scale tᵢ is
	// roughly Gaussian with variance Σ nᵢ·tᵢ²·Iᵢ (Iᵢ the Fisher
	// information), i.e. μ-GDP with μ² = that sum; earlier releases take
	// their share `used` of μ² (at most 99% of it, for the guess).
	mu, err := gdpMu(total.Epsilon, total.Delta)
	if err != nil || !(mu > 0) {
		mu = 1
	}
	s := 0.0
	for _, p := range ps {
		s += float64(p.n) * pldFisher(p.Mechanism) / (p.w * p.w)
	}
	guess := math.Sqrt(s) / mu
	if used > 0 {
		guess = math.Sqrt(s / math.Max(mu*mu-used, 0.01*mu*mu))
	}
	_, cert, scales, err := solveNoiseLevel(eval, guess, total.Delta)
	if err != nil {
		return calCandidate{}, err
	}
	return calCandidate{acct: AccountPLD, method: Solver, scales: scales, cert: cert}, nil
}

// solveNoiseLevel finds (to CalibrationTolerance) the smallest κ with
// eval(κ) ≤ target, assuming eval is non-increasing, and returns the upper
// end of the final bracket — a κ whose certificate was computed and checked.
// It brackets geometrically from the guess (bracketNoiseLevel) and then runs
// the Illinois variant of regula falsi on log δ against log κ, falling back
// to bisection (refineNoiseLevel).
func solveNoiseLevel(eval func(float64) (float64, []float64, error), guess, target float64) (float64, float64, []float64, error) {
	if !(guess > 0) || math.IsInf(guess, 0) {
		guess = 1
	}
	at := func(x float64) (levelPoint, error) {
		d, sc, err := eval(math.Exp(x))
		if err != nil {
			return levelPoint{}, err
		}
		return levelPoint{x: x, f: math.Log(math.Max(d, 1e-320)) - math.Log(target), d: d, scales: sc}, nil
	}
	lo, hi, err := bracketNoiseLevel(at, math.Log(guess), target)
	if err != nil {
		return 0, 0, nil, err
	}
	hi, err = refineNoiseLevel(at, lo, hi)
	if err != nil {
		return 0, 0, nil, err
	}
	return math.Exp(hi.x), hi.d, hi.scales, nil
}

// levelPoint is one evaluation of solveNoiseLevel's certificate.
type levelPoint struct {
	x, f   float64 // log κ, log δ − log target
	d      float64
	scales []float64
}

// bracketNoiseLevel returns lo infeasible (f > 0) and hi feasible (f ≤ 0)
// around the root, bracketing geometrically from x0 = log guess: steps of
// 1%, doubling, so a good guess costs two evaluations and a poor one a few
// more.
func bracketNoiseLevel(at func(float64) (levelPoint, error), x0, target float64) (lo, hi levelPoint, err error) {
	p, err := at(x0)
	if err != nil {
		return lo, hi, err
	}
	step := 0.01
	if p.f <= 0 {
		hi = p
		for k := 0; ; k++ {
			q, err := at(hi.x - step)
			if err != nil {
				return lo, hi, err
			}
			if q.f > 0 {
				return q, hi, nil
			}
			hi = q
			step *= 2
			if k > 60 {
				return lo, hi, fmt.Errorf("%w: the accountant certifies any noise level; check the budget", ErrInfeasible)
			}
		}
	}
	lo = p
	for k := 0; ; k++ {
		q, err := at(lo.x + step)
		if err != nil {
			return lo, hi, err
		}
		if q.f <= 0 {
			return lo, q, nil
		}
		lo = q
		step *= 2
		if k > 60 || lo.x+step > 690 {
			return lo, hi, fmt.Errorf("%w: δ %v is below what the accountant can certify at any noise level (its numerical floor grows with the number of compositions, about 1e-13 each)", ErrInfeasible, target)
		}
	}
}

// refineNoiseLevel narrows the bracket [lo, hi] to CalibrationTolerance by
// the Illinois variant of regula falsi, and returns its feasible end.
func refineNoiseLevel(at func(float64) (levelPoint, error), lo, hi levelPoint) (levelPoint, error) {
	fl, fh := lo.f, hi.f // working values, halved by the Illinois rule
	last, same := 0, 0
	tol := math.Log1p(CalibrationTolerance)
	for i := 0; i < 100 && hi.x-lo.x > tol; i++ {
		w := hi.x - lo.x
		x := hi.x - fh*w/(fh-fl)
		// Stay at least 0.4·tol inside the bracket, so that a secant step
		// landing next to the root closes the bracket on the next
		// evaluation; bisect after three steps on the same side in case δ(κ)
		// is kinked (grid effects).
		minStep := 0.4 * tol
		if same >= 3 || math.IsNaN(x) {
			x = 0.5 * (lo.x + hi.x)
			same = 0
		}
		x = math.Max(lo.x+minStep, math.Min(hi.x-minStep, x))
		q, err := at(x)
		if err != nil {
			return hi, err
		}
		if q.f > 0 {
			lo, fl = q, q.f
			if last == -1 {
				fh /= 2
				same++
			} else {
				same = 1
			}
			last = -1
		} else {
			hi, fh = q, q.f
			if last == 1 {
				fl /= 2
				same++
			} else {
				same = 1
			}
			last = 1
		}
	}
	return hi, nil
}
