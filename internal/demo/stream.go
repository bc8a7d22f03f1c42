package demo

// stream.go describes the demo's synthetic input: smart-meter readings, as
// messages in arrival order. generate.go makes a stream, encode.go its
// message bytes, truth.go its exact bounded aggregates.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// The synthetic stream's schema: field names, regions (the group-by field,
// released as public groups), statuses (the histogram categories) and the
// bounds of the numeric field.
const (
	synthTimeField   = "ts"
	synthUnitField   = "meter"
	synthRegionField = "region"
	synthStatusField = "status"
	synthValueField  = "wh"
	// synthLower and synthUpper bound one reading in watt-hours. A reading
	// covers about 5 minutes; 300 Wh in 5 minutes is a 3.6 kW draw, above
	// what a household uses without an electric-vehicle charger, so larger
	// readings (EV charging spikes) are clamped.
	synthLower = 0.0
	synthUpper = 300.0
	// synthUnknownRegion is a region outside the public list: its readings
	// are valid but skipped by the operator (privacy.public_groups).
	synthUnknownRegion = "atlantis"
)

// WindowSize is the demo's window size; Lateness its allowed lateness.
const (
	WindowSize = 15 * time.Minute
	Lateness   = time.Minute
	// streamBase is the start of the first window: 2024-05-01T00:00:00Z
	// (time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()).
	streamBase = int64(1714521600000)
)

var (
	// Regions are the public groups (the values of the group-by field),
	// with synthRegionWeights the share of meters in each (made up,
	// unequal so the groups differ in size). Read-only.
	Regions            = []string{"north", "east", "south", "west"}
	synthRegionWeights = []float64{0.4, 0.3, 0.2, 0.1}
	// synthStatuses are the histogram categories, with the probability of
	// each per reading (made up: most readings are measured, some are
	// estimated by the head end, a few flag a fault).
	synthStatuses      = []string{"ok", "estimated", "fault"}
	synthStatusWeights = []float64{0.88, 0.09, 0.03}
)

// synthBounds are the demo's contribution bounds per meter and window. A
// normal meter sends 1–3 readings per window with at most 2 distinct
// statuses, so only the flooding meters and per-bucket repeats are cut.
var synthBounds = struct{ MaxGroups, MaxBuckets, MaxPerBucket, MaxValues int }{1, 2, 2, 3}

// StreamConfig describes one synthetic stream.
type StreamConfig struct {
	Seed            uint64
	Windows         int   // windows of readings
	EventsPerWindow int   // readings generated per window (before bad and late extras)
	Partitions      int   // input partitions the messages are spread over
	Base            int64 // first window start, unix ms
	Size            time.Duration
	Lateness        time.Duration
}

// Limits of StreamConfig (typo guards: the demo must finish in seconds to
// minutes).
const (
	maxStreamWindows = 1000
	maxStreamEvents  = 1_000_000
	maxStreamParts   = 64
)

// errStream wraps invalid generator settings.
var errStream = errors.New("demo: invalid synthetic stream settings")

func (c StreamConfig) validate() error {
	switch {
	case c.Windows < 1 || c.Windows > maxStreamWindows:
		return fmt.Errorf("%w: windows must be in [1, %d], got %d", errStream, maxStreamWindows, c.Windows)
	case c.EventsPerWindow < 1 || c.EventsPerWindow > maxStreamEvents:
		return fmt.Errorf("%w: events per window must be in [1, %d], got %d", errStream, maxStreamEvents, c.EventsPerWindow)
	case c.Windows*c.EventsPerWindow > 20*maxStreamEvents:
		return fmt.Errorf("%w: windows × events per window must be at most %d", errStream, 20*maxStreamEvents)
	case c.Partitions < 1 || c.Partitions > maxStreamParts:
		return fmt.Errorf("%w: partitions must be in [1, %d], got %d", errStream, maxStreamParts, c.Partitions)
	case c.Size < time.Minute || c.Size%time.Millisecond != 0:
		return fmt.Errorf("%w: window size must be a whole number of ms, at least 1m", errStream)
	case c.Lateness < 0 || c.Lateness >= c.Size/2:
		return fmt.Errorf("%w: lateness must be in [0, size/2)", errStream)
	}
	return nil
}

