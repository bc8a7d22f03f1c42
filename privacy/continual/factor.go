package continual

import (
	"fmt"
	"math"
	"math/big"
)

// Factorization is the integer square-root factorization of the prefix
// sums of T windows, for event-level privacy (one event changes one
// window's value x_j, by at most Δ): the T×T lower-triangular Toeplitz
// matrix R' with integer coefficients
//
//	r'_k = round(2^bits · C(2k, k)/4^k),  r'_0 = K = 2^bits,
//
// which is K·A^{1/2} (A the prefix-sum matrix, Sqrt) to within ½ per
// entry. With x integer (counts, or sums in lattice steps) and z i.i.d.
// discrete Gaussian on Z^T, w = R'x + z is one mechanism over the whole
// horizon: one event shifts w by δ_j·(r'_0, …, r'_{T−1−j}) on coordinates
// j…T−1 (|δ_j| ≤ Δ), so the coordinate shifts are at most Δ·r'_k and the
// L2 shift at most Δ·‖r'‖₂ (Coefficients, ColumnNorm).
//
// The releases are a function of w alone (Decode): per window t,
// V_t = round((2^OutputBits·w_t − Σ_{i=1..t} r'_i·V_{t−i}) / K), an
// integer, released as V_t/2^OutputBits. Because K·2^OutputBits·x_t/K is
// an integer, V_t = 2^OutputBits·x_t + E_t with E the same recursion run
// on z instead of w (Noise): the operator computes the release from the
// window's own exact value and the regenerated noises z_0…z_t, and it is
// bit for bit the post-processing Decode(w) of the one mechanism
// (TestDecodeIsPostProcessing). All arithmetic is in integers (128-bit),
// so no floating-point rounding can leak x.
//
// The noise of the released values: R'E = 2^OutputBits·z + K·ρ with
// |ρ_t| ≤ ½ (the rounding), so the value noise is
// e = E/2^OutputBits = R'^{-1}z + 2^{−OutputBits}·C·ρ with C = K·R'^{-1}
// (Toeplitz, coefficients c_k ≈ those of √(1−x): 1, −½, −⅛, …), and the
// noise of the running total (A·e) is (A·R'^{-1})z + 2^{−OutputBits}·A·C·ρ
// with A·C Toeplitz, coefficients d_k = c_0 + … + c_k ≈ r_k. With
// σ = σ_z/K (the noise parameter in value units), the per-window noise is
// a weighted sum of independent discrete Gaussians with weights c_k·σ and
// the running total's with weights d_k·σ (WindowFactor, RunningFactor),
// plus a deterministic rounding of at most WindowRounding and
// RunningRounding.
type Factorization struct {
	bits uint      // K = 2^bits
	r    []int64   // r'_k
	c    []float64 // coefficients of K·R'^{-1}
	d    []float64 // coefficients of K·A·R'^{-1}: prefix sums of c
}

// Bounds of the factorization's parameters.
const (
	// OutputBits: released values are multiples of 2^−10 (of a count, or
	// of a lattice step): the rounding adds at most 2^−11·Σ|d_k| to a
	// running total, about 0.02 at T = 1440 (noise scale ≈ 14 there).
	OutputBits = 10
	// MinFactorBits and MaxFactorBits bound K = 2^bits. With K = 2^bits the
	// coefficients are within 2^−bits−1 of K·r_k, so ‖r'‖₂/K is within
	// √T·2^−bits−1 of ‖r‖₂ (2^−8: 1.5% at T = 10080); 2^30 keeps
	// r'_k·|E| within 128 bits for every |E| ≤ 2^63.
	MinFactorBits = 8
	MaxFactorBits = 30
	// MaxFactorWindows bounds T: 10080 is a week of minutes; the weights
	// are O(T²) flops and the decoding of window t O(t²) integer
	// operations from scratch (Decode), O(t) from the earlier windows'
	// (DecodeNext).
	MaxFactorWindows = 10080
	// weightMargin is the relative margin added to every float weight norm
	// and sum: the recursions of c and d accumulate at most about T²
	// roundings of 2^−53 (T = 10080: 1.1e-8); TestWeightsExact checks them
	// against exact rational arithmetic to 1e-12 at T = 64.
	weightMargin = 1e-6
)

