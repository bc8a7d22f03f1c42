package quantile

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/dpstream/dpstream/privacy/rng"
)

// Joint selects all ranks of a group in one draw by the joint exponential
// mechanism (Gillenwater, Joseph & Kulesza, "Differentially Private
// Quantiles", ICML 2021) over the leaf edges of the group's exact leaf
// histogram, sampled exactly.
//
// Candidates: the non-decreasing tuples t = (j_1 ≤ … ≤ j_k) of the L+1
// leaf edges e_j (as Exponential), C(L+k, k) of them, independent of the
// data. With the prefix counts C(j) (values in leaves < j), j_0 = 0 and
// j_{k+1} = L (C(0) = 0, C(L) = N), q_0 = 0 and q_{k+1} = 1, the loss of t
// is
//
//	c(t) = Σ_{i=1}^{k+1} |C(j_i) − C(j_{i−1}) − (q_i − q_{i−1})·N|,
//
// how far the counts between consecutive released edges are from the
// ranks' shares. The mechanism outputs t with probability ∝ exp(−γ·c(t)),
// γ = ε'/(2Δ).
//
// Sensitivity (derive it: a unit with m ≤ V values in the group). Adding
// or removing it moves C(j) by a_j, non-decreasing from a_0 = 0 to a_L = m,
// so the count between j_{i−1} and j_i moves by b_i ≥ 0 with Σ b_i = m and
// term i by at most b_i + (q_i − q_{i−1})·m: c moves by at most 2m ≤ 2V =
// Δ. Replacing one unit by another (a MaxUnits cap) moves it by at most
// the sum of two such moves: Δ = 4V. The loss of different tuples moves in
// either direction, so the mechanism runs at ε'/(2Δ) (the exponential
// mechanism, McSherry & Talwar 2007): ε'-DP for each group.
//
// ε' is the calibrated scale's reciprocal rounded down to a dyadic
// rational, as Exponential.
type Joint struct {
	Leaves       int     // L ≥ 1: the histogram's leaves (candidates: non-decreasing tuples of the L+1 edges)
	Lower, Upper float64 // the clamping range the leaves cover
}

// JointOptions is one joint selection of a group's ranks.
type JointOptions struct {
	Ranks   []float64 // q_1 ≤ … ≤ q_k in [0, 1], 1 ≤ k ≤ MaxJointRanks
	Scale   float64   // the selection's scale: it is (1/Scale)-DP
	Values  int64     // V ≥ 1: the most values one unit keeps in the group
	Replace bool      // neighbours replace one unit (MaxUnits) rather than add or remove one
}

// MaxJointRanks is the most ranks one joint selection takes (the sampler's
// work grows as k²).
const MaxJointRanks = 32

// ErrNotImplemented is returned by Joint.Select until its exact sampler
// lands.
var ErrNotImplemented = errors.New("quantile: joint selection not implemented")

// Sensitivity returns the loss's sensitivity Δ for o, exactly: 2V, or 4V
// when units are replaced.
func (o JointOptions) Sensitivity() *big.Rat {
	d := int64(2)
	if o.Replace {
		d = 4
	}
	return new(big.Rat).SetInt64(d * o.Values)
}

// Edge returns e_j (as Exponential.Edge).
func (e Joint) Edge(j int) float64 { return Exponential(e).Edge(j) }

// Select returns the edge indices j_1 ≤ … ≤ j_k ∈ [0, Leaves] the joint
// exponential mechanism selects for o's ranks (in their order) from the
// group's histogram, drawing from s. leaves must be sorted by leaf,
// distinct, with positive counts.
func (e Joint) Select(s *rng.Stream, leaves []LeafCount, o JointOptions) ([]int, error) {
	_, _ = s, leaves
	return nil, fmt.Errorf("%w (%d ranks)", ErrNotImplemented, len(o.Ranks))
}

// RankError returns x such that, with probability at least 1 − β, every
// released edge's rank is within c* + x of its rank·N, c* the smallest
// loss over the candidates (at most twice the sum of the ranks' distances
// to their nearest edges: the leaf resolution).
func (e Joint) RankError(o JointOptions, beta float64) (float64, error) {
	return 0, fmt.Errorf("%w (%d ranks, β %g)", ErrNotImplemented, len(o.Ranks), beta)
}
