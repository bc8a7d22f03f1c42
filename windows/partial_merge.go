package windows

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

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
			k1 := uint64(w[pos+pK1lo]) | uint64(w[pos+pK1hi])<<32
			t.finishUnit(k1, p.keys, w[pos+pEvents], int(w[pos+pNg]), w[pos+pHdr:end], acc, &out.Drops)
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
