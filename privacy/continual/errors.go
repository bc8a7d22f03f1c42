package continual

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// ErrArgs is wrapped by every error of this package's functions about
// their arguments.
var ErrArgs = errors.New("continual: invalid arguments")

// Strategy is a way of releasing the T prefix sums of a stream of T
// per-window values x: a factorization A = L·R of the T×T lower-triangular
// all-ones matrix A, noise z ~ N(0, σ²I) added to R·x, and the prefix sums
// estimated as L·(R·x + z). σ = s·Δ_R, where s is the Gaussian noise
// multiplier of the total budget (σ for sensitivity 1) and Δ_R the
// sensitivity of R·x under the neighbouring relation.
type Strategy string

// The strategies compared.
const (
	// Identity is R = I, L = A: the per-window values are released with
	// noise and the prefix sums are their running sums (for dpstream,
	// post-processing of what it releases anyway).
	Identity Strategy = "per-window sums (R = I)"
	// Tree is the binary-tree mechanism: R has one row per complete dyadic
	// interval [j·2^l, (j+1)·2^l) ⊆ [0, T), and the prefix sum [0, t) is
	// the sum of its canonical decomposition (popcount(t) nodes).
	Tree Strategy = "binary tree"
	// TreeHonaker is the same tree with Honaker's (2015) variance-optimal
	// estimator: each node of the decomposition is estimated from its
	// whole subtree (its own value and the best estimate of its children's
	// sum, weighted by inverse variance). In the streaming setting every
	// complete node within [0, t) lies in the subtree of one node of the
	// decomposition, so this is the best linear unbiased estimate of the
	// prefix sum from the nodes released by t.
	TreeHonaker Strategy = "binary tree, Honaker"
	// Sqrt is the square-root factorization L = R = A^{1/2}: lower
	// triangular Toeplitz with r_k = C(2k, k)/4^k (Fichtenberger,
	// Henzinger & Upadhyay 2023).
	Sqrt Strategy = "square-root factorization"
)

// Strategies lists the strategies in table order.
var Strategies = []Strategy{Identity, Tree, TreeHonaker, Sqrt}

// Result is the error of one strategy for T windows, a unit in at most K
// of them.
type Result struct {
	Strategy Strategy
	T, K     int
	// Sens is Δ_R/c: the largest ‖R·δ‖₂ over the neighbouring deltas δ (at
	// most K non-zero coordinates, each in [−c, c]), in units of c. For
	// K = 1 and K = T it is exact; in between it is an upper bound (the
	// one a calibration must use, see SensitivityBound).
	Sens float64
	// RMSEAtT and MaxRMSE are the root mean squared error of the prefix
	// sum at t = T and the largest over t = 1…T, in units of c·s.
	RMSEAtT, MaxRMSE float64
}

// Errors returns the error of every strategy for T windows when one unit
// contributes to at most K windows, each coordinate by at most c (K = T:
// dpstream's relation, a unit may be in every window; K = 1: event-level
// privacy with parallel composition). All are calibrated to the same total
// budget: Gaussian noise of σ = s·Δ_R on R·x is one Gaussian mechanism
// with L2 sensitivity Δ_R (for R = I this is exactly the composition of
// the T per-window Gaussian releases, each of sensitivity c, with a unit
// in K of them: Gaussian composition adds in quadrature).
//
// Why the box relation matters: for an entrywise non-negative R and any
// δ with |δ_j| ≤ c on at most K coordinates S, elementwise
// |R·δ| ≤ R·|δ| ≤ c·R·1_S (the triangle inequality, R ≥ 0), so
// ‖R·δ‖₂ ≤ c·‖R·1_S‖₂, with equality at δ = c·1_S. Hence Δ_R =
// c·max_{|S|≤K} ‖R·1_S‖₂, and for K = T, Δ_R = c·‖R·1‖₂: a unit in every
// window moves a tree node of level l by up to 2^l·c, not c.
//
// A lower bound that (a) meets: for any factorization, the estimate of
// prefix t has error σ‖L_t‖₂ ≥ s·c‖L_t‖₂‖R·1‖₂ ≥ s·c·⟨L_t, R·1⟩ = s·c·t
// (Cauchy–Schwarz; ⟨L_t, R1⟩ = (A·1)_t = t). With K = T, R = I has
// σ = s·c·√T and error s·c·√(tT): equal to the bound at t = T, so no
// factorization has a smaller error at the horizon's end or a smaller
// maximum over t.
func Errors(T, K int) ([]Result, error) {
	if T < 1 || K < 1 || K > T {
		return nil, fmt.Errorf("%w: need 1 ≤ K ≤ T, got T=%d, K=%d", ErrArgs, T, K)
	}
	var out []Result
	for _, st := range Strategies {
		sens, err := SensitivityBound(st, T, K)
		if err != nil {
			return nil, err
		}
		at, mx := 0.0, 0.0
		for t := 1; t <= T; t++ {
			e := sens * math.Sqrt(errorFactor(st, t))
			mx = math.Max(mx, e)
			if t == T {
				at = e
			}
		}
		out = append(out, Result{Strategy: st, T: T, K: K, Sens: sens, RMSEAtT: at, MaxRMSE: mx})
	}
	return out, nil
}

