package quantile

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/dpstream/dpstream/privacy/rng"
)

// pfProbabilities returns the exact output distribution of
// permute-and-flip with acceptance probabilities p (one candidate has
// p = 1): over the subsets S of candidates already rejected (a uniformly
// random next candidate among the rest, accepted with its p), by dynamic
// programming over the 2^n subsets.
func pfProbabilities(p []float64) []float64 {
	n := len(p)
	reach := make([]float64, 1<<n) // P(the first |S| visited are S, all rejected)
	reach[0] = 1
	out := make([]float64, n)
	for set := range reach {
		if reach[set] == 0 {
			continue
		}
		rest := n
		for j := range n {
			if set&(1<<j) != 0 {
				rest--
			}
		}
		for j := range n {
			if set&(1<<j) != 0 {
				continue
			}
			w := reach[set] / float64(rest)
			out[j] += w * p[j]
			reach[set|1<<j] += w * (1 - p[j])
		}
	}
	return out
}

// acceptance returns every edge's acceptance probability exp(−(s_j −
// s*)/(2Δ·scale)), computed independently of the package in float64 from
// the dense prefix counts (the tests' scales are dyadic, so ε' = 1/scale;
// Δ = max(q, 1−q)·V, or V when units are replaced).
func acceptance(e Exponential, leaves []LeafCount, o SelectOptions) []float64 {
	dense := make([]float64, e.Leaves)
	n := 0.0
	for _, l := range leaves {
		dense[l.Leaf] = float64(l.Count)
		n += float64(l.Count)
	}
	delta := math.Max(o.Rank, 1-o.Rank) * float64(o.Values)
	if o.Replace {
		delta = float64(o.Values)
	}
	score := make([]float64, e.Leaves+1)
	c, best := 0.0, math.Inf(1)
	for j := range score {
		if j > 0 {
			c += dense[j-1]
		}
		score[j] = math.Abs(c - o.Rank*n)
		best = math.Min(best, score[j])
	}
	p := make([]float64, len(score))
	for j, s := range score {
		p[j] = math.Exp(-(s - best) / (2 * delta * o.Scale))
	}
	return p
}

// TestExponentialDistribution compares n = 6·10⁴ draws of Select (keyed
// stream, fixed key) with the exact permute-and-flip distribution over
// the 8 edges of a 7-leaf histogram, by a chi-square test over the cells
// with expected count ≥ 20 (merged otherwise) at the 1 − 1e-6 quantile
// (Wilson–Hilferty; the standard normal 1 − 1e-6 quantile is 4.753):
// each case fails with probability about 1e-6. It fails when the
// acceptance exponent, the sensitivity or the order's uniformity is off.
func TestExponentialDistribution(t *testing.T) {
	n := 60_000
	if testing.Short() {
		n = 20_000
	}
	e := Exponential{Leaves: 7, Lower: 0, Upper: 7}
	hist := []LeafCount{{1, 3}, {2, 1}, {4, 2}, {6, 1}}
	cases := []struct {
		leaves []LeafCount
		o      SelectOptions
	}{
		{hist, SelectOptions{Rank: 0.5, Scale: 1, Values: 2}},
		{hist, SelectOptions{Rank: 0.9, Scale: 0.75, Values: 1}},
		{hist, SelectOptions{Rank: 0.2, Scale: 2.5, Values: 3, Replace: true}},
		{nil, SelectOptions{Rank: 0.5, Scale: 1, Values: 1}}, // no values: uniform
	}
	var key rng.Key
	key[0] = 7
	for ci, c := range cases {
		t.Run(fmt.Sprint(ci), func(t *testing.T) {
			want := pfProbabilities(acceptance(e, c.leaves, c.o))
			s := rng.NewStream(key, fmt.Sprintf("pf-test/%d", ci))
			got := make([]int, len(want))
			for range n {
				j, err := e.Select(s, c.leaves, c.o)
				if err != nil {
					t.Fatal(err)
				}
				got[j]++
			}
			chi, cells, eo, ee := 0.0, 0, 0.0, 0.0
			for j, p := range want {
				eo, ee = eo+float64(got[j]), ee+p*float64(n)
				if ee >= 20 {
					chi += (eo - ee) * (eo - ee) / ee
					cells++
					eo, ee = 0, 0
				}
			}
			if ee > 0 {
				chi += (eo - ee) * (eo - ee) / math.Max(ee, 1e-300)
			}
			v := float64(cells - 1)
			a := 2 / (9 * v)
			crit := v * math.Pow(1-a+4.753*math.Sqrt(a), 3)
			if chi > crit {
				t.Errorf("chi-square %.1f > %.1f over %d cells: got %v, want %v", chi, crit, cells, got, want)
			}
		})
	}
}

