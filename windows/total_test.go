package windows

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// vecs lists every integer vector of dimension d with coordinates in
// [0, a], at most k of them non-zero and summing to at most t.
func vecs(d, k, a, t int) [][]int {
	var out [][]int
	v := make([]int, d)
	var rec func(i, nz, sum int)
	rec = func(i, nz, sum int) {
		if i == d {
			out = append(out, append([]int(nil), v...))
			return
		}
		for x := 0; x <= a && sum+x <= t; x++ {
			if x > 0 && nz == k {
				break
			}
			v[i] = x
			nz1 := nz
			if x > 0 {
				nz1++
			}
			rec(i+1, nz1, sum+x)
		}
		v[i] = 0
	}
	rec(0, 0, 0)
	return out
}

// norms returns the L0, L1, squared L2 and L∞ norms of a − b (b nil: of a).
func norms(a, b []int) (l0, l1, sq, linf int) {
	for i, x := range a {
		if b != nil {
			x -= b[i]
		}
		if x < 0 {
			x = -x
		}
		if x > 0 {
			l0++
		}
		l1, sq, linf = l1+x, sq+x*x, max(linf, x)
	}
	return l0, l1, sq, linf
}

// worstNorms returns the largest L0, L1, squared L2 and L∞ over the
// vectors vs (add/remove) or over the differences of two of them
// (replace).
func worstNorms(vs [][]int, replace bool) [4]int {
	var w [4]int
	for i, v := range vs {
		if !replace {
			l0, l1, sq, li := norms(v, nil)
			w = [4]int{max(w[0], l0), max(w[1], l1), max(w[2], sq), max(w[3], li)}
			continue
		}
		for _, u := range vs[i:] {
			l0, l1, sq, li := norms(v, u)
			w = [4]int{max(w[0], l0), max(w[1], l1), max(w[2], sq), max(w[3], li)}
		}
	}
	return w
}

// totalSensitivity equals the largest norms over brute-force enumeration:
// of one unit's vector (add/remove; dimension k suffices) and of the
// difference of two units' vectors (replace one; dimension 2k lets their
// supports be disjoint). Reference: the enumeration itself, exact integer
// arithmetic.
func TestTotalSensitivityBrute(t *testing.T) {
	for k := 1; k <= 4; k++ {
		for a := 1; a <= 4; a++ {
			for tot := 0; tot <= k*a+1; tot++ {
				for _, replace := range []bool{false, true} {
					if replace && k > 2 {
						continue // pairs grow fast; k ≤ 2 covers the cases
					}
					d, lim := k, tot
					if replace {
						d = 2 * k
					}
					if tot == 0 {
						lim = k * a // unset: no total bound
					}
					w := worstNorms(vecs(d, k, a, lim), replace)
					got := totalSensitivity(float64(k), float64(a), float64(tot), replace)
					want := Sensitivity{L0: float64(w[0]), L1: float64(w[1]), L2: sqrtUp(float64(w[2])), Linf: float64(w[3])}
					name := fmt.Sprintf("k=%d a=%d t=%d replace=%v", k, a, tot, replace)
					// L2 may be one ulp above √ when the bound does not bind
					// (vectorSensitivity rounds √k·a up in two steps).
					l2ok := got.L2 == want.L2 || !got.Total && got.L2 == math.Nextafter(want.L2, math.Inf(1))
					if got.L0 != want.L0 || got.L1 != want.L1 || !l2ok || got.Linf != want.Linf {
						t.Errorf("%s: got %+v, enumeration %+v", name, got, want)
					}
					if got.L2*got.L2 < float64(w[2]) {
						t.Errorf("%s: L2 %v below √%d", name, got.L2, w[2])
					}
					if bind := tot > 0 && tot < k*a; got.Total != bind {
						t.Errorf("%s: Total %v, want %v", name, got.Total, bind)
					}
				}
			}
		}
	}
}

