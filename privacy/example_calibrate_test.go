package privacy_test

import (
	"fmt"
	"math"

	"github.com/dpstream/dpstream/privacy"
)

// Pure ε-DP for a count (sensitivity 1) with the Laplace mechanism: the
// scale is Δ/ε.
func ExampleLaplace_Calibrate() {
	c, err := privacy.Laplace{}.Calibrate(0.5, 0, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("scale %.6f (%s), std dev %.4f\n", c.Scale, c.Method, math.Sqrt(privacy.Laplace{}.Variance(c.Scale)))
	// Output: scale 2.000000 (closed-form), std dev 2.8284
}

// The analytic Gaussian mechanism: the exact smallest σ for (1, 1e-5)-DP,
// against the classic bound, which is proven only for ε < 1 and refuses
// ε = 1.
func ExampleGaussian_Calibrate() {
	c, err := privacy.Gaussian{}.Calibrate(1, 1e-5, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("σ = %.3f\n", c.Scale)
	_, err = privacy.GaussianClassic{}.Calibrate(1, 1e-5, 1)
	fmt.Println(err != nil)
	// Output:
	// σ = 3.731
	// true
}

// Calibrating by name, as the command line does, with the error figures
// of the noise: here Subbotin_3 noise for a sum with sensitivity 10.
func ExampleParse() {
	m, err := privacy.Parse("subbotin:3")
	if err != nil {
		panic(err)
	}
	c, err := m.Calibrate(1, 1e-6, 10)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: scale %.2f, std dev %.2f, E|noise| %.2f, 95%% of the noise within ±%.2f\n",
		c.Mechanism, c.Scale, math.Sqrt(m.Variance(c.Scale)), m.MeanAbsError(c.Scale), m.HalfWidth(c.Scale, 0.05))
	// Output: subbotin:3: scale 86.60, std dev 76.31, E|noise| 63.13, 95% of the noise within ±142.11
}

// Gaussian noise can never give pure ε-DP; the error says which noise can.
func ExampleGaussian_Calibrate_pure() {
	_, err := privacy.Gaussian{}.Calibrate(1, 0, 1)
	fmt.Println(err)
	// Output: privacy: budget cannot be met: gaussian noise cannot give pure ε-DP (δ = 0); use δ > 0 or one of: laplace, logistic, cauchy, sas:A, discrete-laplace
}

// Delta evaluates the exact criterion (Lemma 1's left side) at a given
// scale: how much δ a scale buys at a given ε.
func ExampleLogistic_Delta() {
	d := privacy.Logistic{}.Delta(1, 0.9, 1)
	fmt.Printf("δ = %.4f\n", d)
	// Output: δ = 0.0044
}

// Any symmetric log-concave noise, here the uniform density on (−1, 1):
// with bounded support only δ > 0 is possible, and the scale is Δ/(2δ)
// whatever ε is (Remark 1 of the log-concave paper).
func ExampleConvex() {
	uniform := privacy.Convex{
		Label: "uniform",
		Psi: func(x float64) float64 {
			if math.Abs(x) >= 1 {
				return math.Inf(1)
			}
			return 0
		},
		F:       func(x float64) float64 { return math.Max(0, math.Min(1, (x+1)/2)) },
		Support: 1,
	}
	c, err := uniform.Calibrate(1, 0.01, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: scale %.4f\n", c.Mechanism, c.Scale)
	// Output: uniform: scale 50.0000
}
