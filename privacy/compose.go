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
	// L1 and L2, when non-zero, bound the ℓ1 and ℓ2 norms of one unit's
	// change to the part per window more tightly than L0·Linf and
	// √L0·Linf (a bound on a unit's total contributions; see
	// windows.Sensitivity). The accountants that are exact for a norm use
	// it — pure ε for Laplace-like noise (loss ≤ Σ|shiftᵢ|/scale) with L1,
	// μ-GDP for Gaussian noise (rotation invariance) with L2 — and every
	// other accountant keeps composing L0 coordinates at shift Linf, which
	// stays valid (vector.go).
	L1, L2 float64
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
		fmt.Fprintf(&b, "|%T%+v|%d|%x|%x|%x|%x", p.Mechanism, p.Mechanism, p.L0, math.Float64bits(p.Linf), math.Float64bits(p.Weight), math.Float64bits(p.L1), math.Float64bits(p.L2))
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
	ps, err := checkParts(total, windows, parts)
	if err != nil {
		return nil, err
	}
	if _, err := ParseAccounting(string(a)); err != nil {
		return nil, err
	}
	if a == "" {
		a = Tightest
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
	w   float64 // weight (1 if unset)
	n   int     // compositions: windows·L0
	win int     // windows
}

// checkParts validates a calibration request (a total budget, windows
// releases of parts) and returns its parts as the calibration sees them.
func checkParts(total Budget, windows int, parts []Part) ([]calPart, error) {
	if err := total.Validate(); err != nil {
		return nil, err
	}
	if windows < 1 || windows > 1<<30 {
		return nil, fmt.Errorf("%w: windows %d: want 1 ≤ windows ≤ 2^30", ErrInvalidParameter, windows)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: no parts to calibrate", ErrInvalidParameter)
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
		if err := p.checkNorms(); err != nil {
			return nil, fmt.Errorf("%w: calPart %d: %w", ErrInvalidParameter, i, err)
		}
		n := int64(windows) * int64(p.L0)
		if n > 1<<40 {
			return nil, fmt.Errorf("%w: calPart %d: %d compositions exceed 2^40", ErrInvalidParameter, i, n)
		}
		ps[i] = calPart{Part: p, w: w, n: int(n), win: windows}
	}
	return ps, nil
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
	return plansOf(c, total, windows, ps), nil
}

// plansOf is the certified candidate c as one Plan per part.
func plansOf(c calCandidate, total Budget, windows int, ps []calPart) []Plan {
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
	return plans
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
		if anyLatticeL2(ps) {
			// Discrete Gaussian parts with a binding L2 bound
			// (compose_lattice_l2.go).
			tries = append(tries, calibrateLatticeL2)
		}
	}
	calls := make([]func() (calCandidate, error), len(tries))
	for i, f := range tries {
		calls[i] = func() (calCandidate, error) { return f(total, ps) }
	}
	return calSmallest(ps, calls)
}

// calSmallest runs the accountants' calibrations tries in order and
// returns the certified candidate with the smallest noise level (the
// first of equals), or all their errors.
func calSmallest(ps []calPart, tries []func() (calCandidate, error)) (calCandidate, error) {
	var best calCandidate
	var errs []error
	found := false
	for _, f := range tries {
		c, err := f()
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

// AccountantFor returns the accountant of a release whose parts carry the
// given per-coordinate scales, over `windows` releases: what the ledger needs
// to report the budget spent after k ≤ horizon windows. Gaussian-only
// releases get the exact GaussianAccountant, releases whose parts all have
// pure ε and no PLD a PureAccountant, the rest a composed PLD — with
// discrete Gaussian parts that have a binding L2 bound, the smaller of it
// and their L2 accountant (compose_lattice_l2.go, account_lattice_l2.go).
func AccountantFor(parts []Part, scales []float64, windows int) (Accountant, error) {
	if len(parts) == 0 || len(parts) != len(scales) {
		return nil, fmt.Errorf("%w: %d parts and %d scales", ErrInvalidParameter, len(parts), len(scales))
	}
	if windows < 1 {
		return nil, fmt.Errorf("%w: windows %d: want ≥ 1", ErrInvalidParameter, windows)
	}
	ps := make([]calPart, len(parts))
	for i, p := range parts {
		if p.Mechanism == nil || p.L0 < 1 || !(p.Linf > 0) || math.IsInf(p.Linf, 0) || p.checkNorms() != nil {
			return nil, fmt.Errorf("%w: calPart %d: want a mechanism, L0 ≥ 1, a finite L∞ > 0 and L1, L2 unset or finite > 0", ErrInvalidParameter, i)
		}
		if !(scales[i] > 0) || math.IsInf(scales[i], 0) {
			return nil, fmt.Errorf("%w: calPart %d: scale %v: want a finite scale > 0", ErrInvalidParameter, i, scales[i])
		}
		ps[i] = calPart{Part: p, w: 1, n: windows * p.L0, win: windows}
	}
	if calAllGaussian(ps) {
		return GaussianAccountant{Mu: gaussMu(ps, scales)}, nil
	}
	pl, err := calComposedPLD(ps, scales, PLDOptions{})
	if l2, ok := newLatticeL2Accountant(ps, scales); ok && err == nil {
		// Discrete Gaussian parts with a binding L2 bound
		// (compose_lattice_l2.go): the smaller of the two.
		return minAccountant{pl, l2}, nil
	}
	if err != nil {
		// No PLD (e.g. SαS everywhere): exact pure composition.
		e := 0.0
		for i, p := range ps {
			ei, perr := p.pureSpent(scales[i])
			if perr != nil {
				return nil, err
			}
			e += ei
		}
		return PureAccountant{Eps0: e * pldSumFactor(len(ps))}, nil
	}
	return pl, nil
}
