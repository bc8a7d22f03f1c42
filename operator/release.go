package operator

// release.go is the release stage: it turns closed windows (exact
// aggregates) into noised releases — calibration and noise are the plan's
// (releaseWindowAt, addRunning, advance in pipeline.go, running.go and
// ledger.go) — and collects what the publish stage (publish.go) writes.

import (
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// releasedWindow is one window's share of a releaseBatch.
type releasedWindow struct {
	w     *windows.Window
	out   []outMsg      // its releases, in write order
	dup   int           // releases not written: their keys were already published
	wh    int           // groups withheld by private group selection
	spent schema.Budget // the horizon's budget spent through this window
}

// releaseBatch is the release stage's output for a run of closed windows,
// in order: their releases as output-topic messages, and the ledger and
// running totals after the last of them.
type releaseBatch struct {
	windows       []releasedWindow
	msgs          []kafka.Message
	ledger        *ledgerRecord
	running       *runningRecord // nil when windows.running is off
	closedThrough int64          // the end of the last window
}

// release noises the closed windows ws (in order), after what rec says
// is final and published. It does not change rec.
//
// Each release message carries its window's scheduled publication time
// (scheduledAt) as its Kafka timestamp, set here rather than left to the
// producer's clock, so that it is the same in every run and whatever
// arrived.
func (o *Operator) release(rec *recovered, ws []windows.Window) (*releaseBatch, error) {
	k := o.cfg.Kafka
	b := &releaseBatch{ledger: rec.ledger, running: rec.running, closedThrough: ws[len(ws)-1].End}
	if !o.cfg.Windows.Running {
		b.running = nil
	}
	for i := range ws {
		w := &ws[i]
		p := o.plan.at(w.Start) // recalibrated after a configuration change, or the plan
		o.planMetrics(p)
		out, dup, wh, err := p.releaseWindowAt(w, o.key, k.namespace(), o.instance, rec.published, b.ledger)
		if err != nil {
			return nil, err
		}
		if o.cfg.Windows.Running {
			if out, b.running, err = p.addRunning(out, b.running, w); err != nil {
				return nil, err
			}
		}
		b.ledger = p.advance(b.ledger, w.Start, w.End)
		for _, r := range out {
			ms, err := o.cfg.Output.messages(k.OutputTopic, r.key, r.value, &r.rel, scheduledAt(o.cfg, w.End), o.avroOut)
			if err != nil {
				return nil, err
			}
			b.msgs = append(b.msgs, ms...)
		}
		b.windows = append(b.windows, releasedWindow{w, out, dup, wh, b.ledger.Spent})
	}
	return b, nil
}

// observe reports the published batch: metrics, the log line, the
// run-time warnings (metrics.go) and the release hook; lat is the
// publication latency.
func (o *Operator) observe(b *releaseBatch, lat time.Duration) {
	for _, d := range b.windows {
		o.observePublished(d.w, d.out, d.dup, d.wh, lat, d.spent)
		if o.hook != nil {
			rels := make([]schema.Release, len(d.out))
			for i, r := range d.out {
				rels[i] = r.rel
			}
			o.hook(Published{Window: *d.w, Releases: rels, Skipped: d.dup, Withheld: d.wh, Latency: lat})
		}
	}
}
