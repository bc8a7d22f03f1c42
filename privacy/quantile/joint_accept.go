package quantile

import (
	"fmt"
	"math/big"

	"github.com/dpstream/dpstream/privacy/rng"
)

// slack returns F = 1 + 2y as fn/fd, the factor of the bound M = Σ'_0·
// 2^shift0·F on exp(−γc(t))/q̃(t) (see Joint, "Why this is exact"): y =
// 3·D·u + k·η with D the sum over the levels of the largest proposal
// weight depth (jump + term + 1) and of the largest message depth, and η
// = (candidates)·2^(1−K) the integer rounding of the weights. It refuses
// (ErrSelect) when y > maxJointSlack.
func (dp *jointDP) slack() (fn, fd *big.Int, err error) {
	var depth int64
	for i := 1; i <= dp.k; i++ {
		depth += dp.maxJump + dp.dTerm[i] + 1
	}
	for i := 2; i <= dp.k+1; i++ {
		depth += dp.dN[i]
	}
	// 2y·2⁶¹ = 6·D·2⁸ + 2·k·candidates (u = 2⁻⁵³, η·2⁶¹ = 2·candidates).
	twoY := new(big.Int).Mul(big.NewInt(6*256), big.NewInt(depth))
	twoY.Add(twoY, new(big.Int).Mul(big.NewInt(int64(2*dp.k)), big.NewInt(int64(dp.candidates))))
	if twoY.Cmp(big.NewInt(int64(2*maxJointSlack*(1<<61)))) > 0 {
		return nil, nil, fmt.Errorf("%w: the histogram is too large for the exact sampler (rounding depth %d)", ErrSelect, depth)
	}
	fd = new(big.Int).Lsh(big.NewInt(1), 61)
	return new(big.Int).Add(fd, twoY), fd, nil
}

// loss returns c(t) for the groups of a tuple, exactly.
func (dp *jointDP) loss(groups []int) *big.Rat {
	c, prev := new(big.Rat), int64(0)
	for i := 1; i <= dp.k+1; i++ {
		cur := dp.n
		if i <= dp.k {
			cur = dp.c[groups[i-1]]
		}
		tau := new(big.Rat).Add(new(big.Rat).SetInt64(dp.tauInt[i]), dp.tauFrac[i])
		t := new(big.Rat).Sub(new(big.Rat).SetInt64(cur-prev), tau)
		c.Add(c, t.Abs(t))
		prev = cur
	}
	return c
}

// accept flips the acceptance coin of a proposal exactly: true with
// probability A(t) = exp(−γ·c(t))/(M·q̃(t)), where 1/q̃(t) = d.num/d.den
// and M = d.sum0·2^d.shift0·fn/fd, by lazyBernoulli on certified bounds
// of A. A certified lower bound above 1 is an error (the proof says it
// cannot happen; fail closed).
func (dp *jointDP) accept(s *rng.Stream, d *jointDraw, fn, fd *big.Int) (bool, error) {
	x := new(big.Rat).Mul(dp.gamma, dp.loss(d.groups))
	num := new(big.Float).SetInt(new(big.Int).Mul(d.num, fd))
	den := new(big.Float).SetInt(new(big.Int).Mul(new(big.Int).Mul(d.den, d.sum0), fn))
	one := big.NewFloat(1)
	bounds := func(prec uint) (lo, hi *big.Float, err error) {
		e, err := expNegBounds(x, prec)
		if err != nil {
			return nil, nil, err
		}
		lo = down(prec).Mul(e.lo, down(prec).Quo(num, den))
		hi = up(prec).Mul(e.hi, up(prec).Quo(num, den))
		lo, hi = scaled(lo, e.exp-d.shift0, false), scaled(hi, e.exp-d.shift0, true)
		if lo.Cmp(one) > 0 {
			return nil, nil, fmt.Errorf("%w: acceptance probability above 1 (the bound M failed)", ErrSelect)
		}
		return lo, hi, nil
	}
	ok, _, err := lazyBernoulli(s.Uint64, bounds)
	return ok, err
}

// scaledLimit bounds the binary exponents scaled returns (big.Float's are
// int32).
const scaledLimit = 1 << 30

// scaled returns x·2^e (x > 0) when its exponent is within ±2³⁰, else a
// bound on the same side: 0 (upper: 2^−2³⁰) below, 2^2³⁰ above. A is
// within 10⁻⁸ of 1 by the proof, so the bounds only keep an impossible
// case finite: a lower bound above 1 is an error, an upper bound of
// 2^−2³⁰ a rejection.
func scaled(x *big.Float, e int64, upper bool) *big.Float {
	ex := int64(x.MantExp(nil)) + e
	switch {
	case ex < -scaledLimit && upper:
		return new(big.Float).SetMantExp(big.NewFloat(1), -scaledLimit)
	case ex < -scaledLimit:
		return new(big.Float)
	case ex > scaledLimit:
		return new(big.Float).SetMantExp(big.NewFloat(1), scaledLimit)
	}
	return x.SetMantExp(x, int(e))
}
