package privacy

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
)

// pldEvaluations counts composed-PLD evaluations of the calibration solver
// (reported by benchmarks).
var pldEvaluations atomic.Int64

// Accounting names the accountant that certifies a calibration.
type Accounting string

// The accountants. Tightest is a request ("use the best valid one"); a Plan
// always reports the accountant actually used.
const (
	// Tightest chooses the smallest scale among the valid accountants below.
	Tightest Accounting = "tightest"
	// AccountExact is the exact one-dimensional calibration of the mechanism
	// (Lemma 1), used when the whole horizon is a single coordinate.
	AccountExact Accounting = "exact"
	// AccountGaussian is exact μ-GDP composition: Gaussian noise only.
	AccountGaussian Accounting = "gaussian"
	// AccountPure is exact pure-ε composition (ε adds up, δ = 0).
	AccountPure Accounting = "pure"
	// AccountPLD composes pessimistic privacy loss distributions.
	AccountPLD Accounting = "pld"
	// AccountBasic splits (ε, δ) evenly over all coordinates and windows.
	AccountBasic Accounting = "basic"
	// AccountAdvanced is the advanced composition theorem (Dwork, Rothblum
	// & Vadhan 2010), with the best of a grid of δ splits.
	AccountAdvanced Accounting = "advanced"
)

// ParseAccounting returns the accountant named s ("" means Tightest).
func ParseAccounting(s string) (Accounting, error) {
	a := Accounting(strings.ToLower(strings.TrimSpace(s)))
	switch a {
	case "":
		return Tightest, nil
	case Tightest, AccountExact, AccountGaussian, AccountPure, AccountPLD, AccountBasic, AccountAdvanced:
		return a, nil
	}
	return "", fmt.Errorf("%w: accounting %q: want tightest, exact, gaussian, pure, pld, basic or advanced", ErrInvalidParameter, s)
}

// Part is one noised vector of a release: one unit changes at most L0 of its
// coordinates per window, each by at most Linf, and each coordinate gets
// independent noise of the given mechanism. A release with several aggregates
// (histogram, count, sum) has one Part per aggregate.
type Part struct {
	Mechanism Mechanism
	L0        int     // coordinates a unit can change per window, ≥ 1
	Linf      float64 // largest change of one coordinate, > 0 (whole for discrete mechanisms)
	// Weight sets the part's noise relative to the others: its scale is
	// Weight·κ·Linf for the common κ that the calibration solves for. 0 means
	// 1 (every coordinate gets the same shift-to-scale ratio).
	Weight float64
}

// Plan is the calibration of one Part over a horizon.
type Plan struct {
	// Calibration: Epsilon and Delta are the TOTAL budget of the horizon,
	// Sensitivity is Linf and Scale the per-coordinate noise scale.
	Calibration
	Accounting Accounting // the accountant that certified Scale
	Windows    int        // releases in the horizon
	L0         int        // coordinates a unit can change per window
	// Certified is the δ the accountant certifies at the total ε for the
	// whole release (all parts, all windows); it never exceeds Delta.
	Certified float64
}

// CalibrationTolerance is the relative bracket width at which the numerical
// accountants stop: the returned scale is certified and within this factor
// of the smallest scale the same accountant would certify. (The PLD's own
// pessimism is of the same order; see PLDOptions.)
const CalibrationTolerance = 1e-4

// Horizon is a run of releases calibrated together: the total budget they
// share and what one unit can change in each. Its fields are named so that
// two swapped numbers (windows and L0, say) cannot silently change the
// guarantee.
type Horizon struct {
	// Total is the budget of the whole horizon (all windows together).
	Total Budget
	// Windows is the number of releases in the horizon.
	Windows int
	// L0 is the number of coordinates one unit can change per window.
	L0 int
	// Linf is the most one unit can change one coordinate (L∞).
	Linf float64
}

// CalibrateHorizon returns the per-coordinate scale such that h.Windows
// releases, in each of which one unit changes at most h.L0 coordinates by at
// most h.Linf, together meet the total budget h.Total — the composition of
// Windows·L0 one-dimensional mechanisms (see vector.go for why this is the
// worst case). It uses the tightest valid accountant; results are cached
// per configuration.
func CalibrateHorizon(m Mechanism, h Horizon) (Plan, error) {
	return CalibrateWith(Tightest, m, h)
}

