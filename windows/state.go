package windows

import (
	"math"
	"slices"
	"strings"
)

// This file holds the state of one open window.
//
// Unit mode. Every unit has a record in an open-addressing table keyed by
// 96 bits of its 128-bit keyed hash (k0, k1): k1 and the top half of k0.
// Two of n units collide with probability about n²/2^97 per window
// (≈ 6·10^-14 for n = 10^8). A unit's kept groups form a linked list of
// grec, sorted by descending priority, so the head is the one to evict;
// each kept group has linked lists of kept buckets (brec) and kept values
// (vrec), also sorted by descending priority. Records live in slabs indexed
// by uint32 (index 0 is "none") with free lists, so the state holds no Go
// pointers and costs the garbage collector nothing to scan.
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

// urec is a tracked unit (24 bytes).
type urec struct {
	k1     uint64
	k0     uint32 // top half of k0
	events uint32 // all accepted events of the unit in the window (saturating)
	head   uint32 // first kept group (highest priority)
	// hp is the top 32 bits of the head group's priority when the unit
	// holds MaxGroups groups, else 0. A new group whose priority has larger
	// top bits can be neither kept nor already held, so it is rejected
	// without walking the list (0 disables that shortcut).
	hp uint32
}

// grec is a kept group of one unit (32 bytes).
type grec struct {
	gid    uint32 // interned group
	events uint32 // events of the unit in this group
	hist   uint32 // of which with a bucket
	nvals  uint32 // of which with a value
	next   uint32 // next kept group of the unit; free-list link
	bkts   uint32 // first kept bucket
	vals   uint32 // first kept value
	nb, nv uint16 // kept buckets, kept values
}

// brec is a kept histogram cell of one unit and group (12 bytes).
type brec struct {
	bucket uint32
	count  uint32 // events in the cell (saturating; capped at release)
	next   uint32
}

// vrec is a kept value of one unit and group (16 bytes).
type vrec struct {
	v    float64 // raw value, clamped at release
	prio uint32
	next uint32
}

// Record sizes in bytes, for the memory estimate.
const (
	urecBytes = 24
	grecBytes = 32
	brecBytes = 12
	vrecBytes = 16
	// groupBytes estimates one interned group apart from its key bytes:
	// a map entry (16-byte string header + 4-byte id, at the Swiss table's
	// average load ≈ 0.7 with one control byte per slot ≈ 32 bytes) plus
	// the key slice header (16), hash (8) and reference count (4).
	groupBytes = 60
	// accBytes is one event-level group accumulator: the gacc struct
	// (≈ 120 bytes) and two exact sums of typically one partial each.
	accBytes = 136
)

// gacc accumulates one group's output.
type gacc struct {
	hist                        []int64
	units, count, values, clamp int64
	sum, csum                   exactSum
}

// openWindow is the state of one open window.
type openWindow struct {
	t     *Tumbling
	start int64
	wk0   uint64 // window-specific hashing key
	wk1   uint64

	// Interned groups. A gid is reused after its group is released.
	gidx  map[string]uint32
	gkeys []string
	ghash []uint64
	grefs []uint32 // unit mode: kept (unit, group) pairs referencing the gid
	gfree []uint32

	// Unit mode.
	idx    []uint32   // open-addressing index into recs (0: empty), len power of 2
	recs   slab[urec] // index 0 unused in every slab
	grp    slab[grec]
	bkt    slab[brec]
	val    slab[vrec]
	grpFr  uint32
	bktFr  uint32
	valFr  uint32
	recFr  uint32   // free records, linked through head
	live   int      // units in the table
	capped []uint32 // max-heap of units by priority, with MaxUnits

	// Event mode.
	acc   []gacc
	gheap []uint32 // max-heap of groups by hash, with MaxOpenGroups

	drops Drops // UnitCap and GroupCap, counted as events arrive
}

