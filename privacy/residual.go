package privacy

import (
	"fmt"
	"math"
)

// The floating-point residual of rounded float noise, over a horizon.
//
// A release that adds float64 noise z̃ = scale·X̃ to a value on a grid ΛZ
// and rounds it — output n + round(z̃/Λ) in grid units, n the grid value —
// is exactly an additive integer-noise mechanism whose noise distribution is
// whatever the float64 sampler produces. Under the assumptions stated in
// snap.go (the sampler's result is within η(z) = 2⁻⁴⁴·(|z| + scale) of the
// ideal sample z drawn from the same uniforms, except, for the rejection
// samplers, on a "failure" event of probability ρ ≤ 2⁻⁴⁰ per draw), it is
// compared with the ideal mechanism n + round(z/Λ), which is a
// post-processing of the continuous mechanism and so meets any calibration
// of it for the shift D·Λ (D the largest change of n).
//
// One coordinate. Fix the reach R = h + D·Λ + Λ, h the noise's two-sided
// 1 − β half-width (β = floatTailBeta). A cell c (an output) is "analysed"
// for the neighbouring grid values n, n' if it lies within R of both. For an
// analysed cell the float and the ideal cell probabilities satisfy
//
//	P̃(c | n) ≤ (1+κ)·P*(c | n) + (failure mass),
//	P̃(c | n') ≥ (1−κ)·P*(c | n') − (failure mass),
//
// with κ from FloatKappa below. A cell that is not analysed needs noise
// beyond R − D·Λ ≥ h + Λ: probability ≤ β under the ideal, ≤ β + ρ under the
// float sampler (without failure, |z| ≥ |z̃| − η > h since η < Λ/2).
//
// N coordinates. Over a horizon one unit changes at most N coordinates that
// carry float noise (Σ L0·windows over those parts); the others are
// identical under both inputs. With B the event that some changed float
// coordinate is not analysed or failed (probability ≤ N·(β + ρ) under either
// input and either sampler; half of it for the ideal) and the ideal release
// (ε*, δ*)-DP, for every set S of outputs:
//
//	P̃_D(S)  ≤ (1+κ)^N·P*_D(S) + N·(β + ρ),
//	P*_D'(S) ≤ (1−κ)^−N·(P̃_D'(S) + N·ρ) + N·β,
//
// so, with ε = ε* + N·log((1+κ)/(1−κ)),
//
//	P̃_D(S) ≤ e^ε·P̃_D'(S) + (1+κ)^N·δ* + N·(β + ρ)·(1 + e^ε).
//
// That is basic composition of the per-coordinate residual (ε_f, δ_f) =
// (log((1+κ)/(1−κ)), (β + ρ)·(1 + e^ε)) over the N coordinates, plus the
// inflation (1+κ)^N of δ* — a conservative bound (the e^ε factor comes from
// the failure mass the float sampler may take away from a cell under the
// other input; it is what makes ρ = 2⁻⁴⁰ expensive at large ε). Several
// parts with different κ, ρ and N add their terms. FloatIdeal subtracts the
// residual from a total budget before calibration; FloatGuarantee adds it
// back (the ledger). This is an argument under the stated assumptions about
// the samplers and the math library, not a machine-checked proof: prefer
// the exact paths (laplace, gaussian on real values; the discrete
// mechanisms on integers), which have no residual.

// Constants of the residual analysis.
const (
	// floatTailBeta is β, the probability (per coordinate) of noise beyond
	// the half-width h the analysis covers. It enters δ as β·(1 + e^ε) per
	// changed coordinate: below 1e-10 for 10⁴ coordinates at ε = 4.
	floatTailBeta = 0x1p-50
	// floatTailSlack multiplies β in the tail term, covering the relative
	// error of the survival functions the half-width is computed from (the
	// far tail of an incomplete gamma function is accurate to about 1e-13).
	floatTailSlack = 2
	// FloatGridBits: real values under float noise use a grid step
	// Λ ≥ reach·2⁻²² (FloatStep). Then κ ≈ 2η/Λ ≤ 2⁻²¹·(1 + scale/reach),
	// at most about 1e-6 of ε per changed coordinate, while Λ (< reach·2⁻²¹)
	// adds to the sensitivity about 35·scale·2⁻²¹ for logistic noise: 0.3%
	// at a scale of 250·L∞ (logistic over a day of 1-minute windows at
	// ε = 1), where the ε reserve is 0.25%. The two costs balance near 22
	// bits for such horizons; a single window pays about 1e-5 for either.
	FloatGridBits = 22
	// floatKappaMax: a κ above it means the grid is too fine for float64
	// noise at this scale; the residual is refused rather than reserved.
	floatKappaMax = 0x1p-16
)

