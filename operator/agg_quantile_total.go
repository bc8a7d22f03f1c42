package operator

// agg_quantile_total.go: the quantiles' exponential mechanism under the
// per-unit total bound (bounds.max_contributions), and the joint
// exponential mechanism's (jointTotal, below).
//
// A unit keeps m_g ≤ Vm = min(V, T) values in group g (V =
// bounds.max_values, T = bounds.max_contributions), Σ_g m_g ≤ T, in at
// most G groups (windows: the values follow the count's total-bound
// selection). Every selection's score sensitivity Δ is taken at Vm
// (quantile.SelectOptions.Values), so a selection at scale s is (1/s)-DP.
// Permute-and-flip depends on ε and Δ only through ε/(2Δ): run at (ε, Δ)
// it is the mechanism run at (c·ε, c·Δ), which McKenna & Sheldon's
// Theorem 1 makes (c·ε)-DP for a neighbour moving every score by at most
// c·Δ (c ≤ 1). Adding or removing the unit moves group g's scores by at
// most max(q, 1−q)·m_g, c_g = m_g/Vm; replacing unit u by w by at most
// max(m_g, m′_g), c_g = max(m_g, m′_g)/Vm. The k ranks' draws are
// independent, so pure ε adds up: a unit spends at most
// k·Σ_g c_g/s ≤ k·min(G, T/Vm)/s (2k·min(G, T/Vm)/s replacing units:
// Σ_g max(m_g, m′_g) ≤ 2T over at most 2G groups). That is an L1 bound
// of k·T/Vm (2k·T/Vm) selections at L∞ = 1, below L0 = k·G (2k·G) when
// T < G·Vm. privacy/quantile's TestExponentialPrivacyExactTotal checks
// it over every neighbour of small multi-group windows.
//
// The pure-ε composition uses it as it is (partSpec.pureL0). With δ > 0
// the PLD accountant composes randomized response at one selection's ε
// per coordinate; there the selections are packed (selectPacked,
// partSpec.deltaL0): a unit's selections cost c_i·ε each, c_i ≤ 1, Σ c_i
// ≤ C = the L1 bound. Packed in any order into groups whose c_i add up to
// at most 1 (next fit: open a new group when the next selection does not
// fit), two consecutive groups hold more than 1 together, so b groups
// hold more than ⌊b/2⌋ and b ≤ 2⌈C⌉ − 1. The selections of one group are
// independent draws whose pure ε adds up to at most one selection's ε, so
// the group is ε-DP and dominated by randomized response at ε (Kairouz,
// Oh & Viswanath 2017, as privacy.Selection); groups are independent, so
// the unit's selections are dominated by 2⌈C⌉ − 1 randomized responses,
// whatever its pattern (and in every window, so the horizon composes them
// too). Where that is not fewer than L0, L0 stays.

// selectValues returns Vm, the most values one unit keeps in a group
// under bounds.max_values v and bounds.max_contributions t (0: unset).
func selectValues(v, t int) int {
	if t > 0 {
		return min(v, t)
	}
	return v
}

// selectTotal returns the L1 bound of the selections a unit can move, in
// selections' worth of ε rounded up to a whole number (integer
// arithmetic): ⌈k·T/Vm⌉ (⌈2k·T/Vm⌉ replacing units), and whether it binds
// (T < G·Vm; false without a total bound and at event level). Binding, it
// is below k·G (2k·G).
func (a quantileSelectAgg) selectTotal(replace bool) (float64, bool) {
	vm := selectValues(a.values, a.total)
	if a.total <= 0 || vm <= 0 || a.total >= a.groups*vm {
		return 0, false
	}
	n := a.ranks * a.total
	if replace {
		n *= 2
	}
	return float64((n + vm - 1) / vm), true
}

// jointTotal returns the L1 bound of the joint selections (one per group,
// quantileJointAgg) a unit can move, in selections' worth of ε rounded up
// to a whole number (integer arithmetic): ⌈T/Vm⌉, the same for replacing
// units, and whether it binds (T < G·Vm; false without a total bound and
// at event level). Binding, it is at most G, the part's L0 (2G replacing
// units).
//
// The derivation. Group g's joint selection (quantile.Joint) draws tuple
// t with probability ∝ exp(−γ·c(t)), γ = ε'/(2Δ), ε' = 1/scale and Δ the
// loss's sensitivity at Vm: 2Vm, 4Vm replacing units. It depends on ε'
// and Δ only through their ratio, so run at (ε', Δ) it is the mechanism
// run at (c·ε', c·Δ) for every c > 0, which is (c·ε')-DP for a neighbour
// that moves every tuple's loss by at most c·Δ (McSherry & Talwar 2007:
// the loss moves in either direction, so the ratio of the weights and of
// the normalisers each contribute c·ε'/2). A unit with m_g ≤ Vm values in
// g moves g's loss by at most 2·m_g (quantile.Joint's doc): c_g =
// 2m_g/(2Vm) = m_g/Vm. Replacing unit u (m_g values in g) by w (m′_g)
// moves it by at most 2(m_g + m′_g) (removing u, then adding w): c_g =
// 2(m_g + m′_g)/(4Vm) = (m_g + m′_g)/(2Vm). The groups' draws are
// independent, so pure ε adds up over the groups: with Σ_g m_g ≤ min(T,
// G·Vm) (and the same for w) a unit spends at most
//
//	Σ_g m_g/Vm/scale ≤ min(T/Vm, G)/scale                 (add or remove)
//	Σ_g (m_g + m′_g)/(2Vm)/scale ≤ min(T/Vm, G)/scale     (replace)
//
// an L1 bound of T/Vm selections at L∞ = 1, below L0 = G when T < G·Vm.
// (Replacing units the same sum shows G selections suffice where the part
// states L0 = 2G; the plan keeps the 2G of windows' Units.L0 there, which
// is valid and conservative.) The pure-ε composition uses the bound
// (partSpec.pureL0, and the pure accountant under every budget); with δ >
// 0 the PLD accountant composes the selections packed as the exponential
// mechanism's (selectPacked, selectionParts): the argument above needs
// only independent draws of costs c_g ≤ 1 adding up to at most the L1
// bound, which the joint selections are. privacy/quantile's
// TestJointPrivacyExactTotal checks the bound over every neighbour of
// small multi-group windows.
func (a quantileJointAgg) jointTotal() (float64, bool) {
	vm := selectValues(a.values, a.total)
	if a.total <= 0 || vm <= 0 || a.total >= a.groups*vm {
		return 0, false
	}
	return float64((a.total + vm - 1) / vm), true
}

// selectPacked returns the selections' count the PLD accountant composes
// with δ > 0 under a binding total bound whose pure-ε L1 is l1 (a whole
// number, selectTotal): 2·l1 − 1 packed groups of at most one selection's
// ε each (see above), or l0, the selections a unit can move, when smaller.
func selectPacked(l1, l0 float64) float64 {
	return min(2*l1-1, l0)
}
