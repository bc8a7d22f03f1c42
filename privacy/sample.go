package privacy

import (
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
)

// Samplers of the continuous mechanisms. Each Sample returns scale·X for the
// mechanism's standard variate X, drawn from the release's Stream, and NaN
// when scale is not finite and > 0 (so that a misconfigured release is
// detectably broken instead of silently unprotected).
//
// Exactness: every sampler is an exact algorithm for its distribution run in
// float64 arithmetic, on uniforms that keep full relative precision near 0
// (Stream.Float64), so tails are not truncated at 2⁻⁵³. What remains is
// float64 rounding (a few ulps per operation, and the ulp-level accuracy of
// math.Log, Exp, Sin, Tan, Pow). Released real values must still be snapped
// (Snapped) because the low bits of x + noise leak x (Mironov, "On
// significance of the least significant bits for differential privacy",
// CCS 2012).

// scaleOK reports whether scale is a usable noise scale for Sample.
func scaleOK(scale float64) bool { return scale > 0 && scale <= math.MaxFloat64 }

// Sample implements Mechanism: scale times a standard Laplace variate (an
// exponential ziggurat variate with a random sign).
func (m Laplace) Sample(s *rng.Stream, scale float64) float64 {
	if !scaleOK(scale) {
		return math.NaN()
	}
	return scale * s.Laplace()
}

// Fill sets every element of dst to scale times an independent standard
// Laplace variate, in the order Sample would draw them. It is Sample without
// the per-call overhead; all elements are NaN if scale is invalid.
func (m Laplace) Fill(s *rng.Stream, scale float64, dst []float64) {
	if !scaleOK(scale) {
		fillNaN(dst)
		return
	}
	for i := range dst {
		dst[i] = scale * s.Laplace()
	}
}

// Sample implements Mechanism: scale times a standard logistic variate by
// the inverse CDF, |X| = log((1−h)/h) = log1p(−h) − log(h) for a uniform h
// in (0, 1/2) and an independent sign, which is accurate at both ends: the
// tail reaches |X| ≈ 709.
func (m Logistic) Sample(s *rng.Stream, scale float64) float64 {
	if !scaleOK(scale) {
		return math.NaN()
	}
	return scale * s.Logistic()
}

// Sample implements Mechanism: scale times a standard normal variate (a
// 256-layer ziggurat with an exact tail).
func (m Gaussian) Sample(s *rng.Stream, scale float64) float64 {
	if !scaleOK(scale) {
		return math.NaN()
	}
	return scale * s.Normal()
}

// Fill sets every element of dst to scale times an independent standard
// normal variate, in the order Sample would draw them; all elements are NaN
// if scale is invalid.
func (m Gaussian) Fill(s *rng.Stream, scale float64, dst []float64) {
	if !scaleOK(scale) {
		fillNaN(dst)
		return
	}
	for i := range dst {
		dst[i] = scale * s.Normal()
	}
}

// Sample implements Mechanism: the same standard normal sampler as
// Gaussian.
func (m GaussianClassic) Sample(s *rng.Stream, scale float64) float64 {
	return Gaussian{}.Sample(s, scale)
}

// Sample implements Mechanism: scale times a standard Subbotin_R variate,
// |X| = (R·G)^{1/R} with G ~ Gamma(1/R, 1) and a random sign. R = 1 uses the
// Laplace sampler and R = 2 the normal sampler (the same distributions). It
// returns NaN if R is outside [1, 50].
func (m Subbotin) Sample(s *rng.Stream, scale float64) float64 {
	if !scaleOK(scale) || m.check() != nil {
		return math.NaN()
	}
	switch m.R {
	case 1:
		return scale * s.Laplace()
	case 2:
		return scale * s.Normal()
	}
	sign := s.Uint64() & (1 << 63)
	// log|X| = (log R + log G)/R, computed in logs so that small G (R large
	// makes 1/R small and G tiny) does not underflow.
	x := math.Exp((math.Log(m.R) + s.LogGamma(1/m.R)) / m.R)
	return scale * math.Float64frombits(math.Float64bits(x)|sign)
}

// Sample implements Mechanism: scale times a standard Cauchy variate,
// |X| = cot(πU/2) for a full-precision uniform U and a random sign, computed
// as 1/tan(πU/2) for U < 1/2 and tan(π(1−U)/2) otherwise, so both the far
// tail (U → 0) and the centre keep full relative precision.
func (m Cauchy) Sample(s *rng.Stream, scale float64) float64 {
	if !scaleOK(scale) {
		return math.NaN()
	}
	return scale * s.Cauchy()
}

// Sample implements Mechanism: scale times a standard symmetric α-stable
// variate (characteristic function exp(−|t|^α)) by Chambers, Mallows & Stuck
// (JASA 71, 1976):
//
//	X = sin(αV)/cos(V)^{1/α} · (cos((1−α)V)/W)^{(1−α)/α},
//
// V uniform on (−π/2, π/2), W standard exponential. V is written as
// ±(π/2 − t) with t = πU/2 for a full-precision uniform U, so that
// cos V = sin t keeps its relative precision where the tail comes from
// (V → ±π/2); W = −log U' is an inverse-CDF exponential. α = 1 is the
// Cauchy sampler. It returns NaN if α is outside [1, 2).
func (m Stable) Sample(s *rng.Stream, scale float64) float64 {
	a := m.Alpha
	if !scaleOK(scale) || !(a >= 1 && a < 2) {
		return math.NaN()
	}
	return scale * s.SymmetricStable(a)
}

func fillNaN(dst []float64) {
	for i := range dst {
		dst[i] = math.NaN()
	}
}
