package operator

// group.go is the one consumer-group runner of the operator, used by the
// input group (Run: stage 1, or the whole pipeline of a single instance)
// and by the merge group (runMerge: stage 2 of scale-out).

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// heartbeatInterval is the consumer groups' heartbeat period. A member
// learns that the group rebalances (an instance joined or left) only at
// its next heartbeat, so a scale-out deployment stands partly idle for up
// to this long at every rebalance: with 1 s, the second instance of a
// two-instance start waited 1.0–1.2 s for the first to notice it
// (BenchmarkKafkaThroughput's logs, 2026-11-24). Four heartbeats a second
// per member and group are negligible for a broker.
const heartbeatInterval = 250 * time.Millisecond

// groupRunner joins a consumer group and runs one function per
// generation, until its context ends or a generation fails; a failed join
// is counted, logged and retried after the retry backoff.
type groupRunner struct {
	o    *Operator
	name string // "consumer group" or "merge group", in log messages
	cfg  kafka.ConsumerGroupConfig

	joining    func()          // before every join: health
	joinFailed func(err error) // optional, after a failed join (besides the count and log)
	joined     func()          // optional, after every join: metrics

	// generation consumes one generation: nil when it ends (rebalance,
	// ctx's end), an error only for unrecoverable problems. gctx ends
	// with the generation.
	generation func(ctx, gctx context.Context, gen *kafka.Generation) error
}

// groupConfig returns the settings both consumer groups share, for group
// id on topics; logName prefixes kafka-go's log lines.
func (o *Operator) groupConfig(cl *clients, id string, topics []string, balancers []kafka.GroupBalancer, startOffset int64, logName string) kafka.ConsumerGroupConfig {
	k := o.cfg.Kafka
	return kafka.ConsumerGroupConfig{
		ID:               id,
		GroupBalancers:   balancers,
		Brokers:          cl.brokers,
		Dialer:           cl.dialer,
		Topics:           topics,
		SessionTimeout:   k.SessionTimeout,
		RebalanceTimeout: k.SessionTimeout,
		// Heartbeats every heartbeatInterval (kafka-go's default is 3 s):
		// a member learns of a rebalance at its next heartbeat.
		HeartbeatInterval: min(heartbeatInterval, k.SessionTimeout/3),
		JoinGroupBackoff:  k.RetryBackoff,
		StartOffset:       startOffset,
		Logger:            kafka.LoggerFunc(func(f string, a ...any) { o.log.Debug("kafka-go " + logName + ": " + fmt.Sprintf(f, a...)) }),
		ErrorLogger:       kafka.LoggerFunc(func(f string, a ...any) { o.log.Warn("kafka-go " + logName + ": " + fmt.Sprintf(f, a...)) }),
	}
}

// run joins the group and runs its generations until ctx ends (nil) or a
// generation returns an error (that error).
func (g *groupRunner) run(ctx context.Context) error {
	group, err := kafka.NewConsumerGroup(g.cfg)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrKafka, g.name, err)
	}
	defer group.Close()
	for {
		g.joining()
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			g.o.m.brokerErrors.WithLabelValues("join").Inc()
			if g.joinFailed != nil {
				g.joinFailed(err)
			}
			g.o.log.Warn("joining the "+g.name+" failed; retrying", "err", err)
			if !sleep(ctx, g.o.cfg.Kafka.RetryBackoff) {
				return nil
			}
			continue
		}
		if g.joined != nil {
			g.joined()
		}
		done := make(chan error, 1)
		gen.Start(func(gctx context.Context) { done <- g.generation(ctx, gctx, gen) })
		if err := <-done; err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
