package privacy

import (
	"math"
)

// lossAt is the loss of grid index i, rounded up by a few roundoffs of its
// terms, so that it is never below the exact grid loss off + i·h even after
// offsets were added in composition.
func (p *PLD) lossAt(i int64) float64 {
	ih := float64(i) * p.h
	v := p.off + ih
	return v + 4*roundoff*(math.Abs(p.off)+math.Abs(ih))
}

// pldSumFactor inflates a sum of n non-negative terms to cover its rounding.
func pldSumFactor(n int) float64 { return 1 + float64(n+4)*roundoff }

// Delta returns δ(ε), an upper bound on the hockey-stick divergence of the
// exact PLD at ε: the smallest δ for which the mechanism is (ε, δ)-DP is at
// most this value. It is non-increasing in ε. NaN gives the trivial bound 1.
func (p *PLD) Delta(eps float64) float64 {
	if math.IsNaN(eps) {
		return 1
	}
	s := 0.0
	for i := len(p.mass) - 1; i >= 0; i-- {
		l := p.lossAt(p.lo + int64(i))
		if l <= eps {
			break
		}
		s += p.mass[i] * -math.Expm1(eps-l)
	}
	d := s*pldSumFactor(len(p.mass)) + p.inf + p.slack
	return math.Min(1, d)
}

// Floor is the part of δ(ε) that no ε removes: the probability of infinite
// (or truncated) loss plus the numerical slack.
func (p *PLD) Floor() float64 { return p.inf + p.slack }

// Epsilon returns the smallest ε ≥ 0 with Delta(ε) ≤ delta, rounded up; +Inf
// if even ε → ∞ leaves more than delta (delta below Floor) or delta is NaN.
func (p *PLD) Epsilon(delta float64) float64 {
	if math.IsNaN(delta) {
		return math.Inf(1)
	}
	if p.Delta(0) <= delta {
		return 0
	}
	c := pldSumFactor(len(p.mass))
	rest := (delta - p.inf - p.slack) / c // budget for Σ m(1 − e^{ε−ℓ})
	if !(rest >= 0) {
		return math.Inf(1)
	}
	// Scan downwards. With the points i..top above ε,
	// Σ m(1 − e^{ε−ℓ}) = A − e^{ε−ℓ_i}·B with A = Σm, B = Σ m·e^{ℓ_i−ℓ}.
	A, B := 0.0, 0.0
	eh := math.Exp(-p.h)
	for i := len(p.mass) - 1; i >= 0; i-- {
		li := p.lossAt(p.lo + int64(i))
		B = B*eh + p.mass[i]
		A += p.mass[i]
		if li <= 0 {
			break // ε = 0 was checked above
		}
		// For ε in [ℓ_{i−1}, ℓ_i) the points above ε are exactly i..top.
		lower := li - p.h
		if i > 0 && A-eh*B <= rest {
			continue // still within budget at ℓ_{i−1}: look lower
		}
		if i == 0 {
			lower = math.Inf(-1)
		}
		eps := lower
		if A > rest {
			eps = math.Max(lower, li+math.Log((A-rest)/B))
		}
		eps = math.Min(math.Max(eps, 0), li)
		eps = math.Nextafter(eps, math.Inf(1)) * (1 + 4*roundoff)
		for k := 0; k < 64 && p.Delta(eps) > delta; k++ {
			eps += math.Max(eps*1e-12, 1e-15) * float64(int64(1)<<k)
		}
		return eps
	}
	return 0
}

// PureEpsilon returns the largest loss the PLD can take and true when it is
// finite — then the mechanism is ε-DP (δ = 0) for that ε, up to the
// grid rounding (at most one spacing per composed distribution). It returns
// (+Inf, false) when any mass is at +∞ (unbounded loss or truncation).
func (p *PLD) PureEpsilon() (float64, bool) {
	if !p.pure || p.inf > 0 {
		return math.Inf(1), false
	}
	return p.lossAt(p.lo + int64(len(p.mass)-1)), true
}

// Spacing is the current grid spacing h of the losses.
func (p *PLD) Spacing() float64 { return p.h }

// Len is the number of grid points.
func (p *PLD) Len() int { return len(p.mass) }

// Compositions is the number of base distributions composed into p.
func (p *PLD) Compositions() int { return p.count }
