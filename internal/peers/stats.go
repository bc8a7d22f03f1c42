package main

// stats.go: root mean squared errors over repetitions, their ratio, and
// the standard errors of both (the measurement's precision).

import "math"

// Stat summarises one row's squared errors over R repetitions.
type Stat struct {
	// Reps is R, the repetitions.
	Reps int `json:"reps"`
	// MSE is the mean of the repetitions' squared errors; MSEVar is the
	// sample variance of the repetitions' squared errors.
	MSE    float64 `json:"mse"`
	MSEVar float64 `json:"mse_var"`
	// RMSE is √MSE; RMSERelSE its relative standard error (delta method:
	// ½·SE(MSE)/MSE, SE(MSE) = √(MSEVar/R)).
	RMSE      float64 `json:"rmse"`
	RMSERelSE float64 `json:"rmse_rel_se"`
}

// NewStat summarises the squared errors sq of independent repetitions.
func NewStat(sq []float64) Stat {
	st := Stat{Reps: len(sq)}
	if len(sq) == 0 {
		return st
	}
	for _, v := range sq {
		st.MSE += v
	}
	st.MSE /= float64(len(sq))
	if len(sq) > 1 {
		for _, v := range sq {
			st.MSEVar += (v - st.MSE) * (v - st.MSE)
		}
		st.MSEVar /= float64(len(sq) - 1)
	}
	st.RMSE = math.Sqrt(st.MSE)
	if st.MSE > 0 {
		st.RMSERelSE = 0.5 * math.Sqrt(st.MSEVar/float64(st.Reps)) / st.MSE
	}
	return st
}

// Ratio returns RMSE_a / RMSE_b and its standard error (delta method for
// independent a and b: the relative standard errors add in quadrature).
// Both are NaN when RMSE_b is 0.
func Ratio(a, b Stat) (ratio, se float64) {
	if b.RMSE == 0 {
		return math.NaN(), math.NaN()
	}
	ratio = a.RMSE / b.RMSE
	return ratio, ratio * math.Hypot(a.RMSERelSE, b.RMSERelSE)
}
