package windows

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// More errors returned by this package.
var (
	// ErrTime: a watermark or start time outside ±2^61 ms.
	ErrTime = errors.New("windows: time out of range")
	// ErrStarted: EmitFrom after events were added or windows emitted.
	ErrStarted = errors.New("windows: aggregation already started")
)

// Tumbling aggregates events into event-time tumbling windows with
// per-unit contribution bounds. It is pure and clock-free: event times come
// with the events, watermarks with Advance, and processing time with Tick.
// It is not safe for concurrent use.
//
// # Windows and watermarks
//
// Window k is [Offset + k·Size, Offset + (k+1)·Size) in Unix milliseconds.
// Each partition p has a watermark W_p: the largest event time seen on p
// (by Add, including late events but not TooFarAhead ones) or passed to
// Advance(p, ·), whichever is larger; W_p never decreases. An assigned partition without events or
// Advance has no watermark yet and holds every window open. The effective
// watermark is
//
//	WM = min W_p over active partitions, if any partition is active;
//	WM = max W_p over all partitions, if every partition is idle;
//	WM = −∞ with no partitions (nothing closes).
//
// A window [s, e) closes when e + AllowedLateness ≤ WM. An event on p is
// late, counted and dropped, if its window has closed or if its window's
// e + AllowedLateness ≤ W_p (p's own watermark has passed it). The second
// rule makes acceptance depend only on the partition's own sequence, which
// is what makes closing deterministic: the same per-partition event
// sequences give the same closed windows, byte for byte, however the
// partitions interleave and whenever Poll is called — as long as the set of
// active partitions does not change on the way (idle detection and
// rebalances depend on processing time and are outside this guarantee).
//
// # Far-future events
//
// With MaxSkew > 0, an event on p whose time is more than MaxSkew ahead
// of W_p is dropped with status TooFarAhead: it moves no watermark and
// opens no window, so one bogus timestamp (say in the year 9999) can
// neither close the open windows nor make later events late nor make Poll
// emit empty windows up to it. A genuine jump (a partition silent for
// longer than MaxSkew) heals itself: the JumpEvents-th consecutive event
// on p that is too far ahead, each within MaxSkew of the one before, is
// accepted and moves W_p as usual (the JumpEvents − 1 before it stay
// dropped). Any event on p that is not too far ahead, and any Advance of
// p, restarts the count. Every part of the rule depends only on p's own
// sequence of events and Advance calls, so closing stays deterministic.
//
// A partition without a watermark is measured against the time given to
// EmitFrom (after a restart: the end of the last published window); if
// EmitFrom was not called, its first event is accepted whatever its time.
// That is the rule's blind spot: a bogus first event on a fresh partition
// of a fresh aggregation sets W_p far ahead. Comparing with the other
// partitions' watermarks instead would make the outcome depend on how
// partitions interleave, so it is not done.
//
// Events dropped by MaxOpenWindows (TooManyWindows) still move W_p:
// whether the cap is hit depends on the windows other partitions opened,
// so letting it hold W_p back would make every later decision on p depend
// on the interleaving. With MaxSkew set, far-future events are dropped
// before they reach the cap.
//
// # Emission
//
// Poll emits closed windows in start order, contiguously: from the first
// window (the window given to EmitFrom, or else the earliest window with
// an accepted event) every window is emitted, including empty ones, since
// skipping empty windows would reveal that no unit was present.
//
// # Contribution bounds
//
// Per window and privacy unit, a unit keeps at most MaxGroups groups; per
// kept group at most MaxBuckets histogram cells, each counting at most
// MaxPerBucket events, and at most MaxValues values and counted events;
// values are clamped to [Lower, Upper]. When a unit exceeds a bound, the
// kept subset is the k candidates of smallest keyed priority, H(seed,
// window, unit, candidate): a uniformly random subset that does not depend
// on arrival order. A value's identity is its event's (Partition, Offset).
// With Unit == "" (or EventLevel) every event is its own unit.
type Tumbling struct {
	cfg    Config
	k0, k1 uint64
	size   int64
	offset int64
	late   int64
	idle   int64
	skew   int64   // MaxSkew in ms; 0: off
	valued bool    // Sum or Mean
	mid    float64 // Lower/2 + Upper/2
	sens   Sensitivities

	parts   map[int32]*partition
	revoked map[int32]struct{}
	open    map[int64]*openWindow
	cur     *openWindow // last window added to
	spare   *openWindow // a finished window whose table and arena the next one reuses

	started bool  // next is set
	next    int64 // start of the next window to emit
	origin  int64 // the time given to EmitFrom, if hasOrig
	hasOrig bool
	touched bool // Add or Poll happened

	stats Stats

	queue [queueLen]pending // accepted events whose state update is deferred
	nq    int
	sink  uint32 // keeps flush's cache-warming reads
}