// CalibrateWith is CalibrateHorizon with a chosen accountant, for
// comparisons (basic, advanced) and tests.
func CalibrateWith(a Accounting, m Mechanism, h Horizon) (Plan, error) {
	ps, err := CalibrateParts(a, h.Total, h.Windows, []Part{{Mechanism: m, L0: h.L0, Linf: h.Linf}})
	if err != nil {
		return Plan{}, err
	}
	return ps[0], nil
}

// calibCache memoizes CalibrateParts per configuration. It is bounded: when
// full it is cleared (configurations are few in practice).
var calibCache = struct {
	sync.Mutex
	m map[string][]Plan
}{m: map[string][]Plan{}}

const calibCacheMax = 4096

func cacheKey(a Accounting, total Budget, windows int, parts []Part) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%x|%x|%d", a, math.Float64bits(total.Epsilon), math.Float64bits(total.Delta), windows)
	for _, p := range parts {
		fmt.Fprintf(&b, "|%T%+v|%d|%x|%x", p.Mechanism, p.Mechanism, p.L0, math.Float64bits(p.Linf), math.Float64bits(p.Weight))
	}
	return b.String()
}

// CalibrateParts calibrates a release made of several parts over a horizon
// of `windows` releases so that the composition of everything meets the
// total budget, with accountant a. All parts share one noise level κ
// (scale_i = Weight_i·κ·Linf_i), the smallest the accountant certifies;
// Basic and Advanced instead give every coordinate an equal share of the
// budget and calibrate each part on its own.
func CalibrateParts(a Accounting, total Budget, windows int, parts []Part) ([]Plan, error) {
	if err := total.Validate(); err != nil {
		return nil, err
	}
	if windows < 1 || windows > 1<<30 {
		return nil, fmt.Errorf("%w: windows %d: want 1 ≤ windows ≤ 2^30", ErrInvalidParameter, windows)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: no parts to calibrate", ErrInvalidParameter)
	}
	if _, err := ParseAccounting(string(a)); err != nil {
		return nil, err
	}
	if a == "" {
		a = Tightest
	}
	ps := make([]calPart, len(parts))
	for i, p := range parts {
		if p.Mechanism == nil {
			return nil, fmt.Errorf("%w: calPart %d has no mechanism", ErrInvalidParameter, i)
		}
		if p.L0 < 1 || p.L0 > 1<<30 {
			return nil, fmt.Errorf("%w: calPart %d: L0 %d: want 1 ≤ L0 ≤ 2^30", ErrInvalidParameter, i, p.L0)
		}
		if !(p.Linf > 0) || math.IsInf(p.Linf, 0) {
			return nil, fmt.Errorf("%w: calPart %d: L∞ %v: want a finite L∞ > 0", ErrInvalidParameter, i, p.Linf)
		}
		if pldDiscrete(p.Mechanism) && p.Linf != math.Trunc(p.Linf) {
			return nil, fmt.Errorf("%w: calPart %d: %s needs a whole-number L∞, got %v", ErrInvalidParameter, i, p.Mechanism.Name(), p.Linf)
		}
		w := p.Weight
		if w == 0 {
			w = 1
		}
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("%w: calPart %d: weight %v: want a finite weight > 0", ErrInvalidParameter, i, p.Weight)
		}
		n := int64(windows) * int64(p.L0)
		if n > 1<<40 {
			return nil, fmt.Errorf("%w: calPart %d: %d compositions exceed 2^40", ErrInvalidParameter, i, n)
		}
		ps[i] = calPart{Part: p, w: w, n: int(n)}
	}

	key := cacheKey(a, total, windows, parts)
	calibCache.Lock()
	if v, ok := calibCache.m[key]; ok {
		calibCache.Unlock()
		return append([]Plan(nil), v...), nil
	}
	calibCache.Unlock()

	plans, err := calibrateParts(a, total, windows, ps)
	if err != nil {
		return nil, err
	}
	calibCache.Lock()
	if len(calibCache.m) >= calibCacheMax {
		clear(calibCache.m)
	}
	calibCache.m[key] = plans
	calibCache.Unlock()
	return append([]Plan(nil), plans...), nil
}

