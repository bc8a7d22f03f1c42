package quantile

import (
	"math"
	"math/big"
)

// xfloat is a positive (or zero) number with a float64 mantissa and a
// wide exponent, m·2^e with m ∈ [1/2, 1) (or m = 0), and a rounding depth
// d: a bound on the number of roundings along any term of the expression
// it was computed by. The joint sampler's weights span far beyond
// float64's range (exp(−γ·c) with γ·c up to 2²⁸), so nothing here over- or
// underflows: exponents are int64 (the sampler keeps γ·2N below 2⁶¹), and
// depths int32 (MaxJointLeaves keeps them below 2³¹).
//
// Error model: every operation below is a float64 operation on
// mantissas in [1/4, 2) (normal numbers) plus exact scaling by powers of
// two, so it obeys the standard model fl(a∘b) = (a∘b)(1+θ), |θ| ≤ u =
// 2⁻⁵³. For positive operands and exact inputs x̄ of depths d_i, a
// product has depth d₁ + d₂ + 1 and a sum max(d₁, d₂) + 1, and by
// induction the computed x̃ satisfies (1−u)^d ≤ x̃/x ≤ (1+u)^d for the
// exact value x of the same expression (Higham, "Accuracy and Stability
// of Numerical Algorithms", 2nd ed., §3.1–3.4: products and sums of
// positive terms accumulate their (1+θ) factors without cancellation).
type xfloat struct {
	m float64
	e int64
	d int32
}

// unitRoundoff is u = 2⁻⁵³, float64's unit roundoff for round to nearest.
const unitRoundoff = 0x1p-53

// xone is 1, exactly.
var xone = xfloat{m: 0.5, e: 1}

// pow2neg[k] = 2^−k exactly, for aligning sums (k ≤ 60).
var pow2neg = func() (t [61]float64) {
	for k := range t {
		t[k] = math.Ldexp(1, -k)
	}
	return t
}()

// xfromFloat returns x > 0 (or 0) as an xfloat of depth d: exact when x is
// the exact value, else d counts the roundings that produced x.
func xfromFloat(x float64, d int32) xfloat {
	if x == 0 {
		return xfloat{}
	}
	m, e := math.Frexp(x)
	return xfloat{m: m, e: int64(e), d: d}
}

// xfromBig returns the float64 rounding (to nearest) of x·2^exp > 0 as
// an xfloat of depth d (the caller certifies d; see TestCertified).
func xfromBig(x *big.Float, exp int64, d int32) xfloat {
	mant := new(big.Float)
	e := int64(x.MantExp(mant)) + exp // x·2^exp = mant·2^e, mant ∈ [1/2, 1)
	m, _ := mant.Float64()
	if m == 1 { // rounded up to the next binade
		m, e = 0.5, e+1
	}
	return xfloat{m: m, e: e, d: d}
}

// xmul returns a·b (one rounding).
func xmul(a, b xfloat) xfloat {
	if a.m == 0 || b.m == 0 {
		return xfloat{}
	}
	m, e := a.m*b.m, a.e+b.e // m ∈ [1/4, 1): normal, one rounding
	if m < 0.5 {
		m, e = m*2, e-1
	}
	return xfloat{m: m, e: e, d: a.d + b.d + 1}
}

// xadd returns a + b (one rounding). A term more than 2⁶⁰ times smaller
// than the other is dropped: its relative weight is below 2⁻⁵⁹ < u (even
// allowing for the operands' own error factors, which the sampler keeps
// below 2⁻¹⁰), so the depth rule max(d₁, d₂) + 1 still holds.
func xadd(a, b xfloat) xfloat {
	if a.m == 0 {
		return b
	}
	if b.m == 0 {
		return a
	}
	if a.e < b.e {
		a, b = b, a
	}
	d := max(a.d, b.d) + 1
	diff := a.e - b.e
	if diff > 60 {
		return xfloat{m: a.m, e: a.e, d: d}
	}
	s, e := a.m+b.m*pow2neg[diff], a.e // b.m·2^−diff ≥ 2⁻⁶¹ is exact; s ∈ [1/2, 2)
	if s >= 1 {
		s, e = s/2, e+1
	}
	return xfloat{m: s, e: e, d: d}
}

// xceilScaled returns ⌈x·2^shift⌉ for x·2^shift ≤ 2⁶², exactly (x's
// mantissa is a 53-bit integer over 2⁵³).
func xceilScaled(x xfloat, shift int64) uint64 {
	if x.m == 0 {
		return 0
	}
	m53 := uint64(x.m * (1 << 53))
	sh := x.e + shift - 53
	if sh >= 0 {
		return m53 << uint(sh)
	}
	if sh <= -64 {
		return 1
	}
	q := m53 >> uint(-sh)
	if q<<uint(-sh) != m53 {
		q++
	}
	return q
}
