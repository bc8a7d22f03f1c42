package operator

// progress.go is the periodic progress line of the consuming loop.

import (
	"math"
	"time"
)

// progressEvery is how often the progress line is logged.
const progressEvery = time.Minute

// Values of the progress line's published_through and merge keys that are
// not a time.
const (
	// progressNothingYet: no window published since the start.
	progressNothingYet = "nothing yet (a window is published after its end + windows.allowed_lateness + windows.idle_timeout)"
	// progressStandby: with kafka.scale_out, an instance that does not
	// merge never publishes; another instance of the group does.
	progressStandby = "nothing by this instance: it is a merge standby (kafka.scale_out: it writes partial states, another instance merges and publishes)"
	// progressMerging: with kafka.scale_out, this instance publishes.
	progressMerging = "merging (this instance publishes)"
	// progressStandbyStage: the merge key of a standby.
	progressStandbyStage = "standby (another instance merges and publishes)"
)

// progress logs, at most every progressEvery, what was published:
// windows_published and releases_published since the last line (one
// minute), windows_published_total and releases_published_total since the
// start (operational: the output topic shows them), and how far
// publication has got (published_through). With kafka.scale_out it says
// whether this instance merges or is a standby (merge), and a standby's
// published_through says that it publishes nothing itself. With sensitive
// metrics on it adds events per second, the consumer lag and the windows
// holding events (exact input counts, off by default like their metrics).
func (o *Operator) progress(c *core) {
	m := o.m
	now := o.now()
	if m.progressAt.IsZero() {
		m.progressAt = now
		return
	}
	el := now.Sub(m.progressAt)
	if el < progressEvery {
		return
	}
	args := []any{"windows_published", m.pubWindows.Swap(0), "releases_published", m.pubReleases.Swap(0),
		"windows_published_total", m.totWindows.Load(), "releases_published_total", m.totReleases.Load(),
		"interval", el.Round(time.Second).String()}
	standby := o.cfg.Kafka.ScaleOut && !m.merger.Load()
	switch end := m.lastEnd.Load(); {
	case standby:
		args = append(args, "published_through", progressStandby)
	case end != 0:
		args = append(args, "published_through", tsString(end))
	default:
		args = append(args, "published_through", progressNothingYet)
	}
	if o.cfg.Kafka.ScaleOut {
		stage := progressMerging
		if standby {
			stage = progressStandbyStage
		}
		args = append(args, "merge", stage)
	}
	var counts []any
	if m.s != nil {
		var lag int64
		c.lags(func(_ tp, l int64) { lag += l })
		counts = []any{"events_per_second", math.Round(float64(m.s.n)/el.Seconds()*10) / 10, "lag", lag, "open_windows", c.openWindows()}
		m.s.n = 0
	}
	o.log.Info("progress", m.logArgs(args, counts...)...)
	m.progressAt = now
}