// calPart is a validated Part.
type calPart struct {
	Part
	w float64 // weight (1 if unset)
	n int     // compositions: windows·L0
}

// calCandidate is a certified noise level κ (or explicit scales) from one
// accountant.
type calCandidate struct {
	acct   Accounting
	method Method
	scales []float64
	cert   float64
}

func calibrateParts(a Accounting, total Budget, windows int, ps []calPart) ([]Plan, error) {
	var c calCandidate
	var err error
	switch a {
	case Tightest:
		c, err = calTightest(total, ps)
	case AccountExact:
		c, err = calibrateExact(total, ps)
	case AccountGaussian:
		c, err = calibrateGaussian(total, ps)
	case AccountPure:
		c, err = calibratePure(total, ps)
	case AccountPLD:
		c, err = calibratePLD(total, ps)
	case AccountBasic:
		c, err = calibrateBasic(total, ps)
	case AccountAdvanced:
		c, err = calibrateAdvanced(total, ps)
	}
	if err != nil {
		return nil, err
	}
	plans := make([]Plan, len(ps))
	for i, p := range ps {
		plans[i] = Plan{
			Calibration: Calibration{
				Mechanism:   p.Mechanism.Name(),
				Epsilon:     total.Epsilon,
				Delta:       total.Delta,
				Sensitivity: p.Linf,
				Scale:       c.scales[i],
				Method:      c.method,
			},
			Accounting: c.acct,
			Windows:    windows,
			L0:         p.L0,
			Certified:  c.cert,
		}
	}
	return plans, nil
}

// calTightest returns the smallest valid candidate (smallest Σ scale_i/Linf_i,
// which for a common κ is the smallest κ).
func calTightest(total Budget, ps []calPart) (calCandidate, error) {
	if c, ok, err := calClassic(total, ps); ok {
		return c, err
	}
	single := len(ps) == 1 && ps[0].n == 1
	var tries []func(Budget, []calPart) (calCandidate, error)
	switch {
	case single && calAllGaussian(ps):
		// The mechanism's own calibration may answer from its table (up to
		// 1e-3 above the minimum); the closed form is exact to 1e-12.
		tries = append(tries, calibrateExact, calibrateGaussian)
	case single:
		tries = append(tries, calibrateExact)
	case total.Delta == 0:
		tries = append(tries, calibratePure)
	case calAllGaussian(ps):
		tries = append(tries, calibrateGaussian)
	default:
		// Every valid accountant is a candidate: the PLD is tightest for
		// many compositions, but its grid rounding can lose to an exact
		// path for a handful (e.g. Laplace near its pure-ε scale).
		tries = append(tries, calibratePLD, calibratePure, calibrateBasic, calibrateAdvanced)
	}
	var best calCandidate
	var errs []error
	found := false
	for _, f := range tries {
		c, err := f(total, ps)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !found || calLevel(c, ps) < calLevel(best, ps) {
			best, found = c, true
		}
	}
	if !found {
		return calCandidate{}, errors.Join(errs...)
	}
	return best, nil
}

func calLevel(c calCandidate, ps []calPart) float64 {
	s := 0.0
	for i, p := range ps {
		s += c.scales[i] / (p.w * p.Linf)
	}
	return s
}

func calAllGaussian(ps []calPart) bool {
	for _, p := range ps {
		if _, ok := p.Mechanism.(Gaussian); !ok {
			return false
		}
	}
	return true
}

