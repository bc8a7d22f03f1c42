package privacy

import "math"

// account_lattice_l2.go: the accountant of releases with discrete Gaussian
// parts accounted by their L2 bound (compose_lattice_l2.go) at given
// scales, for AccountantFor (the ledger's budget spent after k windows).

// latticeL2Accountant certifies a release whose lattice L2 parts are
// compared with the continuous Gaussian (compose_lattice_l2.go): pld is
// the composed PLD of the other parts and of the Gaussians at shift L2,
// ds the coordinates d·W and sigmas the scales of the lattice parts. The
// lemma holds for every m ≥ 0, so each query chooses the tails (and with
// them m) for itself; every choice is a valid bound.
type latticeL2Accountant struct {
	pld    *PLD
	ds     []int
	sigmas []float64
}

// latticeL2TailsShare is the share of the bound the tails may take in
// Epsilon: 2⁻²¹, half of what the main term leaves (1 − 2⁻²⁰), so that
// the rounding of the terms stays inside the slack.
const latticeL2TailsShare = 0x1p-21

// newLatticeL2Accountant returns the accountant of ps at scales, or false
// when no part is a lattice L2 part or the PLD cannot be built.
func newLatticeL2Accountant(ps []calPart, scales []float64) (latticeL2Accountant, bool) {
	qs, idx := latticeL2Parts(ps)
	if idx == nil {
		return latticeL2Accountant{}, false
	}
	pl, err := calComposedPLD(qs, scales, PLDOptions{})
	if err != nil {
		return latticeL2Accountant{}, false
	}
	l := latticeL2Accountant{pld: pl}
	for _, i := range idx {
		l.ds = append(l.ds, ps[i].L0*ps[i].win)
		l.sigmas = append(l.sigmas, scales[i])
	}
	return l, true
}

// cert is the comparison's δ at ε with each part's tail at most tail
// (latticeL2Bound); 1 where it does not apply.
func (l latticeL2Accountant) cert(eps, tail float64) float64 {
	c, _ := latticeL2Bound(l.ds, l.sigmas, eps, tail, func(e float64) (float64, error) { return l.pld.Delta(e), nil })
	return c
}

// Delta returns the comparison's δ at eps, each part's tail at most
// latticeL2TailShare of the Gaussian δ at eps (or the smallest normal
// float64 where that is 0).
func (l latticeL2Accountant) Delta(eps float64) float64 {
	if math.IsNaN(eps) || len(l.ds) == 0 {
		return 1
	}
	tail := latticeL2TailShare * l.pld.Delta(eps) / float64(len(l.ds))
	return l.cert(eps, math.Max(tail, 0x1p-1022))
}

// Epsilon returns ε₁ + Σ(a+b) with ε₁ the PLD's ε at e^{−Σa}·δ·(1 − 2⁻²⁰)
// and the tails sized so that e^{ε₁}·ΣT ≤ e^{−Σa}·δ·2⁻²¹, checked by cert;
// +Inf where the check fails.
func (l latticeL2Accountant) Epsilon(delta float64) float64 {
	if !(delta > 0) || len(l.ds) == 0 {
		return math.Inf(1)
	}
	a, _, _, ok := latticeL2Sums(l.ds, l.sigmas, 0.5) // a does not depend on the tail
	if !ok {
		return math.Inf(1)
	}
	e1 := l.pld.Epsilon(delta * math.Exp(-a) * (1 - latticeL2TailShare))
	if math.IsInf(e1, 0) || math.IsNaN(e1) {
		return math.Inf(1)
	}
	tail := delta * latticeL2TailsShare * math.Exp(-a-e1) / float64(len(l.ds))
	if !(tail > 0) {
		return math.Inf(1)
	}
	_, shift, _, ok := latticeL2Sums(l.ds, l.sigmas, tail)
	if !ok {
		return math.Inf(1)
	}
	eps := math.Nextafter((e1+shift)*(1+4*roundoff), math.Inf(1))
	if l.cert(eps, tail) > delta {
		return math.Inf(1)
	}
	return eps
}

// minAccountant is the smaller of two valid accountants' answers (each
// bound holds, so the smaller does).
type minAccountant struct {
	x, y Accountant
}

// Delta returns the smaller δ at eps.
func (m minAccountant) Delta(eps float64) float64 {
	return math.Min(m.x.Delta(eps), m.y.Delta(eps))
}

// Epsilon returns the smaller ε at delta.
func (m minAccountant) Epsilon(delta float64) float64 {
	return math.Min(m.x.Epsilon(delta), m.y.Epsilon(delta))
}
