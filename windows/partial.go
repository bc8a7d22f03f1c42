package windows

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// More errors returned by this package.
var (
	// ErrOverlap: partials to merge cover the same input partition twice.
	ErrOverlap = errors.New("windows: partials overlap")
	// ErrNoEmitFrom: PollPartials emits nothing because EmitFrom has not
	// fixed the first window (see PartialsErr).
	ErrNoEmitFrom = errors.New("windows: partials need EmitFrom")
)

// Partial is the state of one window restricted to the events of some
// input partitions, before the contribution bounds are applied across
// them: per privacy unit, the candidates (groups, histogram cells, values)
// it keeps among the events of those partitions, with the counters the
// bounds need. Partials of the same window over disjoint partitions merge
// exactly (CombinePartials, MergePartials): the merge gives, byte for
// byte, the Window a single Tumbling over all their partitions would emit,
// with every bound applied per unit across all partitions.
//
// # Why the merge is exact
//
// Every bound keeps, per unit, the k candidates of smallest keyed
// priority (see Tumbling, "Contribution bounds"), and the priorities are
// keyed by the seed and the window only, so every instance with the same
// seed computes the same ones. A candidate among the k smallest of the
// union of the partitions is among the k smallest of every partition that
// saw it (fewer candidates compete there), so each partition's kept
// candidates include every globally kept one it saw, with its complete
// counts: a kept candidate is never evicted, so it counted every event of
// its own. Applying bottom-k again to the union of the partitions' kept
// candidates therefore gives exactly the global kept set, and each kept
// candidate's count is the sum of its per-partition counts. This holds at
// every level: units under Config.MaxUnits (priority: the unit's key),
// groups under MaxGroups, cells under MaxBuckets, values under MaxValues,
// and with EventLevel groups under MaxOpenGroups. The capped counters
// (MaxPerBucket and MaxValues on counts) are applied only when the window
// is finished, to the summed per-unit counts, as Poll does. What bounding
// removes is recovered from the counters each partial keeps per unit
// (events per unit, per kept group, with a cell and with a value), and
// units or groups that a cap keeps out are counted from the partials'
// own drop counts plus the events of those that lose only in the merge.
// Sums are exact floating-point expansions, so their order does not
// matter.
//
// A partial is therefore a function of its partitions' events alone, and
// a unit whose events are spread over every partition still contributes
// no more than its bounds once merged; merging finished windows instead
// (Window.Merge) applies the bounds per partition and lets such a unit
// contribute once per partition.
//
// # Identity
//
// A partial carries a fingerprint of the configuration and the seed
// (keyed by the seed, so it reveals nothing about it), and merging refuses
// partials of another configuration, seed or window with ErrMismatch.
//
// The counters a partial keeps per unit saturate at 2^32 − 1, as in a
// Tumbling; saturating sums of saturating counters equal the saturated
// total, so merged counts match a single Tumbling's even then. The one
// exception is Drops.UnitCap for a unit with more than 2^32 − 1 events in
// one window, which a single Tumbling counts in an order-dependent way.
//
// Start, End and Partitions may be read; the state is otherwise opaque
// and immutable: a Partial is made by PollPartials, CombinePartials or
// UnmarshalBinary, and the functions that take partials never modify
// them.
type Partial struct {
	// Start and End delimit the window [Start, End), in Unix milliseconds.
	Start, End int64
	// Partitions are the input partitions the partial covers, sorted and
	// distinct: it holds every accepted event of those partitions in the
	// window and nothing else.
	Partitions []int32

	fp         [16]byte // configuration fingerprint (see fingerprint)
	eventLevel bool
	// Drops counted as events arrived: events of units kept out by
	// MaxUnits (unit mode) and of groups kept out by MaxOpenGroups (event
	// level). The other drops are derived when the window is finished.
	unitCap, groupCap int64
	// keys are the group keys, sorted and distinct: the groups some unit
	// keeps (unit mode) or the groups with events (event level).
	keys []string

	// Unit mode: nunits units in words, sorted by key (k0, k1), each a
	// header (see pK0 …) followed by its kept groups in the unit blob's
	// group layout (gGid … gCounts, cells, values), with gGid indexing
	// keys. Within a unit, groups are sorted by key, cells by bucket and
	// values by (priority, bits).
	nunits int
	words  []uint32

	// Event level: one accumulator per key.
	groups []egroup
}

