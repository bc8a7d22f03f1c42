package privacy

import (
	"fmt"
	"math"
)

// The L2 accountant of discrete Gaussian parts under a total bound.
//
// A part with an L2 bound (a per-unit total bound, Part.L2) whose shift
// patterns cannot be enumerated (compose_total.go: the lattice of real
// values, where one unit moves a coordinate by about 2²⁰ grid steps) would
// otherwise be composed as L0 coordinates at L∞: √L0 times the noise the L2
// bound needs. Continuous Gaussian noise reaches the L2 optimum by rotation
// invariance; the discrete Gaussian on Z^d has no rotations, and its δ(ε)
// is NOT bounded by the continuous one at Δ = ‖c‖₂/σ plus a term that
// vanishes exponentially in σ²: testdata/gen_dg_l2.py sums the exact δ(ε)
// of 2- and 3-dimensional pairs and finds it above the continuous δ(ε) by
// up to 0.0115 at σ = 1, 1.5e-3 at σ = 2, 4.3e-4 at σ = 3 — about
// 0.01/σ³, a discretization error, not an exponentially small one (the
// same holds in one dimension). So the calibration uses the following
// comparison, proved here, with explicit terms.
//
// Lemma. Let Y ~ N_Z(0, σ²)^d (independent coordinates), X ~ N(0, σ²I_d),
// R the coordinate-wise rounding to Z, P_d the law of Y and P_r that of
// R(X). Then, with θ = Σ_{n∈Z} e^{−2π²σ²n²} (≥ 1),
//
//	(i)   P_d(y) ≤ e^a·P_r(y) for every y ∈ Z^d, a = d/(8σ²);
//	(ii)  P_r(y) ≤ e^b·P_d(y) for every ‖y‖₂ ≤ r, b = d·log θ + r²/(24σ⁴);
//	(iii) P_r(‖y‖₂ > r) ≤ d·e^{−m²/2} for r = √d·(mσ + ½), m ≥ 0.
//
// Proof. P_d(y) = e^{−‖y‖²/2σ²}/Z^d with Z = Σ_k e^{−k²/2σ²} = √(2π)σ·θ
// (Poisson summation), and P_r(y) = (2πσ²)^{−d/2}·∫_{[−½,½]^d}
// e^{−‖y+u‖²/2σ²} du = (2πσ²)^{−d/2}·e^{−‖y‖²/2σ²}·Π_j I(y_j) with
// I(t) = ∫_{−½}^{½} e^{−(2tu+u²)/2σ²} du. As e^{−1/(8σ²)} ≤ e^{−u²/2σ²} ≤ 1
// and ∫_{−½}^{½} e^{−tu/σ²} du = sinh(x)/x for x = t/(2σ²), with
// 1 ≤ sinh(x)/x ≤ e^{x²/6} (compare the series term by term:
// (2k+1)! ≥ 6^k·k!): e^{−1/(8σ²)} ≤ I(t) ≤ e^{t²/(24σ⁴)}. So
// P_d/P_r = θ^{−d}/Π_j I(y_j) ≤ e^{d/(8σ²)} (i), and P_r/P_d =
// θ^d·Π_j I(y_j) ≤ θ^d·e^{‖y‖²/(24σ⁴)} (ii). For (iii), ‖R(X)‖₂ > r
// needs some |R(X_j)| > r/√d, so |X_j| > r/√d − ½ = mσ, and
// P(|X_j| > mσ) ≤ e^{−m²/2}; a union bound over the d coordinates. ∎
//
// Composition. Let the release be this part (P_d against Q_d = P_d(· − c),
// c ∈ Z^d the change of one unit, ‖c‖₂ ≤ L2) and independent other parts
// (P_o against Q_o), and P_r, Q_r the rounded continuous Gaussians. (P_r,
// Q_r) is a post-processing (rounding) of (N(0, σ²I), N(c, σ²I)), which is
// dominated by the one-dimensional Gaussian pair at shift L2 (rotation
// invariance; a larger shift dominates). Dominance survives products, so
// for every event E, with δ_G(ε₀) the PLD accountant's δ of the Gaussian
// pair at shift L2 composed with the other parts' PLDs:
//
//	(P_d×P_o)(E) ≤ e^a·(P_r×P_o)(E)                                by (i)
//	             ≤ e^a·(e^{ε₀}·(Q_r×Q_o)(E) + δ_G(ε₀))
//	(Q_r×Q_o)(E) ≤ e^b·(Q_d×Q_o)(E) + Q_r(‖y − c‖₂ > r)            by (ii)
//
// (Q_r(y) = P_r(y − c), Q_d(y) = P_d(y − c)), and with (iii):
//
//	(P_d×P_o)(E) ≤ e^{ε₀+a+b}·(Q_d×Q_o)(E) + e^a·(δ_G(ε₀) + e^{ε₀}·T),  T = d·e^{−m²/2}.
//
// The reverse direction is the same argument with P and Q exchanged (every
// part's noise is symmetric, so δ_G is the same). Several such parts
// multiply their factors and add their tails: the release is (ε, δ)-DP when
// ε₀ = ε − Σ(aᵢ + bᵢ) > 0 and e^{Σaᵢ}·(δ_G(ε₀) + e^{ε₀}·ΣTᵢ) ≤ δ. This is
// a statement about the densities of the whole release, so it needs no
// dominating pair for the lattice part alone (a hockey-stick bound
// "δ_G(ε) + τ" would not compose as a PLD).
//
// Windows. Over a horizon of W windows a unit may move a different c_w in
// every window (‖c_w‖₂ ≤ L2 each; a unit absent from a window moves 0),
// and the noise of every window is independent. The lemma is a statement
// about independent coordinates, so it holds on Z^{dW} for the whole
// release of the part, and there it is the lemma window by window: the
// density bounds (i) and (ii) multiply over the independent windows, a =
// W·d/(8σ²) and b = W·(d·log θ + r²/(24σ⁴)) with r the per-window radius
// (r_W² = dW·(mσ + ½)² = W·r²), and the tail (iii) union-bounds over the
// windows, T = W·d·e^{−m²/2}. The rounded continuous pair at the
// concatenated shift c = (c_1, …, c_W) is dominated by the one-dimensional
// Gaussian pair at ‖c‖₂ ≤ √W·L2, whose PLD is that of W Gaussians at
// shift L2 (μ = √W·L2/σ either way). So the part is accounted as W
// Gaussian coordinates at shift L2, composed with the other parts over
// the horizon, with the terms of d·W coordinates; m is chosen for all d·W
// of them, so the tails of all lattice parts still take at most
// latticeL2TailShare of δ. Nothing here needs the lattice: the argument
// holds for integer discrete Gaussian parts with an L2 bound over several
// windows as well (their exact shift patterns exist in one window only,
// compose_total.go; their σ is small, so a and b cost a few percent), and
// they take it there: in one window a part whose shift patterns one window
// enumerates keeps the exact patterns, over several windows it gets this
// accountant as a candidate beside the PLD of L0 coordinates at L∞
// (calTightest keeps the smaller noise).
//
// At the operator's noise (σ ≥ 2¹⁷ grid steps or so) a, b ≈ d·W·m²/(24σ²)
// are below 1e-9·d·W and log θ ≤ 2.5·e^{−2π²σ²} underflows: it is rounded
// up to the smallest positive float64, never down to 0. m is chosen so
// that the tails take at most latticeL2TailShare of δ.
//
// Where it applies (calPart.latticeL2): discrete Gaussian noise in any
// number of windows, an L2 bound below √L0·L∞ (binding), and in one
// window no shift patterns that the window enumerates (integer parts with
// few patterns keep the exact enumeration there). Elsewhere nothing
// changes.

