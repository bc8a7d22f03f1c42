package operator

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCheckBackfill: a first window n windows before now (n counting the
// window now is in) passes up to MaxBackfillWindows and is refused with
// ErrBackfill from one more, unless windows.ack_backfill covers it; a
// first window after now counts 0.
func TestCheckBackfill(t *testing.T) {
	size := testSize.Milliseconds()
	check := func(n int64, ack int) error {
		c := testConfig([]string{"127.0.0.1:1"}, "in", "out", "g")
		c.Windows.AckBackfill = ack
		now := time.UnixMilli(testBase + (n-1)*size + 1) // 1 ms into the n-th window from testBase
		op, err := New(c, WithKey(testKey()), WithLogger(slog.New(slog.DiscardHandler)), WithRegistry(prometheus.NewRegistry()),
			WithClock(func() time.Time { return now }))
		if err != nil {
			t.Fatal(err)
		}
		if got := op.plan.backfillWindows(testBase, now); got != n {
			t.Errorf("backfillWindows = %d, want %d", got, n)
		}
		return op.checkBackfill(testBase)
	}
	for _, tc := range []struct {
		n       int64
		ack     int
		refused bool
	}{
		{1, 0, false},
		{MaxBackfillWindows, 0, false},
		{MaxBackfillWindows + 1, 0, true},
		{MaxBackfillWindows + 1, MaxBackfillWindows + 1, false},
		{5000, 4999, true},
		{5000, 5000, false},
	} {
		err := check(tc.n, tc.ack)
		if refused := errors.Is(err, ErrBackfill); refused != tc.refused {
			t.Errorf("%d windows back, ack_backfill %d: %v, want refused %v", tc.n, tc.ack, err, tc.refused)
		}
	}
	p := &plan{size: size}
	if n := p.backfillWindows(testBase+size, time.UnixMilli(testBase)); n != 0 {
		t.Errorf("a first window after now counts %d windows back", n)
	}
}
