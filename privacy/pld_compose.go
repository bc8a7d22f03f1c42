package privacy

import (
	"fmt"
	"math"
)

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
