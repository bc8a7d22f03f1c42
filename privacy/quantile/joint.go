package quantile

import (
	"fmt"
	"math"
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
//
// Exact sampling (π(t) ∝ exp(−γ·c(t)) over every tuple once): a float
// proposal corrected by an exact rejection.
//
//  1. Groups and blocks (jointDP): the edges fall into runs of equal C
//     (at most 2·len(leaves)+1 groups), a tuple is a chain of blocks of r
//     ranks in one group (C(s+r−1, r) edge tuples each), and backward
//     messages over (rank, group) give every block's total weight in
//     O(k²·G) work; the sum over the next group is O(G) per rank by a
//     suffix recursion and a sliding window of positive terms
//     (transition), never a difference.
//  2. Every weight is an xfloat (float64 mantissa, wide exponent) with a
//     rounding depth d: its value is within (1±u)^d of the same
//     expression's exact value, u = 2⁻⁵³, because all terms are positive
//     (xfloat). Powers exp(−γn) are products of exp(−γ·2^j), certified by
//     directed rounding (expNegBounds) to within (1±u)² (depth 2), as are
//     the per-rank factors exp(−γ·frac(τ_i)) and exp(−γ(1 − frac(τ_i))).
//     No math.Exp.
//  3. Proposal (propose): block by block, the next (group, run length) is
//     drawn exactly ∝ integers g' = ⌈g·2^(K−E)⌉ of the float weights g
//     (a uniform integer below their 128-bit sum), then the block's edges
//     uniformly among its multisets (Floyd's algorithm, stars and bars).
//     Its probability q̃(t) = Π (g'/Σ')/C(s+r−1, r) is an exact rational.
//  4. Acceptance (accept): with probability A(t) = exp(−γ·c(t))/(M·q̃(t)),
//     by a lazy exact Bernoulli (lazyBernoulli) on certified bounds of A.
//     A rejected proposal is proposed again from the same tables.
//
// Why this is exact: rejection sampling outputs t with probability ∝
// q̃(t)·A(t) = exp(−γc(t))/M ∝ π(t) provided A(t) ≤ 1 for every t, that
// is M ≥ exp(−γc(t))/q̃(t). Write the proposal's states σ (the next rank
// and the previous block's group), Ñ(σ) the float message the parent
// step used, Σ(σ) = Σ g over σ's candidates, g = (exact jump·multiset
// count·inner factor)·Ñ(child)·(1+θ) within depth dG. Then
//
//	exp(−γc(t))/q̃(t) = Π_steps [e·mult·Σ'/g'] · (last factor)
//	                 ≤ Σ(root)·Π_steps (1+η)(1−u)^(−dG)·Π_{σ ≠ root} Σ(σ)/Ñ(σ)
//
// (telescoping: each step's g carries the child's Ñ, which the child's
// Σ replaces; g' ≥ g·2^(K−E) and Σ' ≤ Σ·2^(K−E)·(1+η), η = candidates·
// 2^(1−K), since every candidate rounds up by less than 1 and the largest
// is at least 2^(K−1)). Ñ(σ) and Σ(σ) are two evaluations of the same sum
// of positive terms over the same children's Ñ, of depths dN and dG, so
// Σ(σ)/Ñ(σ) ≤ (1+u)^dG/(1−u)^dN; the terminal factor's exact value over
// its float is at most (1−u)^(−dN). Each level is visited at most once,
// so with D = Σ_levels (dG + dN): exp(−γc)/q̃ ≤ Σ(root)·(1+u)^D(1−u)^(−D)·
// (1+η)^k ≤ Σ'_root·2^(E−K)·exp(3Du + kη) ≤ M := Σ'_root·2^(E−K)·(1 +
// 2(3Du + kη)) (e^y ≤ 1 + 2y for y ≤ 1; the sampler refuses y > 2⁻¹⁰).
// The depths come from the computation itself (xfloat), the per-level
// maxima are recorded while the messages are computed, and a proposal
// weight whose depth exceeds the bound used in M is an error, as is a
// certified lower bound of A above 1 (fail closed, never a release). The
// acceptance rate is 1/(1 + 2y) ≈ 1 − 10⁻⁸ in practice.
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

// maxJointGammaN bounds γ·N (γ·2N bounds γ·c(t)) and N: the binary
// exponents of exp(−γ·c), about −1.44·γ·c, must fit xfloat's and the
// brackets' int64, and counts like C_h + τ_i an int64. γ·N is 6·10⁴ at the
// benchmark's S3. Unlike the other limits these depend on the data (N):
// Select refuses beyond them (an error, no release), which only a group
// of more than 2⁶⁰/γ (and 2⁶¹) values reaches: 2³² values at γ = 2²⁸ (ε =
// 2³⁰, V = 1), 2⁶¹ at ε = 1.
const maxJointGammaN = 1 << 60

// maxJointSlack bounds the acceptance bound's slack y (M = Σ'·(1 + 2y)):
// beyond it the sampler refuses (its acceptance rate would fall below
// 1 − 2⁻⁹); MaxJointLeaves makes that unreachable.
const maxJointSlack = 0x1p-10

// MaxJointLeaves is the most leaves a joint selection takes (the quantile
// tree's default is 16⁴ = 2¹⁶). It keeps the sampler's rounding depths
// (at most 190 per group along a message's recursion: a power of depth
// ≤ 3·62 − 1, a product and a sum; 8·10⁸ in all) within int32 and the
// acceptance bound's slack y below 10⁻⁴ for every histogram, so
// the refusals on y (maxJointSlack) and on the depths cannot be reached
// by any data: with this public limit they are internal checks only.
const MaxJointLeaves = 1 << 22

// check validates o for e.
func (e Joint) check(o JointOptions) error {
	if err := (Exponential(e)).check(SelectOptions{Rank: 0, Scale: o.Scale, Values: o.Values}); err != nil {
		return err
	}
	if e.Leaves > MaxJointLeaves {
		return fmt.Errorf("%w: %d leaves, at most %d for a joint selection", ErrSelect, e.Leaves, MaxJointLeaves)
	}
	k := len(o.Ranks)
	if k < 1 || k > MaxJointRanks {
		return fmt.Errorf("%w: %d ranks, want 1 to %d", ErrSelect, k, MaxJointRanks)
	}
	for i, q := range o.Ranks {
		if !(q >= 0 && q <= 1) || (i > 0 && q < o.Ranks[i-1]) {
			return fmt.Errorf("%w: rank %g at %d: want non-decreasing ranks in [0, 1]", ErrSelect, q, i)
		}
	}
	return nil
}

// gamma returns γ = ε'/(2Δ), ε' = s/t with t/s = rng.DyadicUp(Scale).
func (o JointOptions) gamma() *big.Rat {
	return selectionCoefficient(o.Scale, o.Sensitivity())
}

// Select returns the edge indices j_1 ≤ … ≤ j_k ∈ [0, Leaves] the joint
// exponential mechanism selects for o's ranks (in their order) from the
// group's histogram, drawing from s. leaves must be sorted by leaf,
// distinct, with positive counts.
func (e Joint) Select(s *rng.Stream, leaves []LeafCount, o JointOptions) ([]int, error) {
	edges, _, err := e.selectCounted(s, leaves, o)
	return edges, err
}

// selectCounted is Select, also returning the number of proposals made.
func (e Joint) selectCounted(s *rng.Stream, leaves []LeafCount, o JointOptions) ([]int, int, error) {
	dp, err := e.prepare(leaves, o)
	if err != nil {
		return nil, 0, err
	}
	return dp.draw(s)
}

// prepare validates the arguments and builds the sampler's tables.
func (e Joint) prepare(leaves []LeafCount, o JointOptions) (*jointDP, error) {
	if err := e.check(o); err != nil {
		return nil, err
	}
	sc, err := Exponential(e).newScores(leaves, 0)
	if err != nil {
		return nil, err
	}
	gamma := o.gamma()
	n := sc.prefix[len(sc.prefix)-1]
	if n > 2*maxJointGammaN || new(big.Rat).Mul(gamma, new(big.Rat).SetInt64(n)).Cmp(new(big.Rat).SetInt64(maxJointGammaN)) > 0 {
		return nil, fmt.Errorf("%w: γ·N beyond 2^60 or N beyond 2^61 (scale %g): too large for the exact sampler", ErrSelect, o.Scale)
	}
	dp, err := newJointDP(sc, e.Leaves, len(o.Ranks), o.Ranks, gamma)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSelect, err)
	}
	if dp.slackNum, dp.slackDen, err = dp.slack(); err != nil {
		return nil, err
	}
	return dp, nil
}

