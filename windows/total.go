package windows

import (
	"cmp"
	"math/bits"
	"slices"
)

// The total bound (Config.MaxContributions). A unit's histogram
// contributions in a window are its kept cells' counts after MaxPerBucket,
// n_c = min(count_c, MaxPerBucket), and its count contributions its kept
// groups' event counts after MaxValues, n_g = min(events_g, MaxValues).
// When Σ n exceeds the bound T, the unit keeps a uniformly random T-subset
// of these N = Σ n unit contributions (the contributions of one cell or
// group are interchangeable, so only how many of each survive matters).
// The values a unit adds to a group (sums, means, variances, quantiles)
// follow the count's selection — drawn over the same n_g whether or not
// the count is configured: a group keeps at most as many of its kept
// values as the selection keeps of its events, those of lowest keyed
// priority (lowestValues), so the unit's values over all groups number at
// most T as well.
//
// The subset is drawn by selection sampling (Knuth, TAOCP vol. 2,
// §3.4.2, Algorithm S) over the contributions in a canonical order —
// cells by (group key, bucket), groups by key — keeping the s-th with
// probability (T − kept)/(N − s): exactly uniform over T-subsets given
// exact uniform draws. The draws come from the unit's keyed 64-bit hash
// k1 (the same in Poll and in MergePartials), mixed with a tag and the
// position, so the choice depends only on the unit's own bounded
// contributions and the window's key: not on arrival order, partitioning
// or other units. A draw in [0, m) is ⌊r·m/2^64⌋ of a 64-bit word r
// (bias below m/2^64 ≤ 2^-32, which affects which contributions are kept,
// never how many: the bound, and so the sensitivity, holds exactly).
// The cost is at most N draws per unit whose bound binds, N being at most
// the unit's own events.

// Tags separating the draws of the histogram's and the count's selection.
const (
	tagTotalHist  = 0x746f74616c2f6869 // "total/hi"
	tagTotalCount = 0x746f74616c2f636f // "total/co"
)

// totalSlot is one cell or group of a unit in the total bound's selection:
// n contributions, at position pos of the unit's list, ordered by key.
type totalSlot struct {
	key    string
	bucket uint32
	pos    int
	n      uint32
}

// totalKeep reduces the counts n of slots (in any order) so that they sum
// to at most t, keeping a uniformly random t-subset of the contributions
// as described above, with draws keyed by seed. It returns how many it
// dropped.
func totalKeep(seed uint64, t uint32, slots []totalSlot) int64 {
	total := uint64(0)
	for _, s := range slots {
		total += uint64(s.n)
	}
	if total <= uint64(t) {
		return 0
	}
	slices.SortFunc(slots, func(a, b totalSlot) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.bucket, b.bucket)
	})
	need, left, s := uint64(t), total, uint64(0)
	for i := range slots {
		n := uint64(slots[i].n)
		kept := uint64(0)
		for j := uint64(0); j < n && need > 0; j++ {
			rem := left - j // contributions not yet decided, this one included
			if need == rem {
				kept += n - j
				need -= n - j
				break
			}
			if hi, _ := bits.Mul64(mix(seed, s+j), rem); hi < need {
				kept++
				need--
			}
		}
		left -= n
		s += n
		slots[i].n = uint32(kept)
	}
	return int64(total) - int64(t)
}
