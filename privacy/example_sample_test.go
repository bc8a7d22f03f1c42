package privacy_test

import (
	"fmt"
	"strings"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/rng"
)

// A count is released with discrete Laplace noise: integer noise, exactly
// ε-DP, and reproducible from the key and the release id (the integer
// samplers give the same draws on every platform).
func ExampleDiscreteLaplace() {
	m := privacy.DiscreteLaplace{}
	cal, err := m.Calibrate(1, 0, 1) // ε = 1, pure, one unit changes the count by ≤ 1
	if err != nil {
		fmt.Println(err)
		return
	}
	key, _ := rng.ParseKeyHex(strings.Repeat("ab", rng.KeySize))
	s := rng.NewStream(key, "logins/2024-06-01T10:00Z/count")
	fmt.Printf("scale %.4f\n", cal.Scale)
	fmt.Println(1234 + m.Sample(s, cal.Scale))
	// Output:
	// scale 1.0000
	// 1234
}

// A real-valued sum is clamped, snapped to a power-of-two grid and noised
// with exactly sampled, grid-rounded Laplace noise: no floating-point side
// channel, and the output is the same on every platform.
func ExampleNewSnapped() {
	// Each user adds at most 10 to the sum; the sum lies in [0, 1e6].
	p, err := privacy.NewSnapped(privacy.Laplace{}, privacy.SnapQuery{Budget: privacy.Budget{Epsilon: 0.5}, Sensitivity: 10, Lower: 0, Upper: 1e6})
	if err != nil {
		fmt.Println(err)
		return
	}
	key, _ := rng.ParseKeyHex(strings.Repeat("ab", rng.KeySize))
	s := rng.NewStream(key, "spend/2024-06-01T10:00Z/sum")
	v, err := p.Release(s, 52341.17)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("exact %v, grid step 2^%d, scale %.6f\n", p.Exact, exponent(p.Step), p.Calibration.Scale)
	fmt.Printf("%.6f\n", v)
	// Output:
	// exact true, grid step 2^-16, scale 20.000031
	// 52337.704224
}

func exponent(step float64) int {
	e := 0
	for step < 1 {
		step *= 2
		e--
	}
	return e
}