// partition is the watermark and activity state of one input partition.
type partition struct {
	wm      int64
	hasWM   bool
	idle    bool
	seen    bool // Add or Advance since the last Tick
	last    int64
	hasLast bool  // last is the processing time of the latest activity
	jump    int64 // time of the latest event of the current run of too-far-ahead events
	jumps   int   // length of that run (0: none)
}

// JumpEvents is the number of consecutive too-far-ahead events, each
// within MaxSkew of the one before, after which a partition accepts the
// jump (see Tumbling, "Far-future events"). A design choice: one or two
// stray timestamps are rejected, while a partition that was silent for
// longer than MaxSkew loses only its first two events after the gap.
const JumpEvents = 3

// New returns an aggregator for the configuration. The seed keys the
// sampling of contribution bounds: the same seed gives the same kept
// subsets, so it must stay the same across restarts (a replay must produce
// identical windows) and should be secret (derived from the release key,
// e.g. HMAC(key, "windows")), so that nobody can predict or engineer which
// contributions are kept or which unit keys collide.
func New(cfg Config, seed [32]byte) (*Tumbling, error) {
	sens, err := cfg.Sensitivities()
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	t := &Tumbling{
		cfg:     cfg,
		k0:      le.Uint64(seed[0:]) ^ le.Uint64(seed[16:]),
		k1:      le.Uint64(seed[8:]) ^ le.Uint64(seed[24:]),
		size:    ms(cfg.Size),
		offset:  ms(cfg.Offset),
		late:    ms(cfg.AllowedLateness),
		idle:    ms(cfg.IdleTimeout),
		skew:    ms(cfg.MaxSkew),
		valued:  cfg.Sum || cfg.Mean,
		sens:    sens,
		parts:   make(map[int32]*partition),
		revoked: make(map[int32]struct{}),
		open:    make(map[int64]*openWindow),
	}
	if t.valued {
		t.mid = midpoint(cfg.Lower, cfg.Upper)
	}
	return t, nil
}

// Config returns the configuration.
func (t *Tumbling) Config() Config { return t.cfg }

// Sensitivities returns the sensitivities every window carries.
func (t *Tumbling) Sensitivities() Sensitivities { return t.sens }

// WindowStart returns the start of the window holding time ms.
func (t *Tumbling) WindowStart(ms int64) int64 {
	d := ms - t.offset
	k := d / t.size
	if d%t.size < 0 {
		k--
	}
	return k*t.size + t.offset
}

// Add adds one event and returns what happened to it and the start of its
// window (0 with BadTime). See Tumbling for the rules.
//
// The status is final when Add returns, but with privacy units the update
// of the window state is deferred and applied for up to 16 accepted
// events at once, so that their memory accesses overlap; until then the
// Tumbling keeps a copy of the event, including its strings. Poll and
// Memory apply pending updates first, so nothing observable changes.
func (t *Tumbling) Add(e Event) (Status, int64) {
	s, start := t.add(&e)
	t.stats.Events[s]++
	return s, start
}

// queueLen is the number of accepted events whose state update Add defers
// and then applies together (see flush): enough table and unit-state reads
// in flight to overlap their cache misses (a core tracks 16 or more
// outstanding L1 misses), few enough that the block's state stays in the
// L1 cache.
const queueLen = 16

// pending is an accepted event whose state update is deferred, for window
// w, with its unit key (k0, k1) once flush computes it.
type pending struct {
	w      *openWindow
	k0, k1 uint64
	e      Event
}

// flush applies the deferred state updates, in arrival order. Only the
// window state changes, which nothing reads before a flush: Add's status
// and the stats are settled when the event arrives, and Poll and Memory
// flush first. The updates of a block are applied together so that their
// memory reads overlap: first every unit is hashed, then every table slot
// read, then the unit state each slot points to (reads only), and then
// the updates run one by one on warm caches.
func (t *Tumbling) flush() {
	q := t.queue[:t.nq]
	t.nq = 0
	var refs [queueLen]uint32
	for i := range q {
		p := &q[i]
		p.k0, p.k1 = p.w.unitKey(&p.e)
		refs[i] = p.w.idx[int(p.k1)&(len(p.w.idx)-1)]
	}
	sink := uint32(0)
	for i := range q {
		sink += q[i].w.touch(refs[i])
	}
	t.sink += sink
	for i := range q {
		p := &q[i]
		p.w.addKeyed(&p.e, p.k0, p.k1)
		*p = pending{} // drop the references to the event's strings
	}
}