func newOpenWindow(t *Tumbling, start int64) *openWindow {
	h := newSip(t.k0, t.k1)
	h.word(uint64(start))
	h.word(tagWindow)
	a, b := h.sum128()
	if w := t.spare; w != nil {
		// Reuse the slabs of a closed window: less allocation and GC work.
		t.spare = nil
		clear(w.idx)
		for _, sl := range []interface{ reset() }{&w.recs, &w.grp, &w.bkt, &w.val} {
			sl.reset()
		}
		*w = openWindow{
			t: t, start: start, wk0: a, wk1: b, gidx: w.gidx,
			gkeys: w.gkeys[:0], ghash: w.ghash[:0], grefs: w.grefs[:0], gfree: w.gfree[:0],
			idx: w.idx, recs: w.recs, grp: w.grp, bkt: w.bkt, val: w.val,
			capped: w.capped[:0], gheap: w.gheap[:0],
		}
		w.recs.push(urec{})
		w.grp.push(grec{})
		w.bkt.push(brec{})
		w.val.push(vrec{})
		return w
	}
	w := &openWindow{t: t, start: start, wk0: a, wk1: b, gidx: make(map[string]uint32)}
	if !t.cfg.EventLevel {
		w.idx = make([]uint32, 16)
		w.recs.push(urec{})
		w.grp.push(grec{})
		w.bkt.push(brec{})
		w.val.push(vrec{})
	}
	return w
}

// recycle keeps a finished window's slabs for the next window. The slices
// handed out in the Window (histograms, partials) belong to acc, which is
// not kept.
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
)

