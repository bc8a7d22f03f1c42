package operator

// resume.go is recovery: what a run (or, with scale-out, stage 2 when it
// takes over) does with what earlier runs left in the state topic before
// it consumes anything.

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"
)

// runState is what survives across generations.
type runState struct {
	cl   *clients
	w    *kafka.Writer
	rec  *recovered // closedThrough, the ledger and the keys published after closedThrough
	from int64      // the first window this run may release (see resume)
	// partial counts the consecutive generations that assigned this
	// instance only part of the input partitions (without scale-out:
	// partialassign.go).
	partial int
}

// emitFrom is the first window a generation may release: the window after
// the last final one, and never before the run's first window.
func (st *runState) emitFrom(p *plan) int64 {
	if st.rec.closedThrough == noClosedWindow {
		return st.from
	}
	return max(st.from, p.alignUp(st.rec.closedThrough))
}

// resume prepares a run from what earlier runs left in the state topic:
//
//  1. An unfinished publication (a crash between a batch's intent and its
//     final state record) is completed first, with exactly the recorded
//     messages, so that every key of a window comes from one snapshot
//     under one configuration (completeIntent).
//  2. The first window to release is fixed without looking at the data:
//     after the last final window; on a deployment's first start,
//     windows.start or else the first window after now; never a window
//     whose release is already in the output topic. A lost state record
//     with windows.start set and a consumer group that has consumed before
//     is refused: dpstream could not tell which windows were published.
//     A windows.start later than that postpones the first release to it
//     (firstWindow).
//  3. The budget ledger is checked against this configuration (a change in
//     the middle of a horizon must not overspend it, see plan.reconcile).
//  4. On a first start the origin is recorded before anything is consumed,
//     and so is the partials cutoff (PartialsBoundFrom) on the first start
//     of a version that binds partials to the deployment (recordStart).
//
// Before anything, a state record written by another deployment is
// refused (checkDeployment).
func (o *Operator) resume(ctx context.Context, st *runState) error {
	rec := st.rec
	if err := o.checkDeployment(rec); err != nil {
		return err
	}
	if err := o.completeIntent(ctx, st); err != nil {
		return err
	}
	from, err := o.firstWindow(ctx, st)
	if err != nil {
		return err
	}
	l, err := o.plan.reconcile(rec.ledger, from)
	if err != nil {
		return err
	}
	rec.ledger = l
	if err := o.recordStart(ctx, st, from); err != nil {
		return err
	}
	st.from = from
	return nil
}

// completeIntent completes an unfinished publication (none: nothing to
// do): it writes the intent's messages whose keys are not in the output
// topic yet, then the state record the publication would have written.
func (o *Operator) completeIntent(ctx context.Context, st *runState) error {
	k := o.cfg.Kafka
	rec := st.rec
	in := rec.intentRec
	if in == nil {
		return nil
	}
	var todo []kafka.Message
	for _, m := range rec.intent {
		if _, ok := rec.published[string(m.Key)]; ok {
			continue
		}
		m.Topic = k.OutputTopic
		m.Time = intentReleaseTime(o.cfg, m.Value, in.Through)
		todo = append(todo, m)
	}
	if len(todo) > 0 {
		if err := o.retry(ctx, "publish", func(c context.Context) error { return st.w.WriteMessages(c, todo...) }); err != nil {
			return err
		}
	}
	if err := o.writeState(ctx, st, stateRecord{ClosedThrough: in.Through, Origin: rec.origin, Digest: in.Digest, Ledger: in.Ledger, Running: in.Running}); err != nil {
		return err
	}
	o.log.Info("completed an unfinished publication", "through", tsString(in.Through),
		"written", len(todo), "already_published", len(rec.intent)-len(todo))
	rec.closedThrough, rec.digest, rec.ledger, rec.running = in.Through, in.Digest, in.Ledger, in.Running
	rec.intent, rec.intentRec = nil, nil
	rec.forgetPublished()
	return nil
}

