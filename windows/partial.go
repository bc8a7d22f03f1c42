package windows

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
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
	lo, hi := h.sum128()
	var fp [16]byte
	for i := range 8 {
		fp[i], fp[8+i] = byte(lo>>(8*i)), byte(hi>>(8*i))
	}
	return fp
}

// PollPartials is Poll for a scaled-out first stage: it emits the same
// closed windows, under the same rules (in start order, contiguously, at
// most limit, empty windows included), but as Partials, before the
// contribution bounds are applied across partitions, for MergePartials to
// combine with the partials of the other partitions. Each window is
// emitted once, by Poll or PollPartials.
//
// A partial covers the partitions the Tumbling serves when it emits
// (sorted): every accepted event of theirs in the window. An empty
// partial still says that those partitions have nothing for the window,
// which the merge stage needs to know that a window is complete.
//
// The intended layout is one Tumbling per input partition: then each
// partial covers one partition and is a deterministic function of that
// partition's log (its events, with arrival times that do not decrease,
// from the EmitFrom point on), whichever instance computes it and however
// often — a replay after a rebalance gives the same bytes. Each
// partition's windows close on its own watermark, so an idle or lagging
// partition delays only its own partials, and a rebalance discards only
// the moved partition's Tumbling. (Splitting one Tumbling's partials by
// partition instead would key every unit's state by partition too, on
// Add's hot path, and close every partition's windows on the slowest
// one.) Only TooManyWindows can differ from a single Tumbling over all
// partitions: the cap is measured from each partition's own emission
// point, which is never behind the slowest partition's, so a cap sized
// as Config.MaxOpenWindows says is never reached here either. (Each
// per-partition Tumbling applies its own cap: memory is then bounded per
// partition.)
//
// A Tumbling over several partitions emits one partial covering all of
// them; it equals, byte for byte, the CombinePartials of their
// single-partition partials.
//
// PollPartials emits nothing — and PartialsErr says why — when it could
// not emit correct partials: before EmitFrom has fixed the first window,
// the same for every partition (otherwise each partition would start at
// its own first event and some windows would lack partials), and once a
// partition has been revoked after an Add or Poll (open windows may then
// hold some but not all of its events; the Tumbling must be replaced).
// Partitions must be assigned (AssignPartitions) before their events are
// added, and fed from a point before which every window is emitted.
func (t *Tumbling) PollPartials(limit int) []Partial {
	if t.PartialsErr() != nil {
		return nil
	}
	parts := make([]int32, 0, len(t.parts))
	for id := range t.parts {
		parts = append(parts, id)
	}
	slices.Sort(parts)
	var out []Partial
	t.emit(limit, func(start int64, w *openWindow) {
		p := Partial{Start: start, End: start + t.size, Partitions: slices.Clone(parts), fp: t.fp, eventLevel: t.cfg.EventLevel}
		if w != nil {
			p.unitCap, p.groupCap = w.drops.UnitCap, w.drops.GroupCap
			if t.cfg.EventLevel {
				w.partialGroups(&p)
			} else {
				w.partialUnits(&p)
			}
		}
		out = append(out, p)
	})
	return out
}

