package continual

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/dpstream/dpstream/privacy"
)

// treeMatrix returns R of the binary tree over T windows, nodes complete
// within [0, t) only (rows: nodes, columns: windows).
func treeMatrix(T, t int) *mat.Dense {
	var rows [][]float64
	for l := 0; 1<<l <= t; l++ {
		for j := 0; (j+1)<<l <= t; j++ {
			row := make([]float64, T)
			for i := j << l; i < (j+1)<<l; i++ {
				row[i] = 1
			}
			rows = append(rows, row)
		}
	}
	m := mat.NewDense(len(rows), T, nil)
	for i, r := range rows {
		m.SetRow(i, r)
	}
	return m
}

// sqrtMatrix returns the T×T lower-triangular Toeplitz R with r_k.
func sqrtMatrix(T int) *mat.Dense {
	r := sqrtCoefficients(T)
	m := mat.NewDense(T, T, nil)
	for i := range T {
		for j := 0; j <= i; j++ {
			m.Set(i, j, r[i-j])
		}
	}
	return m
}

func matrixOf(st Strategy, T int) *mat.Dense {
	switch st {
	case Identity:
		m := mat.NewDense(T, T, nil)
		for i := range T {
			m.Set(i, i, 1)
		}
		return m
	case Tree, TreeHonaker:
		return treeMatrix(T, T)
	}
	return sqrtMatrix(T)
}

// TestSensitivityBruteForce checks SensitivityBound against the largest
// ‖R·δ‖₂ over every δ ∈ {−1, 0, 1}^T with at most K non-zero coordinates
// (the vertices of the neighbouring set; ‖R·δ‖ is convex, so its maximum
// over the box is at a vertex): equal for K = 1 and K = T — which checks
// the claim max ‖R·δ‖ = ‖R·1_S‖ for non-negative R, signs included — and
// never below it in between. Reference values: exhaustive enumeration
// (3^8 = 6561 vectors); tolerance 1e-9 relative.
func TestSensitivityBruteForce(t *testing.T) {
	const T = 8
	for _, st := range Strategies {
		R := matrixOf(st, T)
		for K := 1; K <= T; K++ {
			best := 0.0
			d := make([]int, T)
			for {
				nz := 0
				x := make([]float64, T)
				for i, v := range d {
					x[i] = float64(v - 1)
					if v != 1 {
						nz++
					}
				}
				if nz <= K {
					var y mat.VecDense
					y.MulVec(R, mat.NewVecDense(T, x))
					best = math.Max(best, mat.Norm(&y, 2))
				}
				i := 0
				for i < T && d[i] == 2 {
					d[i] = 0
					i++
				}
				if i == T {
					break
				}
				d[i]++
			}
			got, err := SensitivityBound(st, T, K)
			if err != nil {
				t.Fatal(err)
			}
			if got < best*(1-1e-9) {
				t.Errorf("%s K=%d: bound %g below the true maximum %g", st, K, got, best)
			}
			if (K == 1 || K == T) && got > best*(1+1e-9) {
				t.Errorf("%s K=%d: %g, exact maximum %g", st, K, got, best)
			}
		}
	}
}

// TestErrorFactorsMatchMatrices checks errorFactor against explicit
// linear algebra for T up to 24: L = A·R⁺ with R the strategy's matrix
// restricted to what is released by t (for the trees, the nodes complete
// within [0, t); the plain tree sums the canonical decomposition, whose
// variance is popcount(t)), and Honaker's estimator against the best linear
// unbiased estimate a_tᵀ(R_tᵀR_t)⁺a_t; the square-root factorization
// against R·R = A. Tolerance 1e-9 relative.
func TestErrorFactorsMatchMatrices(t *testing.T) {
	for T := 1; T <= 24; T++ {
		for tt := 1; tt <= T; tt++ {
			// BLUE of the prefix sum [0, tt) from the tree nodes complete by tt.
			R := treeMatrix(tt, tt)
			var G, Gi mat.Dense
			G.Mul(R.T(), R)
			if err := Gi.Inverse(&G); err != nil {
				t.Fatal(err)
			}
			a := mat.NewVecDense(tt, nil)
			for i := range tt {
				a.SetVec(i, 1)
			}
			blue := mat.Inner(a, &Gi, a)
			if h := errorFactor(TreeHonaker, tt); math.Abs(h-blue) > 1e-9*blue {
				t.Errorf("Honaker t=%d: %g, BLUE %g", tt, h, blue)
			}
			if p := errorFactor(Tree, tt); p != float64(bits.OnesCount(uint(tt))) || p < blue*(1-1e-9) {
				t.Errorf("tree t=%d: %g (BLUE %g)", tt, p, blue)
			}
		}
		S := sqrtMatrix(T)
		var A mat.Dense
		A.Mul(S, S)
		for i := range T {
			for j := range T {
				want := 0.0
				if j <= i {
					want = 1
				}
				if math.Abs(A.At(i, j)-want) > 1e-9 {
					t.Fatalf("sqrt T=%d: (R·R)[%d,%d] = %g", T, i, j, A.At(i, j))
				}
			}
			row := mat.Row(nil, i, S)
			if v := errorFactor(Sqrt, i+1); math.Abs(v-mat.Dot(mat.NewVecDense(T, row), mat.NewVecDense(T, row))) > 1e-9*v {
				t.Errorf("sqrt t=%d: %g", i+1, v)
			}
		}
	}
}

