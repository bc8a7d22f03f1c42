package privacy

import (
	"fmt"
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
)

// Snapping: releasing real values without floating-point leaks.
//
// x + noise computed in float64 leaks x through its low bits: the set of
// float64 values the sum can take depends on x, and a single release can
// rule out neighbouring inputs (Mironov, "On significance of the least
// significant bits for differential privacy", CCS 2012). A snapped release
// lives on a grid ΛZ, Λ a power of two fixed in advance from the
// sensitivity (SnapStep), never from the data:
//
//  1. the true value is clamped into [lower, upper] (data-independent
//     bounds; clamping never increases the sensitivity);
//  2. it is rounded to the nearest multiple of Λ, n = round(x/Λ), exactly
//     (Λ is a power of two). Rounding can move two neighbouring values apart
//     by up to Λ more than before, so the noise must be calibrated for
//     sensitivity Δ + Λ per coordinate (the adjustment OpenDP makes for its
//     float mechanisms; for a vector: L∞ + Λ, L1 + L0·Λ, L2 + √L0·Λ);
//  3. integer noise k on the grid is added in integer arithmetic, and
//     (n + k)·Λ is released: an exactly representable multiple of Λ.
//
// The noise k, and so the guarantee, depends on the mechanism:
//
//   - laplace (and subbotin:1): k = round(Z/Λ) for Z continuous Laplace,
//     sampled exactly (integer arithmetic only: a Bernoulli(e^{−Λ/(2s)})
//     for k ≠ 0 and an exact geometric). The release is a post-processing
//     of the continuous Laplace mechanism on the rounded value, so every
//     Laplace calibration for Δ + Λ (pure ε or (ε, δ), scalar or L1 vector)
//     holds exactly. No floating-point residual.
//   - gaussian (and subbotin:2), in NewSnapped: k is discrete Gaussian on the
//     lattice, sampled exactly and calibrated exactly (DiscreteGaussian, its
//     own Theorem 7 computation) for the integer sensitivity ⌊Δ/Λ⌋ + 1 ≥
//     (Δ + Λ)/Λ. Exact, no residual. (SnapRelease, which takes a scale
//     calibrated elsewhere, treats gaussian like the next group.)
//   - every other mechanism: k = round(z/Λ) for z = scale·X from the float64
//     sampler. For an ideal sampler this is post-processing of the
//     continuous mechanism, so (ε, δ) at Δ + Λ carries over exactly. The
//     float64 sampler differs from the ideal one driven by the same
//     uniforms by its rounding: assume an error η ≤ 2⁻⁴⁴·(|z| + scale)
//     (about a hundred ulps; each sampler performs about ten operations that
//     are correctly rounded or within an ulp or two of the math library) and,
//     for the rejection samplers (subbotin:R, gaussian, gaussian-classic),
//     that a rejection decision differs from the ideal one with probability
//     at most 2⁻⁴⁰ per draw. Then a grid cell's probability changes by a
//     factor within 1 ± κ, κ = 2η/Λ·e^{L(Λ+2η)/scale} for inner cells (L
//     bounds |(log f)'| on the range) and η·hazard(M) for the end cells when
//     the output is clamped M beyond the bounds. NewSnapped clamps the
//     output (never the noise alone: that would leak a δ of the clamp's tail
//     probability) at the 1 − 2⁻¹⁶ half-width M beyond [lower, upper], with
//     Λ ≥ (M + upper − lower)·2⁻²⁴, checks κ ≤ 2⁻¹⁶ for all noise up to that
//     reach, and reserves
//     FloatEpsilon = log((1+κ)/(1−κ)) ≈ 3.05e-5 of ε and FloatDelta = 2⁻⁴⁰ of
//     δ (rejection samplers) for it. This is a documented argument under the
//     stated assumptions about the sampler and the math library, not a
//     machine-checked proof; prefer laplace or gaussian when exactness
//     matters.
//
// Integer-valued releases (counts, histogram cells) need no snapping: use
// DiscreteLaplace or DiscreteGaussian directly.
//
// Vectors over a horizon (the operator). The same three paths exist for
// noise calibrated jointly elsewhere (CalibrateParts): SnapRelease (exact
// rounded Laplace), LatticeRelease (exact discrete Gaussian on the lattice,
// calibrated as a DiscreteGaussian part for the integer sensitivity
// LatticeSensitivity(L∞, Λ)), and SnapRelease with float noise, whose
// residual over all the coordinates a unit can change is composed and
// reserved by FloatIdeal (residual.go). That path clamps nothing beyond
// ±2⁵⁰ grid steps: instead of an output clamp near data-independent bounds
// (which group sums do not have), the noise beyond its 1 − 2⁻⁵⁰ half-width
// is charged to δ, so it needs δ > 0 and light tails, and Λ ≥ reach·2⁻²²
// (FloatStep).

