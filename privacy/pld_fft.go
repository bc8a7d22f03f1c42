package privacy

import (
	"math"
	"sync"

	"gonum.org/v1/gonum/dsp/fourier"
)

// fftPools holds one sync.Pool of *fourier.FFT per transform length, so
// the twiddle factors are computed once per length and process.
var fftPools sync.Map // int → *sync.Pool

func getFFT(n int) *fourier.FFT {
	p, _ := fftPools.LoadOrStore(n, &sync.Pool{New: func() any { return fourier.NewFFT(n) }})
	return p.(*sync.Pool).Get().(*fourier.FFT)
}

func putFFT(n int, f *fourier.FFT) {
	p, _ := fftPools.Load(n)
	p.(*sync.Pool).Put(f)
}

// fftSize returns the smallest 2^a·3^b·5^c ≥ n (lengths FFTPACK transforms
// efficiently).
func fftSize(n int) int {
	best := 1
	for best < n {
		best <<= 1
	}
	for p3 := 1; p3 < best; p3 *= 3 {
		for p35 := p3; p35 < best; p35 *= 5 {
			v := p35
			for v < n {
				v <<= 1
			}
			if v < best {
				best = v
			}
		}
	}
	return best
}

// directConvMax is the work (len(a)·len(b)) up to which convolution is
// done by direct, compensated summation: slower than an FFT for long
// vectors, but its error (a few roundoffs of each entry) is far below the
// FFT's, which matters most in the first levels of a repeated squaring,
// whose errors are multiplied by the number of copies built from them.
const directConvMax = 1 << 19

// convolve returns the linear convolution of the non-negative vectors a and
// b, with negative round-off clamped to zero, and a bound on the L1 distance
// between the result and the exact convolution (which also bounds every tail
// sum, the norm the PLD tracks; see pldGrid).
//
// Short inputs are convolved directly with Neumaier-compensated sums: each
// entry is within 2u of the exact sum of the rounded products (Higham,
// Accuracy and Stability of Numerical Algorithms, 2nd ed., §4.3, up to
// O(n·u²) terms), and rounding each product adds u, so the L1 error is at
// most (3u + 4n·u²)·‖c‖₁.
//
// Long inputs go through an FFT after splitting off their few large entries
// (atoms such as Laplace's mass ½ at the largest loss), which are convolved
// directly: c = big_a∗b + rest_a∗big_b + rest_a∗rest_b. The FFT error bound
// is proportional to the 2-norms of its inputs, which atoms would dominate.
//
// FFT error bound. For the unnormalized DFT computed by an FFT, the relative
// 2-norm error is at most g = ⌈log2 N⌉·η with η the error of one butterfly
// stage (Higham, Thm 24.2: η = μ + γ4(√2 + μ) ≈ 5.7u + μ for twiddle factors
// accurate to μ). Propagating it through the two forward transforms, the
// pointwise product (|Â|∞ ≤ ‖a‖₁) and the inverse transform gives, to first
// order,
//
//	‖ĉ − c‖₂ ≤ (2g + 4u)·(‖a‖₂‖b‖₁ + ‖a‖₁‖b‖₂),
//
// and ‖·‖₁ ≤ √len(c)·‖·‖₂. gonum's FFTPACK uses mixed radices and a real
// transform rather than Higham's radix-2 setting; we take η = 8u, and a test
// compares the bound with the measured error against exact rational
// convolution and finds it a wide margin above. Clamping a negative entry to
// zero changes it by at most its own error; the clamped amount is added.
func convolve(a, b []float64) ([]float64, float64) {
	na, nb := len(a), len(b)
	if na == 0 || nb == 0 {
		return nil, 0
	}
	if na*nb <= directConvMax {
		return directConv(a, b)
	}
	bigA, restA := splitBig(a)
	bigB, restB := splitBig(b)
	c, err := fftConv(restA, restB)
	nc := na + nb - 1
	if len(c) < nc {
		c = append(c, make([]float64, nc-len(c))...)
	}
	terms := len(bigA) + len(bigB) + 1
	for _, e := range bigA {
		for j, y := range b {
			c[e.i+j] += e.v * y
		}
	}
	for _, e := range bigB {
		for i, x := range restA {
			c[i+e.i] += x * e.v
		}
	}
	// Each entry is the FFT value plus at most len(bigA)+len(bigB) products:
	// sequential summation adds ≤ terms·u of the entry.
	if terms > 1 {
		err += float64(terms+1) * roundoff * norm1(c)
	}
	return c, err
}

