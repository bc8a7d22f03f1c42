package quantile

import (
	"errors"
	"math/big"
	"sync"
)

// errExpRange is returned for an exponent beyond expNegBounds's range.
var errExpRange = errors.New("quantile: exp(−x) argument beyond 2^40")

// maxExpArg is the largest integer part of x that expNegBounds takes:
// exp(−2⁴⁰) is 2^(−1.6·10¹²), beyond big.Float's exponent range (int32);
// the joint sampler never asks for more than 2³⁰ (its limit on γ·N).
const maxExpArg = 1 << 40

// expNegBounds returns lo ≤ exp(−x) ≤ hi, both at precision prec, for a
// rational x ≥ 0, by directed rounding (certified, not estimated): x = n +
// f with n = ⌊x⌋ and f ∈ [0, 1); exp(−f) by its alternating Taylor
// series, whose remainder after any term is at most the next term (the
// terms f^j/j! do not increase for f ≤ 1), evaluated on intervals with
// every operation rounded outwards; exp(−1)^n by squaring on intervals
// (positive numbers: lower ends rounded down, upper ends up). The working
// precision prec + 2·bitlen(n) + 64 absorbs the growth of the interval
// under the ≤ 2·bitlen(n) products, so hi − lo shrinks as 2^−prec·hi.
func expNegBounds(x *big.Rat, prec uint) (lo, hi *big.Float, err error) {
	if x.Sign() < 0 {
		return nil, nil, errors.New("quantile: exp(−x) of a negative x")
	}
	n := new(big.Int).Quo(x.Num(), x.Denom())
	if n.Cmp(big.NewInt(maxExpArg)) > 0 {
		return nil, nil, errExpRange
	}
	f := new(big.Rat).Sub(x, new(big.Rat).SetInt(n))
	wp := prec + 2*uint(n.BitLen()) + 64
	rl, rh := expNegFrac(f, wp)
	if n.Sign() > 0 {
		bl, bh := expNegOne(wp)
		for k := n.Uint64(); k > 0; k >>= 1 {
			if k&1 == 1 {
				rl, rh = mulDown(rl, bl, wp), mulUp(rh, bh, wp)
			}
			if k > 1 {
				bl, bh = mulDown(bl, bl, wp), mulUp(bh, bh, wp)
			}
		}
	}
	lo = new(big.Float).SetMode(big.ToNegativeInf).SetPrec(prec).Set(rl)
	hi = new(big.Float).SetMode(big.ToPositiveInf).SetPrec(prec).Set(rh)
	return lo, hi, nil
}

// expNegFrac returns lo ≤ exp(−f) ≤ hi at precision wp for a rational f ∈
// [0, 1]: partial sums of Σ (−f)^j/j! on intervals, stopped when the next
// term is below 2^−wp, widened by that term (the alternating remainder).
func expNegFrac(f *big.Rat, wp uint) (lo, hi *big.Float) {
	fl := new(big.Float).SetPrec(wp).SetMode(big.ToNegativeInf).SetRat(f)
	fh := new(big.Float).SetPrec(wp).SetMode(big.ToPositiveInf).SetRat(f)
	tl, th := newFloat(wp).SetInt64(1), newFloat(wp).SetInt64(1) // the term f^j/j!
	sl, sh := newFloat(wp).SetInt64(1), newFloat(wp).SetInt64(1) // the partial sum
	eps := new(big.Float).SetMantExp(big.NewFloat(1), -int(wp))
	for j := int64(1); ; j++ {
		jf := newFloat(wp).SetInt64(j)
		tl = quoDown(mulDown(tl, fl, wp), jf, wp)
		th = quoUp(mulUp(th, fh, wp), jf, wp)
		if th.Cmp(eps) < 0 {
			// The true sum is within the next term of the partial sum.
			return subDown(sl, th, wp), addUp(sh, th, wp)
		}
		if j%2 == 1 {
			sl, sh = subDown(sl, th, wp), subUp(sh, tl, wp)
		} else {
			sl, sh = addDown(sl, tl, wp), addUp(sh, th, wp)
		}
	}
}

// expOneCachePrec is the precision of the cached bracket of exp(−1)
// (bits): enough for every constant and the first acceptance comparisons.
const expOneCachePrec = 1024

// expOneCache holds exp(−1)'s bracket at expOneCachePrec bits.
var expOneCache = sync.OnceValues(func() (*big.Float, *big.Float) {
	return expNegFrac(big.NewRat(1, 1), expOneCachePrec)
})

// expNegOne returns lo ≤ exp(−1) ≤ hi at precision wp: the cached
// bracket rounded outwards when wp is below its precision, else computed.
func expNegOne(wp uint) (lo, hi *big.Float) {
	if wp > expOneCachePrec-8 {
		return expNegFrac(big.NewRat(1, 1), wp)
	}
	l, h := expOneCache()
	return new(big.Float).SetPrec(wp).SetMode(big.ToNegativeInf).Set(l), new(big.Float).SetPrec(wp).SetMode(big.ToPositiveInf).Set(h)
}

// newFloat returns 0 at precision wp, rounding to nearest (exact
// assignments only).
func newFloat(wp uint) *big.Float { return new(big.Float).SetPrec(wp) }

// mulDown and the helpers below return a∘b at precision wp rounded
// towards −∞ (Down) or +∞ (Up).
func mulDown(a, b *big.Float, wp uint) *big.Float {
	return new(big.Float).SetPrec(wp).SetMode(big.ToNegativeInf).Mul(a, b)
}

func mulUp(a, b *big.Float, wp uint) *big.Float {
	return new(big.Float).SetPrec(wp).SetMode(big.ToPositiveInf).Mul(a, b)
}

func quoDown(a, b *big.Float, wp uint) *big.Float {
	return new(big.Float).SetPrec(wp).SetMode(big.ToNegativeInf).Quo(a, b)
}

func quoUp(a, b *big.Float, wp uint) *big.Float {
	return new(big.Float).SetPrec(wp).SetMode(big.ToPositiveInf).Quo(a, b)
}

func addDown(a, b *big.Float, wp uint) *big.Float {
	return new(big.Float).SetPrec(wp).SetMode(big.ToNegativeInf).Add(a, b)
}

func addUp(a, b *big.Float, wp uint) *big.Float {
	return new(big.Float).SetPrec(wp).SetMode(big.ToPositiveInf).Add(a, b)
}

func subDown(a, b *big.Float, wp uint) *big.Float {
	return new(big.Float).SetPrec(wp).SetMode(big.ToNegativeInf).Sub(a, b)
}

func subUp(a, b *big.Float, wp uint) *big.Float {
	return new(big.Float).SetPrec(wp).SetMode(big.ToPositiveInf).Sub(a, b)
}

// certified returns exp(−x) as an xfloat of depth 2: the float64
// rounding of a lower bound at 80 bits, off by at most u (the rounding)
// and 2⁻⁷⁹ (the bracket), so within [(1−u)², (1+u)²] of the true value.
func certified(x *big.Rat) (xfloat, error) {
	lo, _, err := expNegBounds(x, 80)
	if err != nil {
		return xfloat{}, err
	}
	return xfromBig(lo, 2), nil
}
