package windows

import "math"

// Sensitivity bounds how far one privacy unit can move one released vector
// (all groups of one aggregate of one window): the number of coordinates it
// can change (L0), the largest change of one coordinate (Linf), and the L1
// and L2 norms of the whole change. Every value is rounded up.
type Sensitivity struct {
	L0, L1, L2, Linf float64
	// Total is true when MaxContributions binds this vector: L1 and L2
	// are then below L0·L∞ and √L0·L∞, and a calibration should use them
	// (Laplace-like noise on L1, Gaussian noise on L2; see
	// totalSensitivity).
	Total bool
}

// Sensitivities holds the sensitivity of every vector a window hands over,
// derived from the bounds by Config.Sensitivities, never configured by hand.
// Vectors of disabled aggregates have zero sensitivity.
type Sensitivities struct {
	// Histogram: Group.Histogram of all groups (groups × NumBuckets cells).
	Histogram Sensitivity
	// Count: Group.Count of all groups.
	Count Sensitivity
	// Sum: Group.Sum of all groups (clamped values).
	Sum Sensitivity
	// MeanSum: Group.CentredSum of all groups, Σ(v − mid).
	MeanSum Sensitivity
	// Values: Group.Values of all groups, the mean's denominator.
	Values Sensitivity
	// Units: Group.Units of all groups (distinct contributing units), for
	// differentially private selection of which groups to release and for
	// the units aggregate.
	Units Sensitivity
	// SumSq: Group.CentredSqSum of all groups, Σ(v − mid)² (variance).
	SumSq Sensitivity
	// Tree: the nodes below the root of every group's quantile tree
	// (quantiles; see treeSensitivity).
	Tree Sensitivity
	// ReplaceOne is true when the bounds hold for replacing one unit by
	// another (a MaxUnits cap is set) rather than adding or removing one.
	ReplaceOne bool
}

// Sensitivities derives the sensitivity of every released vector from the
// bounds. For a vector whose coordinates one unit can each move within
// [lo, hi] (lo ≤ 0 ≤ hi), at most k of them:
//
//   - add/remove one unit: L0 = k, L∞ = max(−lo, hi), L1 = k·L∞,
//     L2 = √k·L∞;
//   - replace one unit (with a MaxUnits cap, keeping one unit can push out
//     another): L0 = 2k, L∞ = hi − lo, L1 = 2k·max(−lo, hi),
//     L2 = √(k·max((hi−lo)², 2·max(−lo, hi)²)) — a coordinate both units
//     touch moves by at most hi − lo, one only one of them touches by at
//     most max(−lo, hi).
//
// The per-vector (k, lo, hi), with G = MaxGroups, B = min(MaxBuckets,
// NumBuckets), P = MaxPerBucket, V = MaxValues, mid = Lower/2 + Upper/2 and
// h = max(Upper − mid, mid − Lower):
//
//	Histogram  k = G·B  [0, P]
//	Count      k = G    [0, V]
//	Values     k = G    [0, V]
//	Units      k = G    [0, 1]
//	Sum        k = G    [min(0, V·Lower), max(0, V·Upper)]
//	MeanSum    k = G    [−V·h, V·h]
//	SumSq      k = G    [0, V·h²]
//
// and the quantile tree's as documented at treeSensitivity. Values and
// MeanSum serve the variance as well as the mean. With MaxContributions
// T > 0, a unit's total over the histogram's cells, and over the groups
// its count's events and its values, is also at most T; see
// totalSensitivity for the histogram, the count and Values then, and
// valuedSensitivity for Sum, MeanSum and SumSq.
//
// With EventLevel every bound is 1 (one event touches one group, one cell,
// and has at most one value). The config must be valid.
func (c Config) Sensitivities() (Sensitivities, error) {
	if err := c.Validate(); err != nil {
		return Sensitivities{}, err
	}
	g, b, p, v := float64(c.MaxGroups), float64(min(c.MaxBuckets, c.NumBuckets)), float64(c.MaxPerBucket), float64(c.MaxValues)
	if c.EventLevel {
		g, b, p, v = 1, 1, 1, 1
	}
	replace := c.MaxUnits > 0 && !c.EventLevel
	s := Sensitivities{ReplaceOne: replace}
	t := float64(c.MaxContributions)
	if c.EventLevel {
		t = 0
	}
	if c.Histogram {
		s.Histogram = totalSensitivity(g*b, p, t, replace)
	}
	if c.Count {
		s.Count = totalSensitivity(g, v, t, replace)
	}
	if c.Sum || c.Mean || c.Variance {
		s.Values = totalSensitivity(g, v, t, replace)
	}
	if c.Sum {
		s.Sum = valuedSensitivity(g, v, min(0, c.Lower), max(0, c.Upper), t, replace)
	}
	if c.Mean || c.Variance {
		h := halfRange(c.Lower, c.Upper)
		s.MeanSum = valuedSensitivity(g, v, -h, h, t, replace)
	}
	if c.Variance {
		s.SumSq = valuedSensitivity(g, v, 0, sqHalfRange(c.Lower, c.Upper), t, replace)
	}
	if c.Quantiles {
		s.Tree = treeSensitivity(g, v, t, c.TreeBranching, c.TreeDepth, replace)
	}
	s.Units = vectorSensitivity(g, 0, 1, replace)
	return s, nil
}