// TestExponentialRankError checks the stated bound: over 2000 draws (65
// leaves, 400 values, ε ≈ 0.2 per rank), the fraction of selections whose
// score exceeds the best by more than RankError(β = 0.2) stays below
// β + 5 standard deviations (false failure below 3e-7); and the bound is
// the tail formula 2Δ·ln((L+1)/β)/ε'.
func TestExponentialRankError(t *testing.T) {
	e := Exponential{Leaves: 64, Lower: 0, Upper: 1}
	var leaves []LeafCount
	for l := range 64 {
		if l%3 != 0 {
			leaves = append(leaves, LeafCount{uint32(l), int64(1 + l%7)})
		}
	}
	const draws, beta = 2000, 0.2
	var key rng.Key
	for _, o := range []SelectOptions{{Rank: 0.5, Scale: 5, Values: 2}, {Rank: 0.99, Scale: 5, Values: 1}} {
		bound, err := e.RankError(o, beta)
		if err != nil {
			t.Fatal(err)
		}
		delta, _ := o.Sensitivity().Float64()
		if want := 2 * delta * o.Scale * math.Log(65/beta); math.Abs(bound-want) > 1e-6*want || bound < want {
			t.Fatalf("rank error %g, want %g (rounded up)", bound, want)
		}
		sc, _ := e.newScores(leaves, o.Rank)
		best := sc.best()
		s := rng.NewStream(key, "pf-rank-error")
		miss := 0
		for range draws {
			j, err := e.Select(s, leaves, o)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := new(big.Rat).Sub(sc.score(sc.below(j)), best).Float64()
			if g > bound {
				miss++
			}
		}
		if f := float64(miss) / draws; f > beta+5*math.Sqrt(beta*(1-beta)/draws) {
			t.Errorf("rank %g: %d of %d selections beyond the bound %g", o.Rank, miss, draws, bound)
		}
	}
}

// TestExponentialReplay: the same stream id selects the same edges (the
// release's replay is byte-identical), and invalid arguments are errors.
func TestExponentialReplay(t *testing.T) {
	e := Exponential{Leaves: 1 << 16, Lower: 0, Upper: 100}
	leaves := []LeafCount{{10, 5}, {3000, 40}, {3001, 2}, {60000, 9}}
	o := SelectOptions{Rank: 0.9, Scale: 3, Values: 5}
	var key rng.Key
	first := make([]int, 20)
	s := rng.NewStream(key, "replay")
	for i := range first {
		first[i], _ = e.Select(s, leaves, o)
	}
	s = rng.NewStream(key, "replay")
	for i := range first {
		if j, _ := e.Select(s, leaves, o); j != first[i] {
			t.Fatalf("draw %d: %d, then %d", i, first[i], j)
		}
	}
	for _, bad := range []struct {
		leaves []LeafCount
		o      SelectOptions
	}{
		{[]LeafCount{{5, 1}, {5, 1}}, o},
		{[]LeafCount{{1 << 16, 1}}, o},
		{[]LeafCount{{5, 0}}, o},
		{leaves, SelectOptions{Rank: 1.5, Scale: 3, Values: 5}},
		{leaves, SelectOptions{Rank: 0.5, Scale: 0, Values: 5}},
		{leaves, SelectOptions{Rank: 0.5, Scale: 3, Values: 0}},
	} {
		if _, err := e.Select(s, bad.leaves, bad.o); err == nil {
			t.Errorf("%v %+v: no error", bad.leaves, bad.o)
		}
	}
}