// FloatResidual is the floating-point residual of one coordinate of rounded
// float64 noise (see above).
type FloatResidual struct {
	// Kappa bounds the relative change of an analysed cell's probability.
	Kappa float64
	// Epsilon is log((1+κ)/(1−κ)), rounded up: ε per changed coordinate.
	Epsilon float64
	// Tail is the probability that a draw is not covered by the analysis:
	// noise beyond the reach (2β) plus, for rejection samplers, ρ = 2⁻⁴⁰.
	// It costs Tail·(1 + e^ε) of δ per changed coordinate.
	Tail float64
	// Reach is the largest noise magnitude (value units) the analysis
	// covers: the 1 − 2⁻⁵⁰ half-width plus the shift plus one step.
	Reach float64
}

// Zero reports whether the residual is zero (an exact mechanism).
func (r FloatResidual) Zero() bool { return r == FloatResidual{} }

// FloatExact reports whether the grid release of m has no floating-point
// residual: exact rounded Laplace (laplace, subbotin:1 — SnapRelease) and the
// discrete mechanisms. Everything else is float64 noise rounded to the grid.
func FloatExact(m Mechanism) bool {
	return snapKindOf(m) == snapRoundedLaplace || pldDiscrete(m)
}

// floatHeavyTailed reports mechanisms whose tails reach far beyond where
// float64 sampling is accurate at any useful grid: the reach of a 1 − 2⁻⁵⁰
// half-width is about 2⁴⁹ scales for Cauchy.
func floatHeavyTailed(m Mechanism) bool {
	switch m.(type) {
	case Cauchy, Stable:
		return true
	}
	return false
}

// FloatTail returns the scale-independent part of m's residual: the Tail
// of NewFloatResidual (2β, plus ρ = 2⁻⁴⁰ for rejection samplers), which
// costs Tail·(1 + e^ε) of δ per changed coordinate; 0 for exact mechanisms
// and +Inf for heavy-tailed ones (no residual bound). For ranking
// candidates before their scale is known.
func FloatTail(m Mechanism) float64 {
	switch {
	case m == nil || floatHeavyTailed(m):
		return math.Inf(1)
	case FloatExact(m):
		return 0
	case rejectionSampler(m):
		return floatTailSlack*floatTailBeta + snapRejectDelta
	}
	return floatTailSlack * floatTailBeta
}

// FloatNoise is float64 noise rounded to a grid: the subject of
// NewFloatResidual and FloatKappa. Its fields are named so that two swapped
// numbers cannot silently change the guarantee.
type FloatNoise struct {
	// Mechanism draws the noise.
	Mechanism Mechanism
	// Scale is the noise scale, in the value's units.
	Scale float64
	// Step is the grid Λ the noise is rounded to, a power of two.
	Step float64
}