// draw proposes until a proposal is accepted, returning the tuple and
// the number of proposals.
func (dp *jointDP) draw(s *rng.Stream) ([]int, int, error) {
	scratch := make([]xfloat, dp.candidates)
	for tries := 1; ; tries++ {
		d, err := dp.propose(s, scratch)
		if err != nil {
			return nil, tries, err
		}
		ok, err := dp.accept(s, d, dp.slackNum, dp.slackDen)
		if err != nil {
			return nil, tries, err
		}
		if ok {
			return d.edges, tries, nil
		}
	}
}

// RankError returns x such that, with probability at least 1 − β, every
// released edge's rank is within c* + x of its rank·N, c* the smallest
// loss over the candidates (at most twice the sum of the ranks' distances
// to their nearest edges: the leaf resolution). Every rank's error is at
// most the loss (|C(j_i) − q_i·N| ≤ Σ_{l ≤ i} |n_l − (q_l − q_{l−1})·N|),
// and the mechanism outputs a tuple of loss c with probability at most
// exp(−γ(c − c*)) (the best tuple's weight is in the normaliser), so
// P(c(t) > c* + x) ≤ C(L+k, k)·exp(−γx): x = (ln C(L+k, k) + ln(1/β))/γ,
// rounded up by a relative 1e-9 (ln C(L+k, k) = Σ_{i ≤ k} ln((L+i)/i) in
// float64, a few roundings per term, far below).
func (e Joint) RankError(o JointOptions, beta float64) (float64, error) {
	if err := e.check(o); err != nil {
		return 0, err
	}
	if !(beta > 0 && beta < 1) {
		return 0, fmt.Errorf("%w: β %g, want (0, 1)", ErrSelect, beta)
	}
	lc := 0.0
	for i := 1; i <= len(o.Ranks); i++ {
		lc += math.Log(float64(e.Leaves+i) / float64(i))
	}
	g, _ := o.gamma().Float64()
	return (lc + math.Log(1/beta)) / g * (1 + 1e-9), nil
}
