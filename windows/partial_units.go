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