// firstWindow returns the first window this run may release (step 2 of
// resume).
func (o *Operator) firstWindow(ctx context.Context, st *runState) (int64, error) {
	rec := st.rec
	start, hasStart := o.cfg.Windows.startMillis()
	var from int64
	switch {
	case rec.closedThrough != noClosedWindow:
		from = o.plan.alignUp(rec.closedThrough)
	case rec.origin != 0:
		from = rec.origin
	default:
		if !rec.found {
			if err := o.checkLostState(ctx, st, hasStart); err != nil {
				return 0, err
			}
		}
		if hasStart {
			from = o.plan.alignUp(start)
		} else {
			from = o.plan.windowAfter(o.now())
		}
	}
	if rec.lastEnd != noClosedWindow && rec.lastEnd > from {
		// Releases of this namespace already in the output topic (a state
		// record written by hand, or lost): never release those windows
		// again.
		o.log.Warn("the output topic holds releases after the recorded state; releasing only later windows",
			"first_window", tsString(o.plan.alignUp(rec.lastEnd)))
		from = o.plan.alignUp(rec.lastEnd)
	}
	if hasStart && o.plan.alignUp(start) > from {
		from = o.plan.alignUp(start)
	}
	return from, nil
}

// checkLostState handles a state topic without a record for this
// deployment: when the consumer group whose commits follow publication
// has committed before, the state was lost; with windows.start set that
// is refused (ErrState), else warned about.
func (o *Operator) checkLostState(ctx context.Context, st *runState, hasStart bool) error {
	k := o.cfg.Kafka
	// The consumer group whose commits follow publication: the input
	// group, or with scale-out the merge group on the partials topic
	// (stage 1 commits input offsets behind the partials it wrote,
	// before stage 2 first records the origin).
	group, topics := k.GroupID, k.InputTopics
	if k.ScaleOut {
		group, topics = k.mergeGroup(), []string{k.partialsTopic()}
	}
	// Retried: on a fresh broker the group coordinator may not be ready
	// yet ("Not Coordinator For Group").
	var consumed bool
	err := o.retry(ctx, "offsets", func(c context.Context) error {
		var err error
		consumed, err = st.cl.committedOffsets(c, group, topics...)
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case consumed && hasStart:
		return fmt.Errorf("%w: consumer group %s has committed offsets but the state topic %s has no record for it "+
			"(the state was lost, or kafka.output_topic / kafka.state_topic changed), and windows.start is set: dpstream cannot tell "+
			"which windows were already published, and publishing them again would spend their budget twice. Restore the state topic, "+
			"remove windows.start (the first release is then the first window after now), or set it after the last window published",
			ErrState, group, k.stateTopic())
	case consumed:
		o.log.Warn("the consumer group has committed offsets but the state topic has no record for it; "+
			"releasing only windows after now", "group_id", group, "state_topic", k.stateTopic())
	}
	return nil
}

// recordStart records, before anything is consumed, what a first start
// fixes (step 4 of resume): the origin, and the partials cutoff.
func (o *Operator) recordStart(ctx context.Context, st *runState, from int64) error {
	rec := st.rec
	write := false
	if rec.boundFrom == 0 {
		// Partials of format version 2 (not bound to the deployment) can
		// exist only for windows in flight now, when a deployment that ran
		// an earlier version first starts this one: stage 1 wrote them
		// before the upgrade and committed its input behind them, so it
		// will not write them again. Later windows, and every window of a
		// fresh deployment, take bound partials only.
		rec.boundFrom = from
		if rec.found {
			rec.boundFrom = max(from, o.plan.alignUp(o.now().UnixMilli()))
			if o.cfg.Kafka.ScaleOut {
				o.log.Info("partials of the previous format (dpp2) are accepted only for windows before the cutoff",
					"cutoff", tsString(rec.boundFrom))
			}
		}
		write = true
	}
	if rec.origin == 0 {
		rec.origin = from
		write = true
	}
	if !write {
		return nil
	}
	digest := rec.digest // of the configuration that published through closedThrough
	if digest == "" {
		digest = o.plan.digest
	}
	return o.writeState(ctx, st, stateRecord{ClosedThrough: rec.closedThrough, Origin: rec.origin, Digest: digest, Ledger: rec.ledger, Running: rec.running})
}