// totalSensitivity is the sensitivity of a vector of k integer
// coordinates, each of which one unit moves within [0, a], with the unit's
// total over all of them at most t (t = 0: no total bound). When t < k·a
// (the total bound binds), with q = min(k, ⌊t/a⌋) coordinates at a and,
// if q < k, one more at r = t − q·a:
//
//   - add/remove one unit: L0 = min(k, t), L∞ = min(a, t), L1 = t,
//     L2 = √(q·a² + r²) — the largest ‖v‖₂ over integer vectors with at
//     most k coordinates in [0, a] summing to at most t: filling the
//     coordinates greedily maximises the convex ‖v‖₂² over that polytope,
//     whose vertices are such vectors (TestTotalSensitivityBrute checks
//     it by enumeration);
//   - replace one unit: the difference v − v′ of two such vectors, so
//     L0 = 2·min(k, t), L∞ = min(a, t), L1 = 2t and, as v, v′ ≥ 0 make
//     ⟨v, v′⟩ ≥ 0, L2² ≤ ‖v‖₂² + ‖v′‖₂² = 2(q·a² + r²).
//
// Otherwise it is vectorSensitivity(k, 0, a, replace), unchanged.
func totalSensitivity(k, a, t float64, replace bool) Sensitivity {
	if !(t > 0) || t >= mulUp(k, a) {
		return vectorSensitivity(k, 0, a, replace)
	}
	sq := totalSq(k, a, t)
	s := Sensitivity{L0: min(k, t), Linf: min(a, t), L1: t, L2: sqrtUp(sq), Total: true}
	if replace {
		s.L0, s.L1, s.L2 = 2*s.L0, 2*t, sqrtUp(mulUp(2, sq))
	}
	return s
}

// valuedSensitivity is the sensitivity of a vector of k groups, to each
// of which one unit adds at most v values, each in [lo, hi] (lo ≤ 0 ≤ hi;
// the group's coordinate is their sum), with at most t values over all
// groups (t = 0: no total bound). Without a binding total bound (t ≥ k·v)
// it is vectorSensitivity(k, v·lo, v·hi, replace), as documented at
// Config.Sensitivities. Otherwise, with a = max(−lo, hi) and c =
// totalSensitivity(k, v, t, replace) the sensitivity of the numbers of
// values per group, every one of these bounds holds, and the smallest is
// taken:
//
//   - a unit adds values to at most min(k, t) groups, at most m = min(v, t)
//     to each: vectorSensitivity(min(k, t), m·lo, m·hi, replace) (L0, L∞
//     and first bounds on L1 and L2);
//   - add/remove: a coordinate moves by at most a times the values added
//     to it, so L1 ≤ a·c.L1 = a·t and L2 ≤ a·c.L2;
//   - replace one unit: the change is v − v′ of two such vectors, L1 ≤
//     ‖v‖₁ + ‖v′‖₁ = a·c.L1 = 2a·t; L2 ≤ a·c.L2 when the values have one
//     sign (⟨v, v′⟩ ≥ 0, as for totalSensitivity), else ‖v‖₂ + ‖v′‖₂ = 2·a
//     times the add/remove c.L2.
func valuedSensitivity(k, v, lo, hi, t float64, replace bool) Sensitivity {
	if !(t > 0) || t >= mulUp(k, v) {
		return vectorSensitivity(k, mulDown(v, lo), mulUp(v, hi), replace)
	}
	m := min(v, t)
	s := vectorSensitivity(min(k, t), mulDown(m, lo), mulUp(m, hi), replace)
	a := max(-lo, hi)
	c := totalSensitivity(k, v, t, replace)
	l2 := mulUp(c.L2, a)
	if replace && lo < 0 && hi > 0 {
		l2 = mulUp(2, mulUp(totalSensitivity(k, v, t, false).L2, a))
	}
	s.L1, s.L2, s.Total = min(s.L1, mulUp(c.L1, a)), min(s.L2, l2), true
	return s
}

