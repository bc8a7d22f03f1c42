package operator

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// tp is a topic partition.
type tp struct {
	topic     string
	partition int
}

// partitionID maps a topic partition to the windows package's int32
// partition id: the index of the topic among the configured input topics
// (sorted) in the high bits and the Kafka partition in the low 20 bits. It
// is the same on every run with the same topics, which the windows
// package's keyed sampling relies on (an event's identity is its partition
// id and offset).
func partitionID(topics []string, t tp) (int32, error) {
	i := slices.Index(topics, t.topic)
	if i < 0 || t.partition < 0 || t.partition >= 1<<20 || i >= 1<<11 {
		return 0, fmt.Errorf("operator: cannot map %s/%d to a partition id", t.topic, t.partition)
	}
	return int32(i)<<20 | int32(t.partition), nil
}

// outcome says what the core did with one input message.
type outcome uint8

const (
	outAccepted  outcome = iota
	outSkipped           // bad input (reason set)
	outLate              // a closed window, or a window before the last final one
	outDropped           // dropped by the windows package for another reason
	outNotPublic         // a group outside privacy.public_groups
	outNoTime            // a record without a usable timestamp (no arrival time)
	outMarker            // not a message: a fetcher's caught-up marker (see item)
)

// noTimestampReason is the skip reason (metrics label, dead-letter header)
// of a record without a usable timestamp.
const noTimestampReason = "no_record_timestamp"

// core is the operator's state for one consumer group generation: the
// decoder, the windows, and the offset bookkeeping that decides what may be
// committed. It does no I/O; the generation's loop (generation.go) feeds it.
//
// Commit rule: for every partition, the committed offset is the smallest
// of (a) the offset after the last message processed and (b) the smallest
// offset of any event held by a window that is not yet final (closed and
// all its releases acknowledged, and recorded in the state topic). So every
// event below a committed offset belongs to a final window, was late, or
// was bad input.
//
// Time: an event's window comes from its event time (the data), but its
// arrival time is the record's Kafka timestamp (see fetch: LogAppendTime on
// a topic so configured), and the windows package decides lateness and
// closes windows by arrival time only, so that no privacy unit can move
// another unit's events out of a release (see windows.Tumbling).
type core struct {
	topics []string // sorted input topics
	dec    *schema.Decoder
	agg    *windows.Tumbling // every partition's events (nil when split)
	public map[string]bool   // nil: every group
	// lanes are the extra measures and histograms (lanes.go), each with a
	// Tumbling fed the same events as agg (laneAggs), or in split mode as
	// the partition's (splitLanes[partition], lanes_partials.go); their
	// windows are attached to agg's (windows.Window.Lanes) as they close,
	// their partials to the partition's.
	lanes      []*lane
	laneAggs   []*windows.Tumbling
	splitLanes map[int32][]*windows.Tumbling

	// split (kafka.scale_out, stage 1): one Tumbling per input partition,
	// each emitting that partition's partial state of every window, so that
	// a partition's partials depend on its own log only (a replay by
	// another instance after a rebalance writes the same ones).
	split bool
	aggs  map[int32]*windows.Tumbling
	wcfg  windows.Config
	seed  [32]byte
	from  int64
	idle  int64 // windows.idle_timeout in ms
	delay int64 // publicationDelay in ms

	// held are the windows the watermark closed whose scheduled
	// publication time (see due) has not come yet, in start order.
	held []windows.Window

	// holds[start][partition] is the smallest offset of an event accepted
	// into the window starting at start, for windows not yet final.
	holds map[int64]map[int32]int64
	// next[partition] is the offset after the last message processed.
	next map[int32]int64
	// hwm[partition] is the high watermark seen with the last message.
	hwm map[int32]int64
	tps map[int32]tp
	// caught[partition] is the issue time of the latest fetch that read the
	// partition to its end, not yet applied (see caughtUp).
	caught map[int32]time.Time
}

