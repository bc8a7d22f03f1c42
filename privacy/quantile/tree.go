package quantile

import (
	"fmt"
	"math"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/rng"
)

// Tree is the post-processing of a noised hierarchical histogram
// (a quantile tree) into quantiles with confidence intervals. The tree
// covers [Lower, Upper] with Branching^Depth leaves of equal width; its
// noised nodes are every node below the root, level by level (ℓ = 1 …
// Depth, Branching^ℓ nodes each, left to right), as one vector (Node
// gives a node's position). Everything here is post-processing of that
// vector: it costs no privacy.
//
// Estimates (Quantiles): the noised nodes are first made consistent (every
// parent the sum of its children) by the weighted least-squares estimator
// of Hay, Rastogi, Miklau & Suciu, "Boosting the accuracy of
// differentially private histograms through consistency", PVLDB 3(1),
// 2010, Theorem 3 (two linear passes for a B-ary tree with equal noise
// variance on every node; the root is not noised here, so it enters with
// weight 0: its estimate is the sum of its children's). The consistent
// tree is then walked top-down as Google's BoundedQuantiles walks its
// noised tree (children clamped at 0 level by level, linear interpolation
// in the last leaf; see Quantiles): monotone in q by construction, and
// every requested rank comes from the same tree.
//
// Intervals (Intervals): the raw noised prefix counts Ĉ(j) (values in
// leaves below j) are each a sum of at most (B−1) noised nodes per level
// (the canonical decomposition of [0, j)), and the noised total N̂ a sum
// of B level-1 nodes. With H the half-width that a sum of
// M = max((B−1)·D, B) independent noises exceeds with probability at most
// β/L (L = B^D, the number of these sums; RankBound), a union bound makes
// every |Ĉ(j) − C(j)| and |N̂ − N| ≤ H at once with probability ≥ 1 − β.
// On that event, for every rank q at once, the true q-quantile of the
// kept values (the ⌈qN⌉-th smallest, at least the first) lies in
// [left edge of leaf j_lo, right edge of leaf j_hi], where j_lo is the
// first leaf j with Ĉ(j+1) ≥ max(1, q(N̂ − H)) − H and j_hi the first
// with Ĉ(j+1) > q(N̂ + H) + H: C(j*+1) ≥ max(1, qN) and C(j) ≤
// max(1, ⌈qN⌉) − 1 ≤ qN below the quantile's leaf j*, so j_lo ≤ j* ≤ j_hi
// (for N ≥ 1; with no value there is no quantile to cover). Moreover every value x in
// that interval has a true rank (between C(leaf(x)) and C(leaf(x)+1))
// within qN ± 2(1+q)·H (RankError). The released estimate is clipped into
// the interval (still monotone: both ends are monotone in q), so the
// stated rank error holds for it too.
type Tree struct {
	Branching, Depth int
	Lower, Upper     float64
}

// Leaves returns Branching^Depth.
func (q Tree) Leaves() int {
	n := 1
	for range q.Depth {
		n *= q.Branching
	}
	return n
}

// Nodes returns the number of noised nodes: Σ_{ℓ=1..Depth} Branching^ℓ.
func (q Tree) Nodes() int {
	n, w := 0, 1
	for range q.Depth {
		w *= q.Branching
		n += w
	}
	return n
}

// levelStart returns the position of the first node of level ℓ (1-based).
func (q Tree) levelStart(l int) int {
	n, w := 0, 1
	for range l - 1 {
		w *= q.Branching
		n += w
	}
	return n
}

// NodeCounts returns the true node counts (the vector to noise) from the
// dense leaf counts (len Leaves()).
func (q Tree) NodeCounts(leaves []float64) []float64 {
	out := make([]float64, q.Nodes())
	copy(out[q.levelStart(q.Depth):], leaves)
	for l := q.Depth - 1; l >= 1; l-- {
		lo, hi := q.levelStart(l), q.levelStart(l+1)
		for i := range hi - lo {
			s := 0.0
			for _, c := range out[hi+i*q.Branching : hi+(i+1)*q.Branching] {
				s += c
			}
			out[lo+i] = s
		}
	}
	return out
}