// NewFloatResidual returns the residual of float64 noise of mechanism
// n.Mechanism at scale n.Scale, rounded to the grid step Λ = n.Step (a power
// of two), for a grid value that moves by at most shift (value units, D·Λ)
// between neighbours.
// Exact mechanisms (FloatExact) return the zero residual. Heavy-tailed
// mechanisms (cauchy, sas:α), a κ above 2⁻¹⁶ and invalid arguments are
// errors (ErrUnsupported, ErrInfeasible, ErrInvalidParameter).
func NewFloatResidual(n FloatNoise, shift float64) (FloatResidual, error) {
	m, scale, step := n.Mechanism, n.Scale, n.Step
	if m == nil {
		return FloatResidual{}, fmt.Errorf("%w: nil mechanism", ErrInvalidParameter)
	}
	if !scaleOK(scale) {
		return FloatResidual{}, fmt.Errorf("%w: noise scale must be finite and > 0, got %v", ErrInvalidParameter, scale)
	}
	if fr, _ := math.Frexp(step); fr != 0.5 || math.IsInf(step, 0) {
		return FloatResidual{}, fmt.Errorf("%w: the grid step must be a power of two, got %v", ErrInvalidParameter, step)
	}
	if !(shift >= 0) || math.IsInf(shift, 0) {
		return FloatResidual{}, fmt.Errorf("%w: shift must be finite and ≥ 0, got %v", ErrInvalidParameter, shift)
	}
	if FloatExact(m) {
		return FloatResidual{}, nil
	}
	if floatHeavyTailed(m) {
		return FloatResidual{}, fmt.Errorf("%w: %s float noise has no bounded floating-point residual (its tails reach beyond where float64 sampling is accurate)", ErrUnsupported, m.Name())
	}
	h := m.HalfWidth(scale, floatTailBeta)
	if !(h > 0) || math.IsInf(h, 0) {
		return FloatResidual{}, fmt.Errorf("%w: %s: no finite noise reach", ErrInfeasible, m.Name())
	}
	reach := h + shift + step
	k := FloatKappa(n, reach)
	if !(k <= floatKappaMax) {
		return FloatResidual{}, fmt.Errorf("%w: %s noise at scale %.3g on grid step %v: the floating-point residual is not bounded (κ = %.3g > 2^-16)",
			ErrInfeasible, m.Name(), scale, step, k)
	}
	r := FloatResidual{Kappa: k, Reach: reach, Tail: FloatTail(m)}
	r.Epsilon = math.Nextafter(math.Log1p(k)-math.Log1p(-k), math.Inf(1))
	return r, nil
}

// FloatKappa returns κ, the bound on the relative change of the probability
// of any grid cell of width Λ = n.Step whose noise lies within reach, for
// float64 noise of n.Mechanism at scale s = n.Scale: with η = 2⁻⁴⁴·(reach + Λ + s)
// (the sampler error) and L the bound on |(log f)'| of the standard density
// up to (reach + Λ)/s, the smaller of
//
//	2η/Λ·e^{L(Λ+2η)/s}                     (snap.go: density ratio over the cell)
//	2η·e^{Lη/s}·(L/s)/(1 − e^{−LΛ/(2s)})   (cells much wider than s/L)
//
// The second holds because, with |(log f)'| ≤ L/s, a cell's mass is at least
// f(y)·(s/L)·(1 − e^{−LΛ/(2s)}) for every y in it (integrate towards the
// farther end, at least Λ/2 away), while each η-strip at an end holds at
// most η·f(end)·e^{Lη/s}. +Inf for mechanisms without a slope bound.
func FloatKappa(n FloatNoise, reach float64) float64 {
	m, s, step := n.Mechanism, n.Scale, n.Step
	eta := snapSamplerError * (reach + step + s)
	l := logDensitySlope(m, (reach+step)/s)
	if math.IsInf(l, 1) || math.IsNaN(l) {
		return math.Inf(1)
	}
	fine := 2 * eta / step * math.Exp(l*(step+2*eta)/s)
	wide := 2 * eta * math.Exp(l*eta/s) * (l / s) / -math.Expm1(-l*step/(2*s))
	k := math.Min(fine, wide)
	if math.IsNaN(k) {
		return math.Inf(1)
	}
	return math.Nextafter(k*(1+1e-9), math.Inf(1)) // a few roundings of the formula
}

// FloatStep returns the grid step for real values whose noise of mechanism
// m has the given scale and whose sensitivity (per coordinate) is linf: the
// smallest power of two Λ ≥ SnapStep(linf) with Λ ≥ reach·2^−FloatGridBits,
// reach = the 1 − 2⁻⁵⁰ half-width + (⌊linf/Λ⌋ + 1)·Λ + Λ. For exact
// mechanisms it is SnapStep(linf). NaN for invalid arguments or a reach
// that does not settle.
func FloatStep(m Mechanism, scale, linf float64) float64 {
	step := SnapStep(linf)
	if math.IsNaN(step) || !scaleOK(scale) || FloatExact(m) {
		return step
	}
	h := m.HalfWidth(scale, floatTailBeta)
	if !(h > 0) || math.IsInf(h, 0) {
		return math.NaN()
	}
	for range 64 {
		reach := h + (math.Floor(linf/step)+2)*step
		need := pow2Ceil(math.Ldexp(reach, -FloatGridBits))
		if need <= step {
			return step
		}
		step = need
	}
	return math.NaN()
}

