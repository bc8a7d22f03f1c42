package quantile

import (
	"fmt"
	"math/big"
	"math/bits"
	"slices"

	"github.com/dpstream/dpstream/privacy/rng"
)

// proposalBits is K: every step's float weights g are scaled so that the
// largest lies in [2^(K−1), 2^K) and rounded up to integers g' =
// ⌈g·2^(K−E)⌉ ≤ 2⁶², whose sum (at most G·k·2⁶² < 2¹²⁸) is kept in 128
// bits. Rounding up keeps every positive weight positive, and the sum
// grows by less than one unit per candidate: a factor at most 1 + η,
// η = (candidates)·2^(1−K).
const proposalBits = 62

// jointDraw is one proposal: the tuple, its groups, and the exact
// rational parts of its proposal probability.
type jointDraw struct {
	edges  []int
	groups []int
	num    *big.Int // Π Σ'_s · Π C(s_h+r−1, r) over the steps
	den    *big.Int // Π g'_s
	sum0   *big.Int // Σ' of the first step
	shift0 int64    // E − K of the first step: Σ(root) ≤ Σ'·2^shift0
}

// propose draws a tuple from the proposal: block by block, the next
// (group, run length) exactly ∝ the integers g', then the block's edges
// uniformly among its multisets. scratch holds a step's weights.
func (dp *jointDP) propose(s *rng.Stream, scratch []xfloat) (*jointDraw, error) {
	d := &jointDraw{num: big.NewInt(1), den: big.NewInt(1)}
	hp, cp := -1, int64(0)
	for i := 1; i <= dp.k; {
		h, r, err := dp.step(s, i, hp, cp, d, scratch)
		if err != nil {
			return nil, err
		}
		d.num.Mul(d.num, new(big.Int).Binomial(dp.size[h]+int64(r)-1, int64(r)))
		for _, j := range dp.blockEdges(s, h, r) {
			d.edges = append(d.edges, j)
			d.groups = append(d.groups, h)
		}
		hp, cp, i = h, dp.c[h], i+r
	}
	return d, nil
}

// step chooses the block that places rank i after a block in group hp
// (hp = −1 and C = 0 before the first): a group h > hp and a run length
// r ≤ k − i + 1 with probability g'/Σ', g = exp(−γ|C_h − cp − τ_i|)·
// term(i, h, r). It records Σ' and g' in d.
func (dp *jointDP) step(s *rng.Stream, i, hp int, cp int64, d *jointDraw, scratch []xfloat) (int, int, error) {
	runs := dp.k - i + 1
	bound := dp.maxJump + dp.dTerm[i] + 1
	first, e := hp+1, int64(0)
	found := false
	for h := first; h < len(dp.c); h++ {
		jp := dp.jump(i, dp.c[h]-cp)
		var bad error
		dp.terms(i, h, func(r int, t xfloat) {
			g := xmulOne(jp, t)
			if int64(g.d) > bound {
				bad = fmt.Errorf("%w: a proposal weight's rounding depth %d exceeds its bound %d", ErrSelect, g.d, bound)
			}
			if g.m != 0 && (!found || g.e > e) {
				e, found = g.e, true
			}
			scratch[(h-first)*runs+r-1] = g
		})
		if bad != nil {
			return 0, 0, bad
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("%w: no proposal weight is positive", ErrSelect)
	}
	n := (len(dp.c) - first) * runs
	shift := int64(proposalBits) - e
	var hi, lo uint64
	for _, g := range scratch[:n] {
		var carry uint64
		lo, carry = bits.Add64(lo, xceilScaled(g, shift), 0)
		hi += carry
	}
	sum := new(big.Int).Lsh(new(big.Int).SetUint64(hi), 64)
	sum.Or(sum, new(big.Int).SetUint64(lo))
	xh, xl := uniform128(s, hi, lo)
	var ch, cl uint64
	for c, g := range scratch[:n] {
		w := xceilScaled(g, shift)
		var carry uint64
		cl, carry = bits.Add64(cl, w, 0)
		ch += carry
		if ch > xh || (ch == xh && cl > xl) { // the first cumulative sum above the uniform
			d.num.Mul(d.num, sum)
			d.den.Mul(d.den, new(big.Int).SetUint64(w))
			if hp < 0 {
				d.sum0, d.shift0 = sum, -shift
			}
			return first + c/runs, c%runs + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: the proposal's uniform exceeded its sum", ErrSelect)
}

// uniform128 returns a uniform integer in [0, hi·2⁶⁴ + lo) (positive), as
// (high, low) words: by rejection of uniform words masked to the bound's
// length (each try succeeds with probability above 1/2).
func uniform128(s *rng.Stream, hi, lo uint64) (uint64, uint64) {
	if hi == 0 {
		return 0, s.Uint64n(lo)
	}
	mask := ^uint64(0) >> uint(64-bits.Len64(hi))
	for {
		h, l := s.Uint64()&mask, s.Uint64()
		if h < hi || (h == hi && l < lo) {
			return h, l
		}
	}
}

// blockEdges returns r edges of group h, non-decreasing, uniform among
// the C(s+r−1, r) multisets of its s edges: a uniform r-subset of {0, …,
// s+r−2} (Floyd's algorithm), sorted, minus 0, 1, …, r−1 (stars and
// bars).
func (dp *jointDP) blockEdges(s *rng.Stream, h, r int) []int {
	n := uint64(dp.size[h]) + uint64(r) - 1
	chosen := make([]uint64, 0, r)
	for j := n - uint64(r); j < n; j++ {
		t := s.Uint64n(j + 1)
		if slices.Contains(chosen, t) {
			t = j
		}
		chosen = append(chosen, t)
	}
	slices.Sort(chosen)
	out := make([]int, r)
	for i, x := range chosen {
		out[i] = int(dp.start[h]) + int(x) - i
	}
	return out
}
