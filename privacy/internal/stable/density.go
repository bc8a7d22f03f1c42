package stable

import (
	"math"
	"slices"
)

// The standard symmetric α-stable density, characteristic function
// exp(−|t|^α), 1 < α < 2, evaluated to near machine precision in relative
// terms over the whole real line (so its logarithm is accurate far in the
// tails). Three representations, each used where it is accurate:
//
//   - |x| ≤ sasSmallX: the convergent power series
//     f(x) = 1/(πα) Σ_k (−1)^k Γ((2k+1)/α)/(2k)! x^{2k}
//     (Nolan, "Univariate Stable Distributions", 2020, Cor. 3.3);
//   - large |x|: Bergström's asymptotic series
//     f(x) ~ 1/π Σ_{k≥1} (−1)^{k+1} Γ(αk+1)/k! sin(kπα/2) |x|^{−αk−1},
//     used only when its terms (bounded without the sine factor) fall below
//     sasSeriesTol relative to the sum within sasMaxTerms terms;
//   - elsewhere Zolotarev's integral in Nolan's form (Nolan 1997, Thm. 1,
//     β = 0): with p = α/(α−1) and
//     g(θ) = x^p (cos θ / sin αθ)^p cos((α−1)θ)/cos θ, θ ∈ (0, π/2),
//     f(x) = p/(πx) ∫ g e^{−g} dθ and P(X > x) = 1/π ∫ e^{−g} dθ.
//     Both integrands are positive (no cancellation) and g decreases in θ.
//     The range is broken where log g crosses each of sasLevels (the peak of
//     g e^{−g} is at log g = 0), at π/4, and, as α → 2, on a geometric
//     ladder around c2 = (2−α)π/2, where g has a second scale; a globally
//     adaptive Gauss–Kronrod rule integrates the pieces. Above π/4 the
//     integrand is written in φ = π/2 − θ, so that cos θ = sin φ and
//     sin αθ = sin(c2 + αφ) keep full relative precision near θ = π/2,
//     where the mass sits for large x.
//
// Accuracy: TestStableDensityReference holds the density and the tail
// probability to relErr (sasDensityRelErr = 1e-12, plus a term for α near 1)
// at every point of a 30-digit mpmath reference (testdata/gen_stable.py),
// and TestStableRepresentationsAgree holds the representations to the same
// bound against each other on a dense grid; the errors seen are about
// 1e-14 (up to 5e-12 as α → 1.0001).

const (
	// sasSmallX is the largest |x| evaluated with the power series. At
	// x = 1/2 the terms fall below 1e-17 of f(0) within 30 terms for every
	// α ≥ 1 (for α = 1 they are exactly 4^{−k}) and there is no cancellation
	// (f(1/2) > f(0)/2).
	sasSmallX = 0.5
	// sasSeriesTol is the relative size of the first neglected series term.
	sasSeriesTol = 1e-17
	// sasMaxTerms caps both series (Γ(αk+1) stays finite for k ≤ 40,
	// α < 2: Γ(81) ≈ 7e118).
	sasMaxTerms = 40
	// sasQuadTol is the relative tolerance on the summed |Kronrod − Gauss|
	// estimates; the Kronrod result is typically far more accurate than this
	// estimate (QUADPACK's heuristic scales it as (200·e)^1.5).
	sasQuadTol = 1e-11
	// sasDensityRelErr bounds the relative error of Density's density and
	// tail probability for α away from 1 (see relErr). The largest error
	// seen against the reference and between representations is about
	// 3e-14 (1.6e-13 at α = 1.999999); the bound is 6 to 30 times that.
	sasDensityRelErr = 1e-12
	// MaxLadder bounds the breakpoints of the ladder around c2 = (2−α)π/2
	// in zolotarev: about log₄((π/8)/(c2/4)) + 1 points, 11 at the largest
	// supported α = 1.999999 (c2 = 1.6e-6).
	MaxLadder = 14
)

// Density holds the per-α constants of the standard SαS density.
// It is immutable after NewDensity and safe for concurrent use.
type Density struct {
	alpha float64
	p, q  float64 // α/(α−1) and 1/(α−1)
	c2    float64 // (2−α)π/2: sin(αθ) = sin(c2 + αφ) with φ = π/2 − θ
	logF0 float64 // log f(0) = log(Γ(1+1/α)/π)
	// small[k] = Γ((2k+1)/α)/((2k)!·πα): the power series coefficients.
	small [sasMaxTerms]float64
	// asym[k] = (−1)^k Γ(α(k+1)+1)/((k+1)!·π)·sin((k+1)πα/2) and
	// asymMag[k] its absolute value without the sine factor (a bound on the
	// term's size).
	asym, asymMag [sasMaxTerms]float64
}