func (t *Tumbling) add(e *Event) (Status, int64) {
	if e.Time < minTime || e.Time > maxTime {
		return BadTime, 0
	}
	start := t.WindowStart(e.Time)
	if e.Bucket < -1 || (t.cfg.Histogram && e.Bucket >= t.cfg.NumBuckets) {
		return BadBucket, start
	}
	if t.valued && e.HasValue && (math.IsNaN(e.Value) || math.IsInf(e.Value, 0)) {
		return BadValue, start
	}
	p := t.partition(e.Partition)
	if p == nil {
		return Unassigned, start
	}
	t.touched = true
	p.seen, p.idle = true, false
	if t.skew > 0 && t.tooFarAhead(p, e.Time) {
		return TooFarAhead, start
	}
	late := (t.started && start < t.next) || (p.hasWM && start+t.size+t.late <= p.wm)
	if !p.hasWM || e.Time > p.wm {
		p.wm, p.hasWM = e.Time, true
	}
	if late {
		return Late, start
	}
	w := t.cur
	if w == nil || w.start != start {
		w = t.open[start]
		if w == nil {
			if c := t.cfg.MaxOpenWindows; c > 0 && len(t.open) >= c {
				return TooManyWindows, start
			}
			w = newOpenWindow(t, start)
			t.open[start] = w
		}
		t.cur = w
	}
	if t.cfg.EventLevel {
		w.addEvent(e)
		return Accepted, start
	}
	t.queue[t.nq] = pending{w: w, e: *e}
	if t.nq++; t.nq == queueLen {
		t.flush()
	}
	return Accepted, start
}

// tooFarAhead applies the MaxSkew rule to an event at time ts on p and
// updates p's run of too-far-ahead events: it reports whether the event
// must be dropped.
func (t *Tumbling) tooFarAhead(p *partition, ts int64) bool {
	ref, ok := p.wm, p.hasWM
	if !ok {
		ref, ok = t.origin, t.hasOrig
	}
	if !ok || ts-ref <= t.skew { // no overflow: |ts|, |ref| ≤ 2^61
		p.jumps = 0
		return false
	}
	if p.jumps > 0 && ts-p.jump <= t.skew && p.jump-ts <= t.skew {
		p.jumps++
	} else {
		p.jumps = 1
	}
	p.jump = ts
	if p.jumps >= JumpEvents {
		p.jumps = 0
		return false
	}
	return true
}

// partition returns the state of partition id, registering an unknown
// partition as active, or nil for a revoked one.
func (t *Tumbling) partition(id int32) *partition {
	if p := t.parts[id]; p != nil {
		return p
	}
	if _, ok := t.revoked[id]; ok {
		return nil
	}
	p := &partition{seen: true}
	t.parts[id] = p
	return p
}

// Advance raises partition p's watermark to wm (it never lowers it), for
// example from a broker's high-water mark time when p has no new events.
// MaxSkew does not apply: the caller vouches for wm.
// An unknown partition is registered. It returns an error wrapping
// ErrRevoked for a revoked partition and ErrTime for wm outside ±2^61 ms.
func (t *Tumbling) Advance(p int32, wm int64) error {
	if wm < minTime || wm > maxTime {
		return fmt.Errorf("%w: watermark %d", ErrTime, wm)
	}
	s := t.partition(p)
	if s == nil {
		return fmt.Errorf("%w: partition %d", ErrRevoked, p)
	}
	s.seen, s.idle, s.jumps = true, false, 0
	if !s.hasWM || wm > s.wm {
		s.wm, s.hasWM = wm, true
	}
	return nil
}

// AssignPartitions registers partitions (on a Kafka rebalance). A new
// partition is active and has no watermark, so it holds every window open
// until it receives an event, an Advance, or goes idle. Re-assigning a
// revoked partition makes it usable again; re-assigning a known one does
// nothing.
func (t *Tumbling) AssignPartitions(ps ...int32) {
	for _, id := range ps {
		delete(t.revoked, id)
		if t.parts[id] == nil {
			t.parts[id] = &partition{seen: true}
		}
	}
}

// RevokePartitions forgets partitions (on a Kafka rebalance): their
// watermarks no longer hold windows open, and later events from them are
// dropped as Unassigned until they are assigned again. Events already
// added stay in their windows; if another instance takes the partition over
// and replays those events, the operator must discard this instance's open
// windows (for example by rebuilding the Tumbling and replaying its
// remaining partitions), or they would be counted twice.
func (t *Tumbling) RevokePartitions(ps ...int32) {
	for _, id := range ps {
		delete(t.parts, id)
		t.revoked[id] = struct{}{}
	}
}