// latticeL2TailShare is the share of δ the tails (iii) of all lattice L2
// parts together may take: 2⁻²⁰, so the noise changes by about a part in
// 10⁷ for it.
const latticeL2TailShare = 0x1p-20

// latticeL2MinSigma is the smallest σ (grid units) the comparison is
// evaluated at: log θ ≤ 2.5·e^{−2π²σ²} needs σ ≥ ½ (then 2/(1 −
// e^{−2π²σ²}) ≤ 2.015); below it the noise level is treated as infeasible.
const latticeL2MinSigma = 0.5

// latticeL2 reports whether the L2 accountant applies to p (see above).
func (p calPart) latticeL2() bool {
	_, dg := p.Mechanism.(DiscreteGaussian)
	one := p
	one.n, one.win = p.L0, 1 // the patterns of one window (see above)
	return dg && p.L2 > 0 && p.L2 < math.Sqrt(float64(p.L0))*p.Linf && (p.win > 1 || one.totalPatterns() == nil)
}

// latticeTerms are the comparison's terms of one part: the factors a and b
// (as exponents) and the tail T.
type latticeTerms struct {
	a, b, tail float64
}

// latticeL2Terms returns the terms (i)–(iii) of the lemma for d coordinates
// of discrete Gaussian noise σ, with m chosen so that T ≤ tail, each
// rounded up; ok is false when σ < latticeL2MinSigma or tail is not in
// (0, 1).
func latticeL2Terms(d int, sigma, tail float64) (t latticeTerms, ok bool) {
	if !(sigma >= latticeL2MinSigma) || math.IsInf(sigma, 0) || !(tail > 0 && tail < 1) || d < 1 {
		return latticeTerms{}, false
	}
	fd := float64(d)
	// m² = 2·log(d/tail), so T = d·e^{−m²/2} = tail.
	m := math.Sqrt(2 * (math.Log(fd) - math.Log(tail)))
	return latticeL2TermsM(d, sigma, m), true
}

