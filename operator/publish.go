package operator

// publish.go is the publish stage: the write protocol that makes a run of
// released windows final (intent → releases → state; the generation then
// commits the input offsets their events held back), and the partial
// writer of stage 1 (scale-out). Each step is durable before the next; a
// crash after the intent is completed by the next start (resume.go). The
// crash points tests may simulate between the steps are crash.go's.

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/windows"
)

// newWriter returns the writer of every stage (releases, state records,
// intents, partials, dead letters): acknowledged by every in-sync
// replica, keys partitioned as Kafka's Java clients do.
func newWriter(cl *clients, k KafkaConfig) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(cl.brokers...),
		Transport:    cl.transport,
		Balancer:     kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: max(k.BatchTimeout, time.Millisecond),
		BatchSize:    1000,
		MaxAttempts:  3,
	}
}

// publish releases the closed windows ws (in order) and records them
// final; it retries until done or ctx ends. Three steps, each durable
// before the next: the publication intent (the encoded releases and the
// ledger after them, in the state topic), the releases (output topic), the
// state record saying they are final. A crash after the first step is
// completed by the next start from the intent (see resume).
//
// The publication latency is measured from releasedAt, when the windows
// were handed over: their scheduled time or later (catching up).
func (o *Operator) publish(ctx context.Context, st *runState, ws []windows.Window, releasedAt time.Time) error {
	b, err := o.release(st.rec, ws)
	if err != nil {
		return err
	}
	if err := o.writeIntent(ctx, st, b); err != nil {
		return err
	}
	if len(b.msgs) > 1 && o.crashes(crashHalf) {
		// Tests: a crash in the middle of a window's publication.
		_ = st.w.WriteMessages(ctx, b.msgs[:len(b.msgs)/2]...)
		return errCrash
	}
	if len(b.msgs) > 0 {
		if err := o.retry(ctx, "publish", func(c context.Context) error { return st.w.WriteMessages(c, b.msgs...) }); err != nil {
			return err
		}
	}
	if o.crashes(crashReleases) {
		return errCrash
	}
	rec := st.rec
	for _, d := range b.windows {
		for _, r := range d.out {
			rec.published[r.key] = d.w.End
		}
	}
	// Record that these windows are final before their events stop
	// holding back commits.
	final := stateRecord{ClosedThrough: b.closedThrough, Origin: rec.origin, Digest: o.plan.digest, Ledger: b.ledger, Running: b.running}
	if err := o.writeState(ctx, st, final); err != nil {
		return err
	}
	if o.crashes(crashState) {
		return errCrash
	}
	rec.ledger, rec.running, rec.closedThrough = b.ledger, b.running, b.closedThrough
	rec.forgetPublished()
	o.observe(b, o.now().Sub(releasedAt))
	return nil
}

// writeIntent writes the publication intent of b (nothing when b has no
// release): the encoded releases in chunks, then the state record
// pointing at them, which keeps the progress of st.rec.
func (o *Operator) writeIntent(ctx context.Context, st *runState, b *releaseBatch) error {
	if len(b.msgs) == 0 {
		return nil
	}
	k := o.cfg.Kafka
	rec := st.rec
	before := o.stamp(rec, stateRecord{ClosedThrough: rec.closedThrough, Origin: rec.origin, Digest: o.plan.digest, Ledger: rec.ledger, Running: rec.running})
	in := intentRecord{Through: b.closedThrough, Ledger: b.ledger, Digest: o.plan.digest, Running: b.running}
	return o.retry(ctx, "intent", func(c context.Context) error {
		im, err := intentMessages(c, st.cl, k.stateTopic(), k.GroupID, k.OutputTopic, before, in, b.msgs)
		if err != nil {
			return err
		}
		// The chunks, then the record pointing at them: two calls, so
		// that the record can never be durable before its chunks.
		if err := st.w.WriteMessages(c, im[:len(im)-1]...); err != nil {
			return err
		}
		return st.w.WriteMessages(c, im[len(im)-1])
	})
}

// writeState writes the state record s, stamped (Operator.stamp), with
// the output topic's end offsets; it retries until done or ctx ends.
func (o *Operator) writeState(ctx context.Context, st *runState, s stateRecord) error {
	k := o.cfg.Kafka
	s = o.stamp(st.rec, s)
	return o.retry(ctx, "state", func(c context.Context) error {
		sm, err := stateMessage(c, st.cl, k.stateTopic(), k.GroupID, k.OutputTopic, s)
		if err != nil {
			return err
		}
		return st.w.WriteMessages(c, sm)
	})
}

// forgetPublished drops the keys of windows now final from the published
// keys (they were only needed to skip releases already written).
func (rec *recovered) forgetPublished() {
	for key, end := range rec.published {
		if end <= rec.closedThrough {
			delete(rec.published, key)
		}
	}
}

// publishPartials is the partial writer of stage 1 (scale-out): it writes
// the partial states ps to the partials topic, every chunk acknowledged
// before their events stop holding back commits; it retries until done
// or ctx ends.
func (o *Operator) publishPartials(ctx context.Context, st *runState, ps []partialOut) error {
	topic := o.cfg.Kafka.partialsTopic()
	macKey := partialMACKey(o.key, partialBindingOf(o.cfg.Kafka, o.plan.digest))
	var msgs []kafka.Message
	for _, p := range ps {
		b, err := encodePartial(p, laneCount(o.cfg))
		if err != nil {
			return fmt.Errorf("operator: encoding a partial state: %w", err)
		}
		msgs = append(msgs, partialMessages(topic, macKey, p.p.Start, p.pid, b)...)
	}
	if o.crashes(crashPartials) {
		_ = st.w.WriteMessages(ctx, msgs[:len(msgs)/2]...)
		return errCrash
	}
	if err := o.retry(ctx, "partials", func(c context.Context) error { return st.w.WriteMessages(c, msgs...) }); err != nil {
		return err
	}
	o.m.partialsWritten(len(ps))
	return nil
}
