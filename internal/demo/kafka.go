package demo

// kafka.go: the demo's Kafka client side (segmentio/kafka-go): creating
// the input topic, producing the stream and reading the releases back.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// CreateTopic creates topic with n partitions and waits until the
// metadata shows all of them. Its records keep the timestamps the demo's
// producer gives them (message.timestamp.type=CreateTime), the simulated
// arrival times; the operator warns about it, rightly for a real
// deployment, where input topics should use LogAppendTime.
func CreateTopic(ctx context.Context, brokers []string, topic string, n int) error {
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second}
	res, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: n, ReplicationFactor: -1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "message.timestamp.type", ConfigValue: "CreateTime"}}}}})
	if err != nil {
		return fmt.Errorf("%w: creating topic %s on %s: %v", ErrRun, topic, strings.Join(brokers, ","), err)
	}
	if e := res.Errors[topic]; e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
		return fmt.Errorf("%w: creating topic %s: %v", ErrRun, topic, e)
	}
	for {
		if ps, err := TopicPartitions(ctx, brokers, topic); err == nil && len(ps) == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: topic %s did not appear: %v", ErrRun, topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TopicPartitions returns the partition ids of topic, asking a broker
// directly.
func TopicPartitions(ctx context.Context, brokers []string, topic string) ([]int, error) {
	var last error
	for _, b := range brokers {
		conn, err := (&kafka.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", b)
		if err != nil {
			last = err
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		ps, err := conn.ReadPartitions(topic)
		conn.Close()
		if err != nil {
			last = err
			continue
		}
		var ids []int
		for _, p := range ps {
			if p.Error == nil {
				ids = append(ids, p.ID)
			}
		}
		slices.Sort(ids)
		return ids, nil
	}
	return nil, last
}

// demoBalancer sends a message to PartitionOf(key), so the partitions get
// exactly the sequences the generator planned.
var demoBalancer = kafka.BalancerFunc(func(m kafka.Message, parts ...int) int {
	return parts[PartitionOf(m.Key, len(parts))]
})

// Produce writes the stream's messages in order, each record stamped
// with its simulated arrival time. Each write call holds at most one batch
// per partition and waits for its acknowledgement, so every partition
// receives its messages in order.
func Produce(ctx context.Context, brokers []string, topic string, s *Stream) error {
	w := &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: topic, Balancer: demoBalancer,
		RequiredAcks: kafka.RequireAll, BatchTimeout: 2 * time.Millisecond, BatchSize: 2000, BatchBytes: 16 << 20,
		MaxAttempts: 1,
	}
	defer w.Close()
	const chunk = 2000
	msgs := make([]kafka.Message, 0, chunk)
	for i := 0; i < len(s.Msgs); i += chunk {
		msgs = msgs[:0]
		for _, m := range s.Msgs[i:min(i+chunk, len(s.Msgs))] {
			// The record timestamp is the simulated arrival time (a
			// CreateTime topic: the demo's producer is the trusted one).
			msgs = append(msgs, kafka.Message{Key: m.Key, Value: m.Value, Time: time.UnixMilli(m.Arrival)})
		}
		// A new topic may be missing from the writer's metadata for a
		// moment. WriteErrors says which messages failed (a partition's
		// batch fails or succeeds as a whole); retry only those, so
		// nothing is written twice and each partition keeps its order.
		for {
			err := w.WriteMessages(ctx, msgs...)
			if err == nil {
				break
			}
			var we kafka.WriteErrors
			if ctx.Err() != nil || !errors.As(err, &we) {
				return fmt.Errorf("%w: producing to %s: %v", ErrRun, topic, err)
			}
			var failed []kafka.Message
			for j, e := range we {
				if e != nil {
					failed = append(failed, msgs[j])
				}
			}
			msgs = failed
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: producing to %s: %v", ErrRun, topic, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// readTopic reads every partition of topic from the start until ctx ends,
// sending the messages on the returned channel; a partition listing error
// is sent on the error channel.
func readTopic(ctx context.Context, brokers []string, topic string) (<-chan kafka.Message, <-chan error) {
	out := make(chan kafka.Message, 1024)
	errc := make(chan error, 1)
	go func() {
		var parts []int
		for {
			ps, err := TopicPartitions(ctx, brokers, topic)
			if err == nil && len(ps) > 0 {
				parts = ps
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		for _, p := range parts {
			go func() {
				r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p,
					MinBytes: 1, MaxBytes: 8 << 20, MaxWait: 100 * time.Millisecond})
				defer r.Close()
				if err := r.SetOffset(kafka.FirstOffset); err != nil {
					select {
					case errc <- err:
					default: // one error is enough
					}
					return
				}
				for {
					m, err := r.ReadMessage(ctx)
					if err != nil {
						return // ctx ended; other errors are retried inside the reader
					}
					select {
					case out <- m:
					case <-ctx.Done():
						return
					}
				}
			}()
		}
	}()
	return out, errc
}