// Constants of the snapping analysis.
const (
	// snapSensitivityBits: Λ ≥ Δ·2⁻²⁰, so the sensitivity adjustment Δ + Λ
	// costs at most one part in 10⁶ of the scale.
	snapSensitivityBits = 20
	// snapMarginBits: Λ ≥ Margin·2⁻²⁴ (float path): with η ≤
	// 2⁻⁴⁴·(Margin + Λ + scale), an inner cell's κ = 2η/Λ·ρ is about
	// 2⁻¹⁹·(1 + scale/Margin)·ρ, below 2⁻¹⁶ for the densities here.
	snapMarginBits = 24
	// snapTailBeta: the noise clamp sits at its two-sided 1 − 2⁻¹⁶
	// half-width, so one release in 65536 is clamped (heavy tails need this
	// to keep Λ small relative to the scale).
	snapTailBeta = 0x1p-16
	// snapSamplerError is the assumed bound on a float64 sampler's error
	// relative to |z| + scale.
	snapSamplerError = 0x1p-44
	// snapKappa bounds the relative change of any cell's probability.
	snapKappa = 0x1p-16
	// snapRejectDelta is the assumed bound on the probability that a float64
	// rejection sampler decides differently from the ideal one in one draw:
	// its acceptance tests compare quantities with relative errors near
	// 2⁻⁵⁰, over at most a few dozen tests per draw.
	snapRejectDelta = 0x1p-40
	// maxSnapUnits bounds |bounds|/Λ and the noise clamp in grid units, so
	// that n + k stays an exact float64 integer.
	maxSnapUnits = 1 << 50
)

// snapFloatEpsilon is log((1+κ)/(1−κ)) for κ = snapKappa, rounded up.
var snapFloatEpsilon = math.Nextafter(math.Log1p(snapKappa)-math.Log1p(-snapKappa), math.Inf(1))

// SnapStep returns the grid step Λ for values whose sensitivity (per
// coordinate: L∞) is linf: the smallest power of two ≥ linf·2⁻²⁰. Calibrate
// the noise for linf + Λ. It returns NaN unless linf is finite and > 0.
func SnapStep(linf float64) float64 {
	if !(linf > 0) || math.IsInf(linf, 0) {
		return math.NaN()
	}
	return pow2Ceil(math.Ldexp(linf, -snapSensitivityBits))
}

// pow2Ceil returns the smallest power of two ≥ x > 0.
func pow2Ceil(x float64) float64 {
	fr, e := math.Frexp(x)
	if fr == 0.5 {
		return x
	}
	return math.Ldexp(1, e)
}

// snapKind says how a snapped release draws its grid noise.
type snapKind int

const (
	snapRoundedLaplace snapKind = iota + 1 // exact rounded Laplace
	snapLattice                            // exact lattice mechanism (discrete Gaussian)
	snapFloat                              // rounded float64 noise
)

// snapKindOf returns how SnapRelease adds noise of m.
func snapKindOf(m Mechanism) snapKind {
	switch mm := m.(type) {
	case Laplace:
		return snapRoundedLaplace
	case Subbotin:
		if mm.R == 1 {
			return snapRoundedLaplace
		}
	}
	return snapFloat
}

