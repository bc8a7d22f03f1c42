package quantile

import (
	"errors"
	"math/big"
)

// coinStartPrec is the working precision of the first comparison of the
// lazy Bernoulli (bits). Tests lower it to force the refinement.
var coinStartPrec uint = 128

// maxCoinWords bounds the lazy Bernoulli's rounds: each further round is
// needed with probability about 2⁻⁶⁴ (the uniform's next 64 bits must
// match the target's), so 64 rounds fail with probability 2⁻⁴⁰³²; the
// sampler then fails closed (an error, no release).
const maxCoinWords = 64

// errCoin is returned when the lazy Bernoulli did not decide.
var errCoin = errors.New("quantile: the acceptance coin did not decide")

// lazyBernoulli returns true with probability exactly a ∈ [0, 1], given
// certified bounds lo ≤ a ≤ hi at any precision (bounds(prec), with hi −
// lo → 0 as prec grows). It compares a uniform U ∈ [0, 1), drawn lazily 64
// bits at a time from word, with a: after w words U lies in [V, V +
// 2^−64w); it returns true (U < a) when V + 2^−64w ≤ lo, false (U ≥ a)
// when V ≥ hi, and otherwise draws 64 more bits and doubles the
// precision (up to 64 bits beyond the uniform's). The decision equals [U < a] for the one real U the words
// define, so P(true) = a exactly. It also returns the words drawn.
func lazyBernoulli(word func() uint64, bounds func(prec uint) (lo, hi *big.Float, err error)) (bool, int, error) {
	v := new(big.Int)
	prec := coinStartPrec
	for w := 1; w <= maxCoinWords; w++ {
		v.Lsh(v, 64)
		v.Or(v, new(big.Int).SetUint64(word()))
		lo, hi, err := bounds(prec)
		if err != nil {
			return false, w, err
		}
		bits := uint(64*w + 1)
		vlo := new(big.Float).SetPrec(bits).SetInt(v)
		vlo.SetMantExp(vlo, -64*w)
		vhi := new(big.Float).SetPrec(bits).SetInt(new(big.Int).Add(v, big.NewInt(1)))
		vhi.SetMantExp(vhi, -64*w)
		if vhi.Cmp(lo) <= 0 {
			return true, w, nil
		}
		if vlo.Cmp(hi) >= 0 {
			return false, w, nil
		}
		prec = min(2*prec, uint(64*(w+1)+64)) // no more than the next word's resolution needs
	}
	return false, maxCoinWords, errCoin
}