// NewFactorization returns the integer square-root factorization of T
// windows with K = 2^bits.
func NewFactorization(T int, bits uint) (*Factorization, error) {
	if T < 1 || T > MaxFactorWindows || bits < MinFactorBits || bits > MaxFactorBits {
		return nil, fmt.Errorf("%w: factorization needs 1 ≤ T ≤ %d and %d ≤ bits ≤ %d, got T=%d, bits=%d",
			ErrArgs, MaxFactorWindows, MinFactorBits, MaxFactorBits, T, bits)
	}
	f := &Factorization{bits: bits, r: integerSqrtCoefficients(T, bits)}
	k := float64(int64(1) << bits)
	f.c = make([]float64, T)
	f.d = make([]float64, T)
	f.c[0] = 1
	f.d[0] = 1
	for n := 1; n < T; n++ {
		s := 0.0
		for i := 1; i <= n; i++ {
			s += float64(f.r[i]) * f.c[n-i]
		}
		f.c[n] = -s / k
		f.d[n] = f.d[n-1] + f.c[n]
	}
	return f, nil
}

// integerSqrtCoefficients returns round(2^bits·C(2k, k)/4^k) for k < T,
// exactly (big integers; halves round up).
func integerSqrtCoefficients(T int, bits uint) []int64 {
	r := make([]int64, T)
	binom := big.NewInt(1) // C(2k, k)
	var num, half big.Int
	for k := range T {
		if k > 0 { // C(2k, k) = C(2k−2, k−1)·2(2k−1)/k, exactly
			binom.Mul(binom, big.NewInt(int64(2*(2*k-1))))
			binom.Quo(binom, big.NewInt(int64(k)))
		}
		num.Lsh(binom, bits)
		half.SetInt64(0)
		if k > 0 {
			half.Lsh(big.NewInt(1), uint(2*k-1))
		}
		num.Add(&num, &half)
		num.Rsh(&num, uint(2*k))
		r[k] = num.Int64()
	}
	return r
}

// Windows returns T.
func (f *Factorization) Windows() int { return len(f.r) }

// Bits returns log2 K.
func (f *Factorization) Bits() uint { return f.bits }

// Coefficients returns r'_0 … r'_{T−1} (a copy): one event that changes
// window j's value by δ shifts coordinate j+k of w by δ·r'_k.
func (f *Factorization) Coefficients() []int64 { return append([]int64(nil), f.r...) }

// ColumnNorm returns an upper bound on ‖r'‖₂/K (the L2 sensitivity of w,
// in value units, per unit of Δ): ⌈√(Σ r'_k²)⌉/K, the sum exact in big
// integers. It exceeds the exact value by less than 1/K.
func (f *Factorization) ColumnNorm() float64 {
	var s, t big.Int
	for _, v := range f.r {
		t.SetInt64(v)
		t.Mul(&t, &t)
		s.Add(&s, &t)
	}
	root := new(big.Int).Sqrt(&s)
	if t.Mul(root, root).Cmp(&s) != 0 {
		root.Add(root, big.NewInt(1))
	}
	// root < 2^30·√T < 2^53: exact in float64, and so is the division.
	return float64(root.Int64()) / float64(int64(1)<<f.bits)
}

// WindowFactor returns an upper bound on √(Σ_{k≤t} c_k²): the noise of
// window t's released value (t from 0) is Σ_j c_{t−j}·(z_j/K), a weighted
// sum of independent discrete Gaussians of parameter σ = σ_z/K, so it is
// (σ·WindowFactor(t))²-subgaussian. About 1.13 for large t (the
// coefficients of √(1−x) have Σ c_k² → 1.27).
func (f *Factorization) WindowFactor(t int) float64 { return norm2(f.c[:f.clip(t)+1]) }

// RunningFactor returns an upper bound on √(Σ_{k≤t} d_k²): the running
// total through window t is (σ·RunningFactor(t))²-subgaussian; within
// about 2^−bits of the square-root factorization's ‖row t‖₂.
func (f *Factorization) RunningFactor(t int) float64 { return norm2(f.d[:f.clip(t)+1]) }