// calClassic handles gaussian-classic, which exists only as a documented
// comparison: one part, calibrated by its own (loose, ε < 1) formula to the
// L2 sensitivity of the whole horizon, Linf·√(windows·L0) — Gaussian noise
// composes exactly in L2. ok reports whether ps is such a request.
func calClassic(total Budget, ps []calPart) (c calCandidate, ok bool, err error) {
	classic := 0
	for _, p := range ps {
		if _, is := p.Mechanism.(GaussianClassic); is {
			classic++
		}
	}
	if classic == 0 {
		return calCandidate{}, false, nil
	}
	if len(ps) != 1 {
		return calCandidate{}, true, fmt.Errorf("%w: gaussian-classic is a single-part comparison; use gaussian", ErrUnsupported)
	}
	p := ps[0]
	cal, err := p.Mechanism.Calibrate(total.Epsilon, total.Delta, p.Linf*math.Sqrt(float64(p.n))*(1+4*roundoff))
	if err != nil {
		return calCandidate{}, true, err
	}
	return calCandidate{acct: AccountGaussian, method: cal.Method, scales: []float64{cal.Scale}, cert: total.Delta}, true, nil
}

// calScales returns scale_i = κ·w_i·Linf_i, each rounded up.
func calScales(kappa float64, ps []calPart) []float64 {
	s := make([]float64, len(ps))
	for i, p := range ps {
		s[i] = math.Nextafter(kappa*p.w*p.Linf, math.Inf(1))
	}
	return s
}

// calibrateExact is the one-dimensional exact calibration (Lemma 1 and the
// mechanisms' own solvers), valid when the horizon is a single coordinate.
func calibrateExact(total Budget, ps []calPart) (calCandidate, error) {
	if len(ps) != 1 || ps[0].n != 1 {
		return calCandidate{}, fmt.Errorf("%w: exact calibration covers one coordinate in one window", ErrUnsupported)
	}
	c, err := ps[0].Mechanism.Calibrate(total.Epsilon, total.Delta, ps[0].Linf)
	if err != nil {
		return calCandidate{}, err
	}
	return calCandidate{acct: AccountExact, method: c.Method, scales: []float64{c.Scale}, cert: total.Delta}, nil
}

// calibrateGaussian: all parts Gaussian; the release over the horizon is
// μ-GDP with μ² = Σ nᵢ·(Linfᵢ/scaleᵢ)² = Σ nᵢ/(κ·wᵢ)².
func calibrateGaussian(total Budget, ps []calPart) (calCandidate, error) {
	if !calAllGaussian(ps) {
		return calCandidate{}, fmt.Errorf("%w: exact Gaussian accounting needs Gaussian noise in every calPart", ErrUnsupported)
	}
	mu, err := gdpMu(total.Epsilon, total.Delta)
	if err != nil {
		return calCandidate{}, err
	}
	s := 0.0
	for _, p := range ps {
		s += float64(p.n) / (p.w * p.w)
	}
	kappa := math.Sqrt(s) / mu * (1 + 8*roundoff)
	scales := calScales(kappa, ps)
	cert := GaussianAccountant{Mu: gaussMu(ps, scales)}.Delta(total.Epsilon)
	if cert > total.Delta {
		return calCandidate{}, fmt.Errorf("%w: Gaussian certificate %v exceeds δ %v", ErrInfeasible, cert, total.Delta)
	}
	return calCandidate{acct: AccountGaussian, method: ClosedForm, scales: scales, cert: cert}, nil
}

// gaussMu is μ = √(Σ nᵢ·(Linfᵢ/scaleᵢ)²), rounded up.
func gaussMu(ps []calPart, scales []float64) float64 {
	s := 0.0
	for i, p := range ps {
		r := p.Linf / scales[i]
		s += float64(p.n) * r * r
	}
	return math.Sqrt(s) * (1 + 8*roundoff)
}

// calPureLoss is implemented by mechanisms that report their exact pure ε at a
// scale (Stable, Cauchy).
type calPureLoss interface {
	Epsilon(scale, sensitivity float64) float64
}

