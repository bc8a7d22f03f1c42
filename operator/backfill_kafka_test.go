package operator

// Broker test of the first-start guard against a windows.start far in the
// past (backfill.go).

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// TestKafkaFirstStartFarPastRefused: a first start whose windows.start lies
// MaxBackfillWindows+10 windows that began before the operator's clock, on an empty
// input topic, is refused with ErrBackfill before anything is published,
// saying how many windows and naming windows.ack_backfill; the same start
// with windows.ack_backfill set to that number publishes its first window,
// the one at windows.start. (Before the guard, the first start published
// every window from windows.start on: the refusal fails.)
func TestKafkaFirstStartFarPastRefused(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName("dpstream-backfill-in"), uniqueName("dpstream-backfill-out")
	createTopic(t, cl, in, 1)
	c := testConfig(brokers, in, out, uniqueName("dpstream-backfill"))
	c.Kafka.CreateTopics = true
	const over = 10
	windows := int64(MaxBackfillWindows + over)
	// The clock: 1 ms into the window that starts windows-1 windows after
	// testBase: windows windows, that one included, began before now.
	now := time.UnixMilli(testBase + (windows-1)*testSize.Milliseconds() + 1)
	clock := func() time.Time { return now }

	published := make(chan int64, 1<<14)
	sink := &logSink{}
	t.Cleanup(func() { scanLogs(t, sink) })
	newOp := func(c Config) *Operator {
		op, err := New(c, WithKey(testKey()), WithLogger(sink.logger(t)), WithRegistry(prometheus.NewRegistry()),
			WithClock(clock), WithReleaseHook(func(p Published) { published <- p.Window.Start }))
		if err != nil {
			t.Fatal(err)
		}
		return op
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := newOp(c).Run(ctx)
	if !errors.Is(err, ErrBackfill) {
		t.Fatalf("first start with windows.start %d windows back: Run returned %v, want ErrBackfill", windows, err)
	}
	for _, want := range []string{strconv.FormatInt(windows, 10) + " windows", "windows.ack_backfill: " + strconv.FormatInt(windows, 10)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if n := outputCount(t, cl, out); n != 0 {
		t.Fatalf("the refused start published %d messages", n)
	}

	// Acknowledged: the first window published is windows.start's.
	c.Windows.AckBackfill = int(windows)
	first, err := runFirstRelease(t, newOp(c), published, 60*time.Second)
	if err != nil {
		t.Fatalf("acknowledged first start: %v", err)
	}
	if first != testBase {
		t.Errorf("acknowledged first start published window %s first, want windows.start %s", tsString(first), tsString(testBase))
	}
}

// runFirstRelease runs op until it publishes its first window and returns
// that window's start and Run's error.
func runFirstRelease(t *testing.T, op *Operator, published chan int64, deadline time.Duration) (int64, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- op.Run(ctx) }()
	select {
	case s := <-published:
		cancel()
		return s, <-errc
	case err := <-errc:
		t.Fatalf("Run ended before publishing: %v", err)
	case <-time.After(deadline):
		cancel()
		<-errc
		t.Fatalf("nothing published within %v", deadline)
	}
	return 0, nil
}
