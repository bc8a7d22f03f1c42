package windows

import (
	"slices"
	"strings"
)

// finish applies the remaining bounds and returns the window's aggregate.
// The state must not be used afterwards.
func (w *openWindow) finish() Window {
	t := w.t
	out := t.emptyWindow(w.start)
	out.Drops = w.drops
	if !t.cfg.EventLevel {
		w.acc = make([]gacc, len(w.gkeys))
		// The aggregates are sums (exact for the values), so the order in
		// which units are visited does not matter: arena order.
		for _, r := range w.liveRefs() {
			b := w.blob(r)
			k1 := uint64(b[hK1lo]) | uint64(b[hK1hi])<<32
			t.finishUnit(k1, w.gkeys, b[hEvents], int(b[hMeta]&0xffff), b[w.hdr:], w.acc, &out.Drops)
		}
		out.Units = int64(w.live)
	}
	t.finishGroups(&out, w.gkeys, w.acc)
	return out
}

// emptyWindow returns the window starting at start with no contribution:
// what Poll emits for a window without state, and what the finishing
// functions start from.
func (t *Tumbling) emptyWindow(start int64) Window {
	return Window{Start: start, End: start + t.size, EventLevel: t.cfg.EventLevel, Sensitivity: t.sens, Partials: 1}
}

// finishUnit applies the remaining bounds to one kept unit — of keyed
// hash k1, with events accepted events and ng kept groups in the words b
// (laid out as in a unit blob, each group's first word indexing acc and
// keys) — adding its contributions to acc and what the bounds remove to
// d. Shared by Poll (unit blobs) and MergePartials (partial units), so
// that both finish a unit with the same arithmetic; the order of the
// groups, cells and values in b does not matter.
func (t *Tumbling) finishUnit(k1 uint64, keys []string, events uint32, ng int, b []uint32, acc []gacc, d *Drops) {
	cfg := &t.cfg
	perBucket, maxValues := uint32(cfg.MaxPerBucket), uint32(cfg.MaxValues)
	var keepCount, keepCells []uint32
	if cfg.MaxContributions > 0 {
		keepCount, keepCells = t.totalBound(k1, keys, ng, b, d)
	}
	kept := int64(0)
	pos, cell := 0, 0
	for j := range ng {
		g := b[pos : pos+groupSize(b[pos+gCounts])]
		pos += len(g)
		a := &acc[g[gGid]]
		events := g[gEvents]
		kept += int64(events)
		a.units++
		if cfg.Count {
			n := min(events, maxValues)
			if keepCount != nil {
				n = keepCount[j]
			}
			a.count += int64(n)
			d.Count += int64(events - min(events, maxValues))
		}
		nb, nv := int(g[gCounts]&0xffff), int(g[gCounts]>>16)
		cells := g[gWords : gWords+cellWords*nb]
		if cfg.Histogram {
			if a.hist == nil {
				a.hist = make([]int64, cfg.NumBuckets)
			}
			inCells := int64(0)
			for i := 0; i < len(cells); i += cellWords {
				n := cells[i+1]
				inCells += int64(n)
				k := min(n, perBucket)
				if keepCells != nil {
					k = keepCells[cell]
				}
				cell++
				a.hist[cells[i]] += int64(k)
				d.PerBucket += int64(n - min(n, perBucket))
			}
			d.Buckets += int64(g[gHist]) - inCells
		}
		if t.valued {
			vals := g[gWords+len(cells):]
			if keepCount != nil && uint32(nv) > keepCount[j] {
				vals = lowestValues(vals, int(keepCount[j]))
			}
			for i := 0; i < len(vals); i += valWords {
				_, v := valueAt(vals, i)
				t.addClamped(a, v)
			}
			d.Values += int64(g[gNvals]) - int64(nv)
		}
	}
	d.Groups += int64(events) - kept
}

// totalBound applies MaxContributions to the unit of finishUnit (see
// total.go): it returns the contributions kept in each group (by position
// in b; the count's events, and at most as many of the group's values for
// sums, means, variances and quantiles)
// and in each cell (by position among the unit's cells), nil where the
// bound does not bind, and adds what it removes to d.Total.
func (t *Tumbling) totalBound(k1 uint64, keys []string, ng int, b []uint32, d *Drops) (count, cells []uint32) {
	cfg := &t.cfg
	bound := uint32(cfg.MaxContributions)
	var gs, cs []totalSlot
	pos := 0
	for j := range ng {
		g := b[pos : pos+groupSize(b[pos+gCounts])]
		pos += len(g)
		key := keys[g[gGid]]
		if cfg.Count || t.valued {
			gs = append(gs, totalSlot{key: key, pos: j, n: min(g[gEvents], uint32(cfg.MaxValues))})
		}
		if cfg.Histogram {
			nb := int(g[gCounts] & 0xffff)
			for i := gWords; i < gWords+cellWords*nb; i += cellWords {
				cs = append(cs, totalSlot{key: key, bucket: g[i], pos: len(cs), n: min(g[i+1], uint32(cfg.MaxPerBucket))})
			}
		}
	}
	if n := totalKeep(mix(k1, tagTotalCount), bound, gs); n > 0 {
		d.Total += n
		count = slotCounts(gs)
	}
	if n := totalKeep(mix(k1, tagTotalHist), bound, cs); n > 0 {
		d.Total += n
		cells = slotCounts(cs)
	}
	return count, cells
}

// lowestValues returns the k values of vals (laid out as in a kept group,
// valWords each) that come first in valueLess order — the k of lowest
// keyed priority, a uniformly random k-subset of the group's values like
// the MaxValues reservoir they were kept by, and the same whatever the
// order of vals (Poll and MergePartials agree). vals is not modified.
func lowestValues(vals []uint32, k int) []uint32 {
	idx := make([]int, 0, len(vals)/valWords)
	for i := 0; i < len(vals); i += valWords {
		idx = append(idx, i)
	}
	slices.SortFunc(idx, func(a, b int) int {
		pa, va := valueAt(vals, a)
		pb, vb := valueAt(vals, b)
		switch {
		case valueLess(pa, va, pb, vb):
			return -1
		case valueLess(pb, vb, pa, va):
			return 1
		}
		return 0
	})
	out := make([]uint32, 0, k*valWords)
	for _, i := range idx[:k] {
		out = append(out, vals[i:i+valWords]...)
	}
	return out
}

// slotCounts returns the counts of slots indexed by their positions.
func slotCounts(slots []totalSlot) []uint32 {
	out := make([]uint32, len(slots))
	for _, s := range slots {
		out[s.pos] = s.n
	}
	return out
}

// finishGroups appends to out the groups with a contribution — keys[i]
// with accumulator acc[i] — sorted by key, and adds their clamping counts
// (and, with EventLevel, their events as units).
func (t *Tumbling) finishGroups(out *Window, keys []string, acc []gacc) {
	cfg := &t.cfg
	for gid, key := range keys {
		a := &acc[gid]
		if a.units == 0 {
			continue
		}
		if cfg.EventLevel {
			out.Units += a.units
		}
		out.Drops.Clamped += a.clamp
		g := Group{Key: key, Units: a.units, Histogram: a.hist, Values: a.values, sum: a.sum, csum: a.csum, csq: a.csq, Leaves: leafCounts(a.leaves)}
		if cfg.Count {
			g.Count = a.count
		}
		if !t.valued {
			g.Values = 0
		}
		g.finish()
		out.Groups = append(out.Groups, g)
	}
	slices.SortFunc(out.Groups, func(a, b Group) int { return strings.Compare(a.Key, b.Key) })
}