// WindowRounding returns an upper bound on the rounding of window t's
// released value beyond its noise: 2^−OutputBits·½·Σ_{k≤t}|c_k| (≤ about
// 2^−OutputBits, since Σ|c_k| → 2).
func (f *Factorization) WindowRounding(t int) float64 { return roundingBound(f.c[:f.clip(t)+1]) }

// RunningRounding returns an upper bound on the rounding of the running
// total through window t beyond its noise: 2^−OutputBits·½·Σ_{k≤t}|d_k|.
func (f *Factorization) RunningRounding(t int) float64 { return roundingBound(f.d[:f.clip(t)+1]) }

// rangeWeights returns the coefficients of the noise of the sum of the
// released values of windows a…t in units of z_j/K (j = 0…t): d_{t−j}
// minus d_{a−1−j} for j < a (the running total through t less the one
// through a − 1).
func (f *Factorization) rangeWeights(a, t int) []float64 {
	t = f.clip(t)
	a = max(0, min(a, t))
	w := make([]float64, t+1)
	for j := range w {
		w[j] = f.d[t-j]
		if j < a {
			w[j] -= f.d[a-1-j]
		}
	}
	return w
}

// RangeHalfWidth returns a valid (1−β) half-width of the sum of the
// released values of windows a…t (a running total that started at window
// a), as HalfWidths does for a = 0: the noise is a weighted sum of the
// z_j/K (rangeWeights) plus a rounding of at most 2^−OutputBits·½ times
// the weights' absolute sum.
func (f *Factorization) RangeHalfWidth(sigma, variance float64, a, t int, beta float64) (float64, error) {
	w := f.rangeWeights(a, t)
	factor := norm2(w)
	h, err := SumHalfWidth([]Term{{Mechanism: discreteGaussianName, Scale: sigma * factor, Variance: variance * factor * factor, N: 1}}, beta)
	if err != nil {
		return 0, err
	}
	return math.Nextafter(h+roundingBound(w), math.Inf(1)), nil
}

// WorstRunningFactor returns max_t RunningFactor(t) and
// max_t WindowFactor(t) over the horizon.
func (f *Factorization) WorstRunningFactor() (running, window float64) {
	sc, sd := 0.0, 0.0
	for t := range f.r {
		sc += f.c[t] * f.c[t]
		sd += f.d[t] * f.d[t]
		running, window = math.Max(running, sd), math.Max(window, sc)
	}
	return math.Sqrt(running) * (1 + weightMargin), math.Sqrt(window) * (1 + weightMargin)
}

// clip keeps t within the horizon.
func (f *Factorization) clip(t int) int { return max(0, min(t, len(f.r)-1)) }

// norm2 returns ‖xs‖₂ with the relative weightMargin added.
func norm2(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x * x
	}
	return math.Sqrt(s) * (1 + weightMargin)
}

// roundingBound returns 2^−OutputBits·½·Σ|xs| with the weightMargin added.
func roundingBound(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += math.Abs(x)
	}
	return math.Ldexp(s, -OutputBits-1) * (1 + weightMargin)
}

// HalfWidths returns valid (1−β) half-widths of window t's released value
// and of the running total through window t: SumHalfWidth of the weighted
// discrete Gaussian noise (σ = σ_z/K in value units, variance the
// variance of z_j/K) plus the rounding bound. A weighted sum Σ c_k·Y_k of
// independent σ²-subgaussian Y_k is (σ²·Σc_k²)-subgaussian, so it is one
// discrete-gaussian Term of scale σ·WindowFactor(t) (RunningFactor(t));
// its variance is at most variance·WindowFactor(t)².
func (f *Factorization) HalfWidths(sigma, variance float64, t int, beta float64) (window, running float64, err error) {
	one := func(factor, rounding float64) (float64, error) {
		h, err := SumHalfWidth([]Term{{Mechanism: discreteGaussianName, Scale: sigma * factor, Variance: variance * factor * factor, N: 1}}, beta)
		if err != nil {
			return 0, err
		}
		return math.Nextafter(h+rounding, math.Inf(1)), nil
	}
	if window, err = one(f.WindowFactor(t), f.WindowRounding(t)); err != nil {
		return 0, 0, err
	}
	if running, err = one(f.RunningFactor(t), f.RunningRounding(t)); err != nil {
		return 0, 0, err
	}
	return window, running, nil
}