// Snapped is a mechanism calibrated for one real-valued query, releasing
// clamped values on a power-of-two grid (see the package's snapping notes
// above: the guarantee is exact for laplace and gaussian, and carries a
// reserved floating-point residual for the other mechanisms).
type Snapped struct {
	// Calibration is the guarantee: Epsilon and Delta as requested,
	// Sensitivity the requested Δ, Scale the noise scale in the value's
	// units (calibrated for Δ + Step and, on the float path, the budget less
	// the floating-point reserve).
	Calibration Calibration
	// Lower and Upper bound the true value (clamped into [Lower, Upper]).
	Lower, Upper float64
	// Step is Λ: every release is an integer multiple of it.
	Step float64
	// Exact reports that the grid noise is sampled exactly and the
	// guarantee has no floating-point residual.
	Exact bool
	// FloatEpsilon and FloatDelta are the parts of ε and δ reserved for the
	// floating-point residual (0 when Exact).
	FloatEpsilon, FloatDelta float64
	// Margin: the noise is clamped to ±Margin, so releases lie in
	// [Lower − Margin, Upper + Margin] (on the grid); +Inf when Exact.
	Margin float64

	kind  snapKind
	mech  Mechanism // the mechanism whose sampler draws the noise
	scale float64   // the noise scale in grid units (lattice) or value units
	k     float64   // the noise clamp in grid units (float path)
}

// SnapQuery is one real-valued query to release with NewSnapped. Its
// fields are named so that two swapped numbers cannot silently change the
// guarantee.
type SnapQuery struct {
	// Budget is the (ε, δ) of the release.
	Budget Budget
	// Sensitivity is Δ, the most one unit can change the value.
	Sensitivity float64
	// Lower and Upper are data-independent bounds of the value: it is
	// clamped into [Lower, Upper].
	Lower, Upper float64
}

// NewSnapped calibrates mechanism m for releasing one real value with
// sensitivity q.Sensitivity and data-independent bounds [q.Lower, q.Upper]
// at budget q.Budget. Discrete mechanisms are rejected: they release
// integers directly.
func NewSnapped(m Mechanism, q SnapQuery) (Snapped, error) {
	epsilon, delta, sensitivity, lower, upper := q.Budget.Epsilon, q.Budget.Delta, q.Sensitivity, q.Lower, q.Upper
	if err := checkBudget(epsilon, delta, sensitivity); err != nil {
		return Snapped{}, err
	}
	p := Snapped{Lower: lower, Upper: upper, Step: SnapStep(sensitivity)}
	if err := checkSnapRange(lower, upper, p.Step, 0); err != nil {
		return Snapped{}, err
	}
	switch mm := m.(type) {
	case DiscreteLaplace, DiscreteGaussian:
		return Snapped{}, fmt.Errorf("%w: %s adds integer noise to integer values; it needs no snapping", ErrInvalidParameter, m.Name())
	case Gaussian:
		return p.lattice(m, epsilon, delta, sensitivity)
	case Subbotin:
		if mm.R == 2 {
			return p.lattice(m, epsilon, delta, sensitivity)
		}
	}
	if snapKindOf(m) == snapRoundedLaplace {
		cal, err := Laplace{}.Calibrate(epsilon, delta, sensitivity+p.Step)
		if err != nil {
			return Snapped{}, fmt.Errorf("snapped %s: %w", m.Name(), err)
		}
		if t := cal.Scale / p.Step; !rng.DiscreteScaleOK(t) {
			return Snapped{}, fmt.Errorf("%w: snapped %s: noise scale beyond the supported range (ε too small)", ErrInfeasible, m.Name())
		}
		p.kind, p.Exact, p.Margin = snapRoundedLaplace, true, math.Inf(1)
		p.mech, p.scale = Laplace{}, cal.Scale/p.Step
		p.Calibration = Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity,
			Scale: cal.Scale, Method: cal.Method}
		return p, nil
	}
	return p.float(m, epsilon, delta, sensitivity)
}