// PartialsErr returns nil if PollPartials can emit, or why it emits
// nothing: ErrNoEmitFrom before EmitFrom, an error wrapping ErrRevoked
// after a partition was revoked following an Add or Poll. Check it when
// PollPartials returns nothing for longer than expected (or once after
// setting the Tumbling up).
func (t *Tumbling) PartialsErr() error {
	if !t.fixed {
		return ErrNoEmitFrom
	}
	if t.shrunk {
		return fmt.Errorf("%w: a partition was revoked after events were added; its partials would be incomplete", ErrRevoked)
	}
	return nil
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

// partialUnits copies the window's unit state into p in canonical order.
func (w *openWindow) partialUnits(p *Partial) {
	// The dictionary: the groups some kept unit holds, sorted by key.
	gids := make([]uint32, 0, len(w.gidx))
	for gid := range w.gkeys {
		if w.grefs[gid] > 0 {
			gids = append(gids, uint32(gid))
		}
	}
	slices.SortFunc(gids, func(a, b uint32) int { return strings.Compare(w.gkeys[a], w.gkeys[b]) })
	remap := make([]uint32, len(w.gkeys))
	p.keys = make([]string, len(gids))
	for i, gid := range gids {
		p.keys[i] = w.gkeys[gid] // immutable; the window only drops its references
		remap[gid] = uint32(i)
	}

	// One pass over the blobs (random accesses into the arena) writes each
	// unit in canonical form to a dense buffer, in table order; then the
	// units are sorted by key and copied out.
	refs := make([]unitRef, 0, w.live)
	tmp := make([]uint32, 0, w.live*(pHdr+gWords+cellWords+valWords))
	var s scratch
	var pos []int
	for _, r := range w.liveRefs() {
		b := w.blob(r)
		k1 := uint64(b[hK1lo]) | uint64(b[hK1hi])<<32
		ng := int(b[hMeta] & 0xffff)
		off := len(tmp)
		tmp = append(tmp, b[hK0], b[hK1lo], b[hK1hi], b[hEvents], uint32(ng))
		pos = pos[:0]
		at := w.hdr
		for range ng {
			pos = append(pos, at)
			at += groupSize(b[at+gCounts])
		}
		if ng > 1 {
			slices.SortFunc(pos, func(i, j int) int { return cmp.Compare(remap[b[i+gGid]], remap[b[j+gGid]]) })
		}
		for _, at := range pos {
			tmp = s.appendGroup(tmp, b[at:at+groupSize(b[at+gCounts])], remap[b[at+gGid]])
		}
		refs = append(refs, unitRef{k1, b[hK0], uint32(off), uint32(len(tmp) - off)})
	}
	order := unitOrder(refs)
	out := make([]uint32, 0, len(tmp))
	for _, o := range order {
		u := refs[uint32(o)]
		out = append(out, tmp[u.off:u.off+u.n]...)
	}
	p.words, p.nunits = out, len(refs)
}

// unitRef is a unit of a window being written as a partial: its key and
// where its words are in a buffer.
type unitRef struct {
	k1     uint64
	k0     uint32
	off, n uint32
}

// unitOrder returns the positions of refs (in the low 32 bits of each
// element) in the order of their keys (k0, then k1; unitCmp). k0 and the
// position are packed into one uint64 and sorted by k0 with a radix sort
// (BenchmarkUnitOrder, 30 000 units: about a tenth of the time of
// slices.SortFunc on refs); runs of equal k0 (about n²/2³³ pairs for n
// units of random keys) are then ordered by k1.
func unitOrder(refs []unitRef) []uint64 {
	order := make([]uint64, len(refs))
	for i, u := range refs {
		order[i] = uint64(u.k0)<<32 | uint64(i)
	}
	if len(order) < radixMin {
		slices.Sort(order)
	} else {
		radixSortHigh(order)
	}
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && order[j]>>32 == order[i]>>32 {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(order[i:j], func(a, b uint64) int { return cmp.Compare(refs[uint32(a)].k1, refs[uint32(b)].k1) })
		}
		i = j
	}
	return order
}

// radixMin is the smallest input radixSortHigh is used for: below it a
// comparison sort is as fast (its four passes over 256 counters cost about
// as much as sorting a few hundred elements).
const radixMin = 256

// radixSortHigh sorts a by its high 32 bits, stably (least significant
// digit first, four passes of 8 bits; an even number of passes leaves the
// result in a).
func radixSortHigh(a []uint64) {
	tmp := make([]uint64, len(a))
	src, dst := a, tmp
	for shift := 32; shift < 64; shift += 8 {
		var at [256]int
		for _, v := range src {
			at[byte(v>>shift)]++
		}
		sum := 0
		for d, n := range at {
			at[d] = sum
			sum += n
		}
		for _, v := range src {
			d := byte(v >> shift)
			dst[at[d]] = v
			at[d]++
		}
		src, dst = dst, src
	}
}