// latticeL2TermsM is latticeL2Terms at a given m ≥ 0.
func latticeL2TermsM(d int, sigma, m float64) latticeTerms {
	up := func(x float64) float64 { return math.Nextafter(x*(1+8*roundoff), math.Inf(1)) }
	fd := float64(d)
	s2 := sigma * sigma
	// log θ ≤ θ − 1 ≤ 2.5·e^{−2π²σ²} for σ ≥ ½; never rounded to 0.
	logTheta := math.Max(up(2.5*math.Exp(-2*math.Pi*math.Pi*s2)), math.SmallestNonzeroFloat64)
	r := math.Sqrt(fd) * (m*sigma + 0.5)
	return latticeTerms{
		a:    up(fd / (8 * s2)),
		b:    up(fd*logTheta + up(r*r)/(24*s2*s2)),
		tail: up(fd * math.Exp(-m*m/2)),
	}
}

// latticeL2Sums returns Σa, Σ(a+b) and ΣT of lattice parts of ds
// coordinates (d·W) at scales sigmas, each part's tail at most tail; ok is
// false where the lemma is not evaluated (latticeL2Terms).
func latticeL2Sums(ds []int, sigmas []float64, tail float64) (a, shift, tails float64, ok bool) {
	for i, d := range ds {
		t, ok := latticeL2Terms(d, sigmas[i], tail)
		if !ok {
			return 0, 0, 0, false
		}
		a, shift, tails = a+t.a, shift+t.a+t.b, tails+t.tail
	}
	return a, shift, tails, true
}