// lattice sets up the discrete Gaussian lattice path, calibrated for the
// integer sensitivity ⌊Δ/Λ⌋ + 1.
func (p Snapped) lattice(m Mechanism, epsilon, delta, sensitivity float64) (Snapped, error) {
	d := math.Floor(sensitivity/p.Step) + 1 // exact: Λ is a power of two
	cal, err := DiscreteGaussian{}.Calibrate(epsilon, delta, d)
	if err != nil {
		return Snapped{}, fmt.Errorf("snapped %s: %w", m.Name(), err)
	}
	p.kind, p.Exact, p.Margin = snapLattice, true, math.Inf(1)
	p.mech, p.scale = DiscreteGaussian{}, cal.Scale
	p.Calibration = Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity,
		Scale: cal.Scale * p.Step, Method: cal.Method}
	return p, nil
}

// float sets up the floating-point path.
func (p Snapped) float(m Mechanism, epsilon, delta, sensitivity float64) (Snapped, error) {
	p.FloatEpsilon = snapFloatEpsilon
	if rejectionSampler(m) {
		p.FloatDelta = snapRejectDelta
	}
	eps, del := epsilon-p.FloatEpsilon, delta-p.FloatDelta
	if eps <= 0 || del < 0 || (p.FloatDelta > 0 && del == 0) {
		return Snapped{}, fmt.Errorf("%w: snapped %s needs ε > %.3g and δ > %.3g for its floating-point reserve",
			ErrInfeasible, m.Name(), p.FloatEpsilon, p.FloatDelta)
	}
	// Λ depends on the margin, which depends on the scale, which depends on
	// Λ (through Δ + Λ): iterate until Λ covers the margin.
	for i := 0; ; i++ {
		cal, err := m.Calibrate(eps, del, sensitivity+p.Step)
		if err != nil {
			return Snapped{}, fmt.Errorf("snapped %s: %w", m.Name(), err)
		}
		margin := m.HalfWidth(cal.Scale, snapTailBeta)
		if !(margin > 0) || math.IsInf(margin, 0) {
			return Snapped{}, fmt.Errorf("%w: snapped %s: no finite noise margin", ErrInfeasible, m.Name())
		}
		// The output, not the noise, is clamped to [Lower − M, Upper + M]
		// (post-processing, no δ): noise up to reach = M + (Upper − Lower)
		// can still decide an output cell, so the residual analysis and the
		// grid cover that whole reach.
		reach := margin + (p.Upper - p.Lower)
		if need := pow2Ceil(math.Ldexp(reach, -snapMarginBits)); need > p.Step {
			if i >= 8 {
				return Snapped{}, fmt.Errorf("%w: snapped %s: grid did not settle", ErrInfeasible, m.Name())
			}
			p.Step = need
			continue
		}
		p.k = math.Ceil(margin / p.Step)
		p.Margin = p.k * p.Step
		if err := checkSnapRange(p.Lower, p.Upper, p.Step, p.Margin); err != nil {
			return Snapped{}, err
		}
		if k := snapKappaOf(m, cal.Scale, p.Step, p.Margin, p.Margin+(p.Upper-p.Lower)); !(k <= snapKappa) {
			return Snapped{}, fmt.Errorf("%w: snapped %s: the grid cannot bound the floating-point residual (κ = %.3g)", ErrInfeasible, m.Name(), k)
		}
		p.kind, p.mech, p.scale = snapFloat, m, cal.Scale
		p.Calibration = Calibration{Mechanism: m.Name(), Epsilon: epsilon, Delta: delta, Sensitivity: sensitivity,
			Scale: cal.Scale, Method: cal.Method}
		return p, nil
	}
}