// partialGroups copies the window's event-level accumulators into p.
func (w *openWindow) partialGroups(p *Partial) {
	gids := make([]uint32, 0, len(w.gidx))
	for gid := range w.gkeys {
		if w.acc[gid].units > 0 {
			gids = append(gids, uint32(gid))
		}
	}
	slices.SortFunc(gids, func(a, b uint32) int { return strings.Compare(w.gkeys[a], w.gkeys[b]) })
	p.keys = make([]string, len(gids))
	p.groups = make([]egroup, len(gids))
	for i, gid := range gids {
		a := &w.acc[gid]
		g := egroup{events: a.units, values: a.values, clamp: a.clamp, sum: a.sum.clone(), csum: a.csum.clone(), csq: a.csq.clone(), leaves: leafCounts(a.leaves)}
		for b, n := range a.hist {
			if n != 0 {
				g.cells = append(g.cells, ecell{uint32(b), n})
			}
		}
		g.sum.canon()
		g.csum.canon()
		g.csq.canon()
		p.keys[i], p.groups[i] = w.gkeys[gid], g
	}
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

// combine implements CombinePartials for t's configuration and seed.
func (t *Tumbling) combine(parts []Partial) (Partial, error) {
	if len(parts) == 0 {
		return Partial{}, fmt.Errorf("%w: no partials", ErrMismatch)
	}
	start := parts[0].Start
	if start < minTime || start > maxTime || t.WindowStart(start) != start {
		return Partial{}, fmt.Errorf("%w: %d is not a window start of this configuration", ErrMismatch, start)
	}
	out := Partial{Start: start, End: start + t.size, fp: t.fp, eventLevel: t.cfg.EventLevel}
	for i := range parts {
		p := &parts[i]
		switch {
		case p.fp != t.fp || p.eventLevel != t.cfg.EventLevel:
			return Partial{}, fmt.Errorf("%w: partial %d was made with another configuration or seed", ErrMismatch, i)
		case p.Start != start || p.End != out.End:
			return Partial{}, fmt.Errorf("%w: partial %d is for window [%d, %d), not [%d, %d)", ErrMismatch, i, p.Start, p.End, start, out.End)
		}
		if err := t.checkPartial(p); err != nil {
			return Partial{}, fmt.Errorf("%w: partial %d: %w", ErrCorrupt, i, err)
		}
		var ok1, ok2 bool
		out.unitCap, ok1 = addInt(out.unitCap, p.unitCap)
		out.groupCap, ok2 = addInt(out.groupCap, p.groupCap)
		if !ok1 || !ok2 {
			return Partial{}, fmt.Errorf("%w: drop counts overflow", ErrCorrupt)
		}
	}
	var err error
	if out.Partitions, err = Coverage(parts); err != nil {
		return Partial{}, err
	}
	if len(parts) == 1 {
		// A valid partial is already bounded: combining it alone changes
		// nothing.
		p := &parts[0]
		out.keys, out.nunits, out.words, out.groups = p.keys, p.nunits, p.words, p.groups
		return out, nil
	}
	if t.cfg.EventLevel {
		if err := t.combineGroups(&out, parts); err != nil {
			return Partial{}, err
		}
	} else {
		t.combineUnits(&out, parts)
	}
	return out, nil
}

func sortedDistinct(ps []int32) bool {
	for i := 1; i < len(ps); i++ {
		if ps[i] <= ps[i-1] {
			return false
		}
	}
	return true
}

// addInt returns a + b for non-negative a and b, and false on overflow.
func addInt(a, b int64) (int64, bool) {
	s := a + b
	return s, s >= a
}

func satAdd(a, b uint32) uint32 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint32
}