// Tick passes processing time now (Unix milliseconds, from the caller's
// clock) for idle detection. A partition with an Add or Advance since the
// previous Tick is stamped active at now; a partition whose latest stamp is
// at least IdleTimeout before now becomes idle, and stays idle until its
// next Add or Advance. Idle detection is as fine as the Tick interval.
// With IdleTimeout 0, Tick does nothing.
func (t *Tumbling) Tick(now int64) {
	if t.idle <= 0 {
		return
	}
	for _, p := range t.parts {
		switch {
		case p.seen || !p.hasLast:
			p.seen, p.last, p.hasLast = false, now, true
		case now-p.last >= t.idle:
			p.idle = true
		}
	}
}

// Watermark returns the effective watermark (see Tumbling) and false if
// there is none yet.
func (t *Tumbling) Watermark() (int64, bool) {
	var minActive, maxAll int64
	anyActive, anyWM := false, false
	for _, p := range t.parts {
		if !p.idle {
			if !p.hasWM {
				return 0, false // an active partition without a watermark holds everything
			}
			if !anyActive || p.wm < minActive {
				minActive = p.wm
			}
			anyActive = true
		}
		if p.hasWM && (!anyWM || p.wm > maxAll) {
			maxAll, anyWM = p.wm, true
		}
	}
	if anyActive {
		return minActive, true
	}
	return maxAll, anyWM
}

// EmitFrom sets the first window Poll emits to the one holding time ms;
// events of earlier windows are late. Use it on start-up (the end of the
// last published window after a restart, or a configured start) so that
// the first release does not depend on when data began. It must be called
// before any Add or Poll; otherwise it returns an error wrapping ErrStarted.
func (t *Tumbling) EmitFrom(ms int64) error {
	if t.touched || t.started {
		return ErrStarted
	}
	if ms < minTime || ms > maxTime {
		return fmt.Errorf("%w: start %d", ErrTime, ms)
	}
	t.next, t.started = t.WindowStart(ms), true
	t.origin, t.hasOrig = ms, true
	return nil
}

// DefaultPollLimit is the number of windows Poll returns at most when
// called with limit ≤ 0.
const DefaultPollLimit = 1024

// Poll returns closed windows not yet returned, in start order, at most
// limit of them (DefaultPollLimit if limit ≤ 0); call it again until it
// returns none. It includes the empty windows between the first window and
// the watermark, so a watermark far ahead yields many windows: the limit
// keeps each call bounded.
func (t *Tumbling) Poll(limit int) []Window {
	if limit <= 0 {
		limit = DefaultPollLimit
	}
	t.flush()
	t.touched = true
	wm, ok := t.Watermark()
	if !ok {
		return nil
	}
	if !t.started {
		if len(t.open) == 0 {
			return nil
		}
		first := int64(math.MaxInt64)
		for s := range t.open {
			first = min(first, s)
		}
		// Fix the first window only once it closes: until then an event
		// for an earlier window may still arrive on a partition that is
		// behind, and must not be judged late by the timing of Poll.
		if first+t.size+t.late > wm {
			return nil
		}
		t.next, t.started = first, true
	}
	var out []Window
	for t.next+t.size+t.late <= wm && len(out) < limit {
		if w := t.open[t.next]; w != nil {
			out = append(out, w.finish())
			delete(t.open, t.next)
			if t.cur == w {
				t.cur = nil
			}
			t.recycle(w)
		} else {
			out = append(out, Window{Start: t.next, End: t.next + t.size, EventLevel: t.cfg.EventLevel, Sensitivity: t.sens, Partials: 1})
		}
		t.next += t.size
	}
	t.stats.Windows += int64(len(out))
	return out
}

// Stats returns the cumulative counters.
func (t *Tumbling) Stats() Stats { return t.stats }

// MemoryStats estimates the memory held by open windows.
type MemoryStats struct {
	// Windows, Units and Groups count open windows, tracked units and
	// interned groups.
	Windows, Units, Groups int64
	// UnitBytes is held by per-unit state (unit table, kept groups, cells
	// and values); GroupBytes by interned groups and event-level
	// accumulators. Allocated capacity is counted, so the figures include
	// growth slack, free space not yet compacted, and the table and arena
	// of one closed window kept for reuse.
	UnitBytes, GroupBytes int64
}

// Bytes is the total estimate.
func (m MemoryStats) Bytes() int64 { return m.UnitBytes + m.GroupBytes }

// Memory estimates the memory held by the open windows.
func (t *Tumbling) Memory() MemoryStats {
	t.flush()
	m := MemoryStats{Windows: int64(len(t.open))}
	ws := make([]*openWindow, 0, len(t.open)+1)
	for _, w := range t.open {
		ws = append(ws, w)
	}
	if t.spare != nil {
		ws = append(ws, t.spare) // retained for reuse: held, but not open
	}
	for _, w := range ws {
		u, g := w.memory()
		m.UnitBytes += u
		m.GroupBytes += g
		m.Units += int64(w.live)
		m.Groups += int64(len(w.gidx))
	}
	return m
}