// snapKappaOf returns κ, the bound on the relative change of any cell's
// probability for noise up to reach (≥ margin M) away from the value: the
// larger of the inner-cell bound 2η/Λ·e^{L(Λ+2η)/s} and the end-cell bound
// η·hazard, with η = 2⁻⁴⁴·(reach + Λ + s), L the log-density slope bound up
// to reach, and hazard(x) ≤ (L + s/x)/s for x ≥ M (a Mills-ratio bound,
// S(x) ≥ f(x)/(L + 1/x) in standard units, for the densities here).
func snapKappaOf(m Mechanism, s, step, margin, reach float64) float64 {
	eta := snapSamplerError * (reach + step + s)
	l := logDensitySlope(m, (reach+step)/s)
	inner := 2 * eta / step * math.Exp(l*(step+2*eta)/s)
	end := eta * (l + s/margin) / s
	return math.Max(inner, end)
}

// checkSnapRange checks that the bounds and the margin fit the grid in
// exact integers.
func checkSnapRange(lower, upper, step, margin float64) error {
	if !(lower < upper) || math.IsInf(lower, 0) || math.IsInf(upper, 0) {
		return fmt.Errorf("%w: snapping needs finite bounds lower < upper, got [%v, %v]", ErrInvalidParameter, lower, upper)
	}
	if fr, _ := math.Frexp(step); fr != 0.5 {
		return fmt.Errorf("%w: the grid step must be a power of two, got %v", ErrInvalidParameter, step)
	}
	if math.Max(math.Abs(lower), math.Abs(upper))+margin > maxSnapUnits*step {
		return fmt.Errorf("%w: bounds [%v, %v] are too wide for the grid step %v (more than 2^50 steps)", ErrInvalidParameter, lower, upper, step)
	}
	return nil
}

// rejectionSampler reports whether m's float64 sampler uses rejection (and
// so carries the snapRejectDelta residual).
func rejectionSampler(m Mechanism) bool {
	switch m.(type) {
	case Subbotin, GaussianClassic, Gaussian:
		return true
	}
	return false
}

// logDensitySlope bounds L = sup |ψ'(x)| = |d/dx log f(x)| of the standard
// density over |x| ≤ u: 1 for Laplace, Logistic (|tanh(x/2)|) and Cauchy
// (2|x|/(1+x²)), max(1, u^{R−1}) for Subbotin_R, max(1, u) for the normal,
// and max(3, u) for SαS, whose score is normal-like (below |x|) near the
// centre and (α+1)/|x| ≤ 3/|x| in the tail (a loose bound: it only makes
// the check stricter). Unknown mechanisms get +Inf and are refused.
func logDensitySlope(m Mechanism, u float64) float64 {
	switch mm := m.(type) {
	case Laplace, Logistic, Cauchy:
		return 1
	case Subbotin:
		return math.Max(1, math.Pow(u, mm.R-1))
	case Gaussian, GaussianClassic:
		return math.Max(1, u)
	case Stable:
		return math.Max(3, u)
	}
	return math.Inf(1)
}

// Release returns the snapped, noised release of value: a multiple of Step.
// A NaN or infinite value is an error (the value is not echoed).
func (p Snapped) Release(s *rng.Stream, value float64) (float64, error) {
	if p.kind == 0 {
		return 0, fmt.Errorf("%w: Snapped not initialised (use NewSnapped)", ErrInvalidParameter)
	}
	if p.kind != snapFloat {
		return snapAdd(p.kind, p.mech, s, p.scale, p.Step, p.Lower, p.Upper, rng.MaxLattice+maxSnapUnits, -rng.MaxLattice, rng.MaxLattice, value)
	}
	// Float path: clamp the output (in grid units) to [nL − k, nU + k]. The
	// noise clamp at k + (nU − nL) is implied by it for every n in [nL, nU],
	// so both are post-processing of n + noise and cost no δ. (Clamping the
	// noise itself at ±k would: the output n − k would then be impossible
	// for a neighbouring n' > n, a δ of P(noise < −k) ≈ 2⁻¹⁷ per release.)
	nl, nu := math.Round(p.Lower/p.Step), math.Round(p.Upper/p.Step)
	return snapAdd(p.kind, p.mech, s, p.scale, p.Step, p.Lower, p.Upper, p.k+(nu-nl), int64(nl-p.k), int64(nu+p.k), value)
}