// NewDensity returns the density for 1 < α < 2 (not checked here).
func NewDensity(alpha float64) *Density {
	d := &Density{alpha: alpha, p: alpha / (alpha - 1), q: 1 / (alpha - 1), c2: (2 - alpha) * math.Pi / 2}
	lg1, _ := math.Lgamma(1 + 1/alpha)
	d.logF0 = lg1 - math.Log(math.Pi)
	for k := 0; k < sasMaxTerms; k++ {
		a, _ := math.Lgamma(float64(2*k+1) / alpha)
		b, _ := math.Lgamma(float64(2*k + 1)) // log (2k)!
		d.small[k] = math.Exp(a-b) / (math.Pi * alpha)
		kk := float64(k + 1)
		g, _ := math.Lgamma(alpha*kk + 1)
		f, _ := math.Lgamma(kk + 1)
		d.asymMag[k] = math.Exp(g-f) / math.Pi
		d.asym[k] = d.asymMag[k] * sinPi(kk*alpha/2)
		if k%2 == 1 { // (−1)^{k+1} with k counted from 1
			d.asym[k] = -d.asym[k]
		}
	}
	return d
}

// sinPi returns sin(πx), exact at integers and accurate for moderate x.
func sinPi(x float64) float64 {
	r := math.Mod(x, 2) // in (−2, 2)
	if r < 0 {
		r += 2
	}
	switch {
	case r == 0 || r == 1:
		return 0
	case r <= 0.25:
		return math.Sin(math.Pi * r)
	case r <= 0.75:
		return math.Cos(math.Pi * (r - 0.5))
	case r <= 1.25:
		return -math.Sin(math.Pi * (r - 1))
	case r <= 1.75:
		return -math.Cos(math.Pi * (r - 1.5))
	}
	return math.Sin(math.Pi * (r - 2))
}

// LogPDF returns log f(x), or NaN if the integral failed to converge.
func (d *Density) LogPDF(x float64) float64 {
	x = math.Abs(x)
	switch {
	case math.IsNaN(x):
		return math.NaN()
	case math.IsInf(x, 1):
		return math.Inf(-1)
	case x == 0:
		return d.logF0
	case x <= sasSmallX:
		return math.Log(d.smallPDF(x))
	}
	if v, ok := d.asymLogPDF(x); ok {
		return v
	}
	// An integral that exhausted its budget would break the error bound the
	// calibration margins rely on: report NaN, which the solvers turn into
	// an error (never seen in the supported α range).
	if v, ok := d.zolotarev(x, false); ok {
		return v
	}
	return math.NaN()
}

// LogSurvival returns log P(X > x), or NaN if the integral failed to
// converge.
func (d *Density) LogSurvival(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return math.NaN()
	case x < 0:
		return math.Log1p(-math.Exp(d.LogSurvival(-x)))
	case math.IsInf(x, 1):
		return math.Inf(-1)
	case x <= sasSmallX:
		return math.Log(0.5 - d.smallCDF(x))
	}
	if v, ok := d.asymLogSurvival(x); ok {
		return v
	}
	if v, ok := d.zolotarev(x, true); ok {
		return v
	}
	return math.NaN()
}

// smallPDF sums the power series of f at 0 < x ≤ sasSmallX.
func (d *Density) smallPDF(x float64) float64 {
	x2 := x * x
	sum, pow := 0.0, 1.0
	for k := 0; k < sasMaxTerms; k++ {
		t := d.small[k] * pow
		if k%2 == 1 {
			t = -t
		}
		sum += t
		if math.Abs(t) < sasSeriesTol*sum {
			break
		}
		pow *= x2
	}
	return sum
}

// smallCDF returns F(x) − 1/2 = ∫_0^x f by the integrated power series.
func (d *Density) smallCDF(x float64) float64 {
	x2 := x * x
	sum, pow := 0.0, x
	for k := 0; k < sasMaxTerms; k++ {
		t := d.small[k] * pow / float64(2*k+1)
		if k%2 == 1 {
			t = -t
		}
		sum += t
		if math.Abs(t) < sasSeriesTol*sum {
			break
		}
		pow *= x2
	}
	return sum
}

