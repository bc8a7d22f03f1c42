package quantile

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/rng"
)

// Exponential selects quantiles from the exact leaf histogram of a group
// by permute-and-flip (McKenna & Sheldon, "Permute-and-Flip: A new
// mechanism for differentially private selection", NeurIPS 2020), the
// exponential mechanism's ε-DP improvement (never worse in expected
// utility), sampled exactly.
//
// Candidates: the Leaves+1 leaf edges e_j = Lower + (Upper − Lower)·j/L
// (j = 0 … L, e_L = Upper), the resolution of the quantile tree over the
// same range. The number of kept values below e_j is the prefix count
// C(j) (values in leaves < j), N = C(L). The score of e_j for rank q is
// |C(j) − q·N|: the rank error of releasing e_j.
//
// Sensitivity (derive it: S = the set of a unit's kept values in the
// group, m = |S| ≤ V values). Adding or removing the unit moves C(j) by
// a_j ∈ [0, m] and N by m, so C(j) − qN moves by a_j − qm ∈ [−qV,
// (1−q)V] and the score by at most Δ = max(q, 1−q)·V. Replacing one unit
// by another (a MaxUnits cap) moves it by the difference of two such
// terms, in [−V, V]: Δ = V. The score is not monotone (the moves of
// different candidates have either sign), so permute-and-flip runs at
// ε/(2Δ): visit the candidates in a uniformly random order and stop at
// the first r accepted with probability exp(−ε·(s_r − s*)/(2Δ)), s* the
// smallest score (accepted surely). This is ε-DP (McKenna & Sheldon,
// Theorem 1) for each rank and group; the release of k ranks over G
// groups composes k·G of them (privacy.Selection is their accounting).
//
// Exactness: ε is the calibrated scale's reciprocal rounded down to a
// dyadic rational (1/scale ≥ ε' = s/t with t/s = rng.DyadicUp(scale)),
// q is a float64 (a dyadic rational), Δ is exact (big.Rat), and every
// acceptance is an exact Bernoulli(exp(−γ)) of the rational γ
// (rng.Stream.BernoulliExp); the order is a lazy Fisher–Yates shuffle of
// unbiased uniform integers. No floating-point value of the data enters
// the sampling, and the draws come from the release's keyed stream, so a
// replay selects the same edges.
//
// Rank error: P&F outputs r with probability at most exp(−ε'·(s_r −
// s*)/(2Δ)) (it must reach and accept r), so P(s_r − s* > t) ≤
// (L+1)·exp(−ε't/(2Δ)) and with probability at least 1 − β the released
// edge's rank is within s* + RankError of qN, where s* ≤ the distance from
// qN to the nearest edge's rank (at most half the count of the quantile's
// leaf). There is no data-independent value interval narrower than
// [Lower, Upper] for a selection (the value distance of a rank distance
// depends on the data), so that is the released interval.
type Exponential struct {
	Leaves       int     // L ≥ 1: the histogram's leaves (candidates: L+1 edges)
	Lower, Upper float64 // the clamping range the leaves cover
}

// LeafCount is one non-empty leaf of a group's histogram: Count kept
// values in leaf Leaf (0 ≤ Leaf < Leaves), as windows.LeafCount.
type LeafCount struct {
	Leaf  uint32
	Count int64
}

// SelectOptions is one rank's selection: its rank, the calibrated scale of its
// privacy.Selection part (ε = 1/Scale before rounding down), and the
// bound behind Δ.
type SelectOptions struct {
	Rank    float64 // q in [0, 1]
	Scale   float64 // the part's scale: the selection is (1/Scale)-DP
	Values  int64   // V ≥ 1: the most values one unit keeps in the group
	Replace bool    // neighbours replace one unit (MaxUnits) rather than add or remove one
}

// ErrSelect wraps the errors of invalid selection arguments.
var ErrSelect = errors.New("quantile: invalid selection")

// check validates o for e.
func (e Exponential) check(o SelectOptions) error {
	if e.Leaves < 1 || e.Leaves >= 1<<32 || !(e.Lower < e.Upper) {
		return fmt.Errorf("%w: %d leaves over [%g, %g]", ErrSelect, e.Leaves, e.Lower, e.Upper)
	}
	if !(o.Rank >= 0 && o.Rank <= 1) || o.Values < 1 || !rng.DiscreteScaleOK(o.Scale) {
		return fmt.Errorf("%w: rank %g, values %d, scale %g (want a rank in [0, 1], V ≥ 1 and a scale in [2^-30, 2^40])", ErrSelect, o.Rank, o.Values, o.Scale)
	}
	return nil
}

