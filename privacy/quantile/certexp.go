package quantile

import (
	"errors"
	"math/big"
	"sync"
)

// errExpRange is returned for an exponent beyond expNegBounds's range.
var errExpRange = errors.New("quantile: exp(−x) argument beyond 2^62")

// maxExpArg is the largest integer part of x that expNegBounds takes:
// its binary exponent, about −1.44·x, must fit an int64 (the joint
// sampler asks for at most γ·2N < 2⁶¹).
const maxExpArg = 1 << 62

// bracket is a certified interval [lo·2^exp, hi·2^exp] of a positive
// number, lo ≤ hi, kept with hi's mantissa in [1/2, 1) so that the
// exponent (int64) carries the magnitude: exp(−γ·c) reaches 2^(−10¹⁸),
// beyond big.Float's int32 exponents.
type bracket struct {
	lo, hi *big.Float
	exp    int64
}

// normal returns [lo, hi]·2^exp with hi's exponent moved into exp
// (exact).
func normal(lo, hi *big.Float, exp int64) bracket {
	e := hi.MantExp(nil)
	lo.SetMantExp(lo, -e)
	hi.SetMantExp(hi, -e)
	return bracket{lo: lo, hi: hi, exp: exp + int64(e)}
}

// mul returns a bracket of the product at precision wp (rounded
// outwards).
func (b bracket) mul(c bracket, wp uint) bracket {
	return normal(down(wp).Mul(b.lo, c.lo), up(wp).Mul(b.hi, c.hi), b.exp+c.exp)
}

// quo returns a bracket of b/c at precision wp (rounded outwards).
func (b bracket) quo(c bracket, wp uint) bracket {
	return normal(down(wp).Quo(b.lo, c.hi), up(wp).Quo(b.hi, c.lo), b.exp-c.exp)
}

// expNegBounds returns a bracket of exp(−x) at precision prec (hi − lo ≤
// about 2^−prec·hi) for a rational x ≥ 0, by directed rounding
// (certified, not estimated): x = n + f with n = ⌊x⌋ and f ∈ [0, 1);
// exp(−f) by its alternating Taylor series, whose remainder after any
// term is at most the next term (the terms f^j/j! do not increase for f
// ≤ 1), evaluated in fixed point with every operation rounded outwards
// (expNegFrac); exp(−1)^n by squaring brackets (positive numbers: lower
// ends rounded down, upper ends up). The working precision prec +
// 2·bitlen(n) + 64 absorbs the growth of the interval under the ≤
// 2·bitlen(n) products.
func expNegBounds(x *big.Rat, prec uint) (bracket, error) {
	if x.Sign() < 0 {
		return bracket{}, errors.New("quantile: exp(−x) of a negative x")
	}
	n := new(big.Int).Quo(x.Num(), x.Denom())
	if n.Cmp(big.NewInt(maxExpArg)) > 0 {
		return bracket{}, errExpRange
	}
	f := new(big.Rat).Sub(x, new(big.Rat).SetInt(n))
	wp := prec + 2*uint(n.BitLen()) + 64
	r := normal(expNegFrac(f, wp))
	if n.Sign() > 0 {
		b := expNegOne(wp)
		for k := n.Uint64(); k > 0; k >>= 1 {
			if k&1 == 1 {
				r = r.mul(b, wp)
			}
			if k > 1 {
				b = b.mul(b, wp)
			}
		}
	}
	return bracket{lo: down(prec).Set(r.lo), hi: up(prec).Set(r.hi), exp: r.exp}, nil
}

// expNegFrac returns lo ≤ exp(−f) ≤ hi for a rational f ∈ [0, 1], to
// about 2^−wp (relative): expNegSeries on f/2^s, squared s times.
func expNegFrac(f *big.Rat, wp uint) (lo, hi *big.Float, exp int64) {
	// exp(−f) = exp(−f/2^s)^(2^s): the series of f/2^s ≤ 2⁻¹² needs a
	// quarter of the terms, and the s squarings (rounded outwards) widen
	// the bracket by a factor of about 2^s, which s + 8 more bits absorb.
	const s = 12
	wq := wp + s + 8
	lo, hi = expNegSeries(new(big.Rat).SetFrac(f.Num(), new(big.Int).Lsh(f.Denom(), s)), wq)
	for range s {
		lo, hi = down(wq).Mul(lo, lo), up(wq).Mul(hi, hi)
	}
	return lo, hi, 0
}

// expNegSeries returns lo ≤ exp(−f) ≤ hi for f ∈ [0, 1] to about 2^−wp:
// partial sums of Σ (−f)^j/j! in fixed point (integers over 2^wp), every
// term bracketed by rounding its products and quotients down (tl) and up
// (th), stopped when the upper term is at most one unit and widened by it
// (the alternating remainder is at most the next term).
func expNegSeries(f *big.Rat, wp uint) (lo, hi *big.Float) {
	one := new(big.Int).Lsh(big.NewInt(1), wp)
	fl, rem := new(big.Int).QuoRem(new(big.Int).Lsh(f.Num(), wp), f.Denom(), new(big.Int)) // ⌊f·2^wp⌋
	fh := new(big.Int).Set(fl)
	if rem.Sign() != 0 {
		fh.Add(fh, big.NewInt(1))
	}
	mask := new(big.Int).Sub(one, big.NewInt(1))
	tl, th := new(big.Int).Set(one), new(big.Int).Set(one) // the term f^j/j!, over 2^wp
	sl, sh := new(big.Int).Set(one), new(big.Int).Set(one) // the partial sum
	for j := int64(1); ; j++ {
		jb := big.NewInt(j)
		tl.Mul(tl, fl).Rsh(tl, wp).Quo(tl, jb)
		th.Mul(th, fh).Add(th, mask).Rsh(th, wp) // ⌈th·fh/2^wp⌉
		th.Add(th, big.NewInt(j-1)).Quo(th, jb)  // ⌈th/j⌉
		if th.Cmp(big.NewInt(1)) <= 0 {
			sl.Sub(sl, th)
			sh.Add(sh, th)
			break
		}
		if j%2 == 1 {
			sl.Sub(sl, th)
			sh.Sub(sh, tl)
		} else {
			sl.Add(sl, tl)
			sh.Add(sh, th)
		}
	}
	lo = new(big.Float).SetInt(sl)
	hi = new(big.Float).SetInt(sh)
	return lo.SetMantExp(lo, -int(wp)), hi.SetMantExp(hi, -int(wp))
}

// expOneCachePrec is the precision of the cached bracket of exp(−1)
// (bits): enough for every constant and the first acceptance comparisons.
const expOneCachePrec = 1024

// expOneCache holds exp(−1)'s bracket at expOneCachePrec bits.
var expOneCache = sync.OnceValue(func() bracket {
	return normal(expNegFrac(big.NewRat(1, 1), expOneCachePrec))
})

// expNegOne returns a bracket of exp(−1) at precision wp: the cached one
// rounded outwards when wp is below its precision, else computed.
func expNegOne(wp uint) bracket {
	if wp > expOneCachePrec-8 {
		return normal(expNegFrac(big.NewRat(1, 1), wp))
	}
	c := expOneCache()
	return bracket{lo: down(wp).Set(c.lo), hi: up(wp).Set(c.hi), exp: c.exp}
}

// down and up return a fresh float at precision wp rounding towards −∞
// or +∞: down(wp).Mul(a, b) is a·b rounded down.
func down(wp uint) *big.Float { return new(big.Float).SetPrec(wp).SetMode(big.ToNegativeInf) }

func up(wp uint) *big.Float { return new(big.Float).SetPrec(wp).SetMode(big.ToPositiveInf) }
