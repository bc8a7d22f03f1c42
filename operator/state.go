package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
)

// stateVersion is the version of the state record format.
const stateVersion = 1

// noClosedWindow is closedThrough before any window was published.
const noClosedWindow = math.MinInt64

// stateRecord is what the operator writes to its state topic after every
// batch of windows whose releases were all acknowledged, keyed by the
// consumer group id (the topic is compacted, so the last record per group
// survives):
//
//   - ClosedThrough: every window ending at or before it is final — all its
//     releases are in the output topic. Windows close in event-time order,
//     so one number says it. Events of those windows met again on a replay
//     are late.
//   - OutputOffsets: the output topic's end offset per partition when the
//     record was written. Releases of later windows are at or after them, so
//     at start the operator reads the output topic only from there to learn
//     which release keys of not-yet-final windows were already written.
type stateRecord struct {
	Version       int              `json:"v"`
	ClosedThrough int64            `json:"closed_through"`
	OutputOffsets map[string]int64 `json:"output_offsets"`
}

// recovered is what the operator knows at start about earlier runs.
type recovered struct {
	closedThrough int64
	// published maps the key of every release of a window after
	// closedThrough found in the output topic to its window end.
	published map[string]int64
	// scanned and foreign count the output messages read and those that
	// were not dpstream releases of this deployment.
	scanned, foreign int
}

// recover reads the state topic (the last record for group) and then the
// output topic from the recorded offsets to its end.
func recoverState(ctx context.Context, c *clients, stateTopic, group, outputTopic string) (recovered, error) {
	rec := recovered{closedThrough: noClosedWindow, published: map[string]int64{}}
	var last *stateRecord
	err := c.scanTopic(ctx, stateTopic, nil, func(m kafka.Message) error {
		if string(m.Key) != group {
			return nil
		}
		if m.Value == nil { // tombstone: the state was reset by hand
			last = nil
			return nil
		}
		var s stateRecord
		if err := json.Unmarshal(m.Value, &s); err != nil || s.Version != stateVersion {
			return fmt.Errorf("%w: state topic %s has an unreadable record for group %s at offset %d", ErrKafka, stateTopic, group, m.Offset)
		}
		last = &s
		return nil
	})
	if err != nil {
		return rec, err
	}
	from := map[int]int64{}
	if last != nil {
		rec.closedThrough = last.ClosedThrough
		for p, o := range last.OutputOffsets {
			pi, err := strconv.Atoi(p)
			if err != nil {
				return rec, fmt.Errorf("%w: state record: bad partition %q", ErrKafka, p)
			}
			from[pi] = o
		}
	}
	err = c.scanTopic(ctx, outputTopic, from, func(m kafka.Message) error {
		rec.scanned++
		r, err := schema.DecodeRelease(m.Value)
		if err != nil || r.Key() != string(m.Key) {
			rec.foreign++
			return nil
		}
		if r.WindowEnd > rec.closedThrough {
			rec.published[string(m.Key)] = r.WindowEnd
		}
		return nil
	})
	return rec, err
}

// stateMessage builds the state record message for closedThrough, reading
// the output topic's current end offsets.
func stateMessage(ctx context.Context, c *clients, stateTopic, group, outputTopic string, closedThrough int64) (kafka.Message, error) {
	_, end, err := c.endOffsets(ctx, outputTopic)
	if err != nil {
		return kafka.Message{}, err
	}
	s := stateRecord{Version: stateVersion, ClosedThrough: closedThrough, OutputOffsets: map[string]int64{}}
	for p, o := range end {
		s.OutputOffsets[strconv.Itoa(p)] = o
	}
	b, err := json.Marshal(s)
	if err != nil {
		return kafka.Message{}, err
	}
	return kafka.Message{Topic: stateTopic, Key: []byte(group), Value: b}, nil
}