// totalSq is q·a² + r² rounded up, q = min(k, ⌊t/a⌋) and r = min(a, t −
// q·a) (0 when q = k): the largest squared L2 norm of k integer
// coordinates in [0, a] summing to at most t (see totalSensitivity).
func totalSq(k, a, t float64) float64 {
	q := min(k, math.Floor(t/a))
	r := 0.0
	if q < k {
		r = min(a, t-q*a) // exact: integers below 2^53
	}
	return addUp(mulUp(q, mulUp(a, a)), mulUp(r, r))
}

// midpoint is the centre used for Group.CentredSum: Lower/2 + Upper/2
// (halving is exact for normal floats and cannot overflow).
func midpoint(lower, upper float64) float64 { return lower/2 + upper/2 }

// halfRange bounds |fl(v − mid)| for v in [lower, upper]: floating-point
// subtraction is monotone, so fl(v − mid) lies in [fl(lower − mid),
// fl(upper − mid)].
func halfRange(lower, upper float64) float64 {
	mid := midpoint(lower, upper)
	return max(upper-mid, mid-lower)
}

// vectorSensitivity computes the bounds documented at Config.Sensitivities
// for k coordinates each moving within [lo, hi].
func vectorSensitivity(k, lo, hi float64, replace bool) Sensitivity {
	a := max(-lo, hi) // largest |contribution| of one unit to one coordinate
	if !replace {
		return Sensitivity{L0: k, Linf: a, L1: mulUp(k, a), L2: mulUp(sqrtUp(k), a)}
	}
	w := addUp(hi, -lo) // largest move of a coordinate both units touch
	per := max(mulUp(w, w), mulUp(2, mulUp(a, a)))
	return Sensitivity{L0: 2 * k, Linf: w, L1: mulUp(2*k, a), L2: sqrtUp(mulUp(k, per))}
}

// Combine returns the sensitivity of the concatenation of vectors with the
// given sensitivities, each holding for the same neighbouring relation:
// L0 and L1 add, L2 adds in squares, L∞ is the largest. Use it to analyse
// several aggregates of one window as one release.
func Combine(s ...Sensitivity) Sensitivity {
	var out Sensitivity
	sq := 0.0
	for _, x := range s {
		out.L0 = addUp(out.L0, x.L0)
		out.L1 = addUp(out.L1, x.L1)
		sq = addUp(sq, mulUp(x.L2, x.L2))
		out.Linf = max(out.Linf, x.Linf)
	}
	out.L2 = sqrtUp(sq)
	return out
}

// mulUp returns a·b rounded up (towards +∞): the FMA residual a·b − fl(a·b)
// is exact, and positive exactly when the rounded product is too small.
func mulUp(a, b float64) float64 {
	p := a * b
	if math.FMA(a, b, -p) > 0 {
		p = math.Nextafter(p, math.Inf(1))
	}
	return p
}

// mulDown returns a·b rounded down (towards −∞).
func mulDown(a, b float64) float64 {
	p := a * b
	if math.FMA(a, b, -p) < 0 {
		p = math.Nextafter(p, math.Inf(-1))
	}
	return p
}

// addUp returns a+b rounded up, using the exact TwoSum error term.
func addUp(a, b float64) float64 {
	s := a + b
	bb := s - a
	err := (a - (s - bb)) + (b - bb)
	if err > 0 {
		s = math.Nextafter(s, math.Inf(1))
	}
	return s
}

// sqrtUp returns √x rounded up: math.Sqrt is correctly rounded, and the FMA
// residual s² − x is negative exactly when s < √x.
func sqrtUp(x float64) float64 {
	s := math.Sqrt(x)
	if math.FMA(s, s, -x) < 0 {
		s = math.Nextafter(s, math.Inf(1))
	}
	return s
}
