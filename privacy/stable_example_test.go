package privacy_test

import (
	"fmt"

	"github.com/dpstream/dpstream/privacy"
)

// Calibrate Cauchy noise for a count (sensitivity 1) at ε = 0.5: the scale
// is the closed form 1/(2·sinh(1/4)), and half of all releases are off by
// less than the scale (the median absolute error); the mean error is
// infinite.
func ExampleCauchy() {
	c, err := privacy.Cauchy{}.Calibrate(0.5, 0, 1)
	if err != nil {
		panic(err)
	}
	m := privacy.Cauchy{}
	fmt.Printf("scale %.4f (%s), median error %.4f, mean error %v\n",
		c.Scale, c.Method, m.MedianAbsError(c.Scale), m.MeanAbsError(c.Scale))
	fmt.Printf("95%% of releases within ±%.1f\n", m.HalfWidth(c.Scale, 0.05))
	// Output:
	// scale 1.9793 (closed-form), median error 1.9793, mean error +Inf
	// 95% of releases within ±25.1
}

// Calibrate symmetric 1.5-stable noise for a sum with sensitivity 10 at
// ε = 1 (pure ε-DP), and read off its error figures. The variance is
// infinite, so compare mechanisms by the mean absolute error.
func ExampleStable() {
	m, err := privacy.NewStable(1.5)
	if err != nil {
		panic(err)
	}
	c, err := m.Calibrate(1, 0, 10)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: scale %.2f, ε at that scale ≤ 1: %v\n", c.Mechanism, c.Scale, m.Epsilon(c.Scale, 10) <= 1)
	fmt.Printf("mean |error| %.1f, variance %v\n", m.MeanAbsError(c.Scale), m.Variance(c.Scale))
	// Output:
	// sas:1.5: scale 9.94, ε at that scale ≤ 1: true
	// mean |error| 17.0, variance +Inf
}