// calPureEpsilon returns the exact pure ε of one coordinate with noise `scale`
// and shift linf, rounded up, or an error for mechanisms without pure ε.
func calPureEpsilon(m Mechanism, scale, linf float64) (float64, error) {
	switch s := m.(type) {
	case Laplace, Logistic, DiscreteLaplace:
		// sup of the privacy loss: Δ/s (Laplace, logistic: §3.3 of the
		// log-concave paper; discrete Laplace: |k−Δ|−|k| ≤ Δ).
		return math.Nextafter(linf/scale, math.Inf(1)), nil
	case Subbotin:
		if s.R == 1 {
			return math.Nextafter(linf/scale, math.Inf(1)), nil
		}
	}
	if pl, ok := m.(calPureLoss); ok {
		e := pl.Epsilon(scale, linf)
		if e > 0 && !math.IsInf(e, 1) {
			return e, nil
		}
		return 0, fmt.Errorf("%w: %s: no finite pure ε at scale %v", ErrInfeasible, m.Name(), scale)
	}
	return 0, fmt.Errorf("%w: %s has no pure ε-DP guarantee (δ must be > 0); pure ε: %s",
		ErrInfeasible, m.Name(), pureMechanisms)
}

// calLinearPure reports whether the pure ε of m is exactly Linf/scale.
func calLinearPure(m Mechanism) bool {
	switch v := m.(type) {
	case Laplace, Logistic, DiscreteLaplace:
		return true
	case Subbotin:
		return v.R == 1
	}
	return false
}

// pureRetries is how often calibratePure widens κ by the certificate's
// own excess before it refuses: each widening lands within a few ulps of
// ε, so two suffice in practice; four leave room.
const pureRetries = 4

