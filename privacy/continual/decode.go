package continual

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrOverflow is returned when a decoded value does not fit in an int64.
var ErrOverflow = errors.New("continual: decoded value out of the int64 range")

// Decode returns V_0 … V_{n−1} (n = len(w) ≤ T) for the noised vector w of
// the factorization:
//
//	V_t = ⌊(2^OutputBits·w_t − Σ_{i=1..t} r'_i·V_{t−i} + K/2) / K⌋,
//
// the released value of window t being V_t/2^OutputBits. Run on z alone
// it returns the noise E of the releases: for w = R'x + z with x integer,
// Decode(w)_t = 2^OutputBits·x_t + Decode(z)_t exactly (by induction: the
// numerator of V_t is K·2^OutputBits·x_t plus the numerator of E_t, and
// ⌊(K·m + y)/K⌋ = m + ⌊y/K⌋ for integers m). So a release computed as
// 2^OutputBits·x_t + Decode(z)_t is a function of w only: post-processing
// of the one mechanism w. Integer arithmetic throughout (128-bit
// accumulators); O(n²) operations. It is DecodeNext applied to each
// window in turn.
func (f *Factorization) Decode(w []int64) ([]int64, error) {
	if len(w) > len(f.r) {
		return nil, fmt.Errorf("%w: %d values for a factorization of %d windows", ErrArgs, len(w), len(f.r))
	}
	v := make([]int64, 0, len(w))
	for _, wt := range w {
		q, err := f.DecodeNext(v, wt)
		if err != nil {
			return nil, err
		}
		v = append(v, q)
	}
	return v, nil
}

// DecodeNext returns V_t for t = len(prev), given prev = V_0 … V_{t−1}
// (Decode of the first t values) and w_t: the step of Decode's recursion,
// so that a caller holding V_0 … V_{t−1} decodes window t in O(t)
// integer operations, with the same result bit for bit.
func (f *Factorization) DecodeNext(prev []int64, wt int64) (int64, error) {
	t := len(prev)
	if t >= len(f.r) {
		return 0, fmt.Errorf("%w: window %d of a factorization of %d windows", ErrArgs, t, len(f.r))
	}
	half := i128{lo: 1 << (f.bits - 1)} // K/2
	acc := mul128(wt, 1<<OutputBits).add(half)
	for i := 1; i <= t; i++ {
		acc = acc.sub(mul128(f.r[i], prev[t-i]))
	}
	q, ok := acc.shiftRight(f.bits).int64()
	if !ok {
		return 0, fmt.Errorf("%w: window %d", ErrOverflow, t)
	}
	return q, nil
}

// i128 is a signed 128-bit integer hi·2⁶⁴ + lo (two's complement). The
// decoding's magnitudes stay below 2^107 (T ≤ 2^14 terms of at most
// 2^30·2^63), far from its range.
type i128 struct {
	hi int64
	lo uint64
}

// mul128 returns a·b exactly.
func mul128(a, b int64) i128 {
	neg := (a < 0) != (b < 0)
	hi, lo := bits.Mul64(abs64(a), abs64(b))
	x := i128{hi: int64(hi), lo: lo}
	if neg {
		return x.neg()
	}
	return x
}

// abs64 returns |a| as a uint64 (exact for math.MinInt64 too).
func abs64(a int64) uint64 {
	if a < 0 {
		return uint64(-(a + 1)) + 1
	}
	return uint64(a)
}

// add returns x + y.
func (x i128) add(y i128) i128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	return i128{hi: x.hi + y.hi + int64(c), lo: lo}
}

// neg returns −x.
func (x i128) neg() i128 {
	lo, c := bits.Add64(^x.lo, 1, 0)
	return i128{hi: ^x.hi + int64(c), lo: lo}
}

// sub returns x − y.
func (x i128) sub(y i128) i128 { return x.add(y.neg()) }

// shiftRight returns ⌊x / 2^n⌋ for 0 < n < 64 (an arithmetic shift).
func (x i128) shiftRight(n uint) i128 {
	return i128{hi: x.hi >> n, lo: x.lo>>n | uint64(x.hi)<<(64-n)}
}

// int64 returns x as an int64 and whether it fits.
func (x i128) int64() (int64, bool) {
	v := int64(x.lo)
	return v, (x.hi == 0 && v >= 0) || (x.hi == -1 && v < 0)
}
