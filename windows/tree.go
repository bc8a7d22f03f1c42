package windows

import (
	"cmp"
	"math"
	"slices"
)

// This file holds the state behind the variance and quantiles aggregates
// (issue 11): the leaf histogram of a quantile tree per group, and the
// sensitivities of the tree and of the centred sum of squares.

// LeafCount is one non-empty leaf of a group's quantile tree: the number of
// kept values in leaf Leaf, the interval [Lower + Leaf·w, Lower +
// (Leaf+1)·w) with w = (Upper − Lower)/TreeBranching^TreeDepth (the last
// leaf includes Upper).
type LeafCount struct {
	Leaf  uint32
	Count int64
}

// TreeLeaves returns the number of leaves of the configuration's quantile
// tree (TreeBranching^TreeDepth), 0 without Quantiles.
func (c Config) TreeLeaves() int {
	if !c.Quantiles || c.TreeBranching < 2 || c.TreeDepth < 1 || treeLeavesOver(c.TreeBranching, c.TreeDepth) {
		return 0
	}
	n := 1
	for range c.TreeDepth {
		n *= c.TreeBranching
	}
	return n
}

// LeafOf returns the leaf of a value clamped to [lower, upper] in a tree of
// n leaves of equal width: ⌊(v − lower)/(upper − lower)·n⌋, with upper in
// the last leaf (Google's BoundedQuantiles.getIndex). It is a
// deterministic function of the value (one division and one
// multiplication, each correctly rounded), so every instance puts a value
// in the same leaf and one value always moves exactly one leaf count.
func LeafOf(v, lower, upper float64, n int) uint32 {
	x := float64((v - lower) / (upper - lower))
	i := int(math.Floor(float64(x * float64(n))))
	return uint32(min(max(i, 0), n-1))
}

// leafCounts turns a leaf → count map into the sorted list Group.Leaves
// holds (nil for an empty map).
func leafCounts(m map[uint32]int64) []LeafCount {
	if len(m) == 0 {
		return nil
	}
	out := make([]LeafCount, 0, len(m))
	for l, n := range m {
		out = append(out, LeafCount{l, n})
	}
	slices.SortFunc(out, func(a, b LeafCount) int { return cmp.Compare(a.Leaf, b.Leaf) })
	return out
}

// mergeLeaves returns the leaf counts of a and b (both sorted) added up.
func mergeLeaves(a, b []LeafCount) []LeafCount {
	if len(b) == 0 {
		return slices.Clone(a)
	}
	out := make([]LeafCount, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].Leaf < b[j].Leaf:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Leaf < a[i].Leaf:
			out = append(out, b[j])
			j++
		default:
			out = append(out, LeafCount{a[i].Leaf, a[i].Count + b[j].Count})
			i++
			j++
		}
	}
	return out
}

// treeSensitivity is the sensitivity of the quantile trees of all groups:
// every node below the root at every level ℓ = 1 … D of every group's tree
// (the root is not released; Google's BoundedQuantiles does the same). One
// kept value adds 1 to one node per level, so with G groups and V values
// per group a unit moves, at level ℓ, at most min(V, B^ℓ) nodes of each
// group, each by at most V, and its moves at one level sum to at most V:
//
//	L0 = G·Σ_{ℓ=1..D} min(V, B^ℓ)   L∞ = V
//	L1 = G·D·V                      L2 = √(G·D)·V
//
// (L2: at one level the squares of non-negative moves summing to V sum to
// at most V², reached when all V values fall in one leaf.) Replacing one
// unit by another (a MaxUnits cap) doubles L0, L1 and L2² (the two units'
// moves have opposite signs, each bounded as above; a node both touch
// moves by at most V, so L∞ stays V).
//
// With a binding total bound t < G·V (MaxContributions: a unit's values
// over all groups number at most t) a unit adds n_g ≤ V values to group g,
// Σ n_g ≤ t, and at level ℓ touches at most min(n_g, B^ℓ) nodes of group
// g, each by at most n_g, moving them by n_g in all:
//
//	L0 = Σ_ℓ min(t, G·min(V, B^ℓ))   L∞ = min(V, t)
//	L1 = D·t                         L2 = √(D·(q·V² + r²))
//
// with q = min(G, ⌊t/V⌋) groups full and r = t − q·V in one more (the
// largest Σ n_g², as in totalSensitivity); each is reached (all of a
// group's values in one leaf for L1, L2 and L∞; spread over distinct
// leaves for L0). Replacing one unit doubles L0, L1 and L2² as above.
func treeSensitivity(g, v, t float64, b, d int, replace bool) Sensitivity {
	if t > 0 && t < mulUp(g, v) {
		return treeTotal(g, v, t, b, d, replace)
	}
	l0, width := 0.0, 1.0
	for range d {
		width *= float64(b)
		l0 += math.Min(v, width)
	}
	l0 *= g
	gd := g * float64(d)
	s := Sensitivity{L0: l0, Linf: v, L1: mulUp(gd, v), L2: mulUp(sqrtUp(gd), v)}
	if replace {
		s.L0 = 2 * l0
		s.L1 = mulUp(2*gd, v)
		s.L2 = mulUp(sqrtUp(2*gd), v)
	}
	return s
}

// treeTotal is treeSensitivity with a binding total bound t < G·V.
func treeTotal(g, v, t float64, b, d int, replace bool) Sensitivity {
	l0, width := 0.0, 1.0
	for range d {
		width *= float64(b)
		l0 += math.Min(t, g*math.Min(v, width))
	}
	df := float64(d)
	sq := mulUp(df, totalSq(g, v, t))
	s := Sensitivity{L0: l0, Linf: math.Min(v, t), L1: mulUp(df, t), L2: sqrtUp(sq), Total: true}
	if replace {
		s.L0, s.L1, s.L2 = 2*l0, mulUp(2*df, t), sqrtUp(mulUp(2, sq))
	}
	return s
}

// sqHalfRange bounds fl(d²) for d = fl(v − mid), v in [lower, upper]:
// |d| ≤ halfRange, and rounding is monotone, so fl(d²) ≤ fl(h²) ≤ h²
// rounded up.
func sqHalfRange(lower, upper float64) float64 {
	h := halfRange(lower, upper)
	return mulUp(h, h)
}
