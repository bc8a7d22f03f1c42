package windows

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// treeCfg has every aggregate of issue 11 on, with a small tree.
func treeCfg() Config {
	return Config{
		Size: 10 * time.Second, AllowedLateness: time.Second,
		Units: true, Variance: true, Quantiles: true, TreeBranching: 4, TreeDepth: 3,
		MaxGroups: 2, MaxValues: 3, Lower: -5, Upper: 5,
	}
}

// treeWindow adds evs (all in window [0, 10 s), partition 0) and returns
// the window.
func treeWindow(t *testing.T, cfg Config, evs []Event) Window {
	t.Helper()
	tu, err := New(cfg, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	if err := tu.EmitFrom(0); err != nil {
		t.Fatal(err)
	}
	tu.AssignPartitions(0)
	for _, e := range evs {
		if st, _ := tu.Add(e); st != Accepted {
			t.Fatalf("event %+v: %v", e, st)
		}
	}
	if err := tu.Advance(0, 100_000); err != nil {
		t.Fatal(err)
	}
	ws := tu.Poll(1)
	if len(ws) != 1 {
		t.Fatalf("%d windows", len(ws))
	}
	return ws[0]
}

// The leaves and the centred sum of squares of a group hold exactly the
// kept clamped values: checked against a direct computation over the
// events (every unit within its bounds, so every value is kept), in unit
// mode and at event level.
func TestTreeStateHoldsKeptValues(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var evs []Event
	for i := range 200 {
		evs = append(evs, Event{
			Offset: int64(i), Time: int64(r.IntN(9_000)), Arrival: 9_500, Unit: string(rune('a'+i%50)) + string(rune('a'+i/50)),
			Group: []string{"x", "y"}[i%2], Bucket: -1, Value: r.NormFloat64() * 4, HasValue: true,
		})
	}
	for _, eventLevel := range []bool{false, true} {
		cfg := treeCfg()
		cfg.EventLevel = eventLevel
		w := treeWindow(t, cfg, evs)
		leaves := cfg.TreeLeaves()
		if leaves != 64 {
			t.Fatalf("TreeLeaves = %d, want 4^3", leaves)
		}
		for _, g := range w.Groups {
			want := map[uint32]int64{}
			var sq exactSum
			mid := midpoint(cfg.Lower, cfg.Upper)
			for _, e := range evs {
				if e.Group != g.Key {
					continue
				}
				v := min(max(e.Value, cfg.Lower), cfg.Upper)
				want[LeafOf(v, cfg.Lower, cfg.Upper, leaves)]++
				d := v - mid
				sq.add(d * d)
			}
			sq.canon()
			if got := leafCounts(want); !slices.Equal(g.Leaves, got) {
				t.Errorf("event level %v, group %s: leaves %v, want %v", eventLevel, g.Key, g.Leaves, got)
			}
			if g.CentredSqSum != sq.value() {
				t.Errorf("event level %v, group %s: centred sum of squares %v, want %v", eventLevel, g.Key, g.CentredSqSum, sq.value())
			}
			if g.Units != 100 && !eventLevel || eventLevel && g.Units != 100 {
				t.Errorf("group %s: %d units, want 100", g.Key, g.Units)
			}
		}
		// The encoding round-trips the new fields.
		b, err := w.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back Window
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		b2, _ := back.MarshalBinary()
		if !bytes.Equal(b, b2) || back.Groups[0].CentredSqSum != w.Groups[0].CentredSqSum || !slices.Equal(back.Groups[1].Leaves, w.Groups[1].Leaves) {
			t.Errorf("event level %v: window encoding does not round-trip the tree and the sum of squares", eventLevel)
		}
	}
}

// LeafOf puts the bounds in the first and last leaf, every leaf's left
// edge in that leaf, and is monotone.
func TestLeafOf(t *testing.T) {
	const lo, hi, n = -5.0, 5.0, 64
	if LeafOf(lo, lo, hi, n) != 0 || LeafOf(hi, lo, hi, n) != n-1 {
		t.Fatal("bounds not in the end leaves")
	}
	prev := uint32(0)
	for i := range n {
		x := lo + (hi-lo)*float64(i)/n
		if l := LeafOf(x, lo, hi, n); l != uint32(i) {
			t.Errorf("left edge of leaf %d (%v) is in leaf %d", i, x, l)
		}
	}
	for x := lo; x <= hi; x += 0.001 {
		l := LeafOf(x, lo, hi, n)
		if l < prev {
			t.Fatalf("LeafOf not monotone at %v", x)
		}
		prev = l
	}
}

// treeSensitivity matches a brute-force maximisation over every way one
// unit can place its V values in the leaves of one group's tree (B = 3,
// D = 2, V = 1 … 4; the tree's node counts below the root), and scales
// with G and the replace-one relation as documented.
func TestTreeSensitivityBruteForce(t *testing.T) {
	const b, d = 3, 2
	leaves := 9
	for v := 1; v <= 4; v++ {
		var l0, l1, l2sq, linf float64
		// Enumerate multisets of v leaves as non-decreasing sequences.
		var rec func(start int, left int, cur []int)
		rec = func(start, left int, cur []int) {
			if left == 0 {
				nodes := map[[2]int]float64{}
				for _, leaf := range cur {
					nodes[[2]int{2, leaf}]++     // level 2: the leaf
					nodes[[2]int{1, leaf / b}]++ // level 1: its parent
				}
				var s1, s2, sInf float64
				for _, c := range nodes {
					s1 += c
					s2 += c * c
					sInf = max(sInf, c)
				}
				l0, l1, l2sq, linf = max(l0, float64(len(nodes))), max(l1, s1), max(l2sq, s2), max(linf, sInf)
				return
			}
			for l := start; l < leaves; l++ {
				rec(l, left-1, append(cur, l))
			}
		}
		rec(0, v, nil)
		got := treeSensitivity(1, float64(v), 0, b, d, false)
		if got.L0 != l0 || got.L1 != l1 || got.Linf != linf || math.Abs(got.L2-math.Sqrt(l2sq)) > 1e-12 {
			t.Errorf("V=%d: %+v, brute force L0=%g L1=%g L2=%g L∞=%g", v, got, l0, l1, math.Sqrt(l2sq), linf)
		}
		g3 := treeSensitivity(3, float64(v), 0, b, d, false)
		if g3.L0 != 3*l0 || g3.L1 != 3*l1 || g3.Linf != linf {
			t.Errorf("V=%d, G=3: %+v", v, g3)
		}
		rp := treeSensitivity(1, float64(v), 0, b, d, true)
		if rp.L0 != 2*l0 || rp.L1 != 2*l1 || rp.Linf != linf || math.Abs(rp.L2-math.Sqrt(2*l2sq)) > 1e-12 {
			t.Errorf("V=%d, replace one: %+v", v, rp)
		}
	}
}

// The sensitivities of the new vectors come from the bounds, and only the
// aggregates that are on get one.
func TestSensitivitiesNewAggregates(t *testing.T) {
	cfg := treeCfg()
	s, err := cfg.Sensitivities()
	if err != nil {
		t.Fatal(err)
	}
	// h = 5, V = 3, G = 2: Σ(v − mid)² moves by at most V·h² = 75 per group.
	if s.SumSq != (Sensitivity{L0: 2, Linf: 75, L1: 150, L2: 75 * math.Sqrt2}) && math.Abs(s.SumSq.L2-75*math.Sqrt2) > 1e-12 {
		t.Errorf("sum of squares: %+v", s.SumSq)
	}
	if s.SumSq.L0 != 2 || s.SumSq.Linf != 75 || s.SumSq.L1 != 150 {
		t.Errorf("sum of squares: %+v", s.SumSq)
	}
	if s.MeanSum.Linf != 15 || s.Values.Linf != 3 || s.Units.Linf != 1 || s.Units.L0 != 2 {
		t.Errorf("variance's centred sum %+v, count %+v, units %+v", s.MeanSum, s.Values, s.Units)
	}
	// Tree: G·Σ min(V, 4^ℓ) = 2·(3+3+3) = 18 nodes, L∞ = V = 3, L1 = G·D·V.
	if s.Tree.L0 != 18 || s.Tree.Linf != 3 || s.Tree.L1 != 18 {
		t.Errorf("tree: %+v", s.Tree)
	}
	cfg.Variance, cfg.Quantiles = false, false
	if s, _ := cfg.Sensitivities(); s.SumSq != (Sensitivity{}) || s.Tree != (Sensitivity{}) || s.Values != (Sensitivity{}) {
		t.Errorf("units only: %+v", s)
	}
	// Validation: the tree needs a shape, values need bounds.
	bad := treeCfg()
	bad.TreeBranching, bad.Upper = 1, bad.Lower
	if err := bad.Validate(); err == nil {
		t.Error("branching 1 and lower = upper accepted")
	}
	big := treeCfg()
	big.TreeBranching, big.TreeDepth = 1024, 3
	if err := big.Validate(); err == nil {
		t.Error("a tree of 2^30 leaves accepted")
	}
}

// treeSensitivity under a binding total bound t < G·V matches a
// brute-force maximisation over every way one unit can place at most V
// values in each of G = 2 groups' trees (B = 3, D = 2), at most t in all
// (V = 1 … 3): the largest L0, L1, L2 and L∞ of the moved node counts
// below the roots. Replacing one unit doubles L0, L1 and L2² (checked as
// documented). Reference: the enumeration, exact small integers.
func TestTreeSensitivityTotalBruteForce(t *testing.T) {
	const b, d, g, leaves = 3, 2, 2, 9
	// placements[n] lists the multisets of n leaves of one group.
	placements := make([][][]int, 4)
	var rec func(n, start, left int, cur []int)
	rec = func(n, start, left int, cur []int) {
		if left == 0 {
			placements[n] = append(placements[n], append([]int(nil), cur...))
			return
		}
		for l := start; l < leaves; l++ {
			rec(n, l, left-1, append(cur, l))
		}
	}
	for n := range placements {
		rec(n, 0, n, nil)
	}
	for v := 1; v <= 3; v++ {
		for tot := 1; tot < g*v; tot++ {
			var l0, l1, l2sq, linf float64
			for n0 := 0; n0 <= v; n0++ {
				for n1 := 0; n1 <= v && n0+n1 <= tot; n1++ {
					for _, p0 := range placements[n0] {
						for _, p1 := range placements[n1] {
							nodes := map[[3]int]float64{}
							for gi, p := range [][]int{p0, p1} {
								for _, leaf := range p {
									nodes[[3]int{gi, 2, leaf}]++
									nodes[[3]int{gi, 1, leaf / b}]++
								}
							}
							var s1, s2, sInf float64
							for _, c := range nodes {
								s1, s2, sInf = s1+c, s2+c*c, max(sInf, c)
							}
							l0, l1, l2sq, linf = max(l0, float64(len(nodes))), max(l1, s1), max(l2sq, s2), max(linf, sInf)
						}
					}
				}
			}
			got := treeSensitivity(g, float64(v), float64(tot), b, d, false)
			if !got.Total || got.L0 != l0 || got.L1 != l1 || got.Linf != linf || math.Abs(got.L2-math.Sqrt(l2sq)) > 1e-12 {
				t.Errorf("V=%d, t=%d: %+v, brute force L0=%g L1=%g L2=%g L∞=%g", v, tot, got, l0, l1, math.Sqrt(l2sq), linf)
			}
			rp := treeSensitivity(g, float64(v), float64(tot), b, d, true)
			if rp.L0 != 2*l0 || rp.L1 != 2*l1 || rp.Linf != linf || math.Abs(rp.L2-math.Sqrt(2*l2sq)) > 1e-12 {
				t.Errorf("V=%d, t=%d, replace one: %+v", v, tot, rp)
			}
		}
	}
	if got, want := treeSensitivity(g, 3, 6, b, d, false), treeSensitivity(g, 3, 0, b, d, false); got != want {
		t.Errorf("t = G·V: %+v, want the bound-free %+v", got, want)
	}
}