// consistentLeaves returns the leaf estimates of Hay et al.'s consistent
// tree (see Tree) from the noised nodes.
func (q Tree) consistentLeaves(noised []float64) []float64 {
	return q.consistent(noised)[q.levelStart(q.Depth):]
}

// consistent returns every node's estimate in Hay et al.'s consistent tree
// (see Tree), in the noised vector's layout.
func (q Tree) consistent(noised []float64) []float64 {
	b := float64(q.Branching)
	// Pass 1, bottom-up: z = leaf value; at height k ≥ 2 (leaves are at
	// height 1), z[v] = (b^k − b^{k−1})/(b^k − 1)·x[v] +
	// (b^{k−1} − 1)/(b^k − 1)·Σ z[children].
	z := make([]float64, len(noised))
	ld := q.levelStart(q.Depth)
	copy(z[ld:], noised[ld:])
	for l := q.Depth - 1; l >= 1; l-- {
		k := float64(q.Depth - l + 1)
		bk, bk1 := math.Pow(b, k), math.Pow(b, k-1)
		wSelf, wKids := (bk-bk1)/(bk-1), (bk1-1)/(bk-1)
		lo, hi := q.levelStart(l), q.levelStart(l+1)
		for i := range hi - lo {
			s := 0.0
			for _, c := range z[hi+i*q.Branching : hi+(i+1)*q.Branching] {
				s += c
			}
			z[lo+i] = wSelf*noised[lo+i] + wKids*s
		}
	}
	// Pass 2, top-down: h[v] = z[v] + (h[parent] − Σ z[siblings and v])/b;
	// the root is not noised, so h[root] = Σ z[level 1] and level 1 keeps z.
	h := z // updated in place, top-down: a parent is final before its children
	for l := 1; l < q.Depth; l++ {
		lo, hi := q.levelStart(l), q.levelStart(l+1)
		for i := range hi - lo {
			kids := h[hi+i*q.Branching : hi+(i+1)*q.Branching]
			s := 0.0
			for _, c := range kids {
				s += c
			}
			adj := (h[lo+i] - s) / b
			for j := range kids {
				kids[j] += adj
			}
		}
	}
	return h
}

// edge returns the left edge of leaf j (j = Leaves(): Upper).
func (q Tree) edge(j, leaves int) float64 {
	if j >= leaves {
		return q.Upper
	}
	return q.Lower + (q.Upper-q.Lower)*(float64(j)/float64(leaves))
}

// Quantiles returns the estimate of every rank in ranks (each in [0, 1])
// from the noised nodes, before clipping into the intervals (Release does
// both): non-decreasing in the rank.
//
// It walks the consistent tree top-down, as Google's BoundedQuantiles walks
// its noised tree: at each node the children's estimates are clamped at 0,
// the child where the cumulative share reaches the rank is entered and the
// rank rescaled to it, and inside the final leaf the value is interpolated
// linearly. Clamping level by level keeps the noise of the many empty
// leaves of a sparse tree out of the walk (clamping all leaves at once
// would add their positive noise up into a uniform CDF). The walk is
// monotone: a larger rank enters the same child with a larger rescaled rank
// or a child further right, at every level.
func (q Tree) Quantiles(noised []float64, ranks []float64) []float64 {
	h := q.consistent(noised)
	leaves := q.Leaves()
	out := make([]float64, len(ranks))
	kids := make([]float64, q.Branching)
	for k, r := range ranks {
		idx := 0 // node index within its level; the root's children first
		rank := r
		lo, hi := 0, leaves // leaf range of the current node
		for l := 1; l <= q.Depth; l++ {
			first := q.levelStart(l) + idx*q.Branching
			total := 0.0
			for j := range kids {
				kids[j] = math.Max(0, h[first+j])
				total += kids[j]
			}
			span := (hi - lo) / q.Branching
			if !(total > 0) {
				// No information below: spread the rank uniformly.
				x := q.edge(lo, leaves) + (q.edge(hi, leaves)-q.edge(lo, leaves))*rank
				out[k] = x
				goto next
			}
			{
				target, cum, j := rank*total, 0.0, 0
				for ; j < q.Branching-1; j++ {
					if kids[j] > 0 && cum+kids[j] >= target {
						break
					}
					cum += kids[j]
				}
				if kids[j] > 0 {
					rank = math.Min(1, math.Max(0, (target-cum)/kids[j]))
				} else {
					rank = 0
				}
				idx = idx*q.Branching + j
				lo = lo + j*span
				hi = lo + span
			}
		}
		out[k] = q.edge(lo, leaves) + (q.edge(hi, leaves)-q.edge(lo, leaves))*rank
	next:
	}
	return out
}

