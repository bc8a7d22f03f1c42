package operator

// Broker-free tests of stage 2's intake (merger.add): which messages of
// the partials topic become pending partials, and which are rejected and
// counted. Deterministic (fixed key, fixed partials): no false-failure
// rate.

import (
	"context"
	"io"
	"log/slog"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/windows"
)

// TestMergerAdd: a complete partial of an expected partition is pending
// (and its first chunk's offset holds back the commit); a replayed one,
// one of a final window, one under another key, one whose content does not
// match its message and a message that is no partial are not, and the
// rejected ones are counted by reason.
func TestMergerAdd(t *testing.T) {
	c := stateTestConfig()
	c.Kafka.ScaleOut = true
	reg := prometheus.NewRegistry()
	op, err := New(c, WithKey(testKey()), WithRegistry(reg), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	size := op.plan.size
	next := 10 * size // the first window not yet final
	macKey := partialMACKey(op.key, partialBindingOf(c.Kafka, op.plan.digest))
	m := &merger{
		o: op, ctx: context.Background(), rec: &recovered{}, size: size,
		expected: map[int32]bool{0: true, 1: true}, next: next,
		pending: map[int64]map[int32]windows.Partial{}, firstOff: map[int64]int64{},
		nextOffset: -1, committed: -2,
		asm: newAssembler(macKey, partialMACKeyV2(op.key), math.MinInt64),
	}
	// msg encodes a partial of window start covering partitions parts as
	// the message of input partition pid, under key.
	msg := func(key []byte, start int64, pid int32, parts []int32, offset int64) kafka.Message {
		t.Helper()
		p := windows.Partial{Start: start, End: start + size, Partitions: parts}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		ms := partialMessages("partials", key, start, pid, b)
		if len(ms) != 1 {
			t.Fatalf("%d chunks, want 1", len(ms))
		}
		ms[0].Offset = offset
		return ms[0]
	}
	var other rng.Key // another deployment's noise key
	other[0] = 1
	otherKey := partialMACKey(other, partialBindingOf(c.Kafka, op.plan.digest))
	for _, tc := range []struct {
		name string
		m    kafka.Message
		want bool
	}{
		{"partition 0", msg(macKey, next, 0, []int32{0}, 5), true},
		{"partition 0 replayed", msg(macKey, next, 0, []int32{0}, 6), false},
		{"a final window", msg(macKey, next-size, 1, []int32{1}, 7), false},
		{"another key", msg(otherKey, next, 1, []int32{1}, 8), false},
		{"content of another partition", msg(macKey, next+size, 1, []int32{0}, 9), false},
		{"not a partial", kafka.Message{Value: []byte("hello"), Offset: 10}, false},
		{"partition 1 of the next window", msg(macKey, next+size, 1, []int32{1}, 11), true},
	} {
		if got := m.add(tc.m); got != tc.want {
			t.Errorf("%s: add = %v, want %v", tc.name, got, tc.want)
		}
		if m.nextOffset != tc.m.Offset+1 {
			t.Errorf("%s: next offset %d, want %d", tc.name, m.nextOffset, tc.m.Offset+1)
		}
	}
	if len(m.pending) != 2 || len(m.pending[next]) != 1 || len(m.pending[next+size]) != 1 {
		t.Errorf("pending %v, want one partial of each of two windows", m.pending)
	}
	if m.firstOff[next] != 5 || m.firstOff[next+size] != 11 {
		t.Errorf("first offsets %v, want %d: 5 and %d: 11", m.firstOff, next, next+size)
	}
	for reason, want := range map[string]float64{"mac": 1, "damaged": 1, "not_partial": 1} {
		if got := counter(t, reg, "dpstream_partials_rejected_total", reason); got != want {
			t.Errorf("partials rejected as %s: %v, want %v", reason, got, want)
		}
	}
}
