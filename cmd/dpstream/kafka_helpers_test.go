package main

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/internal/demo"
)

// snapshotTopic returns every message of topic up to the end offsets
// measured at the call, partition by partition.
func snapshotTopic(ctx context.Context, brokers []string, topic string) ([]kafka.Message, error) {
	parts, err := demo.TopicPartitions(ctx, brokers, topic)
	if err != nil {
		return nil, err
	}
	var out []kafka.Message
	for _, p := range parts {
		conn, err := (&kafka.Dialer{Timeout: 10 * time.Second}).DialLeader(ctx, "tcp", brokers[0], topic, p)
		if err != nil {
			return nil, err
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		first, last, err := conn.ReadOffsets()
		conn.Close()
		if err != nil {
			return nil, err
		}
		if first >= last {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, MinBytes: 1, MaxBytes: 8 << 20,
			MaxWait: 100 * time.Millisecond})
		if err := r.SetOffset(first); err != nil {
			r.Close()
			return nil, err
		}
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				return nil, err
			}
			out = append(out, m)
			if m.Offset >= last-1 {
				break
			}
		}
		r.Close()
	}
	return out, nil
}