// latticeL2Bound is the comparison's δ at eps (see Composition above):
// e^{Σa}·(δ_G(ε₀) + e^{ε₀}·ΣT), ε₀ = ε − Σ(a+b), rounded up, with deltaG
// the δ of the Gaussians at shift L2 composed with the other parts; 1
// where the lemma is not evaluated or ε₀ is not positive.
func latticeL2Bound(ds []int, sigmas []float64, eps, tail float64, deltaG func(eps0 float64) (float64, error)) (float64, error) {
	a, shift, tails, ok := latticeL2Sums(ds, sigmas, tail)
	eps0 := math.Nextafter(eps-shift*(1+4*roundoff), math.Inf(-1))
	if !ok || !(eps0 > 0) {
		return 1, nil
	}
	d, err := deltaG(eps0)
	if err != nil {
		return 0, err
	}
	c := math.Exp(a) * (d + math.Exp(eps0)*tails) * (1 + 16*roundoff)
	return math.Min(1, math.Nextafter(c, math.Inf(1))), nil
}

// latticeL2Parts returns ps with every part the L2 accountant applies to
// replaced by one continuous Gaussian coordinate per window at shift L2
// (same scale), and the indices of those parts (nil: none).
func latticeL2Parts(ps []calPart) ([]calPart, []int) {
	var idx []int
	qs := make([]calPart, len(ps))
	for i, p := range ps {
		qs[i] = p
		if p.latticeL2() {
			qs[i] = calPart{Part: Part{Mechanism: Gaussian{}, L0: 1, Linf: p.L2}, w: p.w, n: p.win, win: p.win}
			idx = append(idx, i)
		}
	}
	if idx == nil {
		return nil, nil
	}
	return qs, idx
}

// calibrateLatticeL2 is the PLD calibration with the lattice parts
// accounted by their L2 bound (see above): the smallest κ at which the
// composed PLD of the other parts and the Gaussians at shift L2 meets
// (ε − Σ(aᵢ+bᵢ), e^{−Σaᵢ}·δ − e^{ε₀}·ΣTᵢ).
func calibrateLatticeL2(total Budget, ps []calPart) (calCandidate, error) {
	qs, idx := latticeL2Parts(ps)
	if idx == nil {
		return calCandidate{}, fmt.Errorf("%w: no discrete Gaussian part with a binding L2 bound", ErrUnsupported)
	}
	if !(total.Delta > 0) {
		return calCandidate{}, fmt.Errorf("%w: the L2 accountant needs δ > 0", ErrUnsupported)
	}
	var o PLDOptions
	pats := patternCombos(qs)
	tail := total.Delta * latticeL2TailShare / float64(len(idx))
	ds := make([]int, len(idx))
	for j, i := range idx {
		ds[j] = ps[i].L0 * ps[i].win // d·W coordinates
	}
	sigmas := make([]float64, len(idx))
	eval := func(kappa float64) (float64, []float64, error) {
		pldEvaluations.Add(1)
		scales := calScales(kappa, ps)
		for j, i := range idx {
			sigmas[j] = scales[i]
		}
		cert, err := latticeL2Bound(ds, sigmas, total.Epsilon, tail, func(eps0 float64) (float64, error) {
			if pats != nil {
				return patternDelta(qs, pats, scales, eps0, o)
			}
			p, err := calComposedPLD(qs, scales, o)
			if err != nil {
				return 0, err
			}
			return p.Delta(eps0), nil
		})
		if err != nil {
			return 0, nil, err
		}
		return cert, scales, nil
	}
	mu, err := gdpMu(total.Epsilon, total.Delta)
	if err != nil || !(mu > 0) {
		mu = 1
	}
	s := 0.0
	for i, q := range qs {
		s += float64(q.n) * pldFisher(q.Mechanism) * (q.Linf / ps[i].Linf) * (q.Linf / ps[i].Linf) / (q.w * q.w)
	}
	_, cert, scales, err := solveNoiseLevel(eval, math.Sqrt(s)/mu, total.Delta)
	if err != nil {
		return calCandidate{}, err
	}
	return calCandidate{acct: AccountPLD, method: Solver, scales: scales, cert: cert}, nil
}

// anyLatticeL2 reports whether the L2 accountant applies to a part of ps.
func anyLatticeL2(ps []calPart) bool {
	for _, p := range ps {
		if p.latticeL2() {
			return true
		}
	}
	return false
}
