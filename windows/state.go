package windows

import (
	"math"
	"slices"
	"strings"
)

// This file holds the state of one open window.
//
// Unit mode. Every unit has one blob (see arena): a run of uint32 words
// holding its identity, counters and every contribution it keeps, so that
// an event touches one table slot and one or two cache lines. Units are
// found through an open-addressing table of blob references, keyed by 96
// bits of the unit's 128-bit keyed hash (k0, k1): k1 and the top half of
// k0. Two of n units collide with probability about n²/2^97 per window
// (≈ 6·10^-14 for n = 10^8). A blob is laid out as
//
//	header   k1 (2 words), k0 top half, events, ng | class << 16
//	         [, position in the MaxUnits heap]
//	groups   ng kept groups in descending priority, each:
//	         gid, events, hist, nvals, nb | nv << 16,
//	         nb kept cells (bucket, count) in descending priority,
//	         nv kept values (priority, value bits low, high) in
//	         descending order of (priority, bits)
//
// so the first group, cell and value of each list is the one to evict.
// With every bound 1 and an event with a cell and a value, a unit takes 15
// words (60 bytes; 16 with MaxUnits), against 84 bytes of linked records
// in the first implementation. Counters saturate at 2^32 − 1.
//
// Priorities (smaller is kept):
//
//	unit        top 32 bits of k0          (ties: k1)
//	group       mix(k1, H(group))          (ties: group key)
//	bucket      mix(group priority, b+1)   (ties: bucket)
//	value       mix(k0, mix(part, offset)) top 32 bits (ties: value bits)
//
// where H is SipHash under the window's key. A unit keeps the k candidates
// of smallest priority among all it touched in the window: a uniformly
// random subset whose choice does not depend on arrival order. A
// candidate that is evicted or rejected can never come back, because the
// k-th smallest priority only decreases as candidates arrive, so the online
// result equals the offline one.

// Word offsets in a unit blob's header.
const (
	hK1lo   = 0        // k1, low half
	hK1hi   = 1        // k1, high half
	hK0     = 2        // top half of k0
	hEvents = 3        // accepted events of the unit in the window (saturating)
	hMeta   = metaWord // number of kept groups (bits 0–15) | size class << 16
	hHeap   = 5        // position in the MaxUnits heap (only with MaxUnits)
	// hdrWords and hdrCapped are the header sizes without and with MaxUnits.
	hdrWords  = 5
	hdrCapped = 6
)

// Word offsets in a kept group, and entry sizes.
const (
	gGid    = 0 // interned group
	gEvents = 1 // events of the unit in this group
	gHist   = 2 // of which with a cell
	gNvals  = 3 // of which with a value
	gCounts = 4 // kept cells (bits 0–15) | kept values << 16
	// gWords is the size of a group's own words; its cells and values
	// follow.
	gWords    = 5
	cellWords = 2 // bucket, count
	valWords  = 3 // priority, value bits (low, high)
	// maxBlobWords bounds a blob: header and MaxGroups groups of
	// MaxBuckets cells and MaxValues values, at most MaxBound each
	// (≈ 2.1·10^10 words; every size class up to it exists).
	maxBlobWords = hdrCapped + MaxBound*(gWords+MaxBound*(cellWords+valWords))
)

// groupSize is the number of words of a kept group with counts word c.
func groupSize(c uint32) int {
	return gWords + cellWords*int(c&0xffff) + valWords*int(c>>16)
}

// Estimates in bytes, for the memory figures.
const (
	// groupBytes estimates one interned group apart from its key bytes:
	// a map entry (16-byte string header + 4-byte id, at the Swiss table's
	// average load ≈ 0.7 with one control byte per slot ≈ 32 bytes) plus
	// the key slice header (16), hash (8) and reference count (4).
	groupBytes = 60
	// accBytes is one event-level group accumulator: the gacc struct
	// (≈ 120 bytes) and two exact sums of typically one partial each.
	accBytes = 136
	// leafBytes is one non-empty quantile leaf of an event-level group
	// accumulator: a map entry of 12 bytes (uint32 key, int64 count) at the
	// Swiss table's average load ≈ 0.7 with one control byte per slot.
	leafBytes = 20
)