// Sensitivity returns the score's sensitivity Δ for o, exactly:
// max(q, 1 − q)·V, or V when units are replaced.
func (o SelectOptions) Sensitivity() *big.Rat {
	v := new(big.Rat).SetInt64(o.Values)
	if o.Replace {
		return v
	}
	q := new(big.Rat).SetFloat64(o.Rank)
	p := new(big.Rat).Sub(big.NewRat(1, 1), q)
	if p.Cmp(q) > 0 {
		q = p
	}
	return q.Mul(q, v)
}

// coefficient returns ε'/(2Δ): the factor from a score gap to γ, with ε'
// = s/t the reciprocal of the scale rounded up to a dyadic t/s.
func (o SelectOptions) coefficient() *big.Rat {
	return selectionCoefficient(o.Scale, o.Sensitivity())
}

// selectionCoefficient returns ε'/(2Δ) for a selection at scale (ε' = s/t,
// the reciprocal of the scale rounded down: t/s = rng.DyadicUp(scale)) and
// sensitivity delta, exactly.
func selectionCoefficient(scale float64, delta *big.Rat) *big.Rat {
	t, s := rng.DyadicUp(scale)
	k := new(big.Rat).SetFrac(new(big.Int).SetUint64(s), new(big.Int).SetUint64(t))
	d := new(big.Rat).Mul(delta, big.NewRat(2, 1))
	return k.Quo(k, d)
}

// Edge returns e_j = Lower + (Upper − Lower)·j/L, Upper for j = L (as
// Tree's leaf edges).
func (e Exponential) Edge(j int) float64 {
	if j >= e.Leaves {
		return e.Upper
	}
	return e.Lower + (e.Upper-e.Lower)*(float64(j)/float64(e.Leaves))
}

// scores holds the prefix counts of a histogram and the exact scores.
type scores struct {
	leaves []LeafCount
	prefix []int64 // prefix[i]: values in leaves[:i]
	qn     *big.Rat
}

// newScores checks that leaves are sorted, distinct, inside the tree and
// with positive counts, and returns their prefix counts and q·N.
func (e Exponential) newScores(leaves []LeafCount, q float64) (*scores, error) {
	sc := &scores{leaves: leaves, prefix: make([]int64, len(leaves)+1)}
	for i, l := range leaves {
		if int64(l.Leaf) >= int64(e.Leaves) || l.Count < 1 || (i > 0 && l.Leaf <= leaves[i-1].Leaf) || sc.prefix[i] > math.MaxInt64-l.Count {
			return nil, fmt.Errorf("%w: leaf %d (count %d) of %d leaves: want sorted, distinct leaves with positive counts", ErrSelect, l.Leaf, l.Count, e.Leaves)
		}
		sc.prefix[i+1] = sc.prefix[i] + l.Count
	}
	n := sc.prefix[len(leaves)]
	sc.qn = new(big.Rat).Mul(new(big.Rat).SetFloat64(q), new(big.Rat).SetInt64(n))
	return sc, nil
}

// below returns C(j), the values in leaves < j.
func (sc *scores) below(j int) int64 {
	i := sort.Search(len(sc.leaves), func(i int) bool { return int(sc.leaves[i].Leaf) >= j })
	return sc.prefix[i]
}

// score returns |c − qN| for the prefix count c.
func (sc *scores) score(c int64) *big.Rat {
	s := new(big.Rat).Sub(new(big.Rat).SetInt64(c), sc.qn)
	return s.Abs(s)
}

// best returns s*, the smallest score: every prefix count is C(j) of
// some edge j (C only changes at the non-empty leaves).
func (sc *scores) best() *big.Rat {
	var b *big.Rat
	for _, c := range sc.prefix {
		if s := sc.score(c); b == nil || s.Cmp(b) < 0 {
			b = s
		}
	}
	return b
}

