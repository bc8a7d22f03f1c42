package privacy

// Vectors.
//
// A window's release is a vector: every bucket of every histogram, every
// count and sum, in every group. One privacy unit can change at most L0 of
// its coordinates, each by at most L∞ (both derived from the contribution
// bounds). With independent noise per coordinate the release is the
// composition of one-dimensional mechanisms, and for symmetric log-concave
// noise the worst case is exactly L0 coordinates shifted by L∞ each:
//
//  1. One coordinate, shift c ≤ L∞. Log-concave noise has a monotone
//     likelihood ratio, so the optimal distinguishing sets are half-lines
//     and δ_c(ε) = sup_x [F(x) − e^ε·F(x − c)] (Lemma 1 of Vinterbo 2022).
//     F(x − c) is non-increasing in c for every x, so δ_c(ε) ≤ δ_{L∞}(ε) for
//     every ε: the pair at shift L∞ dominates (and by symmetry so does −L∞).
//     For discrete log-concave noise the same holds with integer c.
//  2. Dominance survives composition: if pair A dominates pair A' for every
//     ε, A' is a post-processing of A (Blackwell; Dong, Roth & Su 2022,
//     Prop. 2.10 for trade-off functions), and a product of
//     post-processings is a post-processing of the product. Coordinates the
//     unit does not move contribute nothing (identical distributions).
//  3. Hence the release is dominated by the L0-fold composition of the
//     one-dimensional pair at shift L∞, which is attained by an actual
//     neighbour (L0 coordinates each moved by L∞), so nothing smaller is
//     valid either.
//
// No single p-norm sensitivity describes a Subbotin vector. Lemma 8 and
// Theorem 9 of the log-concave paper claimed that i.i.d. Subbotin_p noise
// calibrated to the ℓp sensitivity is (ε, δ)-DP exactly when a
// one-dimensional condition holds; the author withdrew them (SEEDS.md,
// errata 1). Two shifts of equal ℓ4 norm give different δ for Subbotin_4
// noise (diagonal 0.345, axis 0.246 at s = 1, ε = 1), which
// TestSubbotinCounterexample reproduces. The two norms that do work are
// special: ℓ1 for pure-ε Laplace (the loss is bounded by Σ|shiftᵢ|/b) and ℓ2
// for Gaussian noise (rotation invariance: L0 coordinates moved by L∞ are one
// Gaussian with shift L∞·√L0); CalibrateVector agrees with both.

// CalibrateVector returns the per-coordinate scale of mechanism m for a
// release in which one unit changes at most l0 coordinates by at most linf
// each, meeting budget b: the tightest valid accountant for the l0-fold
// composition at shift linf. It is CalibrateHorizon with one window.
func CalibrateVector(m Mechanism, b Budget, l0 int, linf float64) (Plan, error) {
	return CalibrateHorizon(m, Horizon{Total: b, Windows: 1, L0: l0, Linf: linf})
}
