package quantile

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/dpstream/dpstream/privacy/rng"
)

// tuples returns every non-decreasing k-tuple of edges 0 … L.
func tuples(L, k int) [][]int {
	var out [][]int
	cur := make([]int, k)
	var rec func(i, lo int)
	rec = func(i, lo int) {
		if i == k {
			out = append(out, append([]int(nil), cur...))
			return
		}
		for j := lo; j <= L; j++ {
			cur[i] = j
			rec(i+1, j)
		}
	}
	rec(0, 0)
	return out
}

// jointLogWeights returns −γ·c(t) for every tuple, computed independently
// of the package in float64 from the dense prefix counts (γ =
// 1/(scale·2Δ) for the tests' dyadic scales, Δ = 2V or 4V).
func jointLogWeights(L int, leaves []LeafCount, o JointOptions, ts [][]int) []float64 {
	delta := 2 * float64(o.Values)
	if o.Replace {
		delta *= 2
	}
	return jointLogWeightsAt(L, leaves, o.Ranks, 1/(o.Scale*2*delta), ts)
}

// jointLogWeightsAt returns −γ·c(t) for every tuple at the given γ.
func jointLogWeightsAt(L int, leaves []LeafCount, ranks []float64, gamma float64, ts [][]int) []float64 {
	prefix := make([]float64, L+1)
	for _, l := range leaves {
		for j := int(l.Leaf) + 1; j <= L; j++ {
			prefix[j] += float64(l.Count)
		}
	}
	n := prefix[L]
	out := make([]float64, len(ts))
	for ti, t := range ts {
		c, prevC, prevQ := 0.0, 0.0, 0.0
		for i := 0; i <= len(t); i++ {
			cur, q := n, 1.0
			if i < len(t) {
				cur, q = prefix[t[i]], ranks[i]
			}
			c += math.Abs(cur - prevC - (q-prevQ)*n)
			prevC, prevQ = cur, q
		}
		out[ti] = -gamma * c
	}
	return out
}