// Intervals returns, for every rank, the interval [lo, hi] that holds the
// true quantile of the kept values on the event that every raw prefix
// count and the total are within h of the truth (see Tree and
// RankBound), and the noised total N̂.
func (q Tree) Intervals(noised []float64, ranks []float64, h float64) (lo, hi []float64, total float64) {
	leaves := q.Leaves()
	b := q.Branching
	// Per-level prefix sums of the raw noised nodes.
	pre := make([][]float64, q.Depth+1)
	for l := 1; l <= q.Depth; l++ {
		st, en := q.levelStart(l), q.levelStart(l+1)
		if l == q.Depth {
			en = len(noised)
		}
		p := make([]float64, en-st+1)
		for i, x := range noised[st:en] {
			p[i+1] = p[i] + x
		}
		pre[l] = p
	}
	total = pre[1][b]
	// cum[j] = Ĉ(j): the canonical decomposition of [0, j), at most b−1
	// nodes per level (the left siblings of the path to leaf j).
	cum := make([]float64, leaves+1)
	span := make([]int, q.Depth+1) // leaves under one node of level ℓ
	span[q.Depth] = 1
	for l := q.Depth - 1; l >= 0; l-- {
		span[l] = span[l+1] * b
	}
	for j := 1; j < leaves; j++ {
		s, parent := 0.0, 0
		for l := 1; l <= q.Depth; l++ {
			a := j / span[l]
			s += pre[l][a] - pre[l][parent*b]
			parent = a
		}
		cum[j] = s
	}
	cum[leaves] = total
	// Values are put in leaves by floating-point arithmetic (LeafOf in the
	// windows package): widen by a few ulps of the range so that a value
	// on an edge is inside.
	margin := 4 * math.Max(ulp(q.Lower), ulp(q.Upper)) * float64(leaves)
	lo, hi = make([]float64, len(ranks)), make([]float64, len(ranks))
	for k, r := range ranks {
		tlo, thi := math.Max(1, r*(total-h))-h, r*(total+h)+h
		jlo, jhi := 0, leaves-1
		for j := 0; j < leaves; j++ {
			if cum[j+1] >= tlo {
				jlo = j
				break
			}
		}
		for j := 0; j < leaves; j++ {
			if cum[j+1] > thi {
				jhi = j
				break
			}
		}
		lo[k] = math.Max(q.Lower, q.edge(jlo, leaves)-margin)
		hi[k] = math.Min(q.Upper, q.edge(jhi+1, leaves)+margin)
	}
	return lo, hi, total
}

func ulp(x float64) float64 {
	x = math.Abs(x)
	return math.Nextafter(x, math.Inf(1)) - x
}

// RankError returns the bound on the rank error of any value in the
// interval of rank r: 2(1+r)·h (see Tree).
func RankError(r, h float64) float64 { return 2 * (1 + r) * h }

// Release returns the released quantiles (estimates clipped into their
// intervals: non-decreasing in the rank when ranks are sorted), their
// intervals and the noised total, from the noised nodes and the
// half-width h of RankBound.
func (q Tree) Release(noised, ranks []float64, h float64) (vals, lo, hi []float64, total float64) {
	vals = q.Quantiles(noised, ranks)
	lo, hi, total = q.Intervals(noised, ranks, h)
	for k := range vals {
		vals[k] = math.Min(hi[k], math.Max(lo[k], vals[k]))
	}
	return vals, lo, hi, total
}

