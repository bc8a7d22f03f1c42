package quantile

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/rng"
)

// treeData draws n values into [lower, upper] (a clipped mixture of two
// normals, with an atom at the upper bound) and returns them sorted with
// the tree's dense leaf counts.
func treeData(r *rand.Rand, q Tree, n int) ([]float64, []float64) {
	leaves := make([]float64, q.Leaves())
	vs := make([]float64, n)
	for i := range vs {
		var v float64
		switch r.IntN(10) {
		case 0:
			v = q.Upper
		case 1, 2, 3:
			v = 70 + 10*r.NormFloat64()
		default:
			v = 20 + 5*r.NormFloat64()
		}
		v = min(max(v, q.Lower), q.Upper)
		vs[i] = v
		x := (v - q.Lower) / (q.Upper - q.Lower) * float64(len(leaves))
		leaves[min(max(int(math.Floor(x)), 0), len(leaves)-1)]++
	}
	slices.Sort(vs)
	return vs, leaves
}

// trueQuantile is the ⌈rN⌉-th smallest value (at least the first).
func trueQuantile(sorted []float64, r float64) float64 {
	k := max(1, int(math.Ceil(r*float64(len(sorted)))))
	return sorted[k-1]
}

// Without noise, the consistent tree is the true tree, the estimates are
// the interpolated true quantiles (within one leaf of the ⌈rN⌉-th value)
// and the intervals with H = 0 are the quantile's leaf.
func TestQuantileTreeNoiseless(t *testing.T) {
	q := Tree{Branching: 4, Depth: 3, Lower: 0, Upper: 100}
	r := rand.New(rand.NewPCG(1, 2))
	vs, leaves := treeData(r, q, 1000)
	nodes := q.NodeCounts(leaves)
	if got := q.consistentLeaves(slices.Clone(nodes)); !slices.EqualFunc(got, leaves, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Fatalf("consistency changed a consistent tree")
	}
	ranks := []float64{0, 0.1, 0.5, 0.9, 0.99, 1}
	vals, lo, hi, total := q.Release(nodes, ranks, 0)
	if total != 1000 {
		t.Fatalf("total %g", total)
	}
	w := (q.Upper - q.Lower) / float64(q.Leaves())
	for k, rk := range ranks {
		tq := trueQuantile(vs, rk)
		if !(lo[k] <= tq && tq <= hi[k]) || hi[k]-lo[k] > w*(1+1e-9) {
			t.Errorf("rank %g: true %g, interval [%g, %g] (one leaf is %g wide)", rk, tq, lo[k], hi[k], w)
		}
		if math.Abs(vals[k]-tq) > w {
			t.Errorf("rank %g: estimate %g, true %g", rk, vals[k], tq)
		}
	}
}

// Hay et al.'s estimator is unbiased and never worse than the raw leaves
// for a prefix (their Theorem 4): over many noise draws the squared error
// of the consistent prefix count at the middle of the range is below the
// raw leaves' (which sum 32 noisy leaves), a check that the weights are
// right (wrong weights give a larger error or a bias).
func TestQuantileTreeConsistencyBeatsLeaves(t *testing.T) {
	q := Tree{Branching: 4, Depth: 3, Lower: 0, Upper: 100}
	r := rand.New(rand.NewPCG(3, 4))
	_, leaves := treeData(r, q, 500)
	nodes := q.NodeCounts(leaves)
	truth := 0.0
	for _, c := range leaves[:32] {
		truth += c
	}
	s := rng.NewStream(rng.Key{}, "dpstream/test/quantile-consistency")
	var eCons, eRaw, bias float64
	const trials = 4000
	for range trials {
		noised := slices.Clone(nodes)
		for i := range noised {
			noised[i] += privacy.DiscreteLaplace{}.Sample(s, 2)
		}
		cl := q.consistentLeaves(slices.Clone(noised))
		var c, raw float64
		for j := range 32 {
			c += cl[j]
			raw += noised[q.levelStart(q.Depth)+j]
		}
		eCons += (c - truth) * (c - truth)
		eRaw += (raw - truth) * (raw - truth)
		bias += c - truth
	}
	eCons, eRaw, bias = eCons/trials, eRaw/trials, bias/trials
	t.Logf("prefix of 32 leaves: consistent MSE %.1f, raw leaves MSE %.1f, consistent bias %.2f", eCons, eRaw, bias)
	// Var(raw) = 32·Var(DLap(2)) ≈ 32·7.5 = 240; the consistent estimate
	// of a level-2 aligned prefix uses the two level-1 nodes: far less.
	if !(eCons < eRaw/2) || math.Abs(bias) > 1 {
		t.Errorf("consistent MSE %.1f not below half the raw %.1f, or bias %.2f (tolerance 1: 4000 draws, sd ≈ 0.1)", eCons, eRaw, bias)
	}
}

