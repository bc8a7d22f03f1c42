package windows

import (
	"math"
	"slices"
)

// exactSum holds the exact sum of float64 values as a short list of
// non-overlapping partials in increasing magnitude (Shewchuk, "Adaptive
// precision floating-point arithmetic and fast robust geometric predicates",
// 1997; the algorithm of Python's math.fsum). Because the sum is exact, the
// rounded result does not depend on the order of additions or merges: the
// same multiset of values always gives the same bits, which keeps closed
// windows deterministic under any interleaving of partitions and any order
// of merging partial windows.
//
// The inputs must be finite and their running sum must stay below the
// float64 overflow threshold; Config.Validate bounds |Lower| and |Upper|
// so that it does.
type exactSum struct {
	p []float64
}

// add adds x exactly.
func (e *exactSum) add(x float64) {
	i := 0
	for _, y := range e.p {
		if math.Abs(x) < math.Abs(y) {
			x, y = y, x
		}
		hi := x + y
		lo := y - (hi - x)
		if lo != 0 {
			e.p[i] = lo
			i++
		}
		x = hi
	}
	if x != 0 || i == 0 {
		e.p = append(e.p[:i], x)
	} else {
		e.p = e.p[:i]
	}
}

// merge adds every partial of o exactly.
func (e *exactSum) merge(o *exactSum) {
	for _, x := range o.p {
		e.add(x)
	}
}

// value returns the exact sum correctly rounded to the nearest float64
// (ties to even), as math.fsum does.
func (e *exactSum) value() float64 {
	p := e.p
	n := len(p)
	if n == 0 {
		return 0
	}
	n--
	hi := p[n]
	lo := 0.0
	// Add from the top until the sum becomes inexact.
	for n > 0 {
		x := hi
		n--
		y := p[n]
		hi = x + y
		yr := hi - x
		lo = y - yr
		if lo != 0 {
			break
		}
	}
	// Correct a half-way rounding when the remaining partials push it over
	// (round-half-even would otherwise be wrong).
	if n > 0 && ((lo < 0 && p[n-1] < 0) || (lo > 0 && p[n-1] > 0)) {
		y := lo * 2
		x := hi + y
		yr := x - hi
		if y == yr {
			hi = x
		}
	}
	return hi
}

// canon rewrites the partials in a canonical form that depends only on the
// exact value, not on the order of additions: the greedy expansion whose
// top term is the correctly rounded value and each lower term the correctly
// rounded remainder. Every partial is a multiple of 2^-1074, so a non-zero
// remainder never rounds to zero and the loop ends, after at most about
// (1024+1074)/53 ≈ 40 terms.
func (e *exactSum) canon() {
	rest := e.clone()
	var out []float64
	for {
		h := rest.value()
		if math.IsNaN(h) || math.IsInf(h, 0) {
			return // overflow: only possible with corrupt input; leave as is
		}
		if h == 0 {
			break
		}
		out = append(out, h)
		rest.add(-h)
	}
	slices.Reverse(out)
	e.p = out
}

// clone returns an independent copy.
func (e exactSum) clone() exactSum {
	if len(e.p) == 0 {
		return exactSum{}
	}
	return exactSum{p: append([]float64(nil), e.p...)}
}
