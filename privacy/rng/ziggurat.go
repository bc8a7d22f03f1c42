package rng

import "math"

// The ziggurat method (Marsaglia & Tsang, "The ziggurat method for
// generating random variables", J. Stat. Softw. 5(8), 2000) for the standard
// exponential and normal distributions, with 256 layers and Doornik's fix
// ("An improved ziggurat method to generate normal random samples", 2005):
// the layer index, the sign and the abscissa come from disjoint bits of one
// 64-bit word, so they are independent.
//
// Word layout: bits 0–7 layer index i, bit 8 sign, bits 11–63 a 53-bit
// integer u; the abscissa is x = u·x[i]·2⁻⁵³ ∈ [0, x[i]).
//
// Exactness. Layer i ≥ 1 is the rectangle [0, x[i]] × [f(x[i]), f(x[i+1])],
// layer 0 the base strip [0, r] × [0, f(r)] plus the tail beyond r; all have
// area v. Whatever the table's rounding, the method returns the density
// proportional to f exactly if every layer has area v, so the only error is
// the layers' relative area error (below 1e-12, TestZigguratTables) and the
// 2⁻⁵³ resolution of the abscissa and of the wedge test. The tails (beyond r)
// are sampled exactly with full-precision uniforms (Stream.Float64), so the
// far tails are not truncated: the exponential reaches 708 + r, the normal
// about 38.

// zigLayers is the number of ziggurat layers.
const zigLayers = 256

// zigTable is the table of one ziggurat.
type zigTable struct {
	x [zigLayers + 1]float64 // layer right edges: x[0] = v/f(r), x[1] = r, …, x[256] = 0
	w [zigLayers]float64     // x[i]·2⁻⁵³, scales the 53-bit integer u to [0, x[i])
	f [zigLayers + 1]float64 // f(x[i]); f[256] = f(0) = 1
	r float64                // start of the tail
	v float64                // area of every layer
}

var (
	// expZig is the ziggurat of f(x) = e^{−x}: tail area e^{−r}.
	expZig = buildZiggurat(
		func(x float64) float64 { return math.Exp(-x) },
		func(y float64) float64 { return -math.Log(y) },
		func(r float64) float64 { return math.Exp(-r) },
		6, 9) // brackets the known r ≈ 7.697 (Marsaglia & Tsang 2000, Table 1)
	// normZig is the ziggurat of f(x) = e^{−x²/2}: tail area
	// √(π/2)·erfc(r/√2).
	normZig = buildZiggurat(
		func(x float64) float64 { return math.Exp(-0.5 * x * x) },
		func(y float64) float64 { return math.Sqrt(-2 * math.Log(y)) },
		func(r float64) float64 { return math.Sqrt(math.Pi/2) * math.Erfc(r/math.Sqrt2) },
		3, 4.5) // brackets the known r ≈ 3.654 for 256 layers
)

// buildZiggurat computes the table of the decreasing density shape f on
// [0, ∞) with inverse finv and tail area tail(r) = ∫_r^∞ f. It finds r by
// bisection, to adjacent float64 values, as the smallest r whose layers do not
// overshoot the mode: with v(r) = r·f(r) + tail(r) and x[i+1] =
// finv(f(x[i]) + v/x[i]), the last layer's top f(x[255]) + v/x[255] must be
// f(0) = 1. lo must overshoot and hi must not.
func buildZiggurat(f, finv, tail func(float64) float64, lo, hi float64) *zigTable {
	t := &zigTable{}
	fill := func(r float64) (top float64, ok bool) {
		v := r*f(r) + tail(r)
		t.r, t.v = r, v
		t.x[0], t.x[1] = v/f(r), r
		for i := 1; i < zigLayers-1; i++ {
			y := f(t.x[i]) + v/t.x[i]
			if y >= 1 {
				return y, false
			}
			t.x[i+1] = finv(y)
		}
		top = f(t.x[zigLayers-1]) + v/t.x[zigLayers-1]
		return top, top <= 1
	}
	for {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if _, ok := fill(mid); ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	fill(hi)
	t.x[zigLayers] = 0
	for i := range t.w {
		t.w[i] = t.x[i] * 0x1p-53
	}
	for i := 1; i < zigLayers; i++ {
		t.f[i] = f(t.x[i])
	}
	t.f[0] = f(t.r) // unused: layer 0 goes to the tail, never to a wedge
	t.f[zigLayers] = 1
	return t
}

// withSign returns x with the sign bit set if bit 8 of b is set.
func withSign(x float64, b uint64) float64 {
	return math.Float64frombits(math.Float64bits(x) | b<<55&(1<<63))
}

// Laplace returns a standard Laplace variate: an exponential ziggurat
// variate with an independent random sign.
func (s *Stream) Laplace() float64 {
	for {
		b := s.c.Uint64()
		i := b & 0xff
		x := float64(b>>11) * expZig.w[i]
		if x < expZig.x[i+1] {
			return withSign(x, b)
		}
		if i == 0 {
			// The exponential is memoryless: the tail beyond r is r + Exp.
			return withSign(expZig.r-math.Log(s.Float64()), b)
		}
		// Wedge: y uniform in [f(x[i]), f(x[i+1])], accept below the curve.
		// float64() keeps the product from being fused (reproducibility
		// across architectures).
		y := expZig.f[i] + float64((expZig.f[i+1]-expZig.f[i])*s.float53())
		if y < math.Exp(-x) {
			return withSign(x, b)
		}
	}
}

// normal returns a standard normal variate.
func (s *Stream) normal() float64 {
	for {
		b := s.c.Uint64()
		i := b & 0xff
		x := float64(b>>11) * normZig.w[i]
		if x < normZig.x[i+1] {
			return withSign(x, b)
		}
		if i == 0 {
			return withSign(s.normalTail(), b)
		}
		y := normZig.f[i] + float64((normZig.f[i+1]-normZig.f[i])*s.float53())
		if y < math.Exp(float64(-0.5*x)*x) {
			return withSign(x, b)
		}
	}
}

// normalTail returns a variate of the standard normal conditioned on
// X > r (Marsaglia, "Generating a variable from the tail of the normal
// distribution", Technometrics 6, 1964): exact, with full-precision
// uniforms.
func (s *Stream) normalTail() float64 {
	r := normZig.r
	for {
		x := -math.Log(s.Float64()) / r
		y := -math.Log(s.Float64())
		if y+y > float64(x*x) {
			return r + x
		}
	}
}