// bigEntry is one large entry split off before an FFT.
type bigEntry struct {
	i int
	v float64
}

// maxBig bounds the entries convolved directly around an FFT.
const maxBig = 32

// splitBig returns the entries above a quarter of the vector's 2-norm (at
// most maxBig of them, the largest) and a copy of v without them.
func splitBig(v []float64) ([]bigEntry, []float64) {
	thr := norm2(v) / 4
	var big []bigEntry
	for i, x := range v {
		if x > thr {
			big = append(big, bigEntry{i, x})
		}
	}
	if len(big) == 0 {
		return nil, v
	}
	if len(big) > maxBig {
		// Keep the largest.
		for k := 0; k < maxBig; k++ {
			m := k
			for j := k + 1; j < len(big); j++ {
				if big[j].v > big[m].v {
					m = j
				}
			}
			big[k], big[m] = big[m], big[k]
		}
		big = big[:maxBig]
	}
	rest := append([]float64(nil), v...)
	for _, e := range big {
		rest[e.i] = 0
	}
	return big, rest
}

// directConv is the compensated direct convolution (see convolve).
func directConv(a, b []float64) ([]float64, float64) {
	nc := len(a) + len(b) - 1
	s := make([]float64, nc)
	comp := make([]float64, nc)
	for i, x := range a {
		if x == 0 {
			continue
		}
		cs := s[i : i+len(b)]
		cc := comp[i : i+len(b)]
		for j, y := range b {
			p := x * y
			t := cs[j] + p
			if math.Abs(cs[j]) >= math.Abs(p) {
				cc[j] += (cs[j] - t) + p
			} else {
				cc[j] += (p - t) + cs[j]
			}
			cs[j] = t
		}
	}
	for k := range s {
		s[k] += comp[k]
		if s[k] < 0 {
			s[k] = 0
		}
	}
	n := float64(min(len(a), len(b)))
	return s, (3*roundoff + 4*n*roundoff*roundoff) * norm1(s)
}

// fftConv is the FFT part of convolve, with its error bound.
func fftConv(a, b []float64) ([]float64, float64) {
	na, nb := len(a), len(b)
	nc := na + nb - 1
	n := fftSize(nc)
	f := getFFT(n)
	defer putFFT(n, f)

	buf := make([]float64, n)
	copy(buf, a)
	fa := f.Coefficients(nil, buf)
	if na == nb && &a[0] == &b[0] {
		for i, v := range fa {
			fa[i] = v * v
		}
	} else {
		clear(buf)
		copy(buf, b)
		fb := f.Coefficients(nil, buf)
		for i := range fa {
			fa[i] *= fb[i]
		}
	}
	out := f.Sequence(buf, fa)
	c := make([]float64, nc)
	inv := 1 / float64(n)
	clamped := 0.0
	for i := range c {
		v := out[i] * inv
		if v < 0 {
			clamped -= v
			v = 0
		}
		c[i] = v
	}
	const eta = 8 * roundoff
	g := math.Ceil(math.Log2(float64(n))) * eta
	err2 := (2*g + 4*roundoff) * (norm2(a)*norm1(b) + norm1(a)*norm2(b))
	// Second-order terms (g²·N) are below 1e-20 for the sizes used here;
	// the factor 1.01 covers them and the rounding of the norms.
	return c, 1.01*math.Sqrt(float64(nc))*err2 + clamped
}

func norm1(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += math.Abs(x)
	}
	return s * (1 + float64(len(v))*roundoff)
}

func norm2(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s) * (1 + float64(len(v))*roundoff)
}
