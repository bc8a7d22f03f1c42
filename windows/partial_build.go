package windows

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

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