// treeTrial noises the tree once and returns whether every rank's
// interval holds the true quantile, the released values and the largest
// rank error of a released value relative to its stated bound.
func treeTrial(q Tree, m privacy.Mechanism, scale, h float64, s *rng.Stream, vs, nodes, ranks []float64) (covered bool, vals []float64, worst float64) {
	noised := slices.Clone(nodes)
	for i := range noised {
		noised[i] += m.Sample(s, scale)
	}
	vals, lo, hi, _ := q.Release(noised, ranks, h)
	covered = true
	n := float64(len(vs))
	for k, rk := range ranks {
		tq := trueQuantile(vs, rk)
		if !(lo[k] <= tq && tq <= hi[k]) {
			covered = false
		}
		// True rank of the released value: between the number of values
		// strictly below it and the number at or below it, each widened by
		// a leaf (ranks are counted by leaf in the analysis).
		leaf := (q.Upper - q.Lower) / float64(q.Leaves())
		below := float64(sort.SearchFloat64s(vs, vals[k]-leaf))
		atOrBelow := float64(sort.Search(len(vs), func(i int) bool { return vs[i] > vals[k]+leaf }))
		err := math.Max(0, math.Max(below-rk*n, rk*n-atOrBelow))
		worst = math.Max(worst, err/RankError(rk, h))
	}
	return covered, vals, worst
}

// The stated intervals cover the true quantiles (all ranks at once) at
// least at the stated level, and every released quantile is within the
// stated rank error, for both exact integer mechanisms, several data
// sizes and tree shapes, over 300 noise draws each. The union bound makes
// the intervals conservative (a miss is far rarer than β = 0.05), so the
// test allows at most 30 misses of 300 (P(Bin(300, 0.05) > 30) ≈ 4e-4:
// the false-failure rate per case if the coverage were exactly 95%; the
// seeds are fixed, so the outcome is deterministic). The released values
// are non-decreasing in the rank.
func TestQuantileTreeCoverage(t *testing.T) {
	ranks := []float64{0.1, 0.5, 0.9, 0.99}
	const beta, trials = 0.05, 300
	for _, tc := range []struct {
		q     Tree
		m     privacy.Mechanism
		scale float64
		n     int
	}{
		{Tree{16, 2, 0, 100}, privacy.DiscreteLaplace{}, 4, 200},
		{Tree{16, 2, 0, 100}, privacy.DiscreteGaussian{}, 6, 5000},
		{Tree{4, 4, -10, 90}, privacy.DiscreteLaplace{}, 2, 1000},
		{Tree{16, 3, 0, 100}, privacy.DiscreteLaplace{}, 8, 20000},
	} {
		name := fmt.Sprintf("%s/B%d-D%d/n%d", tc.m.Name(), tc.q.Branching, tc.q.Depth, tc.n)
		t.Run(name, func(t *testing.T) {
			h, err := tc.q.RankBound(tc.m, tc.scale, beta)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(tc.n), 9))
			vs, leaves := treeData(r, tc.q, tc.n)
			nodes := tc.q.NodeCounts(leaves)
			s := rng.NewStream(rng.Key{}, "dpstream/test/quantile-coverage/"+name)
			misses, worst := 0, 0.0
			for range trials {
				ok, vals, w := treeTrial(tc.q, tc.m, tc.scale, h, s, vs, nodes, ranks)
				if !ok {
					misses++
				}
				worst = math.Max(worst, w)
				if !slices.IsSorted(vals) {
					t.Fatalf("released quantiles not monotone: %v", vals)
				}
			}
			t.Logf("H = %g; %d of %d draws missed a quantile; largest rank error %.3g of the stated bound", h, misses, trials, worst)
			if misses > 30 {
				t.Errorf("%d of %d draws missed (stated level %g)", misses, trials, 1-beta)
			}
			if worst > 1 {
				t.Errorf("a released quantile's rank error is %.3g times the stated bound", worst)
			}
		})
	}
}

