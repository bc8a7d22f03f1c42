package windows

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUnitOrder: unitOrder sorts like slices.SortFunc with unitCmp, on
// keys drawn from a few k0 values so that most units share their k0 with
// others (with random 32-bit k0 a tie is rare: the tie-break would go
// untested).
func TestUnitOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, n := range []int{0, 1, 2, 17, 1000} {
		for _, k0s := range []uint32{1, 3, 1 << 31} {
			refs := make([]unitRef, n)
			for i := range refs {
				refs[i] = unitRef{k1: r.Uint64() >> r.UintN(64), k0: r.Uint32N(k0s), off: uint32(i)}
			}
			got := unitOrder(refs)
			want := slices.Clone(refs)
			slices.SortFunc(want, func(a, b unitRef) int { return unitCmp(a.k0, a.k1, b.k0, b.k1) })
			if len(got) != n {
				t.Fatalf("n=%d: %d positions", n, len(got))
			}
			for i, o := range got {
				if u := refs[uint32(o)]; u.k0 != want[i].k0 || u.k1 != want[i].k1 {
					t.Fatalf("n=%d, %d k0 values: position %d holds (%d, %d), want (%d, %d)", n, k0s, i, u.k0, u.k1, want[i].k0, want[i].k1)
				}
			}
		}
	}
}

// BenchmarkUnitOrder compares unitOrder with slices.SortFunc on the same
// 30 000 random keys (about a window's units on one partition in
// BenchmarkKafkaThroughput).
func BenchmarkUnitOrder(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	refs := make([]unitRef, 30_000)
	for i := range refs {
		refs[i] = unitRef{k1: r.Uint64(), k0: r.Uint32(), off: uint32(i)}
	}
	for _, impl := range []string{"unitOrder", "SortFunc"} {
		b.Run(fmt.Sprint(impl), func(b *testing.B) {
			for range b.N {
				if impl == "unitOrder" {
					unitOrder(refs)
				} else {
					s := slices.Clone(refs)
					slices.SortFunc(s, func(a, b unitRef) int { return unitCmp(a.k0, a.k1, b.k0, b.k1) })
				}
			}
		})
	}
}
