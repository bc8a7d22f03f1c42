package rng

import (
	"math"
	"math/big"
	"math/bits"
)

// Exact samplers on rationals, after Canonne, Kamath & Steinke, "The
// Discrete Gaussian for Differential Privacy" (NeurIPS 2020), §5: only
// integer arithmetic and uniform integers, no floating point, so the output
// distribution is exactly the stated one (up to the truncations below, whose
// probability is stated where they occur) and the same on every platform.

// Limits of the discrete samplers' scale parameter (t for discrete Laplace,
// σ for the discrete Gaussian). Outside them Sample returns NaN.
const (
	// MinDiscreteScale: below 2⁻³⁰ the noise is 0 with probability
	// 1 − 2e^{−2³⁰}; such scales never come out of a calibration (Δ ≥ 1).
	MinDiscreteScale = 0x1p-30
	// MaxDiscreteScale keeps every quantity in uint64 and every output
	// exactly representable as a float64 (|y| ≤ 2⁵³) except with probability
	// below e^{−2¹³}.
	MaxDiscreteScale = 0x1p40
	// MaxLattice is the largest |y| a discrete sampler returns: 2⁵³, the
	// float64 integer limit. Larger draws are redrawn (probability below
	// e^{−2¹³} at MaxDiscreteScale).
	MaxLattice = 1 << 53
)

// DiscreteScaleOK reports whether scale is in the discrete samplers' range.
func DiscreteScaleOK(scale float64) bool {
	return scale >= MinDiscreteScale && scale <= MaxDiscreteScale
}

// DyadicUp returns t/s ≥ scale with s a power of two ≤ 2⁶²: exactly scale
// when scale·2⁶² is an integer (every scale ≥ 2⁻¹⁰), else scale rounded up to
// the next multiple of 2⁻⁶² (more noise, never less). scale must be in
// [MinDiscreteScale, MaxDiscreteScale]; the fraction is reduced.
func DyadicUp(scale float64) (t, s uint64) {
	fr, e := math.Frexp(scale) // scale = fr·2^e, fr ∈ [1/2, 1)
	m := uint64(fr * (1 << 53))
	k := 53 - e // scale = m/2^k; k ≥ 12 since scale ≤ 2⁴⁰
	if k > 62 {
		sh := uint(k - 62)
		m = (m + 1<<sh - 1) >> sh // ceiling
		k = 62
	}
	for m&1 == 0 && k > 0 {
		m >>= 1
		k--
	}
	return m, 1 << uint(k)
}

// bernExpFrac returns a Bernoulli(exp(−n/d)) bit for 0 ≤ n ≤ d, d > 0:
// Algorithm 1 of Canonne et al. for γ = n/d ∈ [0, 1]. With K the first k
// whose Bernoulli(γ/k) draw fails, P(K > k) = γ^k/k!, so P(K odd) = e^{−γ}.
// Bernoulli(γ/k) is drawn as Bernoulli(1/k) ∧ Bernoulli(n/d).
func (s *Stream) bernExpFrac(n, d uint64) bool {
	if n == 0 {
		return true
	}
	k := uint64(1)
	for (k == 1 || s.Uint64n(k) == 0) && (n == d || s.Uint64n(d) < n) {
		k++
	}
	return k&1 == 1
}

// bernExp returns a Bernoulli(exp(−n/d)) bit for any n ≥ 0, d > 0:
// e^{−γ} = (e^{−1})^{⌊γ⌋}·e^{−(γ−⌊γ⌋)}, stopping at the first failure (the
// expected number of rounds is below e/(e−1)).
func (s *Stream) bernExp(n, d uint64) bool {
	for n > d {
		if !s.bernExpFrac(1, 1) {
			return false
		}
		n -= d
	}
	return s.bernExpFrac(n, d)
}

// DiscreteLaplace returns Y with P(Y = y) ∝ exp(−|y|·s/t): Algorithm 2 of
// Canonne et al. X = U + t·V with U uniform on {0, …, t−1} accepted with
// probability e^{−U/t} and V geometric (P(V ≥ v) = e^{−v}) is geometric with
// P(X = x) ∝ e^{−x/t}; Y = ⌊X/s⌋ is geometric with ratio e^{−s/t}; a random
// sign, rejecting −0, makes it two-sided. Draws with |Y| > MaxLattice or an
// overflowing X are redrawn.
func (st *Stream) DiscreteLaplace(t, s uint64) int64 {
	for {
		y, ok := st.geometric(t, s)
		if !ok {
			continue
		}
		if st.c.Uint64()>>63 == 1 {
			if y == 0 {
				continue
			}
			return -int64(y)
		}
		return int64(y)
	}
}

// geometric returns Y = ⌊X/s⌋ ≤ MaxLattice with P(Y = y) ∝ e^{−y·s/t} (see
// discreteLaplace); ok is false when the draw overflowed and must be redone.
func (st *Stream) geometric(t, s uint64) (y uint64, ok bool) {
	for {
		u := st.Uint64n(t)
		if !st.bernExpFrac(u, t) {
			continue
		}
		var v uint64
		for st.bernExpFrac(1, 1) {
			v++
		}
		hi, lo := bits.Mul64(t, v)
		x, carry := bits.Add64(lo, u, 0)
		if hi != 0 || carry != 0 {
			return 0, false
		}
		y = x / s
		return y, y <= MaxLattice
	}
}