// gacc accumulates one group's output.
type gacc struct {
	hist                        []int64
	units, count, values, clamp int64
	sum, csum                   exactSum
	csq                         exactSum         // Σ fl(fl(v − mid)²), with Variance
	leaves                      map[uint32]int64 // quantile tree leaf counts, with Quantiles
}

// openWindow is the state of one open window.
type openWindow struct {
	t     *Tumbling
	start int64
	wk0   uint64 // window-specific hashing key
	wk1   uint64
	// SipHash states under (wk0, wk1) after the domain tag: the first
	// message word is the same for every unit, event or group key.
	unitSip, eventSip, groupSip sip

	// Interned groups. A gid is reused after its group is released.
	gidx  map[string]uint32
	gkeys []string
	ghash []uint64
	grefs []uint32 // unit mode: kept (unit, group) pairs referencing the gid
	gfree []uint32

	// Unit mode.
	idx    []uint32 // open-addressing table of blob references (0: empty), len power of 2
	ar     arena
	hdr    int      // header words: hdrWords, or hdrCapped with MaxUnits
	live   int      // units in the table
	capped []uint32 // max-heap of units by priority, with MaxUnits

	// Event mode.
	acc   []gacc
	gheap []uint32 // max-heap of groups by hash, with MaxOpenGroups

	drops Drops // UnitCap and GroupCap, counted as events arrive
}

// windowKey returns the hashing key of the window starting at start:
// SipHash of the start under the seed's key.
func (t *Tumbling) windowKey(start int64) (uint64, uint64) {
	h := newSip(t.k0, t.k1)
	h.word(uint64(start))
	h.word(tagWindow)
	return h.sum128()
}

func newOpenWindow(t *Tumbling, start int64) *openWindow {
	a, b := t.windowKey(start)
	w := t.spare
	if w != nil {
		// Reuse the table and arena of a closed window: less allocation
		// and GC work.
		t.spare = nil
		clear(w.idx)
		w.ar.reset()
		*w = openWindow{
			t: t, gidx: w.gidx,
			gkeys: w.gkeys[:0], ghash: w.ghash[:0], grefs: w.grefs[:0], gfree: w.gfree[:0],
			idx: w.idx, ar: w.ar, capped: w.capped[:0], gheap: w.gheap[:0],
		}
	} else {
		w = &openWindow{t: t, gidx: make(map[string]uint32)}
		if !t.cfg.EventLevel {
			w.idx = make([]uint32, 16)
		}
	}
	w.start, w.wk0, w.wk1 = start, a, b
	w.hdr = hdrWords
	if t.cfg.MaxUnits > 0 {
		w.hdr = hdrCapped
	}
	for _, s := range []struct {
		h   *sip
		tag uint64
	}{{&w.unitSip, tagUnit}, {&w.eventSip, tagEvent}, {&w.groupSip, tagGroup}} {
		*s.h = newSip(a, b)
		s.h.word(s.tag)
	}
	return w
}

// recycle keeps a finished window's table and arena for the next window.
// The slices handed out in the Window (histograms, partials) belong to acc,
// which is not kept.
func (t *Tumbling) recycle(w *openWindow) {
	if t.spare == nil && !t.cfg.EventLevel {
		w.acc = nil
		w.live = 0
		clear(w.gidx)
		clear(w.gkeys) // do not retain key strings
		t.spare = w
	}
}

// Domain-separation tags for the hashed messages.
const (
	tagWindow = 1
	tagUnit   = 2
	tagEvent  = 3
	tagGroup  = 4
	// tagPartial separates the configuration fingerprint of partials
	// (see fingerprint).
	tagPartial = 5
)

// groupHash is the keyed hash of a group key in this window.
func (w *openWindow) groupHash(key string) uint64 {
	a, _ := w.groupSip.sumString(key)
	return a
}

