package windows

import (
	"cmp"
	"slices"
)

// combineUnits merges the units of several partials into out: a k-way
// merge of their sorted unit lists, bottom-k again at every level.
func (t *Tumbling) combineUnits(out *Partial, parts []Partial) {
	cfg := &t.cfg
	keys, remaps := mergeKeys(parts)
	m := unitMerger{cfg: cfg, gh: t.groupHasher(out.Start, keys)}
	total := 0
	m.cs = make([]unitCursor, 0, len(parts))
	for i := range parts {
		if parts[i].nunits > 0 {
			m.cs = append(m.cs, unitCursor{parts[i].words, 0, parts[i].nunits, remaps[i]})
			total += len(parts[i].words)
		}
	}
	h := newUnitHeap(m.cs)
	m.w = make([]uint32, 0, total)
	kept := 0
	for len(h.h) > 0 {
		k0, k1 := h.pop(&m.same)
		if cfg.MaxUnits > 0 && kept >= cfg.MaxUnits {
			// Kept out by MaxUnits: units arrive in priority order.
			for _, o := range m.same {
				out.unitCap += int64(m.cs[o.c].w[o.start+pEvents])
			}
			continue
		}
		kept++
		if len(m.same) == 1 {
			m.copyUnit(m.same[0])
			continue
		}
		m.mergeUnit(k0, k1)
	}
	out.keys, out.words, out.nunits = keys, m.w, kept
	out.pruneKeys()
}

// unitCursor is one partial's sorted unit list being merged: its words,
// the position of its next unit, the units left and its key remapping.
type unitCursor struct {
	w         []uint32
	pos, left int
	remap     []uint32
}

// key returns the key of the cursor's next unit.
func (c *unitCursor) key() (uint32, uint64) {
	return c.w[c.pos+pK0], uint64(c.w[c.pos+pK1lo]) | uint64(c.w[c.pos+pK1hi])<<32
}

// unitOcc is one occurrence of a unit in a cursor: its words.
type unitOcc struct {
	c          int // cursor
	start, end int // the unit's words
}

// unitHeap is a min-heap of cursors by their next unit's key. Each entry
// carries that key, so that comparing two entries reads no cursor (and
// inlines: this heap is the merge's inner loop with many small partials).
type unitHeap struct {
	cs []unitCursor
	h  []unitHead
}

// unitHead is a heap entry: cursor c, whose next unit has key (k0, k1).
type unitHead struct {
	k0 uint32
	k1 uint64
	c  int
}

// newUnitHeap returns the heap of all of cs.
func newUnitHeap(cs []unitCursor) unitHeap {
	u := unitHeap{cs: cs, h: make([]unitHead, len(cs))}
	for i := range u.h {
		k0, k1 := cs[i].key()
		u.h[i] = unitHead{k0, k1, i}
	}
	for i := len(u.h)/2 - 1; i >= 0; i-- {
		u.down(i)
	}
	return u
}

// before reports whether a's unit comes before b's: unitCmp(a, b) < 0,
// written out so that it inlines.
func (a *unitHead) before(b *unitHead) bool {
	return a.k0 < b.k0 || a.k0 == b.k0 && a.k1 < b.k1
}

// down restores the heap order below entry i.
func (u *unitHeap) down(i int) {
	h := u.h
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h[r].before(&h[l]) {
			c = r
		}
		if !h[c].before(&h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// pop advances every cursor whose next unit has the smallest key past
// that unit, sets *same to the unit's occurrences, and returns its key.
// The heap must not be empty.
func (u *unitHeap) pop(same *[]unitOcc) (uint32, uint64) {
	k0, k1 := u.h[0].k0, u.h[0].k1
	*same = (*same)[:0]
	for len(u.h) > 0 && u.h[0].k0 == k0 && u.h[0].k1 == k1 {
		c := &u.cs[u.h[0].c]
		end := unitEnd(c.w, c.pos)
		*same = append(*same, unitOcc{u.h[0].c, c.pos, end})
		c.pos = end
		if c.left--; c.left == 0 {
			u.h[0] = u.h[len(u.h)-1]
			u.h = u.h[:len(u.h)-1]
		} else {
			u.h[0].k0, u.h[0].k1 = c.key()
		}
		u.down(0)
	}
	return k0, k1
}

// unitMerger holds combineUnits' output and reusable buffers.
type unitMerger struct {
	cfg  *Config
	gh   *groupHasher
	cs   []unitCursor
	w    []uint32 // the merged units
	same []unitOcc
	gs   []gref
	ds   []dgroup
	s    scratch
}

// gref is one occurrence of a group in a merged unit.
type gref struct {
	m   uint32 // merged key index
	c   int    // cursor
	pos int    // the group's first word
}

// dgroup is a distinct group of a merged unit: its occurrences gs[from:to].
type dgroup struct {
	m        uint32
	from, to int // its grefs
	prio     uint64
}

// copyUnit appends a unit present in one partial only, with its group
// indices remapped.
func (m *unitMerger) copyUnit(o unitOcc) {
	src, remap := m.cs[o.c].w, m.cs[o.c].remap
	w := append(m.w, src[o.start:o.start+pHdr]...)
	for pos := o.start + pHdr; pos < o.end; {
		n := groupSize(src[pos+gCounts])
		g := len(w)
		w = append(w, src[pos:pos+n]...)
		w[g+gGid] = remap[src[pos+gGid]]
		pos += n
	}
	m.w = w
}

// mergeUnit appends the unit (k0, k1) present in the partials of m.same:
// its groups' union, bottom-k under MaxGroups, each group merged.
func (m *unitMerger) mergeUnit(k0 uint32, k1 uint64) {
	cfg, cs := m.cfg, m.cs
	events := uint32(0)
	gs := m.gs[:0]
	for _, o := range m.same {
		src, remap := cs[o.c].w, cs[o.c].remap
		events = satAdd(events, src[o.start+pEvents])
		for pos := o.start + pHdr; pos < o.end; pos += groupSize(src[pos+gCounts]) {
			gs = append(gs, gref{remap[src[pos+gGid]], o.c, pos})
		}
	}
	slices.SortFunc(gs, func(a, b gref) int { return cmp.Compare(a.m, b.m) })
	ds := m.ds[:0]
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
			ds[i].prio = mix(k1, m.gh.hash(ds[i].m))
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
	m.gs, m.ds = gs, ds
	m.w = append(m.w, k0, uint32(k1), uint32(k1>>32), events, uint32(len(ds)))
	for _, d := range ds {
		if d.to-d.from == 1 {
			r := gs[d.from]
			src := cs[r.c].w
			g := len(m.w)
			m.w = append(m.w, src[r.pos:r.pos+groupSize(src[r.pos+gCounts])]...)
			m.w[g+gGid] = d.m
			continue
		}
		m.mergeGroup(k1, d)
	}
}

// mergeGroup appends group d of unit k1, present in several partials:
// counters add up, cells of one bucket add up and MaxBuckets keeps the
// cells of smallest priority, MaxValues the smallest values.
func (m *unitMerger) mergeGroup(k1 uint64, d dgroup) {
	cfg, s := m.cfg, &m.s
	var ev, hist, nvals uint32
	s.cells, s.vals = s.cells[:0], s.vals[:0]
	for _, r := range m.gs[d.from:d.to] {
		g := m.cs[r.c].w[r.pos:]
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
		gp := mix(k1, m.gh.hash(d.m))
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
	m.w = append(m.w, d.m, ev, hist, nvals, uint32(len(s.cells))|uint32(len(s.vals))<<16)
	m.w = s.appendLists(m.w)
}
