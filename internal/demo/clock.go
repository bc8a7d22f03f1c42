package demo

import (
	"math"
	"time"
)

// demoClock is the operator's clock in the demo. The demo compresses
// simulated time: its records carry their simulated arrival times
// (Message.Arrival, 2024), so the operator's clock must be on the same
// time line, or a partition read to its end would be advanced to today and
// every window since the stream's start released. It starts idle after
// the stream's last arrival, as if the stream had just been produced live,
// and runs at the real rate (publish latencies stay real).
func demoClock(s *Stream, idle time.Duration) func() time.Time {
	end := int64(math.MinInt64)
	for i := range s.Msgs {
		end = max(end, s.Msgs[i].Arrival)
	}
	start := time.UnixMilli(end).Add(idle)
	t0 := time.Now()
	return func() time.Time { return start.Add(time.Since(t0)) }
}
