package windows

import (
	"slices"
)

// unit returns a cursor on the blob of unit (k0, k1), adding the unit with
// room for need words if new, or false if the unit is not kept under
// MaxUnits.
func (w *openWindow) unit(k0 uint32, k1 uint64, need int) (cursor, bool) {
	mask := len(w.idx) - 1
	pos := int(k1) & mask
	for ; ; pos = (pos + 1) & mask {
		r := w.idx[pos]
		if r == 0 {
			break
		}
		if b := w.blob(r); b[hK0] == k0 && b[hK1lo] == uint32(k1) && b[hK1hi] == uint32(k1>>32) {
			return cursor{ref: r, slot: pos, b: b, used: -1}, true
		}
	}
	moved := false
	if c := w.t.cfg.MaxUnits; c > 0 && w.live >= c {
		tb := w.blob(w.capped[0])
		if k0 > tb[hK0] || (k0 == tb[hK0] && k1 > uint64(tb[hK1lo])|uint64(tb[hK1hi])<<32) {
			return cursor{}, false
		}
		w.evictTop()
		moved = true
	}
	if 2*(w.live+1) > len(w.idx) { // keep the load factor ≤ 1/2
		w.grow()
		moved = true
	}
	if moved {
		pos = w.emptySlot(k1)
	}
	c := classOf(need)
	r := w.ar.alloc(c)
	b := w.ar.at(r)[:classWords[c]:classWords[c]]
	b[hK1lo], b[hK1hi], b[hK0], b[hEvents], b[hMeta] = uint32(k1), uint32(k1>>32), k0, 0, uint32(c)<<16
	w.idx[pos] = r
	w.live++
	if w.hdr == hdrCapped {
		b[hHeap] = uint32(len(w.capped))
		w.capped = append(w.capped, r)
		w.siftUp(len(w.capped) - 1)
	}
	return cursor{ref: r, slot: pos, b: b, used: w.hdr}, true
}

// compact compacts the arena and updates the references to moved blobs.
func (w *openWindow) compact() {
	mask := len(w.idx) - 1
	w.ar.compact(func(old, new uint32) {
		pos := int(w.k1Of(new)) & mask
		for w.idx[pos] != old {
			pos = (pos + 1) & mask
		}
		w.idx[pos] = new
		if w.hdr == hdrCapped {
			w.capped[w.ar.at(new)[hHeap]] = new
		}
	})
}

// liveRefs returns the references of the window's units in arena order
// (ascending), so that a pass over every unit reads the arena forwards
// instead of in the table's random order. In table order, loading a
// unit's first word was a cache miss for most units: 74 % of the samples
// of partialUnits' own time in a profile of a scale-out instance.
// BenchmarkPartialEncode (100 000 units, bounds 1), before → after in
// alternating runs: Poll 20 → 7.8 ms, PollPartials 23–27 → 9–11 ms.
func (w *openWindow) liveRefs() []uint32 {
	keys := make([]uint64, 0, w.live)
	for _, r := range w.idx {
		if r != 0 {
			keys = append(keys, uint64(r)<<32)
		}
	}
	if len(keys) < radixMin {
		slices.Sort(keys)
	} else {
		radixSortHigh(keys)
	}
	out := make([]uint32, len(keys))
	for i, k := range keys {
		out[i] = uint32(k >> 32)
	}
	return out
}

// k1Of returns the k1 of unit blob r.
func (w *openWindow) k1Of(r uint32) uint64 {
	s := w.ar.at(r)
	return uint64(s[hK1lo]) | uint64(s[hK1hi])<<32
}

// emptySlot returns the first empty slot of idx from k1's home.
func (w *openWindow) emptySlot(k1 uint64) int {
	mask := len(w.idx) - 1
	pos := int(k1) & mask
	for w.idx[pos] != 0 {
		pos = (pos + 1) & mask
	}
	return pos
}

// grow doubles the table.
func (w *openWindow) grow() {
	old := w.idx
	w.idx = make([]uint32, 2*len(old))
	for _, r := range old {
		if r != 0 {
			w.idx[w.emptySlot(w.k1Of(r))] = r
		}
	}
}

// evictTop removes the kept unit of largest priority (MaxUnits).
func (w *openWindow) evictTop() {
	r := w.capped[0]
	b := w.blob(r)
	w.drops.UnitCap += int64(b[hEvents])
	pos := w.hdr
	for range b[hMeta] & 0xffff {
		w.unref(b[pos+gGid])
		pos += groupSize(b[pos+gCounts])
	}
	// Pop the heap.
	last := len(w.capped) - 1
	w.heapSet(0, w.capped[last])
	w.capped = w.capped[:last]
	if last > 0 {
		w.siftDown(0)
	}
	// Delete from the table (backward-shift deletion for linear probing).
	mask := len(w.idx) - 1
	hole := int(w.k1Of(r)) & mask
	for w.idx[hole] != r {
		hole = (hole + 1) & mask
	}
	w.idx[hole] = 0
	for next := (hole + 1) & mask; w.idx[next] != 0; next = (next + 1) & mask {
		j := w.idx[next]
		home := int(w.k1Of(j)) & mask
		// Move j into the hole if its home is not cyclically in (hole, next].
		if (next-home)&mask >= (next-hole)&mask {
			w.idx[hole] = j
			w.idx[next] = 0
			hole = next
		}
	}
	w.ar.release(r)
	w.live--
}

// heapSet puts unit blob r at position i of the MaxUnits heap.
func (w *openWindow) heapSet(i int, r uint32) {
	w.capped[i] = r
	w.ar.at(r)[hHeap] = uint32(i)
}

// unitAbove orders units by descending priority (k0, then k1) for the
// max-heap of MaxUnits.
func (w *openWindow) unitAbove(a, b uint32) bool {
	ra, rb := w.ar.at(a), w.ar.at(b)
	if ra[hK0] != rb[hK0] {
		return ra[hK0] > rb[hK0]
	}
	return w.k1Of(a) > w.k1Of(b)
}

func (w *openWindow) siftUp(i int) {
	h := w.capped
	for i > 0 {
		p := (i - 1) / 2
		if !w.unitAbove(h[i], h[p]) {
			return
		}
		a, b := h[i], h[p]
		w.heapSet(i, b)
		w.heapSet(p, a)
		i = p
	}
}

func (w *openWindow) siftDown(i int) {
	h := w.capped
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && w.unitAbove(h[r], h[l]) {
			c = r
		}
		if !w.unitAbove(h[c], h[i]) {
			return
		}
		a, b := h[i], h[c]
		w.heapSet(i, b)
		w.heapSet(c, a)
		i = c
	}
}
