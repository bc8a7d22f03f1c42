package privacy

import "math"

// Logistic is the Logistic mechanism: X has density e^{−x}/(1 + e^{−x})²,
// variance π²/3 and E|X| = 2·ln 2.
//
// Calibrate uses Theorem 4 of Vinterbo (2022), necessary and sufficient:
// s = Δ / (2·log((e^{ε/2} + √(δ(e^ε + δ − 1))) / (1 − δ))). Like Laplace it
// gives pure ε-DP at s = Δ/ε.
type Logistic struct{}

// Name implements Mechanism.
func (m Logistic) Name() string { return "logistic" }

// Calibrate implements Mechanism with Theorem 4's closed form, rounded up and
// verified with Delta.
func (m Logistic) Calibrate(epsilon, delta, sensitivity float64) (Calibration, error) {
	if err := checkBudget(epsilon, delta, sensitivity); err != nil {
		return Calibration{}, err
	}
	// Theorem 4's denominator, rewritten without overflow or cancellation:
	// 2·log((e^{ε/2} + √(δ(e^ε+δ−1)))/(1−δ))
	//   = ε + 2·log1p(√(δ(1 − e^{−ε} + δ·e^{−ε}))) − 2·log1p(−δ).
	// About 8 roundings contribute, so the scale is rounded up by 10 ulps.
	root := math.Sqrt(delta * (-math.Expm1(-epsilon) + delta*math.Exp(-epsilon)))
	den := epsilon + 2*math.Log1p(root) - 2*math.Log1p(-delta)
	s := roundUp(sensitivity/den, 10)
	if math.IsInf(s, 1) {
		return Calibration{}, errUnverified
	}
	s, err := settle(s, func(s float64) bool { return m.Delta(epsilon, s, sensitivity) <= delta })
	if err != nil {
		return Calibration{}, err
	}
	return Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity, Scale: s, Method: ClosedForm}, nil
}

// Delta returns the smallest δ for which adding scale·X to a query with the
// given sensitivity is (ε, δ)-DP: Lemma 1 with the closed-form threshold of
// the logistic potential. It is NaN for invalid arguments.
func (m Logistic) Delta(epsilon, scale, sensitivity float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return lemma1(m, epsilon, dOf(sensitivity, scale))
}

// threshold: ψ(x) = 2·log(2·cosh(x/2)), so L(u) = 2·log(cosh(u/2)/cosh((u−d)/2))
// rises to d as u → ∞. If d ≤ ε then u* = ∞; otherwise solving
// cosh(u/2) = e^{ε/2}·cosh((u−d)/2) gives
// u* = log(e^{(ε+d)/2} − 1) − log(1 − e^{(ε−d)/2}) = A − B. The bracket
// covers the rounding of both logarithms (4 ulps each) and of their
// arguments x = (ε+d)/2 and z = (ε−d)/2 (1 ulp each, amplified by the
// derivatives e^x/(e^x − 1) and e^z/(1 − e^z)).
func (m Logistic) threshold(epsilon, d float64) (lo, hi float64) {
	if d <= epsilon {
		return math.Inf(1), math.Inf(1)
	}
	x, z := (epsilon+d)/2, (epsilon-d)/2
	var a float64 // log(e^x − 1)
	if x > 1 {
		a = x + math.Log1p(-math.Exp(-x))
	} else {
		a = math.Log(math.Expm1(x))
	}
	b := math.Log(-math.Expm1(z))
	u := a - b
	const ulp = 0x1p-52
	w := ulp*x/-math.Expm1(-x) + ulp*math.Max(epsilon, d)/2/-math.Expm1(-z)*math.Exp(z) + 4*ulp*(math.Abs(a)+math.Abs(b)+math.Abs(u))
	return u - w, u + w
}

// survival returns P(X > x) = 1/(1 + e^x).
func (m Logistic) survival(x float64) float64 {
	if x > 0 {
		e := math.Exp(-x)
		return e / (1 + e)
	}
	return 1 / (1 + math.Exp(x))
}

// CDF returns P(X ≤ x) for the standard logistic variate.
func (m Logistic) CDF(x float64) float64 { return m.survival(-x) }

// Variance implements Mechanism: (π²/3)·scale².
func (m Logistic) Variance(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return math.Pi * math.Pi / 3 * scale * scale
}

// MeanAbsError implements Mechanism: E|scale·X| = 2·ln 2·scale.
func (m Logistic) MeanAbsError(scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	return 2 * math.Ln2 * scale
}

// HalfWidth implements Mechanism: P(|X| > q) = 2/(1 + e^q), so
// q = log(2/β − 1) = log1p(2(1−β)/β).
func (m Logistic) HalfWidth(scale, beta float64) float64 {
	return halfWidth(scale, beta, math.Log1p(2*(1-beta)/beta), func(q float64) float64 { return 2 * m.survival(q) })
}
