package rng

import (
	"crypto/hmac"
	"crypto/sha256"
	"math"
	"math/bits"
	"math/rand/v2"
)

// Stream is a cryptographically secure pseudo-random stream for one release:
// a ChaCha8 generator (math/rand/v2, the C2SP chacha8rand construction)
// seeded with HMAC-SHA256(key, release id). The same key and release id
// always give the same stream, bit for bit; streams of different release ids
// are computationally independent, and without the key they cannot be
// predicted. A Stream is not safe for concurrent use.
//
// Every variate is a deterministic function of the stream's words, so a
// release that draws its values in a fixed order is reproducible: on the
// same GOARCH and Go version the floating-point samplers reproduce bit for
// bit; the integer samplers (discrete Laplace, discrete Gaussian, the exact
// snapped Laplace and Gaussian) reproduce on every platform for the same
// scale, because they use integer arithmetic only. Create streams with
// NewStream: the zero Stream is not keyed.
type Stream struct {
	c rand.ChaCha8
}

// NewStream returns the stream of the release identified by releaseID.
func NewStream(key Key, releaseID string) *Stream {
	mac := hmac.New(sha256.New, key[:])
	mac.Write([]byte(releaseID))
	var seed [32]byte
	copy(seed[:], mac.Sum(nil))
	s := &Stream{}
	s.c.Seed(seed)
	return s
}

// Uint64 returns 64 uniformly random bits.
func (s *Stream) Uint64() uint64 { return s.c.Uint64() }

// Uint64n returns a uniformly random integer in [0, n), without modulo bias
// (Lemire, "Fast random integer generation in an interval", ACM TOMACS 2019).
// Uint64n(0) returns 0.
func (s *Stream) Uint64n(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	hi, lo := bits.Mul64(s.c.Uint64(), n)
	if lo < n {
		thresh := -n % n // 2^64 mod n: the size of the biased remainder
		for lo < thresh {
			hi, lo = bits.Mul64(s.c.Uint64(), n)
		}
	}
	return hi
}

// mantMask selects the 52 explicit mantissa bits of a float64.
const mantMask = 1<<52 - 1

// Float64 returns a uniform variate in the open interval (0, 1) that reaches
// every float64 in [2⁻¹⁰²², 1) with the right probability: it is a uniform
// real number V rounded down to the float64 grid, so P(Float64() = x) is the
// gap between x and the next float64. Unlike k/2⁵³ it keeps full relative
// precision near 0, which is what the tails of −log(U) and of inverse CDFs
// depend on: −log(Float64()) reaches 708, not 36.7.
//
// Method: a geometric binary exponent (the count of leading zero bits of an
// unbounded random bit string) and 52 independent mantissa bits, as in
// Downey, "Generating pseudo-random floating-point values" (2007). One
// 64-bit word suffices with probability 1 − 2⁻¹²; the rest of the time
// further words extend the exponent. The 2⁻¹⁰²² of mass below the smallest
// normal float64 is folded into the lowest normal binade.
func (s *Stream) Float64() float64 {
	x := s.c.Uint64()
	if g := x >> 52; g != 0 {
		// 12 exponent bits: the count of leading zeros, 0…11, has
		// P(k) = 2^-(k+1).
		return uniformFromParts(bits.LeadingZeros64(g)-52, x&mantMask)
	}
	return s.float64Deep(12, x&mantMask)
}

// float64Sign returns a Float64 variate and an independent sign: 0 or
// 1<<63, to be OR-ed into the variate's bits. One 64-bit word suffices with
// probability 1 − 2⁻¹¹.
func (s *Stream) float64Sign() (float64, uint64) {
	x := s.c.Uint64()
	sign := x & (1 << 63)
	if g := x >> 52 & 0x7ff; g != 0 {
		return uniformFromParts(bits.LeadingZeros64(g)-53, x&mantMask), sign
	}
	return s.float64Deep(11, x&mantMask), sign
}

// float64Deep finishes Float64 when its first e exponent bits were zero.
func (s *Stream) float64Deep(e int, mant uint64) float64 {
	for e <= maxUniformZeros {
		y := s.c.Uint64()
		if y != 0 {
			e += bits.LeadingZeros64(y)
			break
		}
		e += 64
	}
	return uniformFromParts(e, mant)
}

// maxUniformZeros is the largest count of leading zero bits that still gives
// a normal float64 in uniformFromParts (biased exponent 1022−1021 = 1).
const maxUniformZeros = 1021

// uniformFromParts returns (1 + mant·2⁻⁵²)·2^−(zeros+1): the float64 in
// [2^−(zeros+1), 2^−zeros) with the given 52-bit mantissa. zeros above
// maxUniformZeros are clamped to it.
func uniformFromParts(zeros int, mant uint64) float64 {
	if zeros > maxUniformZeros {
		zeros = maxUniformZeros
	}
	return math.Float64frombits(uint64(1022-zeros)<<52 | mant&mantMask)
}

// float53 returns k·2⁻⁵³ for a uniform k in [0, 2⁵³): the usual
// fixed-point uniform in [0, 1). It is used only where its resolution
// cannot matter (acceptance tests of rejection samplers).
func (s *Stream) float53() float64 {
	return float64(s.c.Uint64()>>11) * 0x1p-53
}

// Exp returns a standard exponential variate (density e^{−x}, x > 0): a
// 256-layer ziggurat (Marsaglia & Tsang 2000, with Doornik's 2005 fix of
// independent layer and abscissa bits) whose tail uses Float64, so the
// variate is exact up to float64 rounding across its whole range.
func (s *Stream) Exp() float64 {
	return math.Abs(s.Laplace())
}

// Normal returns a standard normal variate: a 256-layer ziggurat as for Exp,
// with Marsaglia's exact tail algorithm on full-precision uniforms.
func (s *Stream) Normal() float64 {
	return s.normal()
}
