package operator

import (
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/privacy"
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
)

// core is the operator's state for one consumer group generation: the
// decoder, the windows, and the offset bookkeeping that decides what may be
// committed. It does no I/O; the Kafka loop in operator.go feeds it.
//
// Commit rule: for every partition, the committed offset is the smallest
// of (a) the offset after the last message processed and (b) the smallest
// offset of any event held by a window that is not yet final (closed and
// all its releases acknowledged, and recorded in the state topic). So every
// event below a committed offset belongs to a final window, was late, or
// was bad input.
type core struct {
	topics []string // sorted input topics
	dec    *schema.Decoder
	agg    *windows.Tumbling
	public map[string]bool // nil: every group

	// holds[start][partition] is the smallest offset of an event accepted
	// into the window starting at start, for windows not yet final.
	holds map[int64]map[int32]int64
	// next[partition] is the offset after the last message processed.
	next map[int32]int64
	// hwm[partition] is the high watermark seen with the last message.
	hwm map[int32]int64
	tps map[int32]tp
}

func newCore(cfg Config, pl *plan, key privacy.Key, closedThrough int64) (*core, error) {
	dec, err := schema.NewDecoder(cfg.Schema)
	if err != nil {
		return nil, err
	}
	agg, err := windows.New(windowsConfig(cfg, dec.NumBuckets()), seedFromKey(key))
	if err != nil {
		return nil, err
	}
	if closedThrough != noClosedWindow {
		// Everything before the end of the last final window is late: a
		// replay never reopens a final window.
		if err := agg.EmitFrom(closedThrough); err != nil {
			return nil, err
		}
	}
	c := &core{
		topics: slices.Sorted(slices.Values(cfg.Kafka.InputTopics)),
		dec:    dec, agg: agg,
		holds: map[int64]map[int32]int64{},
		next:  map[int32]int64{},
		hwm:   map[int32]int64{},
		tps:   map[int32]tp{},
	}
	if pl.publicGroups != nil {
		c.public = map[string]bool{}
		for _, g := range pl.publicGroups {
			c.public[g] = true
		}
	}
	return c, nil
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
	}
	c.agg.AssignPartitions(ids...)
	return nil
}

// item is one input message decoded by a fetcher (decoding runs on the
// fetch goroutines, one decoder each, in parallel with the core loop).
type item struct {
	m      kafka.Message
	ev     schema.Event
	reason schema.Reason // ReasonNone: ev is valid
}

// decode fills it.ev and it.reason from it.m with dec.
func decode(dec *schema.Decoder, it *item) {
	if err := dec.Decode(it.m.Value, &it.ev); err != nil {
		it.reason = schema.ReasonOf(err)
		if it.reason == schema.ReasonNone {
			it.reason = schema.ReasonMalformed
		}
	}
}

// handle decodes and processes one input message.
func (c *core) handle(m *kafka.Message) (outcome, schema.Reason, windows.Status) {
	it := item{m: *m}
	decode(c.dec, &it)
	return c.handleItem(&it)
}

// handleItem processes one decoded input message.
func (c *core) handleItem(it *item) (outcome, schema.Reason, windows.Status) {
	m := &it.m
	id, err := partitionID(c.topics, tp{m.Topic, m.Partition})
	if err != nil {
		return outDropped, schema.ReasonNone, windows.Unassigned
	}
	c.next[id] = m.Offset + 1
	c.hwm[id] = m.HighWaterMark
	if it.reason != schema.ReasonNone {
		return outSkipped, it.reason, 0
	}
	ev := &it.ev
	if c.public != nil && !c.public[ev.Group] {
		return outNotPublic, schema.ReasonNone, 0
	}
	st, start := c.agg.Add(windows.Event{
		Partition: id, Offset: m.Offset, Time: ev.Time, Unit: ev.Unit, Group: ev.Group,
		Bucket: ev.Bucket, Value: ev.Value, HasValue: ev.HasValue,
	})
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

// poll advances processing time and returns the windows that closed.
func (c *core) poll(now time.Time) []windows.Window {
	c.agg.Tick(now.UnixMilli())
	return c.agg.Poll(0)
}

// final marks the windows starting at the given starts as final: their
// events no longer hold back commits.
func (c *core) final(starts ...int64) {
	for _, s := range starts {
		delete(c.holds, s)
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
