package rng

import "math"

// Standard variates of the continuous mechanisms' samplers (package
// privacy scales them): each is an exact algorithm for its distribution run
// in float64 arithmetic on full-precision uniforms (Float64), so the tails
// are not truncated at 2⁻⁵³.

// Logistic returns a standard logistic variate by the inverse CDF,
// |X| = log((1−h)/h) = log1p(−h) − log(h) for a uniform h in (0, 1/2) and an
// independent sign, which is accurate at both ends: the tail reaches
// |X| ≈ 709.
func (s *Stream) Logistic() float64 {
	u, sign := s.float64Sign()
	h := u / 2 // exact: uniform in (0, 1/2)
	x := math.Log1p(-h) - math.Log(h)
	return math.Float64frombits(math.Float64bits(x) | sign)
}

// Cauchy returns a standard Cauchy variate, |X| = cot(πU/2) for a
// full-precision uniform U and a random sign, computed as 1/tan(πU/2) for
// U < 1/2 and tan(π(1−U)/2) otherwise, so both the far tail (U → 0) and the
// centre keep full relative precision.
func (s *Stream) Cauchy() float64 {
	u, sign := s.float64Sign()
	var x float64
	if u < 0.5 {
		x = 1 / math.Tan(math.Pi/2*u)
	} else {
		x = math.Tan(math.Pi / 2 * (1 - u)) // 1 − u is exact here
	}
	return math.Float64frombits(math.Float64bits(x) | sign)
}

// LogGamma returns log G for G ~ Gamma(a, 1), a > 0: Marsaglia & Tsang, "A
// simple method for generating gamma variables", ACM TOMS 26(3), 2000, with
// their boost for a < 1: G(a) = G(a+1)·U^{1/a}, taken in logs.
func (s *Stream) LogGamma(a float64) float64 {
	boost := 0.0
	if a < 1 {
		boost = math.Log(s.Float64()) / a
		a++
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := s.normal()
		v := 1 + float64(c*x)
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := s.Float64()
		x2 := float64(x * x)
		// Squeeze (0.0331 is Marsaglia & Tsang's constant), then the exact
		// test log u < x²/2 + d·(1 − v + log v).
		if u < 1-float64(0.0331*x2)*x2 || math.Log(u) < 0.5*x2+float64(d*(1-v+math.Log(v))) {
			return boost + math.Log(d*v)
		}
	}
}

// SymmetricStable returns a standard symmetric α-stable variate
// (characteristic function exp(−|t|^α)) for 1 ≤ α < 2 by Chambers, Mallows
// & Stuck (JASA 71, 1976):
//
//	X = sin(αV)/cos(V)^{1/α} · (cos((1−α)V)/W)^{(1−α)/α},
//
// V uniform on (−π/2, π/2), W standard exponential. V is written as
// ±(π/2 − t) with t = πU/2 for a full-precision uniform U, so that
// cos V = sin t keeps its relative precision where the tail comes from
// (V → ±π/2); W = −log U' is an inverse-CDF exponential. α = 1 is the
// Cauchy variate. α is not checked here.
func (s *Stream) SymmetricStable(a float64) float64 {
	if a == 1 {
		return s.Cauchy()
	}
	u, sign := s.float64Sign()
	w := -math.Log(s.Float64())
	t := math.Pi / 2 * u
	absV := math.Pi/2 - t
	x := math.Sin(a*absV) / math.Pow(math.Sin(t), 1/a) * math.Pow(math.Cos((a-1)*absV)/w, (1-a)/a)
	return math.Float64frombits(math.Float64bits(x) | sign)
}