// Word offsets in a partial unit's header. The key (k0, k1) is the unit's
// identity and its priority under MaxUnits, as in a unit blob.
const (
	pK0     = 0 // top half of k0
	pK1lo   = 1 // k1, low half
	pK1hi   = 2 // k1, high half
	pEvents = 3 // accepted events of the unit (saturating)
	pNg     = 4 // number of kept groups
	pHdr    = 5 // header size
)

// egroup is one group's accumulator in an event-level partial.
type egroup struct {
	events, values, clamp int64 // events (each its own unit), values, clamped values
	cells                 []ecell
	sum, csum             exactSum // canonical (see exactSum.canon)
	csq                   exactSum // canonical; with Variance
	leaves                []LeafCount
}

// ecell is a non-empty histogram cell of an event-level group.
type ecell struct {
	bucket uint32
	count  int64
}

// EventLevel reports whether the partial holds event-level state.
func (p *Partial) EventLevel() bool { return p.eventLevel }

// Units returns the number of privacy units the partial tracks (0 with
// event-level privacy).
func (p *Partial) Units() int { return p.nunits }

// Groups returns the number of distinct group keys in the partial.
func (p *Partial) Groups() int { return len(p.keys) }

// fingerprint returns a 128-bit fingerprint of the configuration under
// the seed's key: equal for equal configurations and seeds, and a keyed
// pseudo-random function, so that it reveals nothing about the seed.
// Every Config field is included (a test checks that each one changes it),
// so that partials of instances that would not produce identical windows
// never merge.
func fingerprint(c *Config, k0, k1 uint64) [16]byte {
	b := func(x bool) uint64 {
		if x {
			return 1
		}
		return 0
	}
	h := newSip(k0, k1)
	h.word(tagPartial)
	h.word(partialVersion)
	for _, x := range [...]uint64{
		uint64(c.Size), uint64(c.Offset), uint64(c.AllowedLateness),
		b(c.EventLevel), b(c.Histogram), uint64(c.NumBuckets), b(c.Count), b(c.Sum), b(c.Mean),
		uint64(c.MaxGroups), uint64(c.MaxBuckets), uint64(c.MaxPerBucket), uint64(c.MaxValues),
		math.Float64bits(c.Lower), math.Float64bits(c.Upper),
		uint64(c.MaxUnits), uint64(c.MaxOpenGroups), uint64(c.MaxOpenWindows), uint64(c.MaxSkew),
	} {
		h.word(x)
	}
	// The aggregates of issue 11, only when one is on: configurations
	// without them keep their fingerprints.
	if c.Units || c.Variance || c.Quantiles || c.TreeBranching != 0 || c.TreeDepth != 0 {
		for _, x := range [...]uint64{b(c.Units), b(c.Variance), b(c.Quantiles), uint64(c.TreeBranching), uint64(c.TreeDepth)} {
			h.word(x)
		}
	}
	// The total bound (issue 20), only when set: configurations without
	// it keep their fingerprints.
	if c.MaxContributions != 0 {
		h.word(tagTotal)
		h.word(uint64(c.MaxContributions))
	}
	lo, hi := h.sum128()
	var fp [16]byte
	for i := range 8 {
		fp[i], fp[8+i] = byte(lo>>(8*i)), byte(hi>>(8*i))
	}
	return fp
}

// cellRec and valRec are a cell and a value outside the word layout, for
// sorting and merging.
type cellRec struct{ b, n uint32 }

type valRec struct {
	p    uint32
	bits uint64
}

func cellByBucket(a, b cellRec) int { return cmp.Compare(a.b, b.b) }

func valCmp(a, b valRec) int {
	if c := cmp.Compare(a.p, b.p); c != 0 {
		return c
	}
	return cmp.Compare(a.bits, b.bits)
}

// unitCmp orders units by key: top half of k0, then k1 (their priority
// under MaxUnits; see openWindow.unitAbove).
func unitCmp(a0 uint32, a1 uint64, b0 uint32, b1 uint64) int {
	if c := cmp.Compare(a0, b0); c != 0 {
		return c
	}
	return cmp.Compare(a1, b1)
}