// DGParams holds σ² = m/2^j exactly, t = ⌊σ⌋ + 1, and the denominator
// 2·m·t²·2^j of the acceptance exponent of the discrete Gaussian sampler.
type DGParams struct {
	t   uint64
	m   *big.Int
	tj  *big.Int // t·2^j
	den *big.Int // 2·m·t²·2^j
}

// NewDGParams returns the exact parameters for the float64 σ (every float64
// is a dyadic rational, so σ² is too). σ must be in the discrete range.
func NewDGParams(sigma float64) DGParams {
	fr, e := math.Frexp(sigma)
	mant := uint64(fr * (1 << 53))
	k := 53 - e // σ = mant/2^k, k ≥ 12
	for mant&1 == 0 && k > 0 {
		mant >>= 1
		k--
	}
	j := uint(2 * k)
	p := DGParams{t: uint64(math.Floor(sigma)) + 1}
	mm := new(big.Int).SetUint64(mant)
	p.m = mm.Mul(mm, mm) // σ² = mant²/2^(2k)
	p.tj = new(big.Int).Lsh(new(big.Int).SetUint64(p.t), j)
	p.den = new(big.Int).Mul(p.m, p.tj)
	p.den.Mul(p.den, new(big.Int).SetUint64(p.t))
	p.den.Lsh(p.den, 1)
	return p
}

// DiscreteGaussian returns Y with P(Y = y) ∝ exp(−y²/(2σ²)): Algorithm 3 of
// Canonne et al. Propose Y from the discrete Laplace with scale t = ⌊σ⌋ + 1
// and accept with probability exp(−(|Y| − σ²/t)²/(2σ²)); the exponent is
// the exact rational (|Y|·t·2^j − m)² / (2·m·t²·2^j).
func (st *Stream) DiscreteGaussian(p DGParams) int64 {
	num, q, r, y := new(big.Int), new(big.Int), new(big.Int), new(big.Int)
	for {
		v := st.DiscreteLaplace(p.t, 1)
		abs := uint64(v)
		if v < 0 {
			abs = uint64(-v)
		}
		num.Mul(y.SetUint64(abs), p.tj)
		num.Sub(num, p.m)
		num.Mul(num, num)
		q.QuoRem(num, p.den, r)
		if st.bernExpBig(q, r, p.den) {
			return v
		}
	}
}

// bernExpBig returns a Bernoulli(exp(−(q + r/d))) bit for integers q ≥ 0,
// 0 ≤ r < d.
func (st *Stream) bernExpBig(q, r, d *big.Int) bool {
	if q.IsUint64() {
		for i := q.Uint64(); i > 0; i-- {
			if !st.bernExpFrac(1, 1) {
				return false
			}
		}
	} else {
		// q ≥ 2⁶⁴: all of them would have to succeed; stop at the first
		// failure, which comes after e/(e−1) rounds on average.
		for st.bernExpFrac(1, 1) {
		}
		return false
	}
	if r.Sign() == 0 {
		return true
	}
	if d.IsUint64() {
		return st.bernExpFrac(r.Uint64(), d.Uint64())
	}
	k := uint64(1)
	for (k == 1 || st.Uint64n(k) == 0) && st.bernBig(r, d) {
		k++
	}
	return k&1 == 1
}

// bernBig returns a Bernoulli(r/d) bit for 0 ≤ r < d: it compares a uniform
// real, drawn 64 bits at a time, with the base-2⁶⁴ expansion of r/d, and
// stops at the first differing digit (after one digit with probability
// 1 − 2⁻⁶⁴).
func (st *Stream) bernBig(r, d *big.Int) bool {
	rem, digit := new(big.Int).Set(r), new(big.Int)
	for rem.Sign() != 0 {
		rem.Lsh(rem, 64)
		digit.QuoRem(rem, d, rem)
		w, dg := st.c.Uint64(), digit.Uint64()
		if w != dg {
			return w < dg
		}
	}
	// r/d's expansion ended and the uniform equals it so far: U ≥ r/d.
	return false
}

// RoundedLaplace returns K = round(Z) for Z Laplace with scale t/s (in grid
// units), exactly: P(K ≠ 0) = P(|Z| ≥ ½) = e^{−s/(2t)}, and given that,
// |K| − 1 = ⌊|Z| − ½⌋ is geometric with ratio e^{−s/t} (the exponential is
// memoryless), with a random sign. K is a post-processing of Z, so it is
// exactly as private as continuous Laplace noise of scale t/s. Requires
// 2t < 2⁶⁴ (t < 2⁵³ after DyadicUp).
func (st *Stream) RoundedLaplace(t, s uint64) int64 {
	if !st.bernExp(s, 2*t) {
		return 0
	}
	for {
		y, ok := st.geometric(t, s)
		if !ok || y >= MaxLattice {
			continue
		}
		k := int64(y) + 1
		if st.c.Uint64()>>63 == 1 {
			return -k
		}
		return k
	}
}

// BernoulliExp returns a Bernoulli(exp(−n/d)) bit for integers n ≥ 0 and
// d > 0, exactly (Algorithm 1 of Canonne et al. on the integer and the
// fractional part of n/d; only uniform integers, no floating point). It
// panics for n < 0 or d ≤ 0.
func (st *Stream) BernoulliExp(n, d *big.Int) bool {
	if n.Sign() < 0 || d.Sign() <= 0 {
		panic("rng: BernoulliExp needs n ≥ 0 and d > 0")
	}
	q, r := new(big.Int).QuoRem(n, d, new(big.Int))
	return st.bernExpBig(q, r, d)
}