// groupHash is the keyed hash of a group key in this window.
func (w *openWindow) groupHash(key string) uint64 {
	h := newSip(w.wk0, w.wk1)
	h.word(tagGroup)
	h.str(key)
	a, _ := h.sum128()
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

// add adds one validated, accepted event.
func (w *openWindow) add(e *Event) {
	if w.t.cfg.EventLevel {
		w.addEvent(e)
		return
	}
	h := newSip(w.wk0, w.wk1)
	if e.Unit == "" {
		h.word(tagEvent)
		h.word(uint64(uint32(e.Partition)))
		h.word(uint64(e.Offset))
	} else {
		h.word(tagUnit)
		h.str(e.Unit)
	}
	k0, k1 := h.sum128()
	u := w.unit(uint32(k0>>32), k1)
	if u == 0 {
		w.drops.UnitCap++
		return
	}
	r := w.recs.at(u)
	r.events = satInc(r.events)

	cfg := &w.t.cfg
	gid, gh, known := uint32(0), uint64(0), false
	if id, ok := w.gidx[e.Group]; ok {
		gid, gh, known = id, w.ghash[id], true
	} else {
		gh = w.groupHash(e.Group)
	}
	gp := mix(k1, gh)
	if r.hp != 0 && uint32(gp>>32) > r.hp {
		return // full, and above every kept group: bounded away
	}

	// Find the group among the unit's kept groups.
	gi, n := r.head, 0
	for gi != 0 && (!known || w.grp.at(gi).gid != gid) {
		gi = w.grp.at(gi).next
		n++
	}
	if gi == 0 {
		if n >= cfg.MaxGroups {
			top := w.grp.at(r.head)
			if !w.groupLess(gp, e.Group, mix(k1, w.ghash[top.gid]), w.gkeys[top.gid]) {
				return // bounded away; counted at release from r.events
			}
			old := r.head
			r.head = top.next
			w.freeGroup(old)
			n--
		}
		if !known {
			gid = w.intern(e.Group, gh)
		}
		w.grefs[gid]++
		gi = w.newGroup(gid)
		// Insert sorted by descending priority.
		prev := uint32(0)
		cur := r.head
		for cur != 0 && w.groupLess(gp, e.Group, mix(k1, w.ghash[w.grp.at(cur).gid]), w.gkeys[w.grp.at(cur).gid]) {
			prev, cur = cur, w.grp.at(cur).next
		}
		w.grp.at(gi).next = cur
		if prev == 0 {
			r.head = gi
		} else {
			w.grp.at(prev).next = gi
		}
		if n+1 == cfg.MaxGroups {
			r.hp = uint32(mix(k1, w.ghash[w.grp.at(r.head).gid]) >> 32)
		}
	}
	g := w.grp.at(gi)
	g.events = satInc(g.events)
	if cfg.Histogram && e.Bucket >= 0 {
		g.hist = satInc(g.hist)
		w.addBucket(gi, gp, uint32(e.Bucket))
	}
	if w.t.valued && e.HasValue {
		g = w.grp.at(gi)
		g.nvals = satInc(g.nvals)
		p := uint32(mix(k0, mix(uint64(uint32(e.Partition)), uint64(e.Offset))) >> 32)
		w.addValue(gi, p, e.Value)
	}
}

// groupLess orders group priorities, ties broken by key.
func (w *openWindow) groupLess(pa uint64, ka string, pb uint64, kb string) bool {
	if pa != pb {
		return pa < pb
	}
	return ka < kb
}

func (w *openWindow) addBucket(gi uint32, gp uint64, b uint32) {
	g := w.grp.at(gi)
	for bi := g.bkts; bi != 0; bi = w.bkt.at(bi).next {
		if w.bkt.at(bi).bucket == b {
			w.bkt.at(bi).count = satInc(w.bkt.at(bi).count)
			return
		}
	}
	bp := mix(gp, uint64(b)+1)
	less := func(pa uint64, a uint32, pb uint64, b uint32) bool {
		if pa != pb {
			return pa < pb
		}
		return a < b
	}
	if int(g.nb) >= w.t.cfg.MaxBuckets {
		top := g.bkts
		if !less(bp, b, mix(gp, uint64(w.bkt.at(top).bucket)+1), w.bkt.at(top).bucket) {
			return
		}
		g.bkts = w.bkt.at(top).next
		w.freeBucket(top)
		g.nb--
	}
	bi := w.newBucket(b)
	g = w.grp.at(gi)
	prev, cur := uint32(0), g.bkts
	for cur != 0 && less(bp, b, mix(gp, uint64(w.bkt.at(cur).bucket)+1), w.bkt.at(cur).bucket) {
		prev, cur = cur, w.bkt.at(cur).next
	}
	w.bkt.at(bi).next = cur
	if prev == 0 {
		g.bkts = bi
	} else {
		w.bkt.at(prev).next = bi
	}
	g.nb++
}

// valueLess orders value priorities, ties broken by the value's bits (two
// values with equal priority and bits are interchangeable).
func valueLess(pa uint32, va float64, pb uint32, vb float64) bool {
	if pa != pb {
		return pa < pb
	}
	return math.Float64bits(va) < math.Float64bits(vb)
}

func (w *openWindow) addValue(gi uint32, p uint32, v float64) {
	g := w.grp.at(gi)
	if int(g.nv) >= w.t.cfg.MaxValues {
		top := g.vals
		if !valueLess(p, v, w.val.at(top).prio, w.val.at(top).v) {
			return
		}
		g.vals = w.val.at(top).next
		w.freeValue(top)
		g.nv--
	}
	vi := w.newValue(v, p)
	g = w.grp.at(gi)
	prev, cur := uint32(0), g.vals
	for cur != 0 && valueLess(p, v, w.val.at(cur).prio, w.val.at(cur).v) {
		prev, cur = cur, w.val.at(cur).next
	}
	w.val.at(vi).next = cur
	if prev == 0 {
		g.vals = vi
	} else {
		w.val.at(prev).next = vi
	}
	g.nv++
}

func satInc(x uint32) uint32 {
	if x == math.MaxUint32 {
		return x
	}
	return x + 1
}

func (w *openWindow) newGroup(gid uint32) uint32 {
	var i uint32
	if w.grpFr != 0 {
		i = w.grpFr
		w.grpFr = w.grp.at(i).next
	} else {
		i = w.grp.push(grec{})
	}
	*w.grp.at(i) = grec{gid: gid}
	return i
}

// freeGroup frees a kept group with its buckets and values and drops its
// reference to the interned group.
func (w *openWindow) freeGroup(i uint32) {
	g := w.grp.at(i)
	for b := g.bkts; b != 0; {
		next := w.bkt.at(b).next
		w.freeBucket(b)
		b = next
	}
	for v := g.vals; v != 0; {
		next := w.val.at(v).next
		w.freeValue(v)
		v = next
	}
	w.grefs[g.gid]--
	if w.grefs[g.gid] == 0 {
		w.release(g.gid)
	}
	*w.grp.at(i) = grec{next: w.grpFr}
	w.grpFr = i
}

func (w *openWindow) newBucket(b uint32) uint32 {
	var i uint32
	if w.bktFr != 0 {
		i = w.bktFr
		w.bktFr = w.bkt.at(i).next
	} else {
		i = w.bkt.push(brec{})
	}
	*w.bkt.at(i) = brec{bucket: b, count: 1}
	return i
}

func (w *openWindow) freeBucket(i uint32) {
	*w.bkt.at(i) = brec{next: w.bktFr}
	w.bktFr = i
}

func (w *openWindow) newValue(v float64, p uint32) uint32 {
	var i uint32
	if w.valFr != 0 {
		i = w.valFr
		w.valFr = w.val.at(i).next
	} else {
		i = w.val.push(vrec{})
	}
	*w.val.at(i) = vrec{v: v, prio: p}
	return i
}

func (w *openWindow) freeValue(i uint32) {
	*w.val.at(i) = vrec{next: w.valFr}
	w.valFr = i
}

// unit returns the record index of the unit (k0, k1), adding it if new, or
// 0 if the unit is not kept under MaxUnits.
func (w *openWindow) unit(k0 uint32, k1 uint64) uint32 {
	mask := uint64(len(w.idx) - 1)
	for pos := k1 & mask; ; pos = (pos + 1) & mask {
		i := w.idx[pos]
		if i == 0 {
			break
		}
		if r := w.recs.at(i); r.k0 == k0 && r.k1 == k1 {
			return i
		}
	}
	if c := w.t.cfg.MaxUnits; c > 0 && w.live >= c {
		top := w.recs.at(w.capped[0])
		if k0 > top.k0 || (k0 == top.k0 && k1 > top.k1) {
			return 0
		}
		w.evictTop()
	}
	if 2*(w.live+1) > len(w.idx) { // keep the load factor ≤ 1/2
		w.grow()
	}
	var i uint32
	if w.recFr != 0 {
		i = w.recFr
		w.recFr = w.recs.at(i).head
		*w.recs.at(i) = urec{k0: k0, k1: k1}
	} else {
		i = w.recs.push(urec{k0: k0, k1: k1})
	}
	w.live++
	w.place(i)
	if w.t.cfg.MaxUnits > 0 {
		w.capped = append(w.capped, i)
		w.siftUp(len(w.capped) - 1)
	}
	return i
}

// place puts record i into the index.
func (w *openWindow) place(i uint32) {
	mask := uint64(len(w.idx) - 1)
	pos := w.recs.at(i).k1 & mask
	for w.idx[pos] != 0 {
		pos = (pos + 1) & mask
	}
	w.idx[pos] = i
}

func (w *openWindow) grow() {
	w.idx = make([]uint32, 2*len(w.idx))
	for i := uint32(1); i < w.recs.n; i++ {
		if w.recs.at(i).events != 0 {
			w.place(i)
		}
	}
}

// slot returns the index position holding record i.
func (w *openWindow) slot(i uint32) uint64 {
	mask := uint64(len(w.idx) - 1)
	pos := w.recs.at(i).k1 & mask
	for w.idx[pos] != i {
		pos = (pos + 1) & mask
	}
	return pos
}

// evictTop removes the kept unit of largest priority (MaxUnits).
func (w *openWindow) evictTop() {
	i := w.capped[0]
	r := w.recs.at(i)
	w.drops.UnitCap += int64(r.events)
	for g := r.head; g != 0; {
		next := w.grp.at(g).next
		w.freeGroup(g)
		g = next
	}
	// Pop the heap.
	last := len(w.capped) - 1
	w.capped[0] = w.capped[last]
	w.capped = w.capped[:last]
	if last > 0 {
		w.siftDown(0)
	}
	// Delete from the index (backward-shift deletion for linear probing).
	mask := uint64(len(w.idx) - 1)
	pos := w.slot(i)
	w.idx[pos] = 0
	for next := (pos + 1) & mask; w.idx[next] != 0; next = (next + 1) & mask {
		j := w.idx[next]
		home := w.recs.at(j).k1 & mask
		// Move j into the hole if its home is not cyclically in (pos, next].
		if (next-home)&mask >= (next-pos)&mask {
			w.idx[pos] = j
			w.idx[next] = 0
			pos = next
		}
	}
	// Free the record (events == 0 marks a free record).
	*w.recs.at(i) = urec{head: w.recFr}
	w.recFr = i
	w.live--
}

// unitAbove orders units by descending priority (k0, then k1) for the
// max-heap of MaxUnits.
func (w *openWindow) unitAbove(a, b uint32) bool {
	ra, rb := w.recs.at(a), w.recs.at(b)
	if ra.k0 != rb.k0 {
		return ra.k0 > rb.k0
	}
	return ra.k1 > rb.k1
}

func (w *openWindow) siftUp(i int) {
	h := w.capped
	for i > 0 {
		p := (i - 1) / 2
		if !w.unitAbove(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
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
		h[i], h[c] = h[c], h[i]
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
			if !w.groupLess(gh, e.Group, w.ghash[top], w.gkeys[top]) {
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
		w.addClamped(a, e.Value)
	}
}

// addClamped adds one kept value to a group accumulator.
func (w *openWindow) addClamped(a *gacc, v float64) {
	cfg := &w.t.cfg
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
	if cfg.Mean {
		a.csum.add(v - w.t.mid)
	}
}

func (w *openWindow) groupAbove(a, b uint32) bool {
	return w.groupLess(w.ghash[b], w.gkeys[b], w.ghash[a], w.gkeys[a])
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
	cfg := &w.t.cfg
	out := Window{
		Start:       w.start,
		End:         w.start + w.t.size,
		Drops:       w.drops,
		EventLevel:  cfg.EventLevel,
		Sensitivity: w.t.sens,
		Partials:    1,
	}
	if !cfg.EventLevel {
		w.acc = make([]gacc, len(w.gkeys))
		perBucket, maxValues := uint32(cfg.MaxPerBucket), uint32(cfg.MaxValues)
		for u := uint32(1); u < w.recs.n; u++ {
			r := w.recs.at(u)
			if r.events == 0 {
				continue // free record
			}
			kept := int64(0)
			for gi := r.head; gi != 0; gi = w.grp.at(gi).next {
				g := w.grp.at(gi)
				a := &w.acc[g.gid]
				kept += int64(g.events)
				a.units++
				if cfg.Count {
					a.count += int64(min(g.events, maxValues))
					out.Drops.Count += int64(g.events - min(g.events, maxValues))
				}
				if cfg.Histogram {
					if a.hist == nil {
						a.hist = make([]int64, cfg.NumBuckets)
					}
					inCells := int64(0)
					for bi := g.bkts; bi != 0; bi = w.bkt.at(bi).next {
						b := w.bkt.at(bi)
						inCells += int64(b.count)
						a.hist[b.bucket] += int64(min(b.count, perBucket))
						out.Drops.PerBucket += int64(b.count - min(b.count, perBucket))
					}
					out.Drops.Buckets += int64(g.hist) - inCells
				}
				if w.t.valued {
					for vi := g.vals; vi != 0; vi = w.val.at(vi).next {
						w.addClamped(a, w.val.at(vi).v)
					}
					out.Drops.Values += int64(g.nvals) - int64(g.nv)
				}
			}
			out.Drops.Groups += int64(r.events) - kept
		}
		out.Units = int64(w.live)
	}
	for gid, key := range w.gkeys {
		a := &w.acc[gid]
		if a.units == 0 {
			continue
		}
		if cfg.EventLevel {
			out.Units += a.units
		}
		out.Drops.Clamped += a.clamp
		g := Group{Key: key, Units: a.units, Histogram: a.hist, Values: a.values, sum: a.sum, csum: a.csum}
		if cfg.Count {
			g.Count = a.count
		}
		if !w.t.valued {
			g.Values = 0
		}
		g.finish()
		out.Groups = append(out.Groups, g)
	}
	slices.SortFunc(out.Groups, func(a, b Group) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// memory estimates the bytes held by the window, split into per-unit state
// (unit table and kept records) and per-group state (interned groups and
// accumulators).
func (w *openWindow) memory() (unitBytes, groupBytes int64) {
	unitBytes = int64(cap(w.idx))*4 + w.recs.capacity()*urecBytes +
		w.grp.capacity()*grecBytes + w.bkt.capacity()*brecBytes +
		w.val.capacity()*vrecBytes + int64(cap(w.capped))*4
	groupBytes = int64(cap(w.gkeys))*groupBytes + int64(cap(w.gheap))*4
	for _, k := range w.gkeys {
		groupBytes += int64(len(k))
	}
	if w.t.cfg.EventLevel {
		groupBytes += int64(cap(w.acc)) * accBytes
		if w.t.cfg.Histogram {
			groupBytes += int64(len(w.gidx)) * int64(w.t.cfg.NumBuckets) * 8
		}
	}
	return unitBytes, groupBytes
}