// errorFactor returns ‖L_t‖₂², the variance of the estimate of prefix t
// (t windows) per unit noise variance.
func errorFactor(st Strategy, t int) float64 {
	switch st {
	case Identity:
		return float64(t)
	case Tree:
		return float64(bits.OnesCount(uint(t)))
	case TreeHonaker:
		// The decomposition of [0, t) has one node of level l per set bit
		// l of t; a node of level l estimated from its subtree has
		// variance h_l: h_0 = 1, h_l = 1/(1 + 1/(2h_{l−1})).
		v, h := 0.0, 1.0
		for l := 0; t>>l != 0; l++ {
			if l > 0 {
				h = 1 / (1 + 1/(2*h))
			}
			if t>>l&1 == 1 {
				v += h
			}
		}
		return v
	case Sqrt:
		v, r := 0.0, 1.0
		for k := 0; k < t; k++ {
			v += r * r
			r *= (2*float64(k) + 1) / (2*float64(k) + 2)
		}
		return v
	}
	return math.NaN()
}

// sqrtCoefficients returns r_0 … r_{T−1}, r_k = C(2k, k)/4^k (the
// coefficients of (1 − x)^{−1/2}), by r_{k+1} = r_k·(2k+1)/(2k+2).
func sqrtCoefficients(T int) []float64 {
	r := make([]float64, T)
	r[0] = 1
	for k := 1; k < T; k++ {
		r[k] = r[k-1] * (2*float64(k) - 1) / (2 * float64(k))
	}
	return r
}

// SensitivityBound returns max_{|S| ≤ K} ‖R·1_S‖₂ for the strategy's R
// over T windows (exact for K = 1 and K = T; otherwise an upper bound):
// with G = RᵀR ≥ 0, ‖R·1_S‖² = Σ_{i,j∈S} G_ij ≤ Σ_{i∈S} top_K(G_i·),
// which is at most the sum of the K largest row sums top_K(G_i·) of the K
// largest entries of each row.
func SensitivityBound(st Strategy, T, K int) (float64, error) {
	if T < 1 || K < 1 || K > T {
		return 0, fmt.Errorf("%w: need 1 ≤ K ≤ T, got T=%d, K=%d", ErrArgs, T, K)
	}
	switch st {
	case Identity:
		return math.Sqrt(float64(K)), nil
	case Tree, TreeHonaker:
		// G_ij is the number of complete nodes holding both i and j; the
		// nodes holding i are nested, of sizes 2^l, so the K largest
		// entries of row i sum to Σ_l min(K, 2^l) over its complete
		// ancestors (K = T: Σ_l 2^l, and Σ_i of that is Σ_nodes size², the
		// exact ‖R·1‖²).
		rows := make([]float64, T)
		for i := range T {
			for l := 0; 1<<l <= T; l++ {
				if (i>>l+1)<<l <= T { // the level-l node holding i ends by T
					rows[i] += float64(min(K, 1<<l))
				}
			}
		}
		return math.Sqrt(sumLargest(rows, K)), nil
	case Sqrt:
		r := sqrtCoefficients(T)
		if K == T {
			v, c := 0.0, 0.0
			for i := range T {
				c += r[i] // (R·1)_i = r_0 + … + r_i
				v += c * c
			}
			return math.Sqrt(v), nil
		}
		if K == 1 { // the largest column is the first: Σ r_k²
			v := 0.0
			for _, x := range r {
				v += x * x
			}
			return math.Sqrt(v), nil
		}
		tops := sqrtRowTops(T)
		rows := make([]float64, T)
		for i := range T {
			rows[i] = tops[i][K-1]
		}
		return math.Sqrt(sumLargest(rows, K)), nil
	}
	return 0, fmt.Errorf("%w: unknown strategy %q", ErrArgs, st)
}

// sqrtRowTops returns, for the square-root factorization over T windows,
// tops[i][k−1] = the sum of the k largest entries of row i of G = RᵀR,
// G_ij = Σ_{m ≥ max(i,j)} r_{m−i}·r_{m−j}, filled from the last row by
// G_ij = r_{T−1−i}·r_{T−1−j} + G_{i+1,j+1}. O(T²) memory and O(T² log T)
// time (T = 10080: 0.8 GB, seconds), so the last result is cached.
func sqrtRowTops(T int) [][]float64 {
	topsMu.Lock()
	defer topsMu.Unlock()
	if topsT == T {
		return topsCache
	}
	r := sqrtCoefficients(T)
	g := make([]float64, T*T)
	for i := T - 1; i >= 0; i-- {
		for j := T - 1; j >= 0; j-- {
			v := r[T-1-i] * r[T-1-j]
			if i+1 < T && j+1 < T {
				v += g[(i+1)*T+j+1]
			}
			g[i*T+j] = v
		}
	}
	tops := make([][]float64, T)
	for i := range T {
		row := g[i*T : (i+1)*T]
		slices.SortFunc(row, func(a, b float64) int { return -cmp.Compare(a, b) })
		for k := 1; k < T; k++ {
			row[k] += row[k-1]
		}
		tops[i] = row
	}
	topsT, topsCache = T, tops
	return tops
}

var (
	topsMu    sync.Mutex
	topsT     int
	topsCache [][]float64
)

// sumLargest returns the sum of the k largest values of xs (xs unchanged).
func sumLargest(xs []float64, k int) float64 {
	s := slices.Clone(xs)
	slices.SortFunc(s, func(a, b float64) int { return -cmp.Compare(a, b) })
	t := 0.0
	for _, x := range s[:min(k, len(s))] {
		t += x
	}
	return t
}
