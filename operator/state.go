package operator

// state.go is the format of the state topic's records (stateRecord, JSON,
// one per consumer group, keyed by the group id) and their reading at a
// start (recoverState). The publication intent that a record may point to
// is intent.go's; the partials topic's format is partials.go's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go"
)

// stateVersion is the version of the state record format. Version 1
// records (closed_through and output_offsets only) are still read.
const stateVersion = 2

// noClosedWindow is closedThrough before any window was published.
const noClosedWindow = math.MinInt64

// ErrState wraps problems with the operator's own state topic that a retry
// cannot fix (an unreadable record, an incomplete publication intent) and
// refusals to start that protect the privacy guarantee (a configuration
// change that would overspend the horizon's budget, a lost state record).
var ErrState = errors.New("operator: state")

// stateRecord is what the operator writes to its state topic, keyed by
// the consumer group id (the topic is compacted, so the last record per
// group survives):
//
//   - ClosedThrough: every window ending at or before it is final — all its
//     releases are in the output topic. Windows close in event-time order,
//     so one number says it. Events of those windows met again on a replay
//     are late.
//   - OutputOffsets: the output topic's end offset per partition when the
//     record was written. Releases of later windows are at or after them, so
//     at start the operator reads the output topic only from there to learn
//     which release keys of not-yet-final windows were already written.
//   - Origin: the first window this deployment releases, fixed on its first
//     start (windows.start, or the first window after the start time) and
//     never derived from the data: which windows exist must not depend on
//     whether some unit had an early event.
//   - Digest: ReleaseDigest of the configuration that published through
//     ClosedThrough.
//   - Ledger: the budget spent in the current horizon (see ledgerRecord),
//     so that a configuration change cannot overspend it.
//   - Running: the running totals of the horizon through ClosedThrough
//     (windows.running, see running.go), so that a replayed window carries
//     the same running values.
//   - Pending: a publication intent. Before the releases of a batch of
//     closed windows are written, the encoded release messages themselves
//     are written to the state topic (in chunks, see intentKey) and Pending
//     describes them; after a crash the next start writes exactly those
//     messages (skipping keys already in the output topic) before anything
//     else. So every key of a window comes from one snapshot of it, under
//     one configuration, whatever happened in between (a rebuilt window
//     that differs, a changed configuration). The messages are noised
//     releases, not input data.
//   - PartialsBoundFrom: scale-out partials of format version 2 (not bound
//     to the deployment) are accepted only for windows starting before it
//     (see assembler.v2Before); fixed the first time a version that binds
//     partials starts (0: not recorded yet).
//   - Deployment: the identity of the deployment that wrote the record
//     (deploymentRecord); a start whose identity differs is refused or
//     warned about (Operator.checkDeployment). Records without it (written
//     by earlier versions) are read as before.
type stateRecord struct {
	Version       int              `json:"v"`
	ClosedThrough int64            `json:"closed_through"`
	OutputOffsets map[string]int64 `json:"output_offsets"`
	Origin        int64            `json:"origin,omitempty"`
	Digest        string           `json:"digest,omitempty"`
	Ledger        *ledgerRecord    `json:"ledger,omitempty"`
	Running       *runningRecord   `json:"running,omitempty"`
	Pending       *intentRecord    `json:"pending,omitempty"`
	// PartialsBoundFrom and Deployment are omitted when unset, so records
	// of earlier versions and of this one differ only by these keys.
	PartialsBoundFrom int64             `json:"partials_bound_from,omitempty"`
	Deployment        *deploymentRecord `json:"deployment,omitempty"`
}

// deploymentRecord is what tells one deployment from another in the state
// topic: the Kafka cluster, the output topic, the consumer group, the
// release namespace, the input topics (sorted) and, with scale-out, the
// partials topic.
type deploymentRecord struct {
	ClusterID     string   `json:"cluster_id,omitempty"` // empty: the broker did not say
	OutputTopic   string   `json:"output_topic"`
	GroupID       string   `json:"group_id"`
	Namespace     string   `json:"namespace"`
	InputTopics   []string `json:"input_topics"`
	PartialsTopic string   `json:"partials_topic,omitempty"` // scale-out only
}