// totalCfg: one window, a histogram and a count, and a total bound of 5
// below both products (3 groups × 4 cells × 3 per cell; 3 groups × 4).
func totalCfg() Config {
	return Config{
		Size: 10 * time.Second, Histogram: true, NumBuckets: 8, Count: true,
		MaxGroups: 3, MaxBuckets: 4, MaxPerBucket: 3, MaxValues: 4, MaxContributions: 5,
	}
}

// The total bound is enforced independently of arrival order: 20
// shuffles (fixed seed) of the same events give byte-identical windows,
// and every unit's histogram and count totals are at most the bound while
// units below it keep everything. Fails without the enforcement (the
// totals reach 3·4·3 and 3·4).
func TestTotalOrderIndependent(t *testing.T) {
	cfg := totalCfg()
	r := rand.New(rand.NewPCG(5, 6))
	var events []Event
	for i := range 90 {
		events = append(events, Event{Offset: int64(i), Time: int64(r.IntN(10_000)),
			Unit: fmt.Sprint("u", r.IntN(4)), Group: fmt.Sprint("g", r.IntN(4)), Bucket: r.IntN(8)})
	}
	events = append(events, Event{Offset: 90, Time: 1, Unit: "small", Group: "g0", Bucket: 1},
		Event{Offset: 91, Time: 2, Unit: "small", Group: "g1", Bucket: 2})
	ref := encode(t, oneWindow(t, cfg, events))
	for i := range 20 {
		r.Shuffle(len(events), func(a, b int) { events[a], events[b] = events[b], events[a] })
		if got := encode(t, oneWindow(t, cfg, events)); !bytes.Equal(got, ref) {
			t.Fatalf("shuffle %d: the window differs", i)
		}
	}
	bound := int64(cfg.MaxContributions)
	for _, u := range []string{"u0", "u1", "u2", "u3", "small"} {
		var own []Event
		for _, e := range events {
			if e.Unit == u {
				own = append(own, e)
			}
		}
		w := oneWindow(t, cfg, own)
		var hist, count int64
		for _, g := range w.Groups {
			count += g.Count
			for _, c := range g.Histogram {
				hist += c
			}
		}
		want := bound
		if u == "small" {
			want = 2
		}
		if hist != want || count != want {
			t.Errorf("unit %s (%d events): histogram total %d, count total %d, want %d", u, len(own), hist, count, want)
		}
	}
}

// totalKeep keeps a uniformly random subset: over 30 000 seeds, the kept
// counts of slots of 3, 1 and 2 contributions under a bound of 2 follow
// the multivariate hypergeometric law (C(3,i)·C(1,j)·C(2,l)/C(6,2)).
// Pearson's χ² with 4 degrees of freedom is below 33.38, the 1 − 10⁻⁶
// quantile (scipy.stats.chi2.ppf(1 - 1e-6, 4)): a false failure rate of
// 10⁻⁶ for uniform draws; the seeds are fixed, so the outcome is too.
func TestTotalKeepUniform(t *testing.T) {
	const n = 30_000
	want := map[[3]uint32]float64{{2, 0, 0}: 3, {1, 1, 0}: 3, {1, 0, 1}: 6, {0, 1, 1}: 2, {0, 0, 2}: 1}
	got := map[[3]uint32]int{}
	r := rand.New(rand.NewPCG(9, 10))
	for range n {
		slots := []totalSlot{{key: "b", pos: 1, n: 1}, {key: "a", pos: 0, n: 3}, {key: "c", pos: 2, n: 2}}
		if d := totalKeep(r.Uint64(), 2, slots); d != 4 {
			t.Fatalf("dropped %d, want 4", d)
		}
		c := slotCounts(slots)
		got[[3]uint32(c)]++
	}
	chi := 0.0
	for k, p := range want {
		e := n * p / 15
		chi += (float64(got[k]) - e) * (float64(got[k]) - e) / e
	}
	if len(got) != len(want) || chi > 33.38 || math.IsNaN(chi) {
		t.Errorf("kept counts %v: χ² = %.2f (≤ 33.38 expected)", got, chi)
	}
	t.Logf("χ² = %.2f", chi)
}