// intern returns the gid of key, adding it with hash gh.
func (w *openWindow) intern(key string, gh uint64) uint32 {
	var gid uint32
	if n := len(w.gfree); n > 0 {
		gid = w.gfree[n-1]
		w.gfree = w.gfree[:n-1]
		w.gkeys[gid] = strings.Clone(key)
		w.ghash[gid] = gh
	} else {
		gid = uint32(len(w.gkeys))
		w.gkeys = append(w.gkeys, strings.Clone(key))
		w.ghash = append(w.ghash, gh)
		if !w.t.cfg.EventLevel {
			w.grefs = append(w.grefs, 0)
		}
	}
	w.gidx[w.gkeys[gid]] = gid
	return gid
}

// release forgets an interned group that nothing references any more.
func (w *openWindow) release(gid uint32) {
	delete(w.gidx, w.gkeys[gid])
	w.gkeys[gid] = ""
	w.gfree = append(w.gfree, gid)
}

// unref drops one reference to an interned group.
func (w *openWindow) unref(gid uint32) {
	w.grefs[gid]--
	if w.grefs[gid] == 0 {
		w.release(gid)
	}
}

// blob returns the words of unit blob r.
func (w *openWindow) blob(r uint32) []uint32 {
	s := w.ar.at(r)
	n := classWords[uint8(s[hMeta]>>16)]
	return s[:n:n]
}

// cursor is a unit blob being updated: its reference, its slot in idx,
// its words and the number in use (−1: not known yet). Growing the blob
// moves it; cursor follows.
type cursor struct {
	ref  uint32
	slot int
	b    []uint32
	used int
}

// inUse returns the number of words in use in the cursor's blob.
func (w *openWindow) inUse(u *cursor) int {
	if u.used < 0 {
		u.used = w.used(u.b)
	}
	return u.used
}

// used returns the number of words in use in blob b.
func (w *openWindow) used(b []uint32) int {
	pos := w.hdr
	for range b[hMeta] & 0xffff {
		pos += groupSize(b[pos+gCounts])
	}
	return pos
}

// insert opens n words at position at of the unit's blob, moving the rest
// of its state up and the blob to a larger class if needed. The counts
// that describe the new words must be updated after the call.
func (w *openWindow) insert(u *cursor, at, n int) {
	used := w.inUse(u)
	if used+n > len(u.b) {
		old := u.ref
		c := classOf(used + n)
		u.ref = w.ar.alloc(c)
		b := w.ar.at(u.ref)[:classWords[c]:classWords[c]]
		copy(b, u.b[:used])
		b[hMeta] = b[hMeta]&0xffff | uint32(c)<<16
		w.ar.release(old)
		u.b = b
		w.idx[u.slot] = u.ref
		if w.hdr == hdrCapped {
			w.capped[b[hHeap]] = u.ref
		}
	}
	copy(u.b[at+n:used+n], u.b[at:used])
	u.used += n
}

// remove deletes n words at position at of the unit's blob. The counts
// that describe the removed words must be updated after the call.
func (w *openWindow) remove(u *cursor, at, n int) {
	used := w.inUse(u)
	copy(u.b[at:used-n], u.b[at+n:used])
	u.used -= n
}

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

// addEvent aggregates one event directly (event-level privacy).
func (w *openWindow) addEvent(e *Event) {
	cfg := &w.t.cfg
	gid, ok := w.gidx[e.Group]
	if !ok {
		gh := w.groupHash(e.Group)
		if c := cfg.MaxOpenGroups; c > 0 && len(w.gidx) >= c {
			top := w.gheap[0]
			if !groupLess(gh, e.Group, w.ghash[top], w.gkeys[top]) {
				w.drops.GroupCap++
				return
			}
			w.drops.GroupCap += w.acc[top].units
			w.acc[top] = gacc{}
			w.release(top)
			w.gheap[0] = w.gheap[len(w.gheap)-1]
			w.gheap = w.gheap[:len(w.gheap)-1]
			w.groupSiftDown(0)
		}
		gid = w.intern(e.Group, gh)
		if int(gid) == len(w.acc) {
			w.acc = append(w.acc, gacc{})
		}
		if cfg.Histogram {
			w.acc[gid].hist = make([]int64, cfg.NumBuckets)
		}
		if cfg.MaxOpenGroups > 0 {
			w.gheap = append(w.gheap, gid)
			w.groupSiftUp(len(w.gheap) - 1)
		}
	}
	a := &w.acc[gid]
	a.units++
	a.count++
	if cfg.Histogram && e.Bucket >= 0 {
		a.hist[e.Bucket]++
	}
	if w.t.valued && e.HasValue {
		w.t.addClamped(a, e.Value)
	}
}