// The coverage test can fail: intervals computed for half the noise that
// was actually added (H of scale/2… i.e. the scale halved in the bound)
// miss far more often, shown with a tight bound (β = 0.5, B = 2, D = 1:
// few sums, so the union bound is nearly exact).
func TestQuantileTreeCoverageDetectsWrongScale(t *testing.T) {
	q := Tree{Branching: 2, Depth: 1, Lower: 0, Upper: 100}
	r := rand.New(rand.NewPCG(5, 6))
	vs, leaves := treeData(r, q, 100)
	nodes := q.NodeCounts(leaves)
	ranks := []float64{0.5}
	hTrue, _ := q.RankBound(privacy.DiscreteLaplace{}, 20, 0.5)
	hHalf, _ := q.RankBound(privacy.DiscreteLaplace{}, 10, 0.5)
	s := rng.NewStream(rng.Key{}, "dpstream/test/quantile-wrong-scale")
	miss := map[string]int{}
	for range 2000 {
		for name, h := range map[string]float64{"true": hTrue, "half": hHalf} {
			if ok, _, _ := treeTrial(q, privacy.DiscreteLaplace{}, 20, h, s, vs, nodes, ranks); !ok {
				miss[name]++
			}
		}
	}
	t.Logf("misses of 2000: with the right scale %d, with half the scale in the bound %d (H %g vs %g)", miss["true"], miss["half"], hTrue, hHalf)
	if miss["half"] <= miss["true"] {
		t.Errorf("a bound for half the noise does not miss more often")
	}
}

// RankBound is a valid tail bound: the empirical P(|S_M| > H) over 200 000
// sums of M noises is ≤ β/L plus sampling error, checked where β/L is
// large enough to observe (B = 2, D = 1, β = 0.5: β/L = 0.25, M = 2).
// False-failure rate: the tolerance is 5 binomial standard deviations.
func TestRankBoundTail(t *testing.T) {
	q := Tree{Branching: 2, Depth: 1, Lower: 0, Upper: 1}
	s := rng.NewStream(rng.Key{}, "dpstream/test/rank-bound")
	for _, m := range []privacy.Mechanism{privacy.DiscreteLaplace{}, privacy.DiscreteGaussian{}} {
		const scale, beta, n = 3.0, 0.5, 200_000
		h, err := q.RankBound(m, scale, beta)
		if err != nil {
			t.Fatal(err)
		}
		over := 0
		for range n {
			if math.Abs(m.Sample(s, scale)+m.Sample(s, scale)) > h {
				over++
			}
		}
		p, target := float64(over)/n, beta/2
		t.Logf("%s: H = %g, P(|S| > H) ≈ %.4f ≤ %.4f", m.Name(), h, p, target)
		if p > target+5*math.Sqrt(target*(1-target)/n) {
			t.Errorf("%s: empirical tail %.4f above β/L = %.4f", m.Name(), p, target)
		}
	}
	if _, err := q.RankBound(privacy.Laplace{}, 1, 0.05); err == nil {
		t.Error("continuous Laplace accepted")
	}
}