// asymSum returns Σ_{k<K} c_k y^k / c_0 for the asymptotic series with
// coefficients c_k = asym[k]/w_k and y = x^{−α}, where w_k is 1 for the
// density and α(k+1) for the tail probability, and whether the terms fell
// below sasSeriesTol of the sum (bounded without the sine factor) within
// sasMaxTerms terms.
func (d *Density) asymSum(y float64, tail bool) (float64, bool) {
	w := func(k int) float64 {
		if tail {
			return d.alpha * float64(k+1)
		}
		return 1
	}
	c0 := d.asym[0] / w(0)
	if !(c0 > 0) {
		return 0, false
	}
	sum, pow := 1.0, 1.0
	prev := math.Inf(1)
	for k := 1; k < sasMaxTerms; k++ {
		pow *= y
		mag := d.asymMag[k] / w(k) / c0 * pow
		if mag < sasSeriesTol*sum {
			return sum, sum > 0.5
		}
		if mag > prev { // terms growing before convergence: too close in
			return 0, false
		}
		prev = mag
		sum += d.asym[k] / w(k) / c0 * pow
	}
	return 0, false
}

// asymLogPDF evaluates log f(x) by the asymptotic series when it converges.
func (d *Density) asymLogPDF(x float64) (float64, bool) {
	lx := math.Log(x)
	s, ok := d.asymSum(math.Exp(-d.alpha*lx), false)
	if !ok {
		return 0, false
	}
	return math.Log(d.asym[0]) - (d.alpha+1)*lx + math.Log(s), true
}

// asymLogSurvival evaluates log P(X > x) by the integrated asymptotic series.
func (d *Density) asymLogSurvival(x float64) (float64, bool) {
	lx := math.Log(x)
	s, ok := d.asymSum(math.Exp(-d.alpha*lx), true)
	if !ok {
		return 0, false
	}
	return math.Log(d.asym[0]/d.alpha) - d.alpha*lx + math.Log(s), true
}

// zolotarev evaluates log f(x) (or log P(X > x) if tail) for x > 0 by the
// integral representation. ok is false if the adaptive integration ran out
// of budget (the result is then less accurate than sasDensityRelErr).
func (d *Density) zolotarev(x float64, tail bool) (float64, bool) {
	lx := math.Log(x)
	a, p, q, c2 := d.alpha, d.p, d.q, d.c2
	base := p * lx
	// log g in θ ∈ (0, π/4] and in φ = π/2 − θ ∈ (0, π/4]; both continuous
	// at π/4 and monotone: decreasing in θ, increasing in φ.
	lgTheta := func(t float64) float64 {
		return base + q*math.Log(math.Cos(t)) - p*math.Log(math.Sin(a*t)) + math.Log(math.Cos((a-1)*t))
	}
	lgPhi := func(f float64) float64 {
		return base + q*math.Log(math.Sin(f)) - p*math.Log(math.Sin(c2+a*f)) + math.Log(math.Sin(c2+(a-1)*f))
	}
	var hTheta, hPhi func(float64) float64
	if tail {
		hTheta = func(t float64) float64 { return math.Exp(-math.Exp(lgTheta(t))) }
		hPhi = func(f float64) float64 { return math.Exp(-math.Exp(lgPhi(f))) }
	} else {
		hTheta = func(t float64) float64 { l := lgTheta(t); return math.Exp(l - math.Exp(l)) }
		hPhi = func(f float64) float64 { l := lgPhi(f); return math.Exp(l - math.Exp(l)) }
	}
	const quarter = math.Pi / 4
	dlTheta := func(t float64) float64 {
		return -q*math.Tan(t) - p*a/math.Tan(a*t) - (a-1)*math.Tan((a-1)*t)
	}
	dlPhi := func(f float64) float64 {
		return q/math.Tan(f) - p*a/math.Tan(c2+a*f) + (a-1)/math.Tan(c2+(a-1)*f)
	}
	// Break both ranges where log g crosses each of sasLevels, so that every
	// piece sees g e^{−g} (or e^{−g}) change by a bounded factor. Each level
	// lies in exactly one of the two ranges: log g runs from +∞ (θ → 0)
	// through top (θ = φ = π/4) to −∞ (φ → 0).
	top := lgTheta(quarter)
	var ptsT [len(sasLevels) + 2]float64
	var ptsP [len(sasLevels) + 2 + MaxLadder]float64
	nt, np := 1, 1 // both start with the endpoint 0
	// Initial guesses from the behaviour near the endpoints: near θ = 0,
	// log g ≈ p·log(x/(αθ)); near φ = 0, log g ≈ p·log x + q·log φ +
	// (1−p)·log sin c2.
	gt := math.Min(x/a, quarter/2)
	gp := math.Min(math.Sin(c2)*math.Exp(-a*lx), quarter/2)
	for _, s := range sasLevels {
		if top < s {
			gt = solveLevel(lgTheta, dlTheta, s, gt, quarter, false)
			ptsT[nt] = gt
			nt++
		} else {
			gp = solveLevel(lgPhi, dlPhi, s, gp, quarter, true)
			ptsP[np] = gp
			np++
		}
	}
	// As α → 2, c2 → 0 and g has a second scale in φ: it falls from about
	// x²/4 to 0 as φ drops below c2 (the Gaussian limit has no zero at
	// φ = 0). A geometric ladder around c2 lets the quadrature see it.
	for v := c2 / 4; v < quarter/2 && np < len(ptsP)-1; v *= 4 {
		ptsP[np] = v
		np++
	}
	// θ levels were found in increasing θ order.
	ptsT[nt] = quarter
	nt++
	slices.Sort(ptsP[1:np])
	ptsP[np] = quarter
	np++
	var buf [maxQuadPieces]quadPiece
	it, ok1 := integrate(hTheta, ptsT[:nt], sasQuadTol, buf[:])
	ip, ok2 := integrate(hPhi, ptsP[:np], sasQuadTol, buf[:])
	ok := ok1 && ok2
	if tail {
		return math.Log(it+ip) - math.Log(math.Pi), ok
	}
	return math.Log(p/math.Pi) - lx + math.Log(it+ip), ok
}

