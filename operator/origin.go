package operator

// origin.go is how the instances of a scale-out deployment without
// windows.start agree on its first window (the origin): the first
// instance to find none recorded proposes one in the state topic, and the
// first proposal in the topic wins, for every instance and every restart.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/segmentio/kafka-go"
)

// originProposal is the value of an origin proposal in the state topic,
// keyed by originKey. It holds only the proposed first window (Unix ms),
// fixed from the proposing instance's clock, never from the data.
type originProposal struct {
	Version int   `json:"v"`
	Origin  int64 `json:"origin"`
}

// originProposalVersion is the version of originProposal's format.
const originProposalVersion = 1

// originKey is the state-topic key of a proposal for group by the instance
// with token: a key per proposal, so that compaction (which keeps the
// last record of each key) never removes a proposal and the first one in
// the topic stays the first.
func originKey(group string, token []byte) string {
	return originPrefix(group) + hex.EncodeToString(token)
}

// originPrefix is the prefix of group's proposal keys.
func originPrefix(group string) string { return group + "\x00origin\x00" }

// firstPartition is a balancer writing every message to the lowest
// partition: proposals are ordered by their offsets in one partition,
// however many partitions the state topic has.
type firstPartition struct{}

// Balance returns the lowest of partitions.
func (firstPartition) Balance(_ kafka.Message, partitions ...int) int { return slices.Min(partitions) }

// agreedOrigin returns the first window of a scale-out deployment without
// windows.start, the same for every instance: the origin of the state
// topic's record for the group when there is one (stage 2 writes it),
// else the first proposal in the state topic's lowest partition (see
// readOrigin). An
// instance that finds neither proposes the first window after now, then
// reads the topic again and takes the first proposal, its own or one that
// another instance wrote before it. It retries until done or ctx ends.
func (o *Operator) agreedOrigin(ctx context.Context, cl *clients) (int64, error) {
	k := o.cfg.Kafka
	var origin int64
	err := o.retry(ctx, "origin", func(c context.Context) error {
		var err error
		origin, err = o.readOrigin(c, cl)
		if err != nil || origin != 0 {
			return err
		}
		mine := o.plan.windowAfter(o.now())
		if err := writeOriginProposal(c, cl, k.stateTopic(), originKey(k.GroupID, o.token), mine); err != nil {
			return err
		}
		if origin, err = o.readOrigin(c, cl); err == nil && origin == 0 {
			err = fmt.Errorf("%w: state topic %s: the origin proposal written for group %s is not there", ErrKafka, k.stateTopic(), k.GroupID)
		}
		if err == nil && origin != mine {
			o.log.Info("another instance proposed the origin first", "origin", tsString(origin))
		}
		return err
	})
	return origin, err
}

// readOrigin reads the state topic and returns group's recorded origin,
// else its first origin proposal (0: neither). A record without an origin
// (written before origins were recorded) that says windows are final
// gives the window after the last final one: stage 1 of a deployment that
// has published must start there, where stage 2 continues.
func (o *Operator) readOrigin(ctx context.Context, c *clients) (int64, error) {
	k := o.cfg.Kafka
	last, err := lastState(ctx, c, k.stateTopic(), k.GroupID, nil)
	if err != nil {
		return 0, err
	}
	switch {
	case last == nil:
	case last.Origin != 0:
		return last.Origin, nil
	case last.ClosedThrough != noClosedWindow:
		return o.plan.alignUp(last.ClosedThrough), nil
	}
	return firstOriginProposal(ctx, c, k.stateTopic(), k.GroupID)
}

// firstOriginProposal returns the origin of group's first proposal in the
// state topic's lowest partition after the last tombstone of group's
// record there (a state reset by hand forgets the proposals before it;
// 0: none).
func firstOriginProposal(ctx context.Context, c *clients, stateTopic, group string) (int64, error) {
	first, end, err := c.endOffsets(ctx, stateTopic)
	if err != nil {
		return 0, err
	}
	if len(end) == 0 {
		return 0, nil
	}
	p := slices.Min(slices.Collect(maps.Keys(end)))
	if first[p] >= end[p] {
		return 0, nil
	}
	prefix := originPrefix(group)
	var origin int64
	err = c.scanPartition(ctx, stateTopic, p, first[p], end[p], func(m kafka.Message) error {
		if string(m.Key) == group && m.Value == nil {
			origin = 0 // reset by hand
			return nil
		}
		if origin != 0 || !strings.HasPrefix(string(m.Key), prefix) || m.Value == nil {
			return nil
		}
		var op originProposal
		if err := json.Unmarshal(m.Value, &op); err != nil || op.Version != originProposalVersion || op.Origin == 0 {
			return fmt.Errorf("%w: state topic %s has an unreadable origin proposal for group %s at offset %d", ErrState, stateTopic, group, m.Offset)
		}
		origin = op.Origin
		return nil
	})
	return origin, err
}

// writeOriginProposal writes a proposal of origin under key to the state
// topic's lowest partition, acknowledged by every in-sync replica.
func writeOriginProposal(ctx context.Context, c *clients, stateTopic, key string, origin int64) error {
	b, err := json.Marshal(originProposal{Version: originProposalVersion, Origin: origin})
	if err != nil {
		return fmt.Errorf("%w: encoding the origin proposal: %v", ErrState, err)
	}
	w := &kafka.Writer{
		Addr: kafka.TCP(c.brokers...), Transport: c.transport, Topic: stateTopic,
		Balancer: firstPartition{}, RequiredAcks: kafka.RequireAll, MaxAttempts: 3,
	}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(key), Value: b}); err != nil {
		return fmt.Errorf("%w: writing the origin proposal to %s: %v", ErrKafka, stateTopic, err)
	}
	return nil
}