// Select returns the index j ∈ [0, Leaves] of the edge permute-and-flip
// selects for o from the group's histogram (see Exponential), drawing
// from s. leaves must be sorted by leaf, distinct, with positive counts.
func (e Exponential) Select(s *rng.Stream, leaves []LeafCount, o SelectOptions) (int, error) {
	if err := e.check(o); err != nil {
		return 0, err
	}
	sc, err := e.newScores(leaves, o.Rank)
	if err != nil {
		return 0, err
	}
	g := newGaps(sc, o)
	n := e.Leaves + 1
	swapped := map[int]int{} // the lazy shuffle: position → candidate, identity when absent
	at := func(p int) int {
		if v, ok := swapped[p]; ok {
			return v
		}
		return p
	}
	for i := range n {
		r := i + int(s.Uint64n(uint64(n-i)))
		j := at(r)
		swapped[r] = at(i)
		if s.BernoulliExp(g.num(sc.below(j)), g.den) {
			return j, nil
		}
	}
	// The best candidate has γ = 0 and is always accepted.
	return 0, fmt.Errorf("%w: permute-and-flip accepted no candidate", ErrSelect)
}

// gaps computes every candidate's γ = ε'·(s_j − s*)/(2Δ) as an integer
// fraction num/den without rational normalisation: with q = M/2^k
// (a float64 is a dyadic rational), ε' = sd/t and S(c) = |c·2^k − M·N|
// = 2^k·|c − qN|, γ = sd·(S(C(j)) − S*)/(2t·D·V) with D = max(M, 2^k − M)
// (Δ = D·V/2^k), or sd·(S(C(j)) − S*)/(2t·V·2^k) replacing units (Δ = V).
type gaps struct {
	k         uint
	mn, best  *big.Int // M·N and S*
	sd, den   *big.Int
	tmp, cbig *big.Int
}

// newGaps prepares the gaps of sc's candidates for o.
func newGaps(sc *scores, o SelectOptions) *gaps {
	m, k := dyadic(o.Rank)
	g := &gaps{k: k, tmp: new(big.Int), cbig: new(big.Int)}
	g.mn = new(big.Int).Mul(m, big.NewInt(sc.prefix[len(sc.prefix)-1]))
	for _, c := range sc.prefix {
		if s := g.scaled(c); g.best == nil || s.Cmp(g.best) < 0 {
			g.best = new(big.Int).Set(s)
		}
	}
	t, sd := rng.DyadicUp(o.Scale)
	g.sd = new(big.Int).SetUint64(sd)
	g.den = new(big.Int).Lsh(new(big.Int).SetUint64(t), 1) // 2t
	g.den.Mul(g.den, big.NewInt(o.Values))
	if o.Replace {
		g.den.Lsh(g.den, k)
	} else {
		d := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), k), m) // 2^k − M
		if m.Cmp(d) > 0 {
			d = m
		}
		g.den.Mul(g.den, d)
	}
	return g
}

// scaled returns S(c) = |c·2^k − M·N| (in g's scratch integer).
func (g *gaps) scaled(c int64) *big.Int {
	g.cbig.SetInt64(c)
	g.cbig.Lsh(g.cbig, g.k)
	g.cbig.Sub(g.cbig, g.mn)
	return g.cbig.Abs(g.cbig)
}

// num returns γ's numerator sd·(S(c) − S*) for the prefix count c (in
// g's scratch integer).
func (g *gaps) num(c int64) *big.Int {
	g.tmp.Sub(g.scaled(c), g.best)
	return g.tmp.Mul(g.tmp, g.sd)
}

// dyadic returns M and k with q = M/2^k exactly (q ≥ 0 finite).
func dyadic(q float64) (*big.Int, uint) {
	if q == 0 {
		return new(big.Int), 0
	}
	fr, e := math.Frexp(q) // q = fr·2^e, fr ∈ [1/2, 1)
	m := uint64(fr * (1 << 53))
	k := 53 - e
	for m&1 == 0 && k > 0 {
		m >>= 1
		k--
	}
	if k < 0 { // q ≥ 2: not a rank (check refuses it)
		return new(big.Int).Lsh(new(big.Int).SetUint64(m), uint(-k)), 0
	}
	return new(big.Int).SetUint64(m), uint(k)
}

// RankError returns t with P(s_r − s* > t) ≤ β for the selected edge r:
// 2Δ·ln((L+1)/β)/ε' (see Exponential), rounded up by a relative 1e-9
// (float64 rounding of the logarithm and the products is far below).
func (e Exponential) RankError(o SelectOptions, beta float64) (float64, error) {
	if err := e.check(o); err != nil {
		return 0, err
	}
	if !(beta > 0 && beta < 1) {
		return 0, fmt.Errorf("%w: β %g, want (0, 1)", privacy.ErrInvalidParameter, beta)
	}
	k, _ := o.coefficient().Float64() // ε'/(2Δ)
	return math.Log(float64(e.Leaves+1)/beta) / k * (1 + 1e-9), nil
}
