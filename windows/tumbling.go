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
// per-unit contribution bounds. It is pure and clock-free: event times and
// arrival times come with the events, watermarks with Advance. It is not
// safe for concurrent use.
//
// # Two clocks
//
// Every event carries two times. Time, the event time, decides which
// window the event belongs to; it comes from the data, so a privacy unit
// controls it. Arrival is when the event reached the input (the broker's
// record timestamp: ingestion time); it comes from a clock no privacy unit
// controls. Every status Add gives an event is a predicate on that event
// alone and on trusted clocks, never on the event times of other events,
// so no unit can change which of another unit's events are accepted into
// a window. (What a unit may contribute to a window it is accepted into is
// limited by the contribution bounds below, whose effect the
// sensitivities account for.)
//
// # Windows, watermarks and closing
//
// Window k is [Offset + k·Size, Offset + (k+1)·Size) in Unix milliseconds.
// Each partition p has a watermark W_p: the largest Arrival of an event
// added on p (whatever its status, except BadTime and Unassigned) or
// passed to Advance(p, ·), whichever is larger; W_p never decreases and
// event times never move it. An assigned partition without events or
// Advance has no watermark yet and holds every window open. The effective
// watermark is
//
//	WM = min W_p over the assigned partitions (none without partitions).
//
// A window [s, e) closes when e + AllowedLateness ≤ WM, and Poll emits it.
//
// # What happens to an event
//
// Add decides, in this order, from the event and the trusted clocks only:
//
//   - BadTime: Time or Arrival is outside ±2^61 ms.
//   - Unassigned: the partition was revoked.
//   - BadBucket, BadValue: see Status.
//   - TooFarAhead (MaxSkew > 0): Time > Arrival + MaxSkew. The event's own
//     arrival is the reference, so a bogus future timestamp affects only
//     its own event.
//   - Late: e + AllowedLateness ≤ Arrival (the window was over, by the
//     trusted clock, when the event arrived), or the window was already
//     emitted (s < the next window to emit).
//   - TooManyWindows (MaxOpenWindows > 0): s ≥ next + MaxOpenWindows·Size,
//     where next is the first window not yet emitted: the cap is measured
//     from the emission point, which only the trusted clocks move, not
//     from how many windows other events opened. Every open window then
//     lies in [next, next + MaxOpenWindows·Size), so at most
//     MaxOpenWindows are open. (Without EmitFrom, until the first window
//     is emitted, the cap counts open windows instead; see Emission.)
//   - Accepted otherwise.
//
// If Arrival is monotone on each partition (non-decreasing along the
// partition's sequence of events and Advance calls, as Kafka's
// LogAppendTime is), an event whose window was already emitted also fails
// its own Late predicate: the window closed when every W_q, W_p included,
// reached e + AllowedLateness, and the event arrived on p after that. So
// the content of every window is exactly the events whose own predicates
// accept them — independent of the other units' data, of how partitions
// interleave and of when Poll is called. Only TooManyWindows depends on
// timing (on how far the emission point lags the event's arrival, e.g.
// while one partition catches up on a backlog): size the cap so that an
// in-sync consumer never reaches it. An accepted event's window starts
// before Arrival + MaxSkew, and the next window to emit starts after WM −
// AllowedLateness − Size, so with WM at most D behind the event's arrival
// a cap of ⌈(MaxSkew + AllowedLateness + D)/Size⌉ + 2 is never reached (D
// is under the operator's idle timeout plus a tick when a partition is
// advanced by Advance rather than by its own events).
//
// Partitions that receive nothing hold windows open until the caller
// vouches for them with Advance (the operator does so for a partition it
// has read to its end, with its clock minus a margin for clock skew).
//
// # Emission
//
// Poll emits closed windows in start order, contiguously, from the window
// given to EmitFrom: every window is emitted, including empty ones, since
// skipping empty windows would reveal that no unit was present.
//
// Without EmitFrom, emission starts at the earliest window with an
// accepted event once that window closes. Which windows exist then depends
// on the data — one unit's early event adds windows to the output — so
// that mode is for exact, non-private aggregation and tests only: private
// releases must call EmitFrom with a time that does not depend on the
// data (a configured start, or where the previous run stopped).
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
	skew   int64   // MaxSkew in ms; 0: off
	valued bool    // Sum, Mean, Variance or Quantiles
	mid    float64 // Lower/2 + Upper/2
	leaves int     // leaves of the quantile tree (Quantiles), else 0
	sens   Sensitivities

	parts   map[int32]*partition
	revoked map[int32]struct{}
	open    map[int64]*openWindow
	cur     *openWindow // last window added to
	spare   *openWindow // a finished window whose table and arena the next one reuses

	started bool     // next is set
	next    int64    // start of the next window to emit
	touched bool     // Add or Poll happened
	fixed   bool     // EmitFrom set next (PollPartials needs it)
	shrunk  bool     // a partition was revoked after Add or Poll (PollPartials refuses)
	fp      [16]byte // configuration fingerprint of the partials (see fingerprint)

	stats Stats

	queue [queueLen]pending // accepted events whose state update is deferred
	nq    int
	sink  uint32 // keeps flush's cache-warming reads
}