// recovered is what the operator knows at start about earlier runs.
type recovered struct {
	closedThrough int64
	// found: the state topic has a record for the group.
	found  bool
	origin int64 // 0: none recorded
	digest string
	ledger *ledgerRecord
	// running holds the running totals through closedThrough (nil: none).
	running *runningRecord
	// intent holds the messages of an unfinished publication (nil: none),
	// with its record.
	intent    []kafka.Message
	intentRec *intentRecord
	// outputOffsets are the offsets of the last record (the scan's start).
	outputOffsets map[string]int64
	// published maps the key of every release of a window after
	// closedThrough found in the output topic to its window end.
	published map[string]int64
	// lastEnd is the latest window end of a release of this deployment's
	// namespace found in the output topic (noClosedWindow: none).
	lastEnd int64
	// scanned and foreign count the output messages read and those that
	// were not dpstream releases of this deployment.
	scanned, foreign int
	// boundFrom is the record's PartialsBoundFrom (0: none).
	boundFrom int64
	// deployment is the identity in the record (nil: none recorded).
	deployment *deploymentRecord
}

// recoverState reads the state topic (the last record for group and its
// intent chunks) and then the output topic from the recorded offsets to its
// end.
func recoverState(ctx context.Context, c *clients, stateTopic, group, outputTopic, namespace string) (recovered, error) {
	rec := recovered{closedThrough: noClosedWindow, lastEnd: noClosedWindow, published: map[string]int64{}}
	chunks := map[int][]byte{}
	last, err := lastState(ctx, c, stateTopic, group, chunks)
	if err != nil {
		return rec, err
	}
	from := map[int]int64{}
	if last != nil {
		rec.found = true
		rec.closedThrough = last.ClosedThrough
		rec.origin = last.Origin
		rec.digest = last.Digest
		rec.ledger = last.Ledger
		rec.running = last.Running
		rec.outputOffsets = last.OutputOffsets
		rec.boundFrom = last.PartialsBoundFrom
		rec.deployment = last.Deployment
		for p, o := range last.OutputOffsets {
			pi, err := strconv.Atoi(p)
			if err != nil {
				return rec, fmt.Errorf("%w: state record: bad partition %q", ErrState, p)
			}
			from[pi] = o
		}
		if in := last.Pending; in != nil && in.Through > last.ClosedThrough {
			msgs, err := readIntent(in, chunks)
			if err != nil {
				return rec, fmt.Errorf("%w: state topic %s, group %s: %w", ErrState, stateTopic, group, err)
			}
			rec.intent, rec.intentRec = msgs, in
		}
	}
	err = c.scanTopic(ctx, outputTopic, from, func(m kafka.Message) error {
		rec.scanned++
		r, ok := readRelease(m.Key, m.Value)
		if !ok {
			rec.foreign++
			return nil
		}
		if ns, _, ok := strings.Cut(r.releaseID, "/"); ok && ns == namespace && r.windowEnd > rec.lastEnd {
			rec.lastEnd = r.windowEnd
		}
		if r.windowEnd > rec.closedThrough {
			// The message's key (a JSON record's value key), and the
			// release's: a release with a value on the topic is not
			// noised again (the intent completes its other values).
			rec.published[string(m.Key)] = r.windowEnd
			rec.published[r.releaseKey] = r.windowEnd
		}
		return nil
	})
	return rec, err
}