// checkPartial checks what only the configuration can tell about a
// partial (the decoder checks its structure): that it keeps no more than
// the bounds allow, no more and no less than a Tumbling would, and
// nothing for aggregates that are off.
func (t *Tumbling) checkPartial(p *Partial) error {
	cfg := &t.cfg
	if cfg.EventLevel {
		if c := cfg.MaxOpenGroups; c > 0 && len(p.groups) > c {
			return fmt.Errorf("%d groups, max open groups is %d", len(p.groups), c)
		}
		for i := range p.groups {
			g := &p.groups[i]
			switch {
			case len(g.cells) > 0 && (!cfg.Histogram || int(g.cells[len(g.cells)-1].bucket) >= cfg.NumBuckets):
				return errors.New("histogram cell out of range")
			case !t.valued && g.values != 0:
				return errors.New("values without sum or mean")
			case (!cfg.Sum && len(g.sum.p) > 0) || (!cfg.Mean && !cfg.Variance && len(g.csum.p) > 0) || (!cfg.Variance && len(g.csq.p) > 0):
				return errors.New("sum of a disabled aggregate")
			case len(g.leaves) > 0 && (t.leaves == 0 || int(g.leaves[len(g.leaves)-1].Leaf) >= t.leaves):
				return errors.New("quantile leaf out of range")
			case t.leaves > 0 && leafTotal(g.leaves) != g.values:
				return errors.New("quantile leaves do not count the values")
			}
		}
		return nil
	}
	if c := cfg.MaxUnits; c > 0 && p.nunits > c {
		return fmt.Errorf("%d units, max units is %d", p.nunits, c)
	}
	w := p.words
	maxB, maxV := uint32(cfg.MaxBuckets), uint32(cfg.MaxValues)
	for pos := 0; pos < len(w); {
		events, ng := w[pos+pEvents], int(w[pos+pNg])
		if ng > cfg.MaxGroups {
			return fmt.Errorf("a unit keeps %d groups, max groups is %d", ng, cfg.MaxGroups)
		}
		pos += pHdr
		inGroups := uint64(0)
		for range ng {
			g := w[pos : pos+groupSize(w[pos+gCounts])]
			pos += len(g)
			inGroups += uint64(g[gEvents])
			nb, nv := g[gCounts]&0xffff, g[gCounts]>>16
			if !cfg.Histogram && g[gHist] != 0 || !t.valued && g[gNvals] != 0 {
				return errors.New("contributions to a disabled aggregate")
			}
			if nb > maxB || nv > maxV {
				return errors.New("more cells or values than the bounds")
			}
			inCells := uint64(0)
			for i := gWords; i < gWords+cellWords*int(nb); i += cellWords {
				if int(g[i]) >= cfg.NumBuckets {
					return errors.New("histogram cell out of range")
				}
				inCells += uint64(g[i+1])
			}
			// A Tumbling keeps min(n, k) values, and every cell while
			// fewer than MaxBuckets are kept.
			if nv != min(g[gNvals], maxV) || nb < maxB && g[gHist] != math.MaxUint32 && inCells != uint64(g[gHist]) {
				return errors.New("cells or values dropped below the bounds")
			}
		}
		if ng < cfg.MaxGroups && events != math.MaxUint32 && inGroups != uint64(events) {
			return errors.New("groups dropped below the bounds")
		}
	}
	return nil
}