// calibratePure: every coordinate is ε_i-DP and pure ε adds up exactly:
// Σ nᵢ·ε_i(scaleᵢ) ≤ ε. For Laplace-like noise ε_i = 1/(κ·wᵢ), so
// κ = Σ(nᵢ/wᵢ)/ε; otherwise κ is found by bisection.
func calibratePure(total Budget, ps []calPart) (calCandidate, error) {
	spent := func(scales []float64) (float64, error) {
		s := 0.0
		for i, p := range ps {
			e, err := calPureEpsilon(p.Mechanism, scales[i], p.Linf)
			if err != nil {
				return 0, err
			}
			s += float64(p.n) * e
		}
		return s * pldSumFactor(len(ps)), nil
	}
	linear := true
	for _, p := range ps {
		linear = linear && calLinearPure(p.Mechanism)
	}
	var kappa float64
	if linear {
		s := 0.0
		for _, p := range ps {
			s += float64(p.n) / p.w
		}
		kappa = s / total.Epsilon * (1 + 8*roundoff)
	} else {
		// Bracket and bisect κ: spent(κ) is non-increasing in κ.
		hi := 1.0
		var err error
		ok := func(k float64) bool {
			var e float64
			e, err = spent(calScales(k, ps))
			return err == nil && e <= total.Epsilon
		}
		for !ok(hi) {
			if err != nil {
				return calCandidate{}, err
			}
			hi *= 2
			if hi > 1e300 {
				return calCandidate{}, fmt.Errorf("%w: no pure-ε scale found", ErrInfeasible)
			}
		}
		lo := hi / 2
		for ok(lo) {
			hi, lo = lo, lo/2
			if lo < 1e-300 {
				break
			}
		}
		for i := 0; i < 200 && hi-lo > 1e-9*hi; i++ {
			mid := 0.5 * (lo + hi)
			if ok(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		kappa = hi
	}
	scales := calScales(kappa, ps)
	e, err := spent(scales)
	if err != nil {
		return calCandidate{}, err
	}
	// The certificate rounds every term and the sum up (pldSumFactor), so
	// the closed-form κ can miss ε by a few ulps (1.0000000000000002 for
	// six parts at ε = 1). Spending is non-increasing in κ (proportional
	// to 1/κ for Laplace-like noise), so κ·(e/ε) certifies up to rounding:
	// widen κ by that factor and a few ulps more, and certify again. Only
	// a certified κ is returned, so this only ever adds noise: at most
	// pureRetries·(4 + parts + 4)·2⁻⁵³ relative, far below the solvers'
	// 1e-6 tolerance.
	for i := 0; e > total.Epsilon && i < pureRetries; i++ {
		kappa *= e / total.Epsilon * (1 + 4*roundoff)
		scales = calScales(kappa, ps)
		if e, err = spent(scales); err != nil {
			return calCandidate{}, err
		}
	}
	if e > total.Epsilon {
		return calCandidate{}, fmt.Errorf("%w: pure-ε certificate %v exceeds ε %v", ErrInfeasible, e, total.Epsilon)
	}
	return calCandidate{acct: AccountPure, method: ClosedForm, scales: scales, cert: 0}, nil
}

// calRRPLD is the PLD of randomized response with parameter ε₀, which
// dominates every ε₀-DP mechanism (Kairouz, Oh & Viswanath 2017): loss +ε₀
// with probability e^{ε₀}/(1+e^{ε₀}), −ε₀ otherwise. It stands in for the
// pure-ε mechanisms without a monotone loss (SαS, Cauchy) in a composition.
func calRRPLD(eps0 float64, o PLDOptions) (*PLD, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	top := eps0 * (1 + 4*roundoff)
	g := newPLDGrid(top, -top, chooseSpacing(2*top, 2*top, o.Points), true)
	p := 1 / (1 + math.Exp(-eps0))
	// Mass p at +ε₀ (Q-mass 1−p = p·e^{−ε₀}), mass 1−p at −ε₀.
	g.add(p, 2*roundoff, eps0, top, -eps0, 4*roundoff*eps0, false)
	g.add(1-p, 2*roundoff, -top, -eps0, eps0, 4*roundoff*eps0, false)
	return g.pld(true, o), nil
}

// calPartPLD returns the PLD of one coordinate of part p at the given scale.
func calPartPLD(p calPart, scale float64, o PLDOptions) (*PLD, error) {
	pl, err := NewPLD(p.Mechanism, scale, p.Linf, o)
	if errors.Is(err, ErrUnsupported) {
		e, perr := calPureEpsilon(p.Mechanism, scale, p.Linf)
		if perr != nil {
			return nil, err
		}
		return calRRPLD(e, o)
	}
	return pl, err
}

// calComposedPLD is the PLD of the whole horizon at noise level κ.
func calComposedPLD(ps []calPart, scales []float64, o PLDOptions) (*PLD, error) {
	var total *PLD
	for i, p := range ps {
		base, err := calPartPLD(p, scales[i], o)
		if err != nil {
			return nil, err
		}
		c, err := base.SelfCompose(p.n)
		if err != nil {
			return nil, err
		}
		if total == nil {
			total = c
		} else {
			total = compose(total, c)
		}
	}
	return total, nil
}

// calibratePLD finds the smallest κ whose composed PLD certifies δ(ε) ≤ δ.
func calibratePLD(total Budget, ps []calPart) (calCandidate, error) {
	if !(total.Delta > 0) {
		return calCandidate{}, fmt.Errorf("%w: the PLD accountant needs δ > 0; use pure accounting for δ = 0", ErrUnsupported)
	}
	var o PLDOptions
	eval := func(kappa float64) (float64, []float64, error) {
		pldEvaluations.Add(1)
		scales := calScales(kappa, ps)
		p, err := calComposedPLD(ps, scales, o)
		if err != nil {
			return 0, nil, err
		}
		return p.Delta(total.Epsilon), scales, nil
	}
	// First guess: the privacy loss of nᵢ coordinates at shift/scale tᵢ is
	// roughly Gaussian with variance Σ nᵢ·tᵢ²·Iᵢ (Iᵢ the Fisher
	// information), i.e. μ-GDP with μ² = that sum.
	mu, err := gdpMu(total.Epsilon, total.Delta)
	if err != nil || !(mu > 0) {
		mu = 1
	}
	s := 0.0
	for _, p := range ps {
		s += float64(p.n) * pldFisher(p.Mechanism) / (p.w * p.w)
	}
	guess := math.Sqrt(s) / mu
	_, cert, scales, err := solveNoiseLevel(eval, guess, total.Delta)
	if err != nil {
		return calCandidate{}, err
	}
	return calCandidate{acct: AccountPLD, method: Solver, scales: scales, cert: cert}, nil
}

// solveNoiseLevel finds (to CalibrationTolerance) the smallest κ with
// eval(κ) ≤ target, assuming eval is non-increasing, and returns the upper
// end of the final bracket — a κ whose certificate was computed and checked.
// It brackets geometrically from the guess and then runs the Illinois
// variant of regula falsi on log δ against log κ, falling back to bisection.
func solveNoiseLevel(eval func(float64) (float64, []float64, error), guess, target float64) (float64, float64, []float64, error) {
	if !(guess > 0) || math.IsInf(guess, 0) {
		guess = 1
	}
	type point struct {
		x, f   float64 // log κ, log δ − log target
		d      float64
		scales []float64
	}
	at := func(x float64) (point, error) {
		d, sc, err := eval(math.Exp(x))
		if err != nil {
			return point{}, err
		}
		return point{x: x, f: math.Log(math.Max(d, 1e-320)) - math.Log(target), d: d, scales: sc}, nil
	}
	p, err := at(math.Log(guess))
	if err != nil {
		return 0, 0, nil, err
	}
	var lo, hi point // lo infeasible (f > 0), hi feasible (f ≤ 0)
	// Geometric bracketing from the guess: steps of 1%, doubling, so a good
	// guess costs two evaluations and a poor one a few more.
	step := 0.01
	if p.f <= 0 {
		hi = p
		for k := 0; ; k++ {
			q, err := at(hi.x - step)
			if err != nil {
				return 0, 0, nil, err
			}
			if q.f > 0 {
				lo = q
				break
			}
			hi = q
			step *= 2
			if k > 60 {
				return 0, 0, nil, fmt.Errorf("%w: the accountant certifies any noise level; check the budget", ErrInfeasible)
			}
		}
	} else {
		lo = p
		for k := 0; ; k++ {
			q, err := at(lo.x + step)
			if err != nil {
				return 0, 0, nil, err
			}
			if q.f <= 0 {
				hi = q
				break
			}
			lo = q
			step *= 2
			if k > 60 || lo.x+step > 690 {
				return 0, 0, nil, fmt.Errorf("%w: δ %v is below what the accountant can certify at any noise level (its numerical floor grows with the number of compositions, about 1e-13 each)", ErrInfeasible, target)
			}
		}
	}
	fl, fh := lo.f, hi.f // working values, halved by the Illinois rule
	last, same := 0, 0
	tol := math.Log1p(CalibrationTolerance)
	for i := 0; i < 100 && hi.x-lo.x > tol; i++ {
		w := hi.x - lo.x
		x := hi.x - fh*w/(fh-fl)
		// Stay at least 0.4·tol inside the bracket, so that a secant step
		// landing next to the root closes the bracket on the next
		// evaluation; bisect after three steps on the same side in case δ(κ)
		// is kinked (grid effects).
		minStep := 0.4 * tol
		if same >= 3 || math.IsNaN(x) {
			x = 0.5 * (lo.x + hi.x)
			same = 0
		}
		x = math.Max(lo.x+minStep, math.Min(hi.x-minStep, x))
		q, err := at(x)
		if err != nil {
			return 0, 0, nil, err
		}
		if q.f > 0 {
			lo, fl = q, q.f
			if last == -1 {
				fh /= 2
				same++
			} else {
				same = 1
			}
			last = -1
		} else {
			hi, fh = q, q.f
			if last == 1 {
				fl /= 2
				same++
			} else {
				same = 1
			}
			last = 1
		}
	}
	return math.Exp(hi.x), hi.d, hi.scales, nil
}

// calibrateBasic gives every one of the N = Σ nᵢ coordinates the budget
// (ε/N, δ/N) and calibrates each part with its own exact one-dimensional
// calibration.
func calibrateBasic(total Budget, ps []calPart) (calCandidate, error) {
	n := 0
	for _, p := range ps {
		n += p.n
	}
	per := Budget{Epsilon: total.Epsilon / float64(n) * (1 - 4*roundoff), Delta: total.Delta / float64(n) * (1 - 4*roundoff)}
	scales := make([]float64, len(ps))
	for i, p := range ps {
		c, err := p.Mechanism.Calibrate(per.Epsilon, per.Delta, p.Linf)
		if err != nil {
			return calCandidate{}, err
		}
		scales[i] = c.Scale
	}
	return calCandidate{acct: AccountBasic, method: Solver, scales: scales, cert: total.Delta}, nil
}

// advancedSplits are the fractions of δ given to the per-coordinate δ₀
// (the rest is the theorem's δ'); the best is kept.
var advancedSplits = []float64{0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9}

// calibrateAdvanced applies the advanced composition theorem over the
// N = Σ nᵢ coordinates: each is (ε₀, δ₀)-DP with N·δ₀ + δ' = δ and
// √(2N·ln(1/δ'))·ε₀ + N·ε₀·(e^{ε₀} − 1) = ε.
func calibrateAdvanced(total Budget, ps []calPart) (calCandidate, error) {
	if !(total.Delta > 0) {
		return calCandidate{}, fmt.Errorf("%w: advanced composition needs δ > 0", ErrInfeasible)
	}
	n := 0
	for _, p := range ps {
		n += p.n
	}
	var best calCandidate
	found := false
	var lastErr error
	for _, f := range advancedSplits {
		dPrime := total.Delta * (1 - f) * (1 - 4*roundoff)
		d0 := total.Delta * f / float64(n) * (1 - 4*roundoff)
		e0 := advancedPerStep(total.Epsilon, n, dPrime)
		if !(e0 > 0) {
			continue
		}
		scales := make([]float64, len(ps))
		ok := true
		for i, p := range ps {
			c, err := p.Mechanism.Calibrate(e0, d0, p.Linf)
			if err != nil {
				lastErr = err
				ok = false
				break
			}
			scales[i] = c.Scale
		}
		if !ok {
			continue
		}
		c := calCandidate{acct: AccountAdvanced, method: Solver, scales: scales, cert: total.Delta}
		if !found || calLevel(c, ps) < calLevel(best, ps) {
			best, found = c, true
		}
	}
	if !found {
		if lastErr == nil {
			lastErr = fmt.Errorf("%w: advanced composition leaves no per-step ε", ErrInfeasible)
		}
		return calCandidate{}, lastErr
	}
	return best, nil
}

// AccountantFor returns the accountant of a release whose parts carry the
// given per-coordinate scales, over `windows` releases: what the ledger needs
// to report the budget spent after k ≤ horizon windows. Gaussian-only
// releases get the exact GaussianAccountant, releases whose parts all have
// pure ε and no PLD a PureAccountant, the rest a composed PLD.
func AccountantFor(parts []Part, scales []float64, windows int) (Accountant, error) {
	if len(parts) == 0 || len(parts) != len(scales) {
		return nil, fmt.Errorf("%w: %d parts and %d scales", ErrInvalidParameter, len(parts), len(scales))
	}
	if windows < 1 {
		return nil, fmt.Errorf("%w: windows %d: want ≥ 1", ErrInvalidParameter, windows)
	}
	ps := make([]calPart, len(parts))
	for i, p := range parts {
		if p.Mechanism == nil || p.L0 < 1 || !(p.Linf > 0) || math.IsInf(p.Linf, 0) {
			return nil, fmt.Errorf("%w: calPart %d: want a mechanism, L0 ≥ 1 and a finite L∞ > 0", ErrInvalidParameter, i)
		}
		if !(scales[i] > 0) || math.IsInf(scales[i], 0) {
			return nil, fmt.Errorf("%w: calPart %d: scale %v: want a finite scale > 0", ErrInvalidParameter, i, scales[i])
		}
		ps[i] = calPart{Part: p, w: 1, n: windows * p.L0}
	}
	if calAllGaussian(ps) {
		return GaussianAccountant{Mu: gaussMu(ps, scales)}, nil
	}
	pl, err := calComposedPLD(ps, scales, PLDOptions{})
	if err != nil {
		// No PLD (e.g. SαS everywhere): exact pure composition.
		e := 0.0
		for i, p := range ps {
			ei, perr := calPureEpsilon(p.Mechanism, scales[i], p.Linf)
			if perr != nil {
				return nil, err
			}
			e += float64(p.n) * ei
		}
		return PureAccountant{Eps0: e * pldSumFactor(len(ps))}, nil
	}
	return pl, nil
}