// normalise returns exp(lw) / Σ exp(lw).
func normalise(lw []float64) []float64 {
	top := math.Inf(-1)
	for _, x := range lw {
		top = math.Max(top, x)
	}
	p, sum := make([]float64, len(lw)), 0.0
	for i, x := range lw {
		p[i] = math.Exp(x - top)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// chiSquare returns the chi-square statistic of counts against
// probabilities p over n draws, merging cells (in order) until each
// expects at least 20, and its 1 − 1e-6 critical value (Wilson–Hilferty,
// z = 4.753).
func chiSquare(got []int, p []float64, n int) (chi, crit float64, cells int) {
	eo, ee := 0.0, 0.0
	for j, pj := range p {
		eo, ee = eo+float64(got[j]), ee+pj*float64(n)
		if ee >= 20 {
			chi += (eo - ee) * (eo - ee) / ee
			cells++
			eo, ee = 0, 0
		}
	}
	if ee > 0 || eo > 0 {
		chi += (eo - ee) * (eo - ee) / math.Max(ee, 1e-300)
	}
	v := float64(max(cells-1, 1))
	a := 2 / (9 * v)
	return chi, v * math.Pow(1-a+4.753*math.Sqrt(a), 3), cells
}

// jointCase is one distribution test case.
type jointCase struct {
	leaves int
	hist   []LeafCount
	o      JointOptions
}

// draws returns the counts of n Selects of c from s over every tuple,
// and π over the same tuples.
func (c jointCase) draws(t *testing.T, s *rng.Stream, n int) (got []int, want []float64) {
	t.Helper()
	e := Joint{Leaves: c.leaves, Lower: 0, Upper: float64(c.leaves)}
	ts := tuples(c.leaves, len(c.o.Ranks))
	index := map[string]int{}
	for i, tu := range ts {
		index[fmt.Sprint(tu)] = i
	}
	got = make([]int, len(ts))
	for range n {
		j, err := e.Select(s, c.hist, c.o)
		if err != nil {
			t.Fatal(err)
		}
		i, ok := index[fmt.Sprint(j)]
		if !ok {
			t.Fatalf("Select returned %v, not a non-decreasing tuple of edges", j)
		}
		got[i]++
	}
	return got, normalise(jointLogWeights(c.leaves, c.hist, c.o, ts))
}

// jointCases are small histograms with repeated groups (several ranks in
// one group: equal ranks, ranks 0 and 1, a wide empty run), k = 1, 2, 3.
var jointCases = []jointCase{
	{6, []LeafCount{{1, 3}, {2, 1}, {4, 2}}, JointOptions{Ranks: []float64{0.5}, Scale: 1, Values: 1}},
	{6, []LeafCount{{1, 3}, {2, 1}, {4, 2}}, JointOptions{Ranks: []float64{0.25, 0.75}, Scale: 0.5, Values: 1}},
	{5, []LeafCount{{0, 2}, {3, 5}}, JointOptions{Ranks: []float64{0, 0.5, 1}, Scale: 0.25, Values: 1}},
	{8, []LeafCount{{2, 1}, {3, 1}, {7, 4}}, JointOptions{Ranks: []float64{0.3, 0.3, 0.9}, Scale: 0.5, Values: 2}},
	{4, nil, JointOptions{Ranks: []float64{0.1, 0.2}, Scale: 1, Values: 1}}, // no values: uniform over tuples
	{7, []LeafCount{{3, 6}}, JointOptions{Ranks: []float64{0.5, 0.9, 0.99}, Scale: 0.125, Values: 1, Replace: true}},
	{12, []LeafCount{{0, 1}, {1, 2}, {5, 3}, {6, 1}, {11, 2}}, JointOptions{Ranks: []float64{0.2, 0.6}, Scale: 0.25, Values: 1}},
	{1, []LeafCount{{0, 3}}, JointOptions{Ranks: []float64{0.5, 0.5}, Scale: 1, Values: 1}}, // one leaf, two edges
	// γ = 1, N = 4097: weights down to e^−8000, below float64's range.
	{6, []LeafCount{{1, 2000}, {3, 2001}, {4, 96}}, JointOptions{Ranks: []float64{0.49, 0.5}, Scale: 0.25, Values: 1}},
}

// TestJointDistribution compares n = 3·10⁴ draws of Select (keyed stream,
// fixed key: deterministic) with the exact π over every tuple (float64,
// relative error ~1e-15, negligible against the test's resolution) by a
// chi-square test at the 1 − 1e-6 quantile: each case fails with
// probability about 1e-6 under a correct sampler.
func TestJointDistribution(t *testing.T) {
	n := 30_000
	if testing.Short() {
		n = 10_000
	}
	var key rng.Key
	key[0] = 20
	for ci, c := range jointCases {
		t.Run(fmt.Sprint(ci), func(t *testing.T) {
			got, want := c.draws(t, rng.NewStream(key, fmt.Sprintf("joint-test/%d", ci)), n)
			chi, crit, cells := chiSquare(got, want, n)
			if chi > crit {
				t.Errorf("chi-square %.1f > %.1f over %d cells", chi, crit, cells)
			}
			t.Logf("chi-square %.1f (critical %.1f, %d cells, %d tuples)", chi, crit, cells, len(want))
		})
	}
}

// TestJointReplay: the same stream id selects the same tuples (a replay
// of a release is byte-identical), and invalid arguments are errors
// wrapping ErrSelect.
func TestJointReplay(t *testing.T) {
	e := Joint{Leaves: 1 << 16, Lower: 0, Upper: 100}
	leaves := []LeafCount{{10, 5}, {3000, 40}, {3001, 2}, {60000, 9}}
	o := JointOptions{Ranks: []float64{0.5, 0.9, 0.99}, Scale: 3, Values: 5}
	var key rng.Key
	first := make([][]int, 20)
	s := rng.NewStream(key, "joint-replay")
	for i := range first {
		var err error
		if first[i], err = e.Select(s, leaves, o); err != nil {
			t.Fatal(err)
		}
	}
	s = rng.NewStream(key, "joint-replay")
	for i := range first {
		if j, _ := e.Select(s, leaves, o); fmt.Sprint(j) != fmt.Sprint(first[i]) {
			t.Fatalf("draw %d: %v, then %v", i, first[i], j)
		}
	}
	many := make([]float64, MaxJointRanks+1)
	for _, bad := range []struct {
		leaves []LeafCount
		o      JointOptions
	}{
		{[]LeafCount{{5, 1}, {5, 1}}, o},
		{[]LeafCount{{1 << 16, 1}}, o},
		{[]LeafCount{{5, 0}}, o},
		{leaves, JointOptions{Ranks: []float64{0.5, 1.5}, Scale: 3, Values: 5}},
		{leaves, JointOptions{Ranks: []float64{0.9, 0.5}, Scale: 3, Values: 5}},
		{leaves, JointOptions{Ranks: nil, Scale: 3, Values: 5}},
		{leaves, JointOptions{Ranks: many, Scale: 3, Values: 5}},
		{leaves, JointOptions{Ranks: []float64{0.5}, Scale: 0, Values: 5}},
		{leaves, JointOptions{Ranks: []float64{0.5}, Scale: 3, Values: 0}},
	} {
		if _, err := e.Select(s, bad.leaves, bad.o); !errors.Is(err, ErrSelect) {
			t.Errorf("%v %+v: error %v, want ErrSelect", bad.leaves, bad.o, err)
		}
	}
	if _, err := (Joint{Leaves: MaxJointLeaves + 1, Upper: 1}).Select(s, leaves, o); !errors.Is(err, ErrSelect) {
		t.Errorf("%d leaves: error %v, want ErrSelect", MaxJointLeaves+1, err)
	}
	// γ·N = 2⁴⁰ (γ = 1/(2⁻¹⁰·4) = 256, N = 2³²): weights down to
	// 2^(−3·10¹²), beyond float64 and big.Float, are sampled, and only the
	// two tuple shapes of the least loss 0.6·N have any chance (a loss
	// one more has e^−256 the weight): (group 0, group 1) or (group 1,
	// group 2) with groups [0, 7], [8, 9], [10, L]. γ·N = 2⁶¹ is refused.
	huge := JointOptions{Ranks: []float64{0.3, 0.7}, Scale: 0x1p-10, Values: 1}
	for range 20 {
		j, err := e.Select(s, []LeafCount{{7, 1 << 31}, {9, 1 << 31}}, huge)
		if err != nil || !(j[0] <= 7 && j[1] >= 8 && j[1] <= 9 || j[0] >= 8 && j[0] <= 9 && j[1] >= 10) {
			t.Fatalf("γN = 2^40: %v, %v; want a tuple of the least loss", j, err)
		}
	}
	if _, err := e.Select(s, []LeafCount{{7, 1 << 53}}, huge); !errors.Is(err, ErrSelect) {
		t.Errorf("γN = 2^61: error %v, want ErrSelect", err)
	}
}

// TestJointRankError checks RankError's formula (ln C(L+k, k) +
// ln(1/β))/γ, rounded up, against math.Lgamma, and the stated tail: over
// 1000 draws on a 64-leaf histogram, the fraction whose loss exceeds the
// smallest loss (found by enumerating the C(66, 2) = 2145 tuples) by more
// than RankError(β = 0.2) stays below β + 5 standard deviations (false
// failure below 3e-7), and no rank's error exceeds the tuple's loss.
func TestJointRankError(t *testing.T) {
	e := Joint{Leaves: 64, Lower: 0, Upper: 1}
	var leaves []LeafCount
	for l := range 64 {
		if l%3 != 0 {
			leaves = append(leaves, LeafCount{uint32(l), int64(1 + l%7)})
		}
	}
	o := JointOptions{Ranks: []float64{0.5, 0.9}, Scale: 2, Values: 2}
	const draws, beta = 1000, 0.2
	bound, err := e.RankError(o, beta)
	if err != nil {
		t.Fatal(err)
	}
	gamma := 1 / (o.Scale * 2 * 2 * float64(o.Values))
	lc, _ := math.Lgamma(67)
	l1, _ := math.Lgamma(3)
	l2, _ := math.Lgamma(65)
	if want := (lc - l1 - l2 + math.Log(1/beta)) / gamma; bound < want || bound > want*(1+1e-8) {
		t.Fatalf("rank error %g, want %g (rounded up)", bound, want)
	}
	ts := tuples(64, 2)
	lw := jointLogWeights(64, leaves, o, ts)
	best := math.Inf(1)
	for _, x := range lw {
		best = math.Min(best, -x/gamma)
	}
	loss := map[string]float64{}
	for i, tu := range ts {
		loss[fmt.Sprint(tu)] = -lw[i] / gamma
	}
	dp := make([]float64, 65) // prefix counts
	for _, l := range leaves {
		for j := int(l.Leaf) + 1; j <= 64; j++ {
			dp[j] += float64(l.Count)
		}
	}
	s := rng.NewStream(rng.Key{}, "joint-rank-error")
	miss := 0
	for range draws {
		j, err := e.Select(s, leaves, o)
		if err != nil {
			t.Fatal(err)
		}
		c := loss[fmt.Sprint(j)]
		if c-best > bound {
			miss++
		}
		for i, q := range o.Ranks {
			if d := math.Abs(dp[j[i]] - q*dp[64]); d > c+1e-9 {
				t.Fatalf("rank %g: error %g above the loss %g", q, d, c)
			}
		}
	}
	if f := float64(miss) / draws; f > beta+5*math.Sqrt(beta*(1-beta)/draws) {
		t.Errorf("%d of %d selections beyond the bound %g", miss, draws, bound)
	}
	if _, err := e.RankError(o, 0); !errors.Is(err, ErrSelect) {
		t.Errorf("β = 0: error %v", err)
	}
}

// TestJointDistributionRefined is TestJointDistribution's cases 3 and 6
// (repeated groups, several ranks per block) with the acceptance coin's
// first comparison at 2 bits, so that nearly every acceptance goes
// through the refinement (n = 10⁴ each; 1 − 1e-6 chi-square quantile).
func TestJointDistributionRefined(t *testing.T) {
	defer func(p uint) { coinStartPrec = p }(coinStartPrec)
	coinStartPrec = 2
	const n = 10_000
	for _, ci := range []int{3, 6} {
		got, want := jointCases[ci].draws(t, rng.NewStream(rng.Key{}, fmt.Sprintf("joint-refined/%d", ci)), n)
		if chi, crit, cells := chiSquare(got, want, n); chi > crit {
			t.Errorf("case %d: chi-square %.1f > %.1f over %d cells", ci, chi, crit, cells)
		}
	}
}

// TestJointMessages checks the backward messages directly: the first
// step's weights sum (Σ'·2^(E−K), from the integers the proposal draws
// from) to the brute-force normaliser Σ_t exp(−γ·c(t)) of every
// jointCase within a relative 1e-12 (float64 rounding of the reference
// and the messages is ~1e-15). A wrong split point, window or multiset
// count fails it even where the exact rejection would hide the error in
// the output distribution (at a lower acceptance rate or an error).
func TestJointMessages(t *testing.T) {
	for ci, c := range jointCases {
		e := Joint{Leaves: c.leaves, Lower: 0, Upper: float64(c.leaves)}
		dp, err := e.prepare(c.hist, c.o)
		if err != nil {
			t.Fatal(err)
		}
		want := 0.0
		for _, x := range jointLogWeights(c.leaves, c.hist, c.o, tuples(c.leaves, len(c.o.Ranks))) {
			want += math.Exp(x)
		}
		d := &jointDraw{num: big.NewInt(1), den: big.NewInt(1)}
		if _, _, err := dp.step(rng.NewStream(rng.Key{}, "m"), 1, -1, 0, d, make([]xfloat, dp.candidates)); err != nil {
			t.Fatal(err)
		}
		f, _ := new(big.Float).SetInt(d.sum0).Float64()
		got := math.Ldexp(f, int(d.shift0))
		if math.Abs(got-want) > 1e-12*want {
			t.Errorf("case %d: normaliser %.15g, want %.15g", ci, got, want)
		}
	}
}

// TestJointPowTables: pow's tables are built (every count difference
// below 2²⁴ takes one product, not a product per bit) and agree with
// powBits within both depths (the products differ in order), at a depth
// within the bound jump assumes.
func TestJointPowTables(t *testing.T) {
	leaves := []LeafCount{{3, 100_000}, {9, 250_000}}
	dp, err := Joint{Leaves: 16, Upper: 1}.prepare(leaves, JointOptions{Ranks: []float64{0.5}, Scale: 1, Values: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(dp.powTab) != powTabSize || len(dp.powHigh) != int(dp.n/powTabSize)+1 {
		t.Fatalf("tables of %d and %d powers", len(dp.powTab), len(dp.powHigh))
	}
	for _, n := range []int64{0, 1, 4095, 4096, 4097, 123_457, dp.n} {
		got, want := dp.pow(n), dp.powBits(n)
		rel := math.Ldexp(got.m, int(got.e-want.e))/want.m - 1 // both within their depths of β^n
		if math.Abs(rel) > float64(got.d+want.d)*unitRoundoff || int64(got.d) > dp.maxJump-3 {
			t.Errorf("pow(%d) = %v, powBits %v (depth bound %d)", n, got, want, dp.maxJump-3)
		}
	}
}
