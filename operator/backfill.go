package operator

// backfill.go is the guard of a first start with windows.start far in
// the past: such a start releases every window from windows.start to now,
// whether or not the input holds data for it.

import (
	"errors"
	"fmt"
	"time"
)

// MaxBackfillWindows is the most windows that began before now a
// deployment's first start releases without windows.ack_backfill. Every
// such window is released in full (its public groups, with zeros where
// nothing arrived) and spends its budget whether or not the input holds
// its data, so a windows.start a year back releases and spends half a
// million 1-minute windows. 1000 is a policy bound, not a derived one: it
// lets a first start cover more than 16 hours of 1-minute windows (a
// typical topic's recent history), about 41 days of hourly ones or 3
// years of daily ones, and makes anything larger an explicit decision.
const MaxBackfillWindows = 1000

// ErrBackfill is the refusal of a first start that would release more
// windows before now than MaxBackfillWindows (or windows.ack_backfill)
// allows.
var ErrBackfill = errors.New("operator: backfill")

// backfillWindows returns how many windows a first start at now releases
// before now when its first window is from: those starting before the
// first window after now (0 when from is not in the past).
func (p *plan) backfillWindows(from int64, now time.Time) int64 {
	after := p.windowAfter(now)
	if from >= after {
		return 0
	}
	return (after - from) / p.size
}

// checkBackfill refuses a first start whose first window from (windows.start,
// or with scale-out the origin agreed in the state topic) lies more
// windows before now than allowed (MaxBackfillWindows, or
// windows.ack_backfill when set), saying how many and how to acknowledge.
func (o *Operator) checkBackfill(from int64) error {
	n := o.plan.backfillWindows(from, o.now())
	limit := int64(MaxBackfillWindows)
	if a := o.cfg.Windows.AckBackfill; a > 0 {
		limit = int64(a)
	}
	if n <= limit {
		if n > 0 {
			o.log.Info("first start: releasing the windows since windows.start", "windows_before_now", n, "first_window", tsString(from))
		}
		return nil
	}
	return fmt.Errorf("%w: the first window %s (windows.start, or the origin proposed in the state topic) is %d windows of %s before now: a first start releases every one of them, "+
		"with or without data, and each spends its budget; the limit is %d (windows.ack_backfill, default %d). "+
		"Set windows.ack_backfill: %d (or --set windows.ack_backfill=%d) to acknowledge, or set windows.start later",
		ErrBackfill, tsString(from), n, time.Duration(o.plan.size)*time.Millisecond, limit, MaxBackfillWindows, n, n)
}