// TestPerWindowSumsOptimalWhenUnitsSpanTheHorizon: with a unit in every
// window (dpstream's relation), summing the per-window releases has the
// smallest error at t = T and the smallest maximum, equal to the lower
// bound s·c·T (Errors' doc), and every factorization is worse. With a
// unit in one window (event level, parallel composition), the square-root
// factorization and Honaker's tree beat it.
func TestPerWindowSumsOptimalWhenUnitsSpanTheHorizon(t *testing.T) {
	for _, T := range []int{60, 1440} {
		box, err := Errors(T, T)
		if err != nil {
			t.Fatal(err)
		}
		id := box[0]
		if math.Abs(id.RMSEAtT-float64(T)) > 1e-9*float64(T) || math.Abs(id.MaxRMSE-float64(T)) > 1e-9*float64(T) {
			t.Errorf("T=%d: per-window sums %g / %g, lower bound %d", T, id.RMSEAtT, id.MaxRMSE, T)
		}
		for _, r := range box[1:] {
			if !(r.RMSEAtT > id.RMSEAtT) || !(r.MaxRMSE > id.MaxRMSE) {
				t.Errorf("T=%d, every window: %s %g / %g not worse than per-window sums %g / %g", T, r.Strategy, r.RMSEAtT, r.MaxRMSE, id.RMSEAtT, id.MaxRMSE)
			}
		}
		ev, err := Errors(T, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ev[2:] {
			if !(r.MaxRMSE < ev[0].MaxRMSE) {
				t.Errorf("T=%d, event level: %s max %g not below per-window sums %g", T, r.Strategy, r.MaxRMSE, ev[0].MaxRMSE)
			}
		}
	}
}

// tableKs are the participation bounds of the table: one window (event
// level), a few, every window.
func tableKs(T int) []int {
	ks := []int{1}
	for _, k := range []int{8, 64} {
		if k < T {
			ks = append(ks, k)
		}
	}
	return append(ks, T)
}

// errorTable renders the table of testdata/error_table.md for horizons hs.
func errorTable(hs []int) (string, error) {
	var b strings.Builder
	for _, T := range hs {
		for _, K := range tableKs(T) {
			rs, err := Errors(T, K)
			if err != nil {
				return "", err
			}
			rel := fmt.Sprintf("≤ %d windows", K)
			switch K {
			case T:
				rel = "every window (dpstream)"
			case 1:
				rel = "1 window (event level)"
			}
			for _, r := range rs {
				fmt.Fprintf(&b, "| %d | %s | %s | %.4g | %.4g | %.4g | %.3f |\n", T, rel, r.Strategy, r.Sens, r.RMSEAtT, r.MaxRMSE, r.MaxRMSE/rs[0].MaxRMSE)
			}
		}
	}
	return b.String(), nil
}

const tableHeader = "| T (windows) | a unit in | strategy | Δ_R / c | RMSE at t = T | max RMSE over t | max RMSE ÷ per-window sums |\n|---|---|---|---|---|---|---|\n"

// TestErrorTable checks the horizons T = 60 and 1440 of the checked-in
// table testdata/error_table.md (T = 10080 takes about a minute and
// 0.8 GB for the square-root bound at K = 8, 64); with
// DPSTREAM_UPDATE_TABLE=1 it regenerates the whole file:
//
//	DPSTREAM_UPDATE_TABLE=1 go test -run TestErrorTable ./privacy/continual/
func TestErrorTable(t *testing.T) {
	path := filepath.Join("testdata", "error_table.md")
	if os.Getenv("DPSTREAM_UPDATE_TABLE") == "1" {
		rows, err := errorTable([]int{60, 1440, 10080})
		if err != nil {
			t.Fatal(err)
		}
		cal, err := privacy.Gaussian{}.Calibrate(1, 1e-6, 1)
		if err != nil {
			t.Fatal(err)
		}
		doc := "# Running totals: error of three continual-release strategies\n\n" +
			"Generated by `DPSTREAM_UPDATE_TABLE=1 go test -run TestErrorTable ./privacy/continual/` (see errors.go).\n\n" +
			"Prefix sums of T per-window values; one unit moves each window's value by at most c and appears in at most K windows. " +
			"Every strategy adds Gaussian noise σ = s·Δ_R to R·x, calibrated to the same total budget (s: the Gaussian noise multiplier " +
			fmt.Sprintf("of the total budget, e.g. s = %.4g for ε = 1, δ = 10⁻⁶ by the analytic Gaussian); errors are in units of c·s. ", cal.Scale) +
			"Δ_R is exact for K = 1 and K = T and an upper bound (what a calibration must use) in between. " +
			"Per-window sums are free in dpstream (post-processing of the per-window releases); the others would need their own budget.\n\n" +
			tableHeader + rows
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := errorTable([]int{60, 1440})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(rows), "\n") {
		if !strings.Contains(string(want), line+"\n") {
			t.Errorf("%s lacks the row\n%s\n(regenerate with DPSTREAM_UPDATE_TABLE=1)", path, line)
		}
	}
}