// SnapNoise is the noise of SnapRelease, calibrated elsewhere, and the grid
// and clamp range of its output. Its fields are named so that two swapped
// numbers cannot silently change the guarantee.
type SnapNoise struct {
	// Mechanism draws the noise.
	Mechanism Mechanism
	// Scale is the noise scale, in the value's units, calibrated for the
	// sensitivity plus Step.
	Scale float64
	// Step is the grid Λ, a power of two (normally SnapStep(L∞)).
	Step float64
	// Lower and Upper are the data-independent bounds the value is clamped
	// into.
	Lower, Upper float64
}

// SnapRelease releases value with noise of mechanism n.Mechanism at a scale
// n.Scale calibrated elsewhere, on the grid n.Step (normally SnapStep(L∞)):
// the value is clamped into [n.Lower, n.Upper] and rounded to the grid, the
// noise is rounded to the grid, and the two are added exactly. The caller
// must have calibrated the scale for the sensitivity plus the step (per
// coordinate a unit can move). laplace
// and subbotin:1 noise is exact rounded Laplace: the release is exactly as
// private as the continuous mechanism at that sensitivity. For every other
// mechanism, including gaussian here, the float64 residual described above
// applies and is not reserved by SnapRelease (NewSnapped reserves it for one
// value; FloatIdeal composes and reserves it for many — see residual.go);
// the noise is not clamped. Errors: invalid parameters or a non-finite
// value (not echoed).
func SnapRelease(s *rng.Stream, n SnapNoise, value float64) (float64, error) {
	m, scale, step, lower, upper := n.Mechanism, n.Scale, n.Step, n.Lower, n.Upper
	if err := checkSnapRange(lower, upper, step, 0); err != nil {
		return 0, err
	}
	if !scaleOK(scale) {
		return 0, fmt.Errorf("%w: noise scale must be finite and > 0, got %v", ErrInvalidParameter, scale)
	}
	kind := snapKindOf(m)
	if kind == snapRoundedLaplace {
		scale /= step // grid units; exact
		if !rng.DiscreteScaleOK(scale) {
			return 0, fmt.Errorf("%w: noise scale is %v grid steps, outside [2^-30, 2^40]", ErrInvalidParameter, scale)
		}
	}
	// The noise is clamped only beyond rng.MaxLattice + maxSnapUnits grid units:
	// there every |n| ≤ maxSnapUnits gives the same clamped output ±rng.MaxLattice,
	// so the clamp is a post-processing of n + k and costs no δ. (A clamp at
	// maxSnapUnits would not be: the output n − kmax would be impossible for
	// a neighbouring n' > n, a δ of P(noise < −kmax) per value.)
	return snapAdd(kind, m, s, scale, step, lower, upper, rng.MaxLattice+maxSnapUnits, -rng.MaxLattice, rng.MaxLattice, value)
}

// LatticeSensitivity returns the integer sensitivity, in grid units, of a
// value with sensitivity linf clamped and rounded to the grid step:
// ⌊linf/step⌋ + 1. Two values at most linf apart round to grid points at
// most that many steps apart (|round(a) − round(b)| ≤ |a − b| + 1, and the
// left side is an integer); the value is exact since step is a power of
// two. NaN for invalid arguments.
func LatticeSensitivity(linf, step float64) float64 {
	if !(linf > 0) || math.IsInf(linf, 0) || !(step > 0) || math.IsInf(step, 0) {
		return math.NaN()
	}
	return math.Floor(linf/step) + 1
}

// LatticeNoise is the noise of LatticeRelease, calibrated elsewhere, and
// the lattice and clamp range of its output. Its fields are named so that
// two swapped numbers cannot silently change the guarantee.
type LatticeNoise struct {
	// Sigma is σ of the discrete Gaussian noise, in grid units.
	Sigma float64
	// Step is the lattice spacing, a power of two.
	Step float64
	// Lower and Upper are the data-independent bounds the value is clamped
	// into.
	Lower, Upper float64
}

