package windows

import (
	"strings"
)

// This file and state_*.go hold the state of one open window: its layout
// and blobs here, adding to a unit (state_unit_add.go), the unit table and
// MaxUnits heap (state_unit_table.go), event-level groups (state_event.go)
// and finishing (state_finish.go).
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
	// tagTotal marks MaxContributions in the fingerprint (see
	// fingerprint).
	tagTotal = 6
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
