package stable

import (
	"math"
	"sync"
)

// A fast log-density for the calibration loops. Between the power series
// (|x| ≤ sasSmallX) and the point X_a where the asymptotic series takes
// over, logPDF needs Zolotarev's integral (tens of microseconds). On that
// bounded range log f is smooth (analytic), so Fast interpolates it,
// piecewise in t = log x, by Chebyshev polynomials through values of the
// integral; outside it uses the two series as logPDF does. A solve then
// costs tens of microseconds instead of tens of milliseconds, and the exact
// check of a table lookup a few microseconds.
//
// Each interpolant is checked when it is built: at sasInterpChecks points
// of every piece that are not nodes, against the integral. The largest
// deviation seen, times sasInterpSafety, is added to the density's error
// bound (Fast.relErr), so the calibration margins cover it; if it exceeds
// sasInterpMaxErr the interpolant is not used and the integral is.

const (
	// sasInterpNodes is the number of Chebyshev nodes per piece (degree 15).
	sasInterpNodes = 16
	// sasInterpWidth is the initial width of a piece in log x. With 16 nodes
	// the interpolation error on a smooth log f is near rounding level
	// except near α = 2, where log f bends sharply from the Gaussian-like
	// core to the power-law tail and pieces are halved; the build-time
	// check measures it.
	sasInterpWidth = 0.25
	// sasInterpChecks is the number of check points per piece.
	sasInterpChecks = 2
	// sasInterpSafety multiplies the largest deviation seen at the check
	// points: a sampled error is not a bound, so the margin is 10 times it.
	sasInterpSafety = 10
	// sasInterpMaxErr is the largest acceptable deviation at a check point.
	sasInterpMaxErr = 1e-13
	// sasInterpTarget is the deviation above which a piece is halved, at
	// most sasInterpMaxDepth times.
	sasInterpTarget   = 2e-14
	sasInterpMaxDepth = 5
	// sasInterpCacheSize bounds the number of α values whose interpolants
	// are kept (about 5 KB each); beyond it interpolants are built per use.
	sasInterpCacheSize = 64
)

// Fast is the fast log-density for one α.
type Fast struct {
	den *Density
	xa  float64 // upper end of the interpolated range
	// Pieces in increasing order: piece i covers log x ∈ [lo[i], hi[i]].
	lo, hi []float64
	coef   [][sasInterpNodes]float64
	maxErr float64 // largest deviation seen at the check points
	ok     bool    // the interpolant passed its check
}

var (
	sasFastMu    sync.Mutex
	sasFastCache = map[float64]*Fast{}
)

// FastDensity returns the fast log-density for α in (1, 2), from the cache
// if it was built before.
func FastDensity(alpha float64) *Fast {
	sasFastMu.Lock()
	f, ok := sasFastCache[alpha]
	sasFastMu.Unlock()
	if ok {
		return f
	}
	f = newFast(NewDensity(alpha))
	sasFastMu.Lock()
	if len(sasFastCache) < sasInterpCacheSize {
		sasFastCache[alpha] = f
	}
	sasFastMu.Unlock()
	return f
}

// newFast builds and checks the interpolant.
func newFast(den *Density) *Fast {
	f := &Fast{den: den}
	// X_a: the first x on a grid of ratio 1.05 from 1 where the asymptotic
	// series converges (it then converges for every larger x, its terms
	// shrinking with x). The interpolant covers [sasSmallX, X_a].
	xa := 1.0
	for ; xa < 1e3; xa *= 1.05 {
		if _, ok := den.asymLogPDF(xa); ok {
			break
		}
	}
	f.xa = xa
	t0, t1 := math.Log(sasSmallX), math.Log(xa)
	n := int(math.Ceil((t1 - t0) / sasInterpWidth))
	h := (t1 - t0) / float64(n)
	f.ok = true
	for i := 0; i < n && f.ok; i++ {
		f.ok = f.build(t0+float64(i)*h, t0+float64(i+1)*h, 0, math.Inf(1))
	}
	f.ok = f.ok && f.maxErr <= sasInterpMaxErr
	return f
}

// build appends the interpolant of [a, b] (in log x), split in halves while
// its check error exceeds sasInterpTarget and splitting still helps (the
// error falls at least fourfold; otherwise it is the integral's own noise).
// It reports false if an integral failed.
func (f *Fast) build(a, b float64, depth int, parentErr float64) bool {
	var vals, c [sasInterpNodes]float64
	mid, half := 0.5*(a+b), 0.5*(b-a)
	for j := range vals {
		z := math.Cos(math.Pi * (float64(j) + 0.5) / sasInterpNodes)
		v, ok := f.den.zolotarev(math.Exp(mid+half*z), false)
		if !ok {
			return false
		}
		vals[j] = v
	}
	for k := range c {
		s := 0.0
		for j, v := range vals {
			s += v * math.Cos(math.Pi*float64(k)*(float64(j)+0.5)/sasInterpNodes)
		}
		c[k] = 2 * s / sasInterpNodes
	}
	c[0] /= 2
	// Check points, away from the nodes and from each other.
	e := 0.0
	for _, z := range [sasInterpChecks]float64{-0.77, 0.31} {
		v, ok := f.den.zolotarev(math.Exp(mid+half*z), false)
		if !ok {
			return false
		}
		e = math.Max(e, math.Abs(clenshaw(&c, z)-v))
	}
	if e > sasInterpTarget && depth < sasInterpMaxDepth && e < parentErr/4 {
		return f.build(a, mid, depth+1, e) && f.build(mid, b, depth+1, e)
	}
	f.lo = append(f.lo, a)
	f.hi = append(f.hi, b)
	f.coef = append(f.coef, c)
	f.maxErr = math.Max(f.maxErr, e)
	return true
}

// clenshaw evaluates Σ c_k T_k(z) for z ∈ [−1, 1].
func clenshaw(c *[sasInterpNodes]float64, z float64) float64 {
	var b1, b2 float64
	for k := sasInterpNodes - 1; k >= 1; k-- {
		b1, b2 = 2*z*b1-b2+c[k], b1
	}
	return z*b1 - b2 + c[0]
}

// LogPDF returns log f(x): the interpolant on its range, else the density's
// own representations.
func (f *Fast) LogPDF(x float64) float64 {
	x = math.Abs(x)
	if !f.ok || !(x > sasSmallX && x < f.xa) {
		return f.den.LogPDF(x)
	}
	t := math.Log(x)
	// Binary search for the piece with hi[i] ≥ t.
	i, j := 0, len(f.hi)-1
	for i < j {
		m := (i + j) / 2
		if f.hi[m] < t {
			i = m + 1
		} else {
			j = m
		}
	}
	z := (2*t - f.lo[i] - f.hi[i]) / (f.hi[i] - f.lo[i])
	return clenshaw(&f.coef[i], math.Max(-1, math.Min(1, z)))
}

// RelErr bounds the relative error of exp(logPDF): the density's own bound
// plus the interpolation margin.
func (f *Fast) RelErr() float64 {
	e := f.den.RelErr()
	if f.ok {
		e += sasInterpSafety * f.maxErr
	}
	return e
}