// LatticeRelease releases value with exact discrete Gaussian noise on the
// lattice n.Step·Z: the value is clamped into [n.Lower, n.Upper] and rounded
// to the nearest multiple of the step (exactly: it is a power of two),
// integer noise K with P(K = k) ∝ e^{−k²/(2σ²)} (σ = n.Sigma in grid units,
// sampled exactly)
// is added in integer arithmetic, and (n + K)·step is returned (clamped to
// ±2⁵³ grid steps, a data-independent post-processing). The release is the
// discrete Gaussian mechanism on the integer n, so a calibration of
// DiscreteGaussian for the integer sensitivity LatticeSensitivity(Δ, step)
// (alone, or as a Part of CalibrateParts) holds exactly: no floating-point
// residual. This is NewSnapped's lattice path with σ calibrated elsewhere.
// Errors: invalid parameters (σ outside [2⁻³⁰, 2⁴⁰], bounds beyond 2⁵⁰ grid
// steps) or a non-finite value (not echoed).
func LatticeRelease(s *rng.Stream, n LatticeNoise, value float64) (float64, error) {
	sigma, step, lower, upper := n.Sigma, n.Step, n.Lower, n.Upper
	if err := checkSnapRange(lower, upper, step, 0); err != nil {
		return 0, err
	}
	if !rng.DiscreteScaleOK(sigma) {
		return 0, fmt.Errorf("%w: lattice noise σ is %v grid steps, outside [2^-30, 2^40]", ErrInvalidParameter, sigma)
	}
	return snapAdd(snapLattice, DiscreteGaussian{}, s, sigma, step, lower, upper, 0, -rng.MaxLattice, rng.MaxLattice, value)
}

// snapAdd is the release step shared by Snapped and SnapRelease: n =
// round(clamp(value)/step), k the grid noise (clamped to ±kmax grid units on
// the float path, which the callers choose so that this is implied by the
// output clamp), output clamp(n + k, outLo, outHi)·step.
func snapAdd(kind snapKind, m Mechanism, s *rng.Stream, scale, step, lower, upper, kmax float64, outLo, outHi int64, value float64) (float64, error) {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return 0, fmt.Errorf("%w: value is not finite", ErrInvalidParameter)
	}
	v := math.Max(lower, math.Min(upper, value))
	n := int64(math.Round(v / step)) // v/step is exact; |n| ≤ 2^50
	var k int64
	switch kind {
	case snapRoundedLaplace:
		t, d := rng.DyadicUp(scale)
		k = s.RoundedLaplace(t, d) // |k| ≤ 2^53
	case snapLattice:
		z := m.Sample(s, scale)
		if math.IsNaN(z) {
			return 0, fmt.Errorf("%w: snapped %s: invalid noise scale", ErrInvalidParameter, m.Name())
		}
		k = int64(z) // an integer with |z| ≤ 2^53
	default:
		z := m.Sample(s, scale)
		if math.IsNaN(z) {
			return 0, fmt.Errorf("%w: snapped %s: invalid noise scale or parameter", ErrInvalidParameter, m.Name())
		}
		// Round the noise to the grid and clamp it: both data independent.
		k = int64(math.Max(-kmax, math.Min(kmax, math.Round(z/step))))
	}
	out := max(outLo, min(outHi, n+k)) // post-processing; exact float64 integers
	return float64(out) * step, nil
}

// HalfWidth returns h such that a release lies within h of the clamped true
// value with probability at least 1 − β: the noise's half-width rounded to
// the grid, plus Λ/2 for the rounding of the value (and Λ/2 more for the
// rounding of float noise).
func (p Snapped) HalfWidth(beta float64) float64 {
	if p.kind == 0 || !validBeta(beta) {
		return math.NaN()
	}
	switch p.kind {
	case snapLattice:
		return p.mech.HalfWidth(p.scale, beta)*p.Step + p.Step/2
	case snapRoundedLaplace:
		return math.Nextafter(Laplace{}.HalfWidth(p.scale*p.Step, beta)+p.Step, math.Inf(1))
	}
	return math.Nextafter(p.mech.HalfWidth(p.scale, beta)+p.Step, math.Inf(1))
}
