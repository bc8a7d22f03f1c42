package windows

import (
	"math"
)

// unitKey returns the keyed 128-bit hash of the event's unit in this
// window: of (partition, offset) for an event without a unit.
func (w *openWindow) unitKey(e *Event) (k0, k1 uint64) {
	if e.Unit == "" {
		return w.eventSip.sumWords(uint64(uint32(e.Partition)), uint64(e.Offset))
	}
	return w.unitSip.sumString(e.Unit)
}

// touch reads one word in every 64-byte cache line (16 words) of the
// first 256 bytes of unit blob r (0: none), changing nothing, so that the
// memory is in cache when the unit is updated (see Tumbling.flush). It
// returns the sum of the words read.
func (w *openWindow) touch(r uint32) uint32 {
	if r == 0 {
		return 0
	}
	b := w.blob(r)
	n := min(len(b), 64)
	x := b[n-1]
	for i := 0; i < n; i += 16 {
		x += b[i]
	}
	return x
}

// addKeyed adds one validated, accepted event whose unit key is (k0, k1).
func (w *openWindow) addKeyed(e *Event, k0, k1 uint64) {
	if w.ar.fragmented() {
		w.compact()
	}
	cfg := &w.t.cfg
	cell := cfg.Histogram && e.Bucket >= 0
	valued := w.t.valued && e.HasValue
	need := w.hdr + gWords
	if cell {
		need += cellWords
	}
	if valued {
		need += valWords
	}
	u, ok := w.unit(uint32(k0>>32), k1, need)
	if !ok {
		w.drops.UnitCap++
		return
	}
	b := u.b
	b[hEvents] = satInc(b[hEvents])

	gid, gh, known := uint32(0), uint64(0), false
	if id, ok := w.gidx[e.Group]; ok {
		gid, gh, known = id, w.ghash[id], true
	} else {
		gh = w.groupHash(e.Group)
	}
	gp := mix(k1, gh)
	hdr := w.hdr
	ng := int(b[hMeta] & 0xffff)
	full := ng >= cfg.MaxGroups
	gpos := -1
	if full {
		// The head is the kept group of largest priority: a group above
		// it can be neither kept nor already held.
		top := b[hdr+gGid]
		if known && top == gid {
			gpos = hdr
		} else if !groupLess(gp, e.Group, mix(k1, w.ghash[top]), w.gkeys[top]) {
			return // bounded away; counted at release from the events
		}
	}
	if gpos < 0 && known {
		pos := hdr
		for range ng {
			if b[pos+gGid] == gid {
				gpos = pos
				break
			}
			pos += groupSize(b[pos+gCounts])
		}
	}
	if gpos < 0 {
		if full {
			// Evict the head to make room.
			top := b[hdr+gGid]
			w.remove(&u, hdr, groupSize(b[hdr+gCounts]))
			b[hMeta]--
			ng--
			w.unref(top)
		}
		if !known {
			gid = w.intern(e.Group, gh)
		}
		w.grefs[gid]++
		// Insert sorted by descending priority.
		pos := hdr
		for range ng {
			g := b[pos+gGid]
			if !groupLess(gp, e.Group, mix(k1, w.ghash[g]), w.gkeys[g]) {
				break
			}
			pos += groupSize(b[pos+gCounts])
		}
		w.insert(&u, pos, gWords)
		b = u.b
		b[pos+gGid], b[pos+gEvents], b[pos+gHist], b[pos+gNvals], b[pos+gCounts] = gid, 0, 0, 0, 0
		b[hMeta]++
		gpos = pos
	}
	b[gpos+gEvents] = satInc(b[gpos+gEvents])
	if cell {
		b[gpos+gHist] = satInc(b[gpos+gHist])
		w.addCell(&u, gpos, gp, uint32(e.Bucket))
		b = u.b
	}
	if valued {
		b[gpos+gNvals] = satInc(b[gpos+gNvals])
		p := uint32(mix(k0, mix(uint64(uint32(e.Partition)), uint64(e.Offset))) >> 32)
		w.addValue(&u, gpos, p, e.Value)
	}
}

// groupLess orders group priorities, ties broken by key.
func groupLess(pa uint64, ka string, pb uint64, kb string) bool {
	if pa != pb {
		return pa < pb
	}
	return ka < kb
}

// cellLess orders cell priorities, ties broken by bucket.
func cellLess(pa uint64, a uint32, pb uint64, b uint32) bool {
	if pa != pb {
		return pa < pb
	}
	return a < b
}

// addCell adds one event in cell bkt to the kept group at gpos, whose
// priority is gp.
func (w *openWindow) addCell(u *cursor, gpos int, gp uint64, bkt uint32) {
	b := u.b
	nb := int(b[gpos+gCounts] & 0xffff)
	first := gpos + gWords
	for i := first; i < first+cellWords*nb; i += cellWords {
		if b[i] == bkt {
			b[i+1] = satInc(b[i+1])
			return
		}
	}
	bp := mix(gp, uint64(bkt)+1)
	if nb >= w.t.cfg.MaxBuckets {
		top := b[first]
		if !cellLess(bp, bkt, mix(gp, uint64(top)+1), top) {
			return
		}
		w.remove(u, first, cellWords)
		b[gpos+gCounts]--
		nb--
	}
	pos := first
	for range nb {
		c := b[pos]
		if !cellLess(bp, bkt, mix(gp, uint64(c)+1), c) {
			break
		}
		pos += cellWords
	}
	w.insert(u, pos, cellWords)
	b = u.b
	b[pos], b[pos+1] = bkt, 1
	b[gpos+gCounts]++
}

// valueLess orders value priorities, ties broken by the value's bits (two
// values with equal priority and bits are interchangeable).
func valueLess(pa uint32, va float64, pb uint32, vb float64) bool {
	if pa != pb {
		return pa < pb
	}
	return math.Float64bits(va) < math.Float64bits(vb)
}

// valueAt returns the priority and value of the kept value at word i.
func valueAt(b []uint32, i int) (uint32, float64) {
	return b[i], math.Float64frombits(uint64(b[i+1]) | uint64(b[i+2])<<32)
}

// addValue adds value v with priority p to the kept group at gpos.
func (w *openWindow) addValue(u *cursor, gpos int, p uint32, v float64) {
	b := u.b
	counts := b[gpos+gCounts]
	nv := int(counts >> 16)
	first := gpos + gWords + cellWords*int(counts&0xffff)
	if nv >= w.t.cfg.MaxValues {
		if tp, tv := valueAt(b, first); !valueLess(p, v, tp, tv) {
			return
		}
		w.remove(u, first, valWords)
		b[gpos+gCounts] -= 1 << 16
		nv--
	}
	pos := first
	for range nv {
		if cp, cv := valueAt(b, pos); !valueLess(p, v, cp, cv) {
			break
		}
		pos += valWords
	}
	w.insert(u, pos, valWords)
	b = u.b
	bits := math.Float64bits(v)
	b[pos], b[pos+1], b[pos+2] = p, uint32(bits), uint32(bits>>32)
	b[gpos+gCounts] += 1 << 16
}

func satInc(x uint32) uint32 {
	if x == math.MaxUint32 {
		return x
	}
	return x + 1
}