// RankBound returns the half-width H for the tree's intervals at level
// 1 − β: P(|S| > H) ≤ β/L for a sum S of M = max((B−1)·D, B) independent
// draws of m's noise at scale, L = B^D. Only the exact integer mechanisms
// the operator runs on counts are supported, with Chernoff bounds:
//
//   - DiscreteGaussian: the discrete Gaussian with parameter σ is
//     σ-sub-Gaussian (Canonne, Kamath & Steinke 2020, Corollary 9), so
//     H = σ·√(2M·ln(2L/β));
//   - DiscreteLaplace: with p = e^{−1/t} (t rounded up as the sampler
//     does), E e^{λY} = (1−p)²/((1−pe^λ)(1−pe^{−λ})) for |λ| < 1/t, and
//     P(|S| > H) ≤ 2·min_λ exp(M·ln E e^{λY} − λH), solved for H.
//
// H is rounded up to a whole number (the noised sums are integers). The
// error wraps privacy.ErrInvalidParameter for other mechanisms or bad arguments.
func (q Tree) RankBound(m privacy.Mechanism, scale, beta float64) (float64, error) {
	if q.Branching < 2 || q.Depth < 1 || !(beta > 0 && beta < 1) || !(!math.IsNaN(scale) && scale >= 0) || math.IsInf(scale, 0) {
		return 0, fmt.Errorf("%w: quantile tree bound needs branching ≥ 2, depth ≥ 1, β in (0, 1) and a finite scale", privacy.ErrInvalidParameter)
	}
	M := float64(max((q.Branching-1)*q.Depth, q.Branching))
	target := beta / float64(q.Leaves())
	switch m.(type) {
	case privacy.DiscreteGaussian:
		return math.Ceil(scale * math.Sqrt(2*M*math.Log(2/target))), nil
	case privacy.DiscreteLaplace:
		if !rng.DiscreteScaleOK(scale) {
			return 0, fmt.Errorf("%w: discrete Laplace scale %g", privacy.ErrInvalidParameter, scale)
		}
		tn, td := rng.DyadicUp(scale)
		t := math.Nextafter(float64(tn)/float64(td), math.Inf(1)) // the sampler's scale, rounded towards a wider bound
		p := math.Exp(-1 / t)
		logMGF := func(l float64) float64 {
			return 2*math.Log1p(-p) - math.Log1p(-p*math.Exp(l)) - math.Log1p(-p*math.Exp(-l))
		}
		// tail(H) = 2·min over λ in (0, 1/t) of exp(M·logMGF(λ) − λH):
		// the exponent is convex in λ; golden-section search.
		tail := func(H float64) float64 {
			a, c := 0.0, (1/t)*(1-1e-9)
			f := func(l float64) float64 { return M*logMGF(l) - l*H }
			const g = 0.6180339887498949 // (√5 − 1)/2
			x1, x2 := c-g*(c-a), a+g*(c-a)
			f1, f2 := f(x1), f(x2)
			for range 200 {
				if f1 < f2 {
					c, x2, f2 = x2, x1, f1
					x1 = c - g*(c-a)
					f1 = f(x1)
				} else {
					a, x1, f1 = x1, x2, f2
					x2 = a + g*(c-a)
					f2 = f(x2)
				}
			}
			return 2 * math.Exp(math.Min(f1, f2)) // any λ gives a valid bound
		}
		// Bisection on H between the standard deviation and a bound that
		// surely holds.
		lo, hi := 0.0, t*(M+10*math.Sqrt(M))*math.Log(2/target)+10
		for tail(hi) > target {
			hi *= 2
		}
		for hi-lo > 0.5 {
			mid := (lo + hi) / 2
			if tail(mid) <= target {
				hi = mid
			} else {
				lo = mid
			}
		}
		return math.Ceil(hi), nil
	}
	return 0, fmt.Errorf("%w: quantile tree intervals support discrete-laplace and discrete-gaussian noise, not %s", privacy.ErrInvalidParameter, m.Name())
}