// mergeKeys returns the sorted union of the parts' keys and, per part,
// the index in it of each of the part's keys.
func mergeKeys(parts []Partial) ([]string, [][]uint32) {
	n := 0
	for i := range parts {
		n += len(parts[i].keys)
	}
	keys := make([]string, 0, n)
	for i := range parts {
		keys = append(keys, parts[i].keys...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	remaps := make([][]uint32, len(parts))
	for i := range parts {
		r := make([]uint32, len(parts[i].keys))
		j := 0
		for k, key := range parts[i].keys { // both sorted: one pass
			for keys[j] != key {
				j++
			}
			r[k] = uint32(j)
		}
		remaps[i] = r
	}
	return keys, remaps
}

// unitEnd returns the end of the partial unit starting at word pos.
func unitEnd(w []uint32, pos int) int {
	ng := w[pos+pNg]
	pos += pHdr
	for range ng {
		pos += groupSize(w[pos+gCounts])
	}
	return pos
}

// groupHasher computes, and caches, the keyed hashes of merged group keys
// in one window: the same hash as openWindow.groupHash.
type groupHasher struct {
	sip  sip
	keys []string
	h    []uint64
	done []bool
}

func (t *Tumbling) groupHasher(start int64, keys []string) *groupHasher {
	a, b := t.windowKey(start)
	g := &groupHasher{sip: newSip(a, b), keys: keys, h: make([]uint64, len(keys)), done: make([]bool, len(keys))}
	g.sip.word(tagGroup)
	return g
}

func (g *groupHasher) hash(m uint32) uint64 {
	if !g.done[m] {
		g.h[m], _ = g.sip.sumString(g.keys[m])
		g.done[m] = true
	}
	return g.h[m]
}

// combineUnits merges the units of several partials into out: a k-way
// merge of their sorted unit lists, bottom-k again at every level.
func (t *Tumbling) combineUnits(out *Partial, parts []Partial) {
	cfg := &t.cfg
	keys, remaps := mergeKeys(parts)
	gh := t.groupHasher(out.Start, keys)

	type cursor struct {
		w         []uint32
		pos, left int
		remap     []uint32
	}
	total := 0
	cs := make([]cursor, 0, len(parts))
	for i := range parts {
		if parts[i].nunits > 0 {
			cs = append(cs, cursor{parts[i].words, 0, parts[i].nunits, remaps[i]})
			total += len(parts[i].words)
		}
	}
	key := func(c *cursor) (uint32, uint64) {
		return c.w[c.pos+pK0], uint64(c.w[c.pos+pK1lo]) | uint64(c.w[c.pos+pK1hi])<<32
	}
	// A min-heap of cursors by their next unit's key.
	h := make([]int, len(cs))
	less := func(i, j int) bool {
		a0, a1 := key(&cs[h[i]])
		b0, b1 := key(&cs[h[j]])
		return unitCmp(a0, a1, b0, b1) < 0
	}
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			c := l
			if r := l + 1; r < len(h) && less(r, l) {
				c = r
			}
			if !less(c, i) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for i := range h {
		h[i] = i
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}

	type occ struct {
		c          int // cursor
		start, end int // the unit's words
	}
	type gref struct {
		m   uint32 // merged key index
		c   int    // cursor
		pos int    // the group's first word
	}
	type dgroup struct {
		m        uint32
		from, to int // its grefs
		prio     uint64
	}
	var (
		same []occ
		gs   []gref
		ds   []dgroup
		s    scratch
	)
	w := make([]uint32, 0, total)
	kept := 0
	for len(h) > 0 {
		k0, k1 := key(&cs[h[0]])
		same = same[:0]
		for len(h) > 0 {
			c := &cs[h[0]]
			if a, b := key(c); a != k0 || b != k1 {
				break
			}
			end := unitEnd(c.w, c.pos)
			same = append(same, occ{h[0], c.pos, end})
			c.pos = end
			if c.left--; c.left == 0 {
				h[0] = h[len(h)-1]
				h = h[:len(h)-1]
			}
			down(0)
		}
		if cfg.MaxUnits > 0 && kept >= cfg.MaxUnits {
			// Kept out by MaxUnits: units arrive in priority order.
			for _, o := range same {
				out.unitCap += int64(cs[o.c].w[o.start+pEvents])
			}
			continue
		}
		kept++
		if len(same) == 1 {
			o := same[0]
			src, remap := cs[o.c].w, cs[o.c].remap
			w = append(w, src[o.start:o.start+pHdr]...)
			for pos := o.start + pHdr; pos < o.end; {
				n := groupSize(src[pos+gCounts])
				g := len(w)
				w = append(w, src[pos:pos+n]...)
				w[g+gGid] = remap[src[pos+gGid]]
				pos += n
			}
			continue
		}

		events := uint32(0)
		gs = gs[:0]
		for _, o := range same {
			src, remap := cs[o.c].w, cs[o.c].remap
			events = satAdd(events, src[o.start+pEvents])
			for pos := o.start + pHdr; pos < o.end; pos += groupSize(src[pos+gCounts]) {
				gs = append(gs, gref{remap[src[pos+gGid]], o.c, pos})
			}
		}
		slices.SortFunc(gs, func(a, b gref) int { return cmp.Compare(a.m, b.m) })
		ds = ds[:0]
		for i := 0; i < len(gs); {
			j := i + 1
			for j < len(gs) && gs[j].m == gs[i].m {
				j++
			}
			ds = append(ds, dgroup{m: gs[i].m, from: i, to: j})
			i = j
		}
		if len(ds) > cfg.MaxGroups {
			// Bottom-k by (priority, key); key order is index order.
			for i := range ds {
				ds[i].prio = mix(k1, gh.hash(ds[i].m))
			}
			slices.SortFunc(ds, func(a, b dgroup) int {
				if c := cmp.Compare(a.prio, b.prio); c != 0 {
					return c
				}
				return cmp.Compare(a.m, b.m)
			})
			ds = ds[:cfg.MaxGroups]
			slices.SortFunc(ds, func(a, b dgroup) int { return cmp.Compare(a.m, b.m) })
		}
		w = append(w, k0, uint32(k1), uint32(k1>>32), events, uint32(len(ds)))
		for _, d := range ds {
			if d.to-d.from == 1 {
				r := gs[d.from]
				src := cs[r.c].w
				g := len(w)
				w = append(w, src[r.pos:r.pos+groupSize(src[r.pos+gCounts])]...)
				w[g+gGid] = d.m
				continue
			}
			var ev, hist, nvals uint32
			s.cells, s.vals = s.cells[:0], s.vals[:0]
			for _, r := range gs[d.from:d.to] {
				g := cs[r.c].w[r.pos:]
				ev, hist, nvals = satAdd(ev, g[gEvents]), satAdd(hist, g[gHist]), satAdd(nvals, g[gNvals])
				nb, nv := int(g[gCounts]&0xffff), int(g[gCounts]>>16)
				for i := gWords; i < gWords+cellWords*nb; i += cellWords {
					s.cells = append(s.cells, cellRec{g[i], g[i+1]})
				}
				for i := gWords + cellWords*nb; i < gWords+cellWords*nb+valWords*nv; i += valWords {
					s.vals = append(s.vals, valRec{g[i], uint64(g[i+1]) | uint64(g[i+2])<<32})
				}
			}
			// Cells: the same bucket from several partitions adds up.
			slices.SortFunc(s.cells, cellByBucket)
			j := 0
			for i := range s.cells {
				if j > 0 && s.cells[j-1].b == s.cells[i].b {
					s.cells[j-1].n = satAdd(s.cells[j-1].n, s.cells[i].n)
				} else {
					s.cells[j] = s.cells[i]
					j++
				}
			}
			s.cells = s.cells[:j]
			if len(s.cells) > cfg.MaxBuckets {
				gp := mix(k1, gh.hash(d.m))
				slices.SortFunc(s.cells, func(a, b cellRec) int {
					pa, pb := mix(gp, uint64(a.b)+1), mix(gp, uint64(b.b)+1)
					if c := cmp.Compare(pa, pb); c != 0 {
						return c
					}
					return cmp.Compare(a.b, b.b)
				})
				s.cells = s.cells[:cfg.MaxBuckets]
			}
			// Values: each is one event's (two with equal priority and
			// bits are interchangeable), and each list is sorted; keep the
			// MaxValues smallest of the union.
			slices.SortFunc(s.vals, valCmp)
			s.vals = s.vals[:min(len(s.vals), cfg.MaxValues)]
			w = append(w, d.m, ev, hist, nvals, uint32(len(s.cells))|uint32(len(s.vals))<<16)
			w = s.appendLists(w)
		}
	}
	out.keys, out.words, out.nunits = keys, w, kept
	out.pruneKeys()
}

// pruneKeys drops the keys no unit references any more (bounding in the
// merge can drop a partition's only reference), renumbering the rest, so
// that equal states have equal dictionaries.
func (p *Partial) pruneKeys() {
	used := make([]uint32, len(p.keys)) // new index + 1, 0: unused
	w := p.words
	for pos := 0; pos < len(w); {
		ng := w[pos+pNg]
		pos += pHdr
		for range ng {
			used[w[pos+gGid]] = 1
			pos += groupSize(w[pos+gCounts])
		}
	}
	n := uint32(0)
	for i, u := range used {
		if u != 0 {
			p.keys[n] = p.keys[i]
			n++
			used[i] = n
		}
	}
	if int(n) == len(p.keys) {
		return
	}
	p.keys = p.keys[:n:n]
	for pos := 0; pos < len(w); {
		ng := w[pos+pNg]
		pos += pHdr
		for range ng {
			w[pos+gGid] = used[w[pos+gGid]] - 1
			pos += groupSize(w[pos+gCounts])
		}
	}
}

// combineGroups merges event-level partials into out: groups add up, and
// MaxOpenGroups keeps the groups of smallest hash among the union.
func (t *Tumbling) combineGroups(out *Partial, parts []Partial) error {
	keys, remaps := mergeKeys(parts)
	gs := make([]egroup, len(keys))
	overflow := fmt.Errorf("%w: counts overflow", ErrCorrupt)
	for i := range parts {
		for j := range parts[i].groups {
			g, o := &gs[remaps[i][j]], &parts[i].groups[j]
			var ok1, ok2, ok3 bool
			g.events, ok1 = addInt(g.events, o.events)
			g.values, ok2 = addInt(g.values, o.values)
			g.clamp, ok3 = addInt(g.clamp, o.clamp)
			if !ok1 || !ok2 || !ok3 {
				return overflow
			}
			var ok bool
			if g.cells, ok = mergeCells(g.cells, o.cells); !ok {
				return overflow
			}
			g.sum.merge(&o.sum)
			g.csum.merge(&o.csum)
			g.csq.merge(&o.csq)
			g.leaves = mergeLeaves(g.leaves, o.leaves)
		}
	}
	for i := range gs {
		gs[i].sum.canon()
		gs[i].csum.canon()
		gs[i].csq.canon()
	}
	if c := t.cfg.MaxOpenGroups; c > 0 && len(keys) > c {
		gh := t.groupHasher(out.Start, keys)
		order := make([]uint32, len(keys))
		for i := range order {
			order[i] = uint32(i)
		}
		slices.SortFunc(order, func(a, b uint32) int {
			if c := cmp.Compare(gh.hash(a), gh.hash(b)); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		keep := make([]bool, len(keys))
		for _, m := range order[:c] {
			keep[m] = true
		}
		n := 0
		for i := range keys {
			if keep[i] {
				keys[n], gs[n] = keys[i], gs[i]
				n++
				continue
			}
			var ok bool
			if out.groupCap, ok = addInt(out.groupCap, gs[i].events); !ok {
				return overflow
			}
		}
		keys, gs = keys[:n], gs[:n]
	}
	out.keys, out.groups = keys, gs
	return nil
}

// mergeCells returns the cells of a and b (sorted by bucket) added up,
// and false on overflow.
func mergeCells(a, b []ecell) ([]ecell, bool) {
	if len(b) == 0 {
		return a, true
	}
	out := make([]ecell, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].bucket < b[j].bucket:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].bucket < a[i].bucket:
			out = append(out, b[j])
			j++
		default:
			n, ok := addInt(a[i].count, b[j].count)
			if !ok {
				return nil, false
			}
			out = append(out, ecell{a[i].bucket, n})
			i++
			j++
		}
	}
	return out, true
}

// finishPartial finishes a (combined) partial as Poll finishes a window.
func (t *Tumbling) finishPartial(p *Partial) Window {
	cfg := &t.cfg
	out := t.emptyWindow(p.Start)
	out.Drops.UnitCap, out.Drops.GroupCap = p.unitCap, p.groupCap
	acc := make([]gacc, len(p.keys))
	if cfg.EventLevel {
		for i := range p.groups {
			g, a := &p.groups[i], &acc[i]
			a.units, a.count, a.values, a.clamp = g.events, g.events, g.values, g.clamp
			if cfg.Histogram {
				a.hist = make([]int64, cfg.NumBuckets)
				for _, c := range g.cells {
					a.hist[c.bucket] = c.count
				}
			}
			a.sum, a.csum, a.csq = g.sum.clone(), g.csum.clone(), g.csq.clone()
			if len(g.leaves) > 0 {
				a.leaves = make(map[uint32]int64, len(g.leaves))
				for _, l := range g.leaves {
					a.leaves[l.Leaf] = l.Count
				}
			}
		}
	} else {
		w := p.words
		for pos := 0; pos < len(w); {
			end := unitEnd(w, pos)
			t.finishUnit(w[pos+pEvents], int(w[pos+pNg]), w[pos+pHdr:end], acc, &out.Drops)
			pos = end
		}
		out.Units = int64(p.nunits)
	}
	t.finishGroups(&out, p.keys, acc)
	return out
}

// leafTotal returns the sum of the leaf counts (saturating at MaxInt64).
func leafTotal(ls []LeafCount) int64 {
	n := int64(0)
	for _, l := range ls {
		var ok bool
		if n, ok = addInt(n, l.Count); !ok {
			return math.MaxInt64
		}
	}
	return n
}