// partition is the watermark of one input partition.
type partition struct {
	wm    int64 // the largest arrival time seen, if hasWM
	hasWM bool
}

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
		skew:    ms(cfg.MaxSkew),
		valued:  cfg.valued(),
		leaves:  cfg.TreeLeaves(),
		sens:    sens,
		parts:   make(map[int32]*partition),
		revoked: make(map[int32]struct{}),
		open:    make(map[int64]*openWindow),
	}
	if t.valued {
		t.mid = midpoint(cfg.Lower, cfg.Upper)
	}
	t.fp = fingerprint(&cfg, t.k0, t.k1)
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
	if e.Time < minTime || e.Time > maxTime || e.Arrival < minTime || e.Arrival > maxTime {
		return BadTime, 0
	}
	start := t.WindowStart(e.Time)
	p := t.partition(e.Partition)
	if p == nil {
		return Unassigned, start
	}
	t.touched = true
	// The arrival clock is trusted: it moves the watermark whatever
	// happens to the event.
	if !p.hasWM || e.Arrival > p.wm {
		p.wm, p.hasWM = e.Arrival, true
	}
	if e.Bucket < -1 || (t.cfg.Histogram && e.Bucket >= t.cfg.NumBuckets) {
		return BadBucket, start
	}
	if t.valued && e.HasValue && (math.IsNaN(e.Value) || math.IsInf(e.Value, 0)) {
		return BadValue, start
	}
	// No overflow below: times are within ±2^61 ms, durations ≤ 2^40 ms.
	if t.skew > 0 && e.Time-e.Arrival > t.skew {
		return TooFarAhead, start
	}
	if start+t.size+t.late <= e.Arrival || (t.started && start < t.next) {
		return Late, start
	}
	w := t.cur
	if w == nil || w.start != start {
		w = t.open[start]
		if w == nil {
			if t.capped(start) {
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

// capped reports whether opening the window starting at start would break
// MaxOpenWindows: once the emission point is fixed, whether the window
// lies MaxOpenWindows windows or more past it (it is not before it: such
// an event is late); before that (no EmitFrom), whether MaxOpenWindows
// windows are open.
func (t *Tumbling) capped(start int64) bool {
	c := int64(t.cfg.MaxOpenWindows)
	if c <= 0 {
		return false
	}
	if t.started {
		return (start-t.next)/t.size >= c // start ≥ next, both within ±2^61: no overflow
	}
	return int64(len(t.open)) >= c
}

// partition returns the state of partition id, registering an unknown
// partition, or nil for a revoked one.
func (t *Tumbling) partition(id int32) *partition {
	if p := t.parts[id]; p != nil {
		return p
	}
	if _, ok := t.revoked[id]; ok {
		return nil
	}
	p := &partition{}
	t.parts[id] = p
	return p
}

// Advance raises partition p's watermark to wm (it never lowers it): the
// caller vouches that every later event of p will arrive at wm or later,
// for example because p was read to its end at a time its clock puts at
// wm or later. An unknown partition is registered. It returns an error
// wrapping ErrRevoked for a revoked partition and ErrTime for wm outside
// ±2^61 ms.
func (t *Tumbling) Advance(p int32, wm int64) error {
	if wm < minTime || wm > maxTime {
		return fmt.Errorf("%w: watermark %d", ErrTime, wm)
	}
	s := t.partition(p)
	if s == nil {
		return fmt.Errorf("%w: partition %d", ErrRevoked, p)
	}
	if !s.hasWM || wm > s.wm {
		s.wm, s.hasWM = wm, true
	}
	return nil
}

// AssignPartitions registers partitions (on a Kafka rebalance). A new
// partition has no watermark, so it holds every window open until it
// receives an event or an Advance. Re-assigning a revoked partition makes
// it usable again; re-assigning a known one does nothing.
func (t *Tumbling) AssignPartitions(ps ...int32) {
	for _, id := range ps {
		delete(t.revoked, id)
		if t.parts[id] == nil {
			t.parts[id] = &partition{}
		}
	}
}

// RevokePartitions forgets partitions (on a Kafka rebalance): their
// watermarks no longer hold windows open, and later events from them are
// dropped as Unassigned until they are assigned again. Events already
// added stay in their windows; if another instance takes the partition over
// and replays those events, the operator must discard this instance's open
// windows (for example by rebuilding the Tumbling and replaying its
// remaining partitions), or they would be counted twice. After a
// partition is revoked following an Add or Poll, PollPartials refuses to
// emit (see PollPartials).
func (t *Tumbling) RevokePartitions(ps ...int32) {
	for _, id := range ps {
		if _, ok := t.parts[id]; ok && t.touched {
			t.shrunk = true
		}
		delete(t.parts, id)
		t.revoked[id] = struct{}{}
	}
}

// Watermark returns the effective watermark, the smallest partition
// watermark (see Tumbling), and false if there is none yet: no partition,
// or a partition without a watermark.
func (t *Tumbling) Watermark() (int64, bool) {
	var wm int64
	any := false
	for _, p := range t.parts {
		if !p.hasWM {
			return 0, false // a partition without a watermark holds everything
		}
		if !any || p.wm < wm {
			wm, any = p.wm, true
		}
	}
	return wm, any
}

// EmitFrom sets the first window Poll emits to the one holding time ms;
// events of earlier windows are late. Private releases must call it, with
// a time that does not depend on the data (the end of the last published
// window after a restart, a configured start, or the time the deployment
// began): without it the first window is the earliest one with an event,
// so one unit's early event would add windows to the output (see
// Tumbling, "Emission"). It also fixes the point MaxOpenWindows is
// measured from. It must be called before any Add or Poll; otherwise it
// returns an error wrapping ErrStarted.
func (t *Tumbling) EmitFrom(ms int64) error {
	if t.touched || t.started {
		return ErrStarted
	}
	if ms < minTime || ms > maxTime {
		return fmt.Errorf("%w: start %d", ErrTime, ms)
	}
	t.next, t.started, t.fixed = t.WindowStart(ms), true, true
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
	var out []Window
	t.emit(limit, func(start int64, w *openWindow) {
		if w != nil {
			out = append(out, w.finish())
		} else {
			out = append(out, t.emptyWindow(start))
		}
	})
	return out
}

// emit hands the closed windows not yet emitted, in start order and at
// most limit of them (DefaultPollLimit if limit ≤ 0), to f with their
// state (nil for a window without any), then forgets them: the closing
// rules shared by Poll and PollPartials.
func (t *Tumbling) emit(limit int, f func(start int64, w *openWindow)) {
	if limit <= 0 {
		limit = DefaultPollLimit
	}
	t.flush()
	t.touched = true
	wm, ok := t.Watermark()
	if !ok {
		return
	}
	if !t.started {
		if len(t.open) == 0 {
			return
		}
		first := int64(math.MaxInt64)
		for s := range t.open {
			first = min(first, s)
		}
		// Fix the first window only once it closes: until then an event
		// for an earlier window may still arrive on a partition that is
		// behind, and must not be judged late by the timing of Poll.
		if first+t.size+t.late > wm {
			return
		}
		t.next, t.started = first, true
	}
	n := 0
	for t.next+t.size+t.late <= wm && n < limit {
		w := t.open[t.next]
		f(t.next, w)
		if w != nil {
			delete(t.open, t.next)
			if t.cur == w {
				t.cur = nil
			}
			t.recycle(w)
		}
		t.next += t.size
		n++
	}
	t.stats.Windows += int64(n)
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