// lastState reads the state topic to its end and returns the last record
// for group (nil: none, or reset by a tombstone). With chunks not nil it
// also collects group's intent chunks by index.
func lastState(ctx context.Context, c *clients, stateTopic, group string, chunks map[int][]byte) (*stateRecord, error) {
	var last *stateRecord
	prefix := intentKey(group, 0)
	prefix = prefix[:len(prefix)-1]
	err := c.scanTopic(ctx, stateTopic, nil, func(m kafka.Message) error {
		k := string(m.Key)
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			if i, err := strconv.Atoi(rest); err == nil && i >= 0 && chunks != nil {
				chunks[i] = m.Value
			}
			return nil
		}
		if k != group {
			return nil
		}
		if m.Value == nil { // tombstone: the state was reset by hand
			last = nil
			return nil
		}
		s, err := decodeState(m.Value)
		if err != nil {
			return fmt.Errorf("%w: state topic %s has an unreadable record for group %s at offset %d: %v", ErrState, stateTopic, group, m.Offset, err)
		}
		last = s
		return nil
	})
	return last, err
}

// closedThrough reads the state topic's last record for group and returns
// its ClosedThrough (noClosedWindow: no record). With scale-out, stage 1
// calls it at the start of every generation: windows ending at or before
// it are final (stage 2 published them), so their partial states are not
// needed again, and a replay from the committed input offsets re-sends only
// the partials of later windows instead of one per window since
// windows.start.
func closedThrough(ctx context.Context, c *clients, stateTopic, group string) (int64, error) {
	last, err := lastState(ctx, c, stateTopic, group, nil)
	if err != nil || last == nil {
		return noClosedWindow, err
	}
	return last.ClosedThrough, nil
}

// decodeState reads a state record of version 1 or 2.
func decodeState(b []byte) (*stateRecord, error) {
	var s stateRecord
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	switch s.Version {
	case 1:
		// Before origins were recorded: the deployment's first window is
		// unknown, but everything through ClosedThrough is final.
		s.Origin = 0
	case stateVersion:
	default:
		return nil, fmt.Errorf("unknown version %d", s.Version)
	}
	return &s, nil
}

// stateMessage builds the state record message, reading the output topic's
// current end offsets.
func stateMessage(ctx context.Context, c *clients, stateTopic, group, outputTopic string, s stateRecord) (kafka.Message, error) {
	_, end, err := c.endOffsets(ctx, outputTopic)
	if err != nil {
		return kafka.Message{}, err
	}
	b, err := encodeState(s, end)
	if err != nil {
		return kafka.Message{}, err
	}
	return kafka.Message{Topic: stateTopic, Key: []byte(group), Value: b}, nil
}

// encodeState encodes s as the current version, with the output topic's
// end offsets end (by partition), as the state topic carries it (the
// inverse of decodeState).
func encodeState(s stateRecord, end map[int]int64) ([]byte, error) {
	s.Version = stateVersion
	s.OutputOffsets = map[string]int64{}
	for p, o := range end {
		s.OutputOffsets[strconv.Itoa(p)] = o
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the state record: %v", ErrState, err)
	}
	return b, nil
}

// committedOffsets reports whether the consumer group has committed an
// offset for any partition of topics: a group that consumed before.
func (c *clients) committedOffsets(ctx context.Context, group string, topics ...string) (bool, error) {
	parts, err := c.partitions(ctx, topics...)
	if err != nil {
		return false, err
	}
	req := &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{}}
	for t, ps := range parts {
		req.Topics[t] = ps
	}
	res, err := c.client.OffsetFetch(ctx, req)
	if errors.Is(err, kafka.GroupIdNotFound) {
		return false, nil // some brokers (and kfake) answer so for a group that never committed
	}
	if err != nil {
		return false, fmt.Errorf("%w: committed offsets of group %s: %v", ErrKafka, group, err)
	}
	if errors.Is(res.Error, kafka.GroupIdNotFound) {
		return false, nil
	}
	if res.Error != nil {
		return false, fmt.Errorf("%w: committed offsets of group %s: %v", ErrKafka, group, res.Error)
	}
	for _, ps := range res.Topics {
		for _, p := range ps {
			if p.Error == nil && p.CommittedOffset >= 0 {
				return true, nil
			}
		}
	}
	return false, nil
}