// scratch holds reusable buffers for writing units.
type scratch struct {
	cells []cellRec
	vals  []valRec
}

// appendGroup appends the kept group g (blob group layout) to out as group
// gid, with its cells sorted by bucket and its values by (priority, bits).
func (s *scratch) appendGroup(out []uint32, g []uint32, gid uint32) []uint32 {
	counts := g[gCounts]
	nb, nv := int(counts&0xffff), int(counts>>16)
	out = append(out, gid, g[gEvents], g[gHist], g[gNvals], counts)
	s.cells = s.cells[:0]
	for i := gWords; i < gWords+cellWords*nb; i += cellWords {
		s.cells = append(s.cells, cellRec{g[i], g[i+1]})
	}
	s.vals = s.vals[:0]
	for i := gWords + cellWords*nb; i < gWords+cellWords*nb+valWords*nv; i += valWords {
		s.vals = append(s.vals, valRec{g[i], uint64(g[i+1]) | uint64(g[i+2])<<32})
	}
	return s.appendLists(out)
}

// appendLists appends the cells and values in s, sorted.
func (s *scratch) appendLists(out []uint32) []uint32 {
	if len(s.cells) > 1 {
		slices.SortFunc(s.cells, cellByBucket)
	}
	if len(s.vals) > 1 {
		slices.SortFunc(s.vals, valCmp)
	}
	for _, c := range s.cells {
		out = append(out, c.b, c.n)
	}
	for _, v := range s.vals {
		out = append(out, v.p, uint32(v.bits), uint32(v.bits>>32))
	}
	return out
}

// CombinePartials merges partials of one window that cover disjoint
// partitions into one partial covering all of them, applying the
// contribution bounds across them (see Partial): the result is the
// partial a Tumbling over all those partitions would emit, byte for byte,
// whatever the order of parts. Combining is associative, so a merge stage
// can fold partials in as they arrive and keep one partial per window.
// cfg and seed must be the ones the partials were made with.
//
// It returns an error wrapping ErrMismatch for no parts, or parts of
// another configuration, seed or window; ErrOverlap if two parts cover
// the same partition; and ErrCorrupt for a part that no Tumbling with
// this configuration could have produced (more candidates than the
// bounds, buckets out of range, aggregates that are off). The result may
// share memory with the parts.
func CombinePartials(cfg Config, seed [32]byte, parts []Partial) (Partial, error) {
	t, err := New(cfg, seed)
	if err != nil {
		return Partial{}, err
	}
	return t.combine(parts)
}

// MergePartials merges the partials of one window, as CombinePartials
// does, and finishes the result as Poll does: the Window is byte for byte
// (MarshalBinary) the one a single Tumbling over the partitions they
// cover would have emitted, whatever the order of parts (Partials is 1:
// the window was computed as a whole). The caller checks that the parts
// cover every input partition (Coverage) before releasing the window.
// Errors are those of CombinePartials.
func MergePartials(cfg Config, seed [32]byte, parts []Partial) (Window, error) {
	t, err := New(cfg, seed)
	if err != nil {
		return Window{}, err
	}
	p, err := t.combine(parts)
	if err != nil {
		return Window{}, err
	}
	return t.finishPartial(&p), nil
}

// Coverage returns the input partitions the parts cover, sorted, so that
// a merge stage can check that a window is complete before it releases
// it; an error wrapping ErrOverlap if two parts cover the same partition,
// ErrMismatch if a part's partitions are not sorted and distinct.
func Coverage(parts []Partial) ([]int32, error) {
	n := 0
	for i := range parts {
		if !sortedDistinct(parts[i].Partitions) {
			return nil, fmt.Errorf("%w: partial %d: partitions not sorted or repeated", ErrMismatch, i)
		}
		n += len(parts[i].Partitions)
	}
	out := make([]int32, 0, n)
	for i := range parts {
		out = append(out, parts[i].Partitions...)
	}
	slices.Sort(out)
	for i := 1; i < len(out); i++ {
		if out[i] == out[i-1] {
			return nil, fmt.Errorf("%w: partition %d is in two partials", ErrOverlap, out[i])
		}
	}
	return out, nil
}
