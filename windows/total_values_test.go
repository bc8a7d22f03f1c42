package windows

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// valuedSensitivity bounds the largest norms over brute-force enumeration
// and equals them for add/remove: one unit adds n_g ≤ v values to each of
// at most k groups, Σ n_g ≤ t, every value at lo or hi (the norms are
// convex in the values, so the extremes are the worst case); replacing one
// unit is the difference of two such vectors (dimension 2k). Reference:
// the enumeration, exact integer arithmetic; integer ranges of one sign
// and of both signs. L2 is rounded up in two steps (√ then ×a), so
// "tight" allows it 1e-15 relative above √ of the enumeration.
func TestValuedSensitivityBrute(t *testing.T) {
	type rng struct{ lo, hi int }
	for _, r := range []rng{{0, 3}, {-1, 2}, {-2, 2}, {-3, 0}} {
		for k := 1; k <= 3; k++ {
			for v := 1; v <= 3; v++ {
				for tot := 1; tot < k*v; tot++ {
					for _, replace := range []bool{false, true} {
						if replace && (k > 2 || v > 2) {
							continue // pairs grow fast
						}
						d := k
						if replace {
							d = 2 * k
						}
						var sums [][]int // every vector of group sums
						for _, n := range vecs(d, k, v, tot) {
							sums = append(sums, groupSums(n, r.lo, r.hi)...)
						}
						w := worstNorms(sums, replace) // L0, L1, L2², L∞
						got := valuedSensitivity(float64(k), float64(v), float64(r.lo), float64(r.hi), float64(tot), replace)
						name := fmt.Sprintf("[%d,%d] k=%d v=%d t=%d replace=%v", r.lo, r.hi, k, v, tot, replace)
						if !got.Total || got.L0 < float64(w[0]) || got.L1 < float64(w[1]) || got.L2*got.L2 < float64(w[2]) || got.Linf < float64(w[3]) {
							t.Errorf("%s: got %+v below the enumeration's %v", name, got, w)
						}
						if !replace && (got.L0 != float64(w[0]) || got.L1 != float64(w[1]) || got.L2 > sqrtUp(float64(w[2]))*(1+1e-15) || got.Linf != float64(w[3])) {
							t.Errorf("%s: got %+v, enumeration %v (add/remove is tight)", name, got, w)
						}
					}
				}
			}
		}
	}
	// Without a binding bound: vectorSensitivity of the per-group range.
	if got, want := valuedSensitivity(3, 2, -1, 4, 6, false), vectorSensitivity(3, -2, 8, false); got != want {
		t.Errorf("t = k·v: %+v, want %+v", got, want)
	}
}

// groupSums returns every vector of group sums when group g gets n[g]
// values, each lo or hi.
func groupSums(n []int, lo, hi int) [][]int {
	out := [][]int{make([]int, len(n))}
	for g, c := range n {
		var next [][]int
		for _, s := range out {
			for j := 0; j <= c; j++ { // j values at lo, the rest at hi
				x := append([]int(nil), s...)
				x[g] = j*lo + (c-j)*hi
				next = append(next, x)
			}
		}
		out = next
	}
	return out
}

// The total bound caps a unit's values over its groups (sums, means,
// variances) as it caps its count: with and without the count
// configured, every unit keeps at most the bound's values in all, as many
// as its count keeps events (every event has a value here), and the
// window does not depend on the arrival order (20 shuffles, fixed seed).
// Fails without the cap on the values (the totals reach 3 groups × 4).
func TestTotalValues(t *testing.T) {
	base := totalCfg()
	base.Sum, base.Mean, base.Variance, base.Lower, base.Upper = true, true, true, -5, 5
	valuesOnly := base
	valuesOnly.Histogram, valuesOnly.Count = false, false
	r := rand.New(rand.NewPCG(7, 8))
	var events []Event
	for i := range 90 {
		events = append(events, Event{Offset: int64(i), Time: int64(r.IntN(10_000)), Unit: fmt.Sprint("u", r.IntN(4)),
			Group: fmt.Sprint("g", r.IntN(4)), Bucket: r.IntN(8), Value: float64(r.IntN(21) - 10), HasValue: true})
	}
	for name, cfg := range map[string]Config{"with count": base, "values only": valuesOnly} {
		ref := encode(t, oneWindow(t, cfg, events))
		ev := append([]Event(nil), events...)
		for i := range 20 {
			r.Shuffle(len(ev), func(a, b int) { ev[a], ev[b] = ev[b], ev[a] })
			if got := encode(t, oneWindow(t, cfg, ev)); !bytes.Equal(got, ref) {
				t.Fatalf("%s: shuffle %d: the window differs", name, i)
			}
		}
		for _, u := range []string{"u0", "u1", "u2", "u3"} {
			var own []Event
			for _, e := range events {
				if e.Unit == u {
					own = append(own, e)
				}
			}
			w := oneWindow(t, cfg, own)
			var values, count int64
			var sum float64
			for _, g := range w.Groups {
				values, count, sum = values+g.Values, count+g.Count, sum+g.Sum
			}
			if values != int64(cfg.MaxContributions) || (cfg.Count && count != values) {
				t.Errorf("%s: unit %s (%d events): %d values, count %d, want %d", name, u, len(own), values, count, cfg.MaxContributions)
			}
			if math.Abs(sum) > float64(values)*5 {
				t.Errorf("%s: unit %s: sum %v beyond %d values in [-5, 5]", name, u, sum, values)
			}
		}
	}
}