// Reading is one valid smart-meter reading.
type Reading struct {
	Time   int64 // event time, unix ms
	Meter  string
	Region string
	Status string
	Wh     float64
}

// Message is one input message in arrival order.
type Message struct {
	Key, Value []byte
	Partition  int
	// Arrival is when the message reaches the broker (unix ms, simulated
	// time): the demo's producer stamps the record with it, standing in
	// for the broker's LogAppendTime of a live stream. It never decreases
	// along a partition.
	Arrival int64
	// Reading is the decoded content of a valid message; nil for bad input.
	Reading *Reading
	// Bad is the schema reason the operator must skip a bad message with
	// ("" for a valid one).
	Bad string
	// NotPublic marks a valid reading of a region outside the public list.
	NotPublic bool
	// Late marks a valid reading the operator must drop as late: it
	// arrives at or after its window's end plus the lateness.
	Late bool
	// Delayed marks a reading that arrives after its window's end but
	// within the lateness, and is counted.
	Delayed bool
	// Closing marks the readings of the window after the last one, one per
	// partition, arriving at the last window's end plus the lateness: they
	// close the last window by arrival time.
	Closing bool
}

// Stream is a generated stream.
type Stream struct {
	Config StreamConfig
	Msgs   []Message // in arrival order
}

// WindowStart returns the start of window i (unix ms).
func (s *Stream) WindowStart(i int) int64 {
	return s.Config.Base + int64(i)*s.Config.Size.Milliseconds()
}

// WindowOf returns the start of the window of event time t (unix ms).
func (s *Stream) WindowOf(t int64) int64 {
	size := s.Config.Size.Milliseconds()
	return s.Config.Base + floorDiv(t-s.Config.Base, size)*size
}

// PartitionOf is the input partition of a message key: FNV-1a (32 bit) of
// the key modulo the partition count. The demo's writer uses the same
// function (demoBalancer), so the generator knows each partition's order.
func PartitionOf(key []byte, partitions int) int {
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(partitions))
}

// meterID names meter i.
func meterID(i int) string { return fmt.Sprintf("m-%05d", i) }

// Pick returns an index drawn with the given weights (summing to 1): the
// weighted choice of the synthetic streams (the demo's, the peer
// benchmark's).
func Pick(r *rand.Rand, weights []float64) int {
	u := r.Float64()
	for i, w := range weights {
		if u < w {
			return i
		}
		u -= w
	}
	return len(weights) - 1
}

// markLate applies the windows package's lateness rule to each reading: a
// reading is late if it arrives at or after its window's end plus the
// lateness. The rule depends on the reading alone, and arrival times do
// not decrease along a partition, so it is exactly the operator's decision
// (see windows.Tumbling) whatever the interleaving of partitions.
func (s *Stream) markLate() {
	size := s.Config.Size.Milliseconds()
	lateness := s.Config.Lateness.Milliseconds()
	for i := range s.Msgs {
		m := &s.Msgs[i]
		if m.Reading == nil || m.NotPublic {
			continue
		}
		start := s.WindowOf(m.Reading.Time)
		m.Late = start+size+lateness <= m.Arrival
		if m.Late {
			m.Delayed = false
		}
	}
}

// floorDiv is a / b rounded towards −∞.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// StreamCounts summarise a stream: all messages, valid readings in
// published windows (Delayed of them arriving within the lateness), late,
// non-public and closing readings, and bad messages by reason.
type StreamCounts struct {
	Messages, Readings, Late, Delayed, NotPublic, Closing int
	Bad                                                   map[string]int
}

// counts counts the messages of s by kind.
func (s *Stream) counts() StreamCounts {
	c := StreamCounts{Messages: len(s.Msgs), Bad: map[string]int{}}
	for i := range s.Msgs {
		m := &s.Msgs[i]
		switch {
		case m.Bad != "":
			c.Bad[m.Bad]++
		case m.Closing:
			c.Closing++
		case m.NotPublic:
			c.NotPublic++
		case m.Late:
			c.Late++
		default:
			c.Readings++
			if m.Delayed {
				c.Delayed++
			}
		}
	}
	return c
}