// newCore returns the state of a generation that releases windows from the
// one holding from on (Unix ms): always a time fixed without looking at
// the data (the end of the last final window, or the deployment's first
// window), so that which windows are released never depends on an event
// (windows.Tumbling.EmitFrom). Events of earlier windows are late: a replay
// never reopens a final window.
func newCore(cfg Config, pl *plan, key rng.Key, from int64) (*core, error) {
	dec, err := schema.NewDecoder(cfg.Schema)
	if err != nil {
		return nil, err
	}
	c := &core{
		topics: slices.Sorted(slices.Values(cfg.Kafka.InputTopics)),
		dec:    dec,
		split:  cfg.Kafka.ScaleOut,
		aggs:   map[int32]*windows.Tumbling{},
		wcfg:   windowsConfig(cfg, dec.NumBuckets()),
		seed:   seedFromKey(key),
		from:   from,
		idle:   cfg.Windows.IdleTimeout.Milliseconds(),
		delay:  publicationDelay(cfg),
		holds:  map[int64]map[int32]int64{},
		next:   map[int32]int64{},
		hwm:    map[int32]int64{},
		tps:    map[int32]tp{},
		caught: map[int32]time.Time{},
	}
	if pl.publicGroups != nil {
		c.public = map[string]bool{}
		for _, g := range pl.publicGroups {
			c.public[g] = true
		}
	}
	if hasLanes(cfg) {
		if c.lanes, err = lanesOf(cfg); err != nil {
			return nil, err
		}
		c.splitLanes = map[int32][]*windows.Tumbling{}
	}
	if !c.split {
		if c.agg, err = c.newAgg(); err != nil {
			return nil, err
		}
		if err := c.newLanes(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// newLanes makes the Tumbling of every lane (single instance).
func (c *core) newLanes() error {
	for _, l := range c.lanes {
		agg, err := windows.New(l.wcfg, c.seed)
		if err != nil {
			return fmt.Errorf("operator: %s: %w", l.name, err)
		}
		if err := agg.EmitFrom(c.from); err != nil {
			return fmt.Errorf("operator: first window %d: %w", c.from, err)
		}
		c.laneAggs = append(c.laneAggs, agg)
	}
	return nil
}

// newAgg returns a Tumbling that releases windows from c.from on.
func (c *core) newAgg() (*windows.Tumbling, error) {
	agg, err := windows.New(c.wcfg, c.seed)
	if err != nil {
		return nil, err
	}
	if err := agg.EmitFrom(c.from); err != nil {
		return nil, fmt.Errorf("operator: first window %d: %w", c.from, err)
	}
	return agg, nil
}

// aggOf returns the Tumbling that holds partition id's events (nil for a
// partition not assigned in split mode).
func (c *core) aggOf(id int32) *windows.Tumbling {
	if c.split {
		return c.aggs[id]
	}
	return c.agg
}

// assign registers the partitions of a generation.
func (c *core) assign(parts []tp) error {
	ids := make([]int32, 0, len(parts))
	for _, t := range parts {
		id, err := partitionID(c.topics, t)
		if err != nil {
			return err
		}
		c.tps[id] = t
		ids = append(ids, id)
		if c.split {
			agg, err := c.newAgg()
			if err != nil {
				return err
			}
			agg.AssignPartitions(id)
			c.aggs[id] = agg
			if len(c.lanes) > 0 {
				if c.splitLanes[id], err = c.newSplitLanes(id); err != nil {
					return err
				}
			}
		}
	}
	if !c.split {
		c.agg.AssignPartitions(ids...)
		for _, la := range c.laneAggs {
			la.AssignPartitions(ids...)
		}
	}
	return nil
}

// item is one input message decoded by a fetcher (decoding runs on the
// fetch goroutines, one decoder each, in parallel with the core loop), or,
// with caughtUp set, a marker saying that the fetcher read the partition
// m.Topic/m.Partition to its end (its high watermark, m.HighWaterMark) in
// a fetch issued at caughtUp: every later record of the partition was
// appended after that, so its broker timestamp is at least caughtUp (up to
// clock skew).
type item struct {
	m      kafka.Message
	ev     schema.Event
	reason schema.Reason // ReasonNone: ev is valid
	// absent and wrong are the configured fields the message lacked or
	// carried with the wrong type (schema.Decoder.Shape; zero when ev is
	// valid), for the input-shape check.
	absent, wrong uint64
	caughtUp      time.Time // non-zero: a caught-up marker, not a message
}

// handle decodes and processes one input message.
func (c *core) handle(m *kafka.Message) (outcome, schema.Reason, windows.Status) {
	it := item{m: *m}
	if decode(c.dec, &it) { // the registry could not be asked: not decided
		return outDropped, schema.ReasonNone, windows.Unassigned
	}
	return c.handleItem(&it)
}

// handleItem processes one decoded input message, or a caught-up marker.
func (c *core) handleItem(it *item) (outcome, schema.Reason, windows.Status) {
	m := &it.m
	id, err := partitionID(c.topics, tp{m.Topic, m.Partition})
	if err != nil {
		return outDropped, schema.ReasonNone, windows.Unassigned
	}
	if !it.caughtUp.IsZero() {
		c.caughtUp(id, it.caughtUp)
		return outMarker, schema.ReasonNone, 0
	}
	c.next[id] = m.Offset + 1
	c.hwm[id] = m.HighWaterMark
	// The record timestamp is the event's arrival time. kafka-go reports a
	// timestamp ≤ 0 (none: message format v0, or a producer that sent
	// none) as the zero time.
	if m.Time.IsZero() {
		return outNoTime, schema.ReasonNone, 0
	}
	arrival := m.Time.UnixMilli()
	if it.reason != schema.ReasonNone {
		c.advance(id, arrival)
		return outSkipped, it.reason, 0
	}
	ev := &it.ev
	if c.public != nil && !c.public[ev.Group] {
		c.advance(id, arrival)
		return outNotPublic, schema.ReasonNone, 0
	}
	agg := c.aggOf(id)
	if agg == nil {
		return outDropped, schema.ReasonNone, windows.Unassigned
	}
	we := windows.Event{
		Partition: id, Offset: m.Offset, Time: ev.Time, Arrival: arrival, Unit: ev.Unit, Group: ev.Group,
		Bucket: ev.Bucket, Value: ev.Value, HasValue: ev.HasValue,
	}
	st, start := agg.Add(we)
	for i, la := range c.laneAggsOf(id) {
		// The same time, arrival and partition, so the same status.
		la.Add(c.lanes[i].laneEvent(we, ev.Extra))
	}
	switch st {
	case windows.Accepted:
		h := c.holds[start]
		if h == nil {
			h = map[int32]int64{}
			c.holds[start] = h
		}
		if o, ok := h[id]; !ok || m.Offset < o {
			h[id] = m.Offset
		}
		return outAccepted, schema.ReasonNone, st
	case windows.Late:
		return outLate, schema.ReasonNone, st
	default:
		return outDropped, schema.ReasonNone, st
	}
}

// advance moves partition id's watermark to the arrival time of a record
// that does not reach the windows (bad input, a group that is not
// public): its broker timestamp is as trustworthy as an event's.
func (c *core) advance(id int32, arrival int64) {
	if agg := c.aggOf(id); agg != nil {
		_ = agg.Advance(id, arrival) // a record's timestamp is in range; id is assigned
	}
	for _, la := range c.laneAggsOf(id) {
		_ = la.Advance(id, arrival)
	}
}

// caughtUp records that partition id's fetcher read it to its end in a
// fetch issued at processing time at; applyCaughtUp applies it.
func (c *core) caughtUp(id int32, at time.Time) {
	if prev, ok := c.caught[id]; !ok || at.After(prev) {
		c.caught[id] = at
	}
}

// applyCaughtUp advances every partition read to its end since the last
// call to its fetch time − windows.idle_timeout. Every later record of the
// partition was appended after that fetch, so its broker timestamp is at
// least the fetch time, as long as the broker's clock is less than
// idle_timeout behind the operator's (and replication delays are
// shorter): the partition's later events then arrive after its watermark,
// as the windows package requires. So a partition without new data stops
// holding windows open idle_timeout after the operator's clock passed
// them, and an event that arrives later is judged by its own arrival.
// The Kafka loop calls it on every tick after releasing (release, which
// releases only windows scheduled a tick ago or earlier), so that a
// window the clock closes goes out at the same tick as one the data
// closed early.
func (c *core) applyCaughtUp() {
	for id, at := range c.caught {
		if agg := c.aggOf(id); agg != nil {
			_ = agg.Advance(id, at.UnixMilli()-c.idle) // clock times are in range; a revoked id is skipped
		}
		for _, la := range c.laneAggsOf(id) {
			_ = la.Advance(id, at.UnixMilli()-c.idle)
		}
		delete(c.caught, id)
	}
}

// poll returns the windows that closed.
func (c *core) poll() []windows.Window {
	return c.attachLanes(c.agg.Poll(0))
}

// attachLanes polls every lane and attaches the lanes' windows to ws (the
// primary's windows just polled), matched by start. The lanes saw the same
// events and watermarks as the primary, so they close the same windows;
// a lane window that is missing is attached empty.
func (c *core) attachLanes(ws []windows.Window) []windows.Window {
	if len(c.laneAggs) == 0 {
		return ws
	}
	polled := make([]map[int64]windows.Window, len(c.laneAggs))
	for i, la := range c.laneAggs {
		polled[i] = map[int64]windows.Window{}
		for _, w := range la.Poll(0) {
			polled[i][w.Start] = w
		}
	}
	for k := range ws {
		ws[k].Lanes = make([]windows.Window, len(c.laneAggs))
		for i := range c.laneAggs {
			lw, ok := polled[i][ws[k].Start]
			if !ok {
				lw = windows.Window{Start: ws[k].Start, End: ws[k].End}
			}
			ws[k].Lanes[i] = lw
		}
	}
	return ws
}

// publicationDelay is how long after its end (Unix ms) a live window is
// published: windows.allowed_lateness + windows.idle_timeout, the moment
// a partition without new data lets the window close (applyCaughtUp). A
// window that the data closed earlier (a record arriving after end +
// allowed_lateness) waits until then, so that when a window is published
// depends on the clock and the configuration only, never on whether a
// record arrived (DESIGN.md §1, §5; issue 18).
func publicationDelay(cfg Config) int64 {
	return cfg.Windows.AllowedLateness.Milliseconds() + cfg.Windows.IdleTimeout.Milliseconds()
}

// scheduledAt is the scheduled publication time of the window ending at
// end (Unix ms): end + publicationDelay. Release records carry it as
// their Kafka timestamp.
func scheduledAt(cfg Config, end int64) time.Time {
	return time.UnixMilli(end + publicationDelay(cfg))
}

// collect moves the windows that closed into c.held and reports whether
// any did. It takes at most windows.DefaultPollLimit at a time and none
// while that many are held (a watermark far ahead of the clock, from
// record timestamps in the future, must not fill memory with empty
// windows that are not due for a long time).
func (c *core) collect() bool {
	if len(c.held) >= windows.DefaultPollLimit {
		return false
	}
	ws := c.attachLanes(c.agg.Poll(0))
	c.held = append(c.held, ws...)
	return len(ws) > 0
}

// release closes the windows the watermark allows (collect) and returns
// those due by now (Unix ms: the Kafka loop passes its clock minus one
// tick interval), in order; closed reports whether any window closed. It
// is the Kafka loop's one step between the windows and the publisher
// (single instance).
func (c *core) release(now int64) (ws []windows.Window, closed bool) {
	closed = c.collect()
	return c.due(now), closed
}

// due returns, in order, the held windows whose scheduled publication
// time (end + publicationDelay) is at or before now (Unix ms, the
// operator's clock), and keeps the others. Call collect first.
func (c *core) due(now int64) []windows.Window {
	n := 0
	for n < len(c.held) && c.held[n].End+c.delay <= now {
		n++
	}
	if n == 0 {
		return nil
	}
	out := slices.Clone(c.held[:n])
	c.held = slices.Delete(c.held, 0, n)
	return out
}

// final marks the windows starting at the given starts as final: their
// events no longer hold back commits.
func (c *core) final(starts ...int64) {
	for _, s := range starts {
		delete(c.holds, s)
	}
}

// partialOut is the partial state of one window of one input partition
// (split mode).
type partialOut struct {
	pid   int32
	p     windows.Partial
	lanes []windows.Partial // the lanes' partials of the window (lanes_partials.go)
}

// pollPartials returns the partials of the windows that closed on every
// partition (split mode), by partition id and window: all of them, not
// one PollPartials call's worth. A partition taken over (restart,
// rebalance) gets a new aggregator whose first window is where stage 2
// stood when this instance started, and its committed offset can be any
// number of windows ahead of that (stage 1 commits behind partials, not
// behind final windows); makeRoom must then close every window up to the
// watermark, or the resumed events would count against
// windows.max_open_windows and be dropped.
func (c *core) pollPartials() []partialOut {
	var out []partialOut
	for _, id := range slices.Sorted(maps.Keys(c.aggs)) {
		for {
			ps := c.aggs[id].PollPartials(0)
			for _, p := range ps {
				out = append(out, partialOut{pid: id, p: p})
			}
			if len(ps) < windows.DefaultPollLimit {
				break
			}
		}
		if len(c.lanes) == 0 {
			continue
		}
		lps := c.pollLanePartials(id)
		for k := range out {
			if out[k].pid != id {
				continue
			}
			for _, m := range lps {
				if lp, ok := m[out[k].p.Start]; ok {
					out[k].lanes = append(out[k].lanes, lp) // one per lane, or encodePartial refuses it
				}
			}
		}
	}
	return out
}

// finalPartial marks the window starting at start as final for partition
// id (its partial is in the partials topic): its events there no longer
// hold back commits.
func (c *core) finalPartial(id int32, start int64) {
	if h := c.holds[start]; h != nil {
		delete(h, id)
		if len(h) == 0 {
			delete(c.holds, start)
		}
	}
}

// commitOffsets returns the offsets that may be committed now, per topic
// and partition (only partitions with processed messages).
func (c *core) commitOffsets() map[string]map[int]int64 {
	out := map[string]map[int]int64{}
	for id, o := range c.next {
		for _, h := range c.holds {
			if ho, ok := h[id]; ok && ho < o {
				o = ho
			}
		}
		t := c.tps[id]
		if out[t.topic] == nil {
			out[t.topic] = map[int]int64{}
		}
		out[t.topic][t.partition] = o
	}
	return out
}

// lags calls fn with the consumer lag of every partition with messages:
// the high watermark minus the next offset.
func (c *core) lags(fn func(t tp, lag int64)) {
	for id, n := range c.next {
		if h := c.hwm[id]; h > 0 {
			fn(c.tps[id], max(0, h-n))
		}
	}
}

// openWindows is the number of windows holding events.
func (c *core) openWindows() int { return len(c.holds) }