// sasLevels are the values of log g at which the integration range is
// broken, in decreasing order: the peak of g e^{−g} (0), its sides, and the
// points beyond which g e^{−g} < e^{3.7−e^{3.7}} ≈ 1e-16 or g < e^{−37} ≈ 9e-17
// of its peak value e^{−1}.
var sasLevels = [...]float64{3.7, 2, 1, 0, -1, -2.5, -5, -10, -20, -37}

// solveLevel finds v in (0, hi) with l(v) = s for the monotone function l —
// increasing if inc, else decreasing — with l(0+) and l(hi) on either side of
// s. It runs Newton's method in log v from guess, safeguarded by bisection
// in log v.
func solveLevel(l, dl func(float64) float64, s, guess, hi float64, inc bool) float64 {
	lo := 0.0
	v := guess
	if !(v > 0 && v < hi) {
		v = hi / 2
	}
	for i := 0; i < 200; i++ {
		lv := l(v) - s
		if lv == 0 {
			return v
		}
		if (lv < 0) == inc {
			lo = v
		} else {
			hi = v
		}
		// Newton step on log v: v ← v·exp(−(l−s)/(v·l')).
		next := v * math.Exp(-lv/(v*dl(v)))
		if !(next > lo && next < hi) {
			// Bisect in log v; step down geometrically while no lower
			// bound is known.
			if lo == 0 {
				next = v / 16
			} else {
				next = math.Sqrt(lo * hi)
			}
		}
		if math.Abs(next-v) <= 1e-13*v {
			return next
		}
		v = next
	}
	return v
}

// RelErr is the relative error bound of the density and tail probability
// used in calibration margins: sasDensityRelErr, plus a term for the
// conditioning of Zolotarev's integrand as α → 1, where log g is a
// difference of terms of size p·|log x| with p = α/(α−1). The errors seen
// against the reference grow like 4e-16·p (3.8e-13 at α = 1.001, 3.9e-12 at
// α = 1.0001); the term 1e-15·p covers them 2.5-fold.
func (d *Density) RelErr() float64 { return sasDensityRelErr + 1e-15*d.p }

// Quantile returns q > 0 with log P(X > q) = target, for target < log(1/2),
// by Newton's method on log q (d log S/d log q = −q·f(q)/S(q)) safeguarded
// by bisection; it returns 0 if target ≥ log(1/2) and NaN if it fails. The
// caller rounds the result with halfWidth, so it need not be exact.
func (d *Density) Quantile(target float64) float64 {
	if !(target < -math.Ln2) {
		return 0
	}
	lo, hi := math.Inf(-1), math.Inf(1) // bracket in log q
	// Leading tail term: S(q) ≈ asym[0]/α·q^{−α}.
	lq := math.Max((math.Log(d.asym[0]/d.alpha)-target)/d.alpha, -3)
	for i := 0; i < 200; i++ {
		q := math.Exp(lq)
		ls := d.LogSurvival(q)
		r := ls - target
		if r > 0 {
			lo = lq
		} else {
			hi = lq
		}
		next := lq + r/(q*math.Exp(d.LogPDF(q)-ls))
		if !(next > lo && next < hi) || math.IsNaN(next) {
			switch {
			case math.IsInf(lo, -1):
				next = hi - 1
			case math.IsInf(hi, 1):
				next = lo + 1
			default:
				next = 0.5 * (lo + hi)
			}
		}
		if math.Abs(next-lq) < 1e-15 || hi-lo < 1e-15 {
			return math.Exp(next)
		}
		lq = next
	}
	return math.NaN()
}