// FloatTerm is the residual of one part of a release over a horizon: N
// coordinates one unit can change (L0 per window, times the windows), each
// with the residual Residual.
type FloatTerm struct {
	Residual FloatResidual
	N        int64
}

// floatSums returns Σ N·ε_f, Σ N·log(1+κ) and Σ N·Tail, each rounded up.
func floatSums(terms []FloatTerm) (eps, logK, tail float64) {
	up := func(x float64) float64 { return math.Nextafter(x*(1+4*roundoff), math.Inf(1)) }
	for _, t := range terms {
		n := float64(t.N)
		eps = up(eps + up(n*t.Residual.Epsilon))
		logK = up(logK + up(n*math.Log1p(t.Residual.Kappa)))
		tail = up(tail + up(n*t.Residual.Tail))
	}
	return eps, logK, tail
}

// FloatGuarantee returns the guarantee of a release whose float parts have
// the given residual terms, when its ideal counterpart (the same
// calibration with continuous noise) meets ideal:
// ε = ε* + Σ N·ε_f and δ = e^{Σ N·log(1+κ)}·δ* + Σ N·Tail·(1 + e^ε), each
// rounded up. With no residual it returns ideal unchanged.
func FloatGuarantee(ideal Budget, terms []FloatTerm) Budget {
	eps, logK, tail := floatSums(terms)
	if eps == 0 && logK == 0 && tail == 0 {
		return ideal
	}
	up := func(x float64) float64 { return math.Nextafter(x*(1+8*roundoff), math.Inf(1)) }
	e := up(ideal.Epsilon + eps)
	d := up(up(math.Exp(logK)*ideal.Delta) + up(tail*up(1+math.Exp(e))))
	return Budget{Epsilon: e, Delta: d}
}

// FloatIdeal returns the budget the ideal counterpart of a release must meet
// so that the release with the given float residual terms meets total (the
// inverse of FloatGuarantee, rounded down, and checked with it). With no
// residual it returns total. It is an error wrapping ErrInfeasible when the
// residual takes the whole budget: ε ≤ Σ N·ε_f, or a tail term with
// δ ≤ Σ N·Tail·(1 + e^ε) (in particular δ = 0).
func FloatIdeal(total Budget, terms []FloatTerm) (Budget, error) {
	eps, logK, tail := floatSums(terms)
	if eps == 0 && logK == 0 && tail == 0 {
		return total, nil
	}
	reserveD := tail * (1 + math.Exp(total.Epsilon))
	ideal := Budget{
		Epsilon: (total.Epsilon - eps) * (1 - 1e-12),
		Delta:   (total.Delta - reserveD) * math.Exp(-logK) * (1 - 1e-12),
	}
	if !(ideal.Epsilon > 0) {
		return Budget{}, fmt.Errorf("%w: the floating-point residual needs ε > %.3g", ErrInfeasible, eps)
	}
	if tail > 0 && !(ideal.Delta > 0) {
		return Budget{}, fmt.Errorf("%w: the floating-point residual needs δ > %.3g (δ = 0 needs exact noise)", ErrInfeasible, reserveD)
	}
	ideal.Delta = math.Max(ideal.Delta, 0)
	for range 8 {
		g := FloatGuarantee(ideal, terms)
		if g.Epsilon <= total.Epsilon && g.Delta <= total.Delta {
			return ideal, nil
		}
		ideal.Epsilon *= 1 - 1e-9
		ideal.Delta *= 1 - 1e-9
	}
	return Budget{}, fmt.Errorf("%w: the floating-point residual does not fit the budget", ErrInfeasible)
}
