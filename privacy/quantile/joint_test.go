package quantile

import (
	"fmt"
	"math"
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
	prefix := make([]float64, L+1)
	for _, l := range leaves {
		for j := int(l.Leaf) + 1; j <= L; j++ {
			prefix[j] += float64(l.Count)
		}
	}
	n := prefix[L]
	delta := 2 * float64(o.Values)
	if o.Replace {
		delta *= 2
	}
	gamma := 1 / (o.Scale * 2 * delta)
	out := make([]float64, len(ts))
	for ti, t := range ts {
		c, prevC, prevQ := 0.0, 0.0, 0.0
		for i := 0; i <= len(t); i++ {
			cur, q := n, 1.0
			if i < len(t) {
				cur, q = prefix[t[i]], o.Ranks[i]
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
}

// TestJointDistribution compares n = 4·10⁴ draws of Select (keyed stream,
// fixed key: deterministic) with the exact π over every tuple (float64,
// relative error ~1e-15, negligible against the test's resolution) by a
// chi-square test at the 1 − 1e-6 quantile: each case fails with
// probability about 1e-6 under a correct sampler.
func TestJointDistribution(t *testing.T) {
	n := 40_000
	if testing.Short() {
		n = 10_000
	}
	var key rng.Key
	key[0] = 20
	for ci, c := range jointCases {
		t.Run(fmt.Sprint(ci), func(t *testing.T) {
			e := Joint{Leaves: c.leaves, Lower: 0, Upper: float64(c.leaves)}
			ts := tuples(c.leaves, len(c.o.Ranks))
			index := map[string]int{}
			for i, tu := range ts {
				index[fmt.Sprint(tu)] = i
			}
			want := normalise(jointLogWeights(c.leaves, c.hist, c.o, ts))
			s := rng.NewStream(key, fmt.Sprintf("joint-test/%d", ci))
			got := make([]int, len(ts))
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
			chi, crit, cells := chiSquare(got, want, n)
			if chi > crit {
				t.Errorf("chi-square %.1f > %.1f over %d cells", chi, crit, cells)
			}
			t.Logf("chi-square %.1f (critical %.1f, %d cells, %d tuples)", chi, crit, cells, len(ts))
		})
	}
}