// addClamped adds one kept value to a group accumulator.
func (t *Tumbling) addClamped(a *gacc, v float64) {
	cfg := &t.cfg
	if v < cfg.Lower {
		v = cfg.Lower
		a.clamp++
	} else if v > cfg.Upper {
		v = cfg.Upper
		a.clamp++
	}
	a.values++
	if cfg.Sum {
		a.sum.add(v)
	}
	if cfg.Mean || cfg.Variance {
		d := v - t.mid
		a.csum.add(d)
		if cfg.Variance {
			a.csq.add(d * d)
		}
	}
	if t.leaves > 0 {
		if a.leaves == nil {
			a.leaves = make(map[uint32]int64)
		}
		a.leaves[LeafOf(v, cfg.Lower, cfg.Upper, t.leaves)]++
	}
}

func (w *openWindow) groupAbove(a, b uint32) bool {
	return groupLess(w.ghash[b], w.gkeys[b], w.ghash[a], w.gkeys[a])
}

func (w *openWindow) groupSiftUp(i int) {
	h := w.gheap
	for i > 0 {
		p := (i - 1) / 2
		if !w.groupAbove(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (w *openWindow) groupSiftDown(i int) {
	h := w.gheap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && w.groupAbove(h[r], h[l]) {
			c = r
		}
		if !w.groupAbove(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

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
			t.finishUnit(b[hEvents], int(b[hMeta]&0xffff), b[w.hdr:], w.acc, &out.Drops)
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

// finishUnit applies the remaining bounds to one kept unit — events
// accepted events and ng kept groups in the words b (laid out as in a unit
// blob, each group's first word indexing acc) — adding its contributions
// to acc and what the bounds remove to d. Shared by Poll (unit blobs) and
// MergePartials (partial units), so that both finish a unit with the same
// arithmetic; the order of the groups, cells and values in b does not
// matter.
func (t *Tumbling) finishUnit(events uint32, ng int, b []uint32, acc []gacc, d *Drops) {
	cfg := &t.cfg
	perBucket, maxValues := uint32(cfg.MaxPerBucket), uint32(cfg.MaxValues)
	kept := int64(0)
	pos := 0
	for range ng {
		g := b[pos : pos+groupSize(b[pos+gCounts])]
		pos += len(g)
		a := &acc[g[gGid]]
		events := g[gEvents]
		kept += int64(events)
		a.units++
		if cfg.Count {
			a.count += int64(min(events, maxValues))
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
				a.hist[cells[i]] += int64(min(n, perBucket))
				d.PerBucket += int64(n - min(n, perBucket))
			}
			d.Buckets += int64(g[gHist]) - inCells
		}
		if t.valued {
			vals := g[gWords+len(cells):]
			for i := 0; i < len(vals); i += valWords {
				_, v := valueAt(vals, i)
				t.addClamped(a, v)
			}
			d.Values += int64(g[gNvals]) - int64(nv)
		}
	}
	d.Groups += int64(events) - kept
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

// memory estimates the bytes held by the window, split into per-unit state
// (unit table and blobs) and per-group state (interned groups and
// accumulators).
func (w *openWindow) memory() (units, groups int64) {
	units = int64(cap(w.idx))*4 + w.ar.bytes() + int64(cap(w.capped))*4
	groups = int64(cap(w.gkeys))*groupBytes + int64(cap(w.gheap))*4
	for _, k := range w.gkeys {
		groups += int64(len(k))
	}
	if w.t.cfg.EventLevel {
		groups += int64(cap(w.acc)) * accBytes
		if w.t.cfg.Histogram {
			groups += int64(len(w.gidx)) * int64(w.t.cfg.NumBuckets) * 8
		}
		if w.t.leaves > 0 {
			for i := range w.acc {
				groups += int64(len(w.acc[i].leaves)) * leafBytes
			}
		}
	}
	return units, groups
}
