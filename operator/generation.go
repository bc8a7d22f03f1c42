package operator

// generation.go is one generation of the input consumer group, the
// topology of the input side:
//
//	fetch (fetch.go) → window and bound (core.go) → partial (stage 1 of
//	scale-out) | release (release.go) → publish (publish.go) → commit
//
// The generation's loop owns the core and every other piece of mutable
// state; the fetchers and the publisher run on their own goroutines and
// talk to it through channels.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// generation consumes one generation of the input consumer group.
type generation struct {
	o    *Operator
	ctx  context.Context // the run's: its end drains
	gctx context.Context // the generation's: its end is a rebalance
	gen  *kafka.Generation
	st   *runState
	c    *core // window and bound

	// Fetchers: one per assigned partition, feeding items.
	items     chan []item
	stopFetch context.CancelFunc
	fwg       sync.WaitGroup

	// Publisher: publication runs on its own goroutine so that
	// consumption does not stall while releases and the state record are
	// written; windows are published in order, and a window's events hold
	// back commits until the publisher reports it final.
	jobs    chan pubJob
	results chan pubResult
	pending int // jobs sent and not yet reported
	pcancel context.CancelFunc
	pubDone chan struct{}

	dlq        []kafka.Message // dead letters not yet written
	lastCommit time.Time
	committed  map[string]map[int]int64 // the offsets last committed
}

// pubJob is a unit of work for the publisher: closed windows to release
// and publish, or (stage 1) partial states to write.
type pubJob struct {
	ws         []windows.Window
	ps         []partialOut // split mode (stage 1): partial states instead
	releasedAt time.Time    // when ws were handed over (operator's clock)
}

// pubResult is the publisher's report of a job: the windows or partials
// now final, or the error that stopped it.
type pubResult struct {
	starts []int64
	ps     []partialOut
	err    error
}

// runGeneration consumes one consumer group generation. It returns nil when
// the generation ends (rebalance) or ctx ends (after draining), and an
// error only for unrecoverable problems.
func (o *Operator) runGeneration(ctx, gctx context.Context, gen *kafka.Generation, st *runState) error {
	k := o.cfg.Kafka
	mctx, mcancel := ctxOr(ctx, gctx)
	defer mcancel()
	assigned, total, ok := o.checkAssignment(ctx, gctx, mctx, gen, st)
	if !ok {
		return nil
	}
	if k.ScaleOut {
		// Stage 1 starts after the last final window (stage 2 records it),
		// so that a rebalance long after windows.start does not re-send a
		// partial state for every window since then.
		var ct int64
		err := o.retry(mctx, "state", func(c context.Context) error {
			var err error
			ct, err = closedThrough(c, st.cl, k.stateTopic(), k.GroupID)
			return err
		})
		if err != nil {
			if mctx.Err() != nil {
				return nil // generation or run ended
			}
			return err
		}
		st.rec.closedThrough = max(st.rec.closedThrough, ct)
	}
	c, err := newCore(o.cfg, o.plan, o.key, st.emitFrom(o.plan))
	if err != nil {
		return err
	}
	if err := c.assign(assigned); err != nil {
		return err
	}
	o.log.Info("generation started", "generation", gen.ID, "partitions", len(assigned))
	o.m.assigned.Set(float64(len(assigned)))
	defer o.m.assigned.Set(0)
	if k.ScaleOut {
		o.health.stage("partial", fmt.Sprintf("%d of %d input partitions", len(assigned), total))
		defer o.health.stage("partial", "no input partitions")
	}

	g := &generation{o: o, ctx: ctx, gctx: gctx, gen: gen, st: st, c: c}
	g.startFetchers()
	defer g.stopFetchers()
	o.health.set(true, "")
	o.m.ready.Set(1)
	defer o.m.ready.Set(0)
	return g.run()
}

// checkAssignment counts the input partitions. Without scale-out (which
// needs the merge stage) one instance must own every input partition, or
// two instances would publish different releases of the same window: with
// a partial assignment it refuses to consume, and returns ok false after
// a pause, so that a topic created or grown after the join gets a fresh,
// complete assignment. ok is false as well when the generation or the run
// ended.
func (o *Operator) checkAssignment(ctx, gctx, mctx context.Context, gen *kafka.Generation, st *runState) (assigned []tp, total int, ok bool) {
	k := o.cfg.Kafka
	for topic, pas := range gen.Assignments {
		for _, pa := range pas {
			assigned = append(assigned, tp{topic, pa.ID})
		}
	}
	err := o.retry(mctx, "metadata", func(c context.Context) error {
		parts, err := st.cl.partitions(c, k.InputTopics...)
		if err != nil {
			return err
		}
		total = 0
		for _, ps := range parts {
			total += len(ps)
		}
		return nil
	})
	if err != nil {
		return nil, 0, false // generation or run ended
	}
	if len(assigned) != total && !k.ScaleOut {
		st.partial++
		o.health.set(false, fmt.Sprintf("assigned %d of %d input partitions: another instance is in consumer group %s and kafka.scale_out is off", len(assigned), total, k.GroupID))
		t := time.NewTimer(o.reportPartialAssignment(st.partial, len(assigned), total, gen.ID))
		defer t.Stop()
		select {
		case <-t.C:
		case <-gctx.Done():
		case <-ctx.Done():
		}
		return nil, 0, false
	}
	st.partial = 0
	return assigned, total, true
}

// startFetchers starts one fetcher per assigned partition, all feeding
// g.items; the loop owns all state.
func (g *generation) startFetchers() {
	fctx, stop := context.WithCancel(g.gctx)
	g.stopFetch = stop
	g.items = make(chan []item, 64)
	for topic, pas := range g.gen.Assignments {
		for _, pa := range pas {
			g.fwg.Add(1)
			go func() {
				defer g.fwg.Done()
				g.o.fetch(fctx, g.st.cl, topic, pa, g.items)
			}()
		}
	}
}

// stopFetchers stops the fetchers and waits for them.
func (g *generation) stopFetchers() {
	g.stopFetch()
	g.fwg.Wait()
}

// run starts the publisher and runs the generation's loop until the
// generation or the run ends.
func (g *generation) run() error {
	o := g.o
	tick := time.NewTicker(tickInterval(o.cfg))
	defer tick.Stop()
	g.lastCommit = o.now()
	pctx, pcancel := context.WithCancel(g.gctx)
	defer pcancel()
	g.startPublisher(pctx, pcancel)
	for {
		select {
		case batch := <-g.items:
			g.consumeBatch(batch)
		case r := <-g.results:
			if err := g.handle(r); err != nil {
				close(g.jobs)
				return g.fail(err)
			}
		case <-tick.C:
			g.tick()
		case <-g.gctx.Done():
			return g.endGeneration()
		case <-g.ctx.Done():
			return g.drain()
		}
	}
}

// consumeBatch feeds a fetched chunk to the core and returns it to the
// pool.
func (g *generation) consumeBatch(batch []item) {
	for i := range batch {
		// An event dropped by windows.max_open_windows is retried once
		// after pollClosed closed the windows the watermark allows: the
		// windows package only closes windows on Poll, so between ticks a
		// fast catch-up could otherwise reach the cap with windows that
		// are already closable.
		g.o.consume(g.c, &batch[i], &g.dlq, g.pollClosed)
	}
	putItems(batch)
}

// tick is the loop's periodic work: hand over the windows that are due,
// move the partitions read to their end with the clock (the windows that
// closes are released at the next tick), metrics, the progress line and,
// every commit interval, the dead letters and the commit.
func (g *generation) tick() {
	o := g.o
	g.pollClosed()
	g.c.applyCaughtUp()
	o.m.tick(g.c)
	o.progress(g.c) // the periodic progress line (metrics.go)
	if o.now().Sub(g.lastCommit) >= o.cfg.Kafka.CommitInterval {
		g.flushAndCommit(g.gctx)
		g.lastCommit = o.now()
	}
}

// startPublisher starts the publisher goroutine: it publishes the jobs in
// order (partial states for stage 1, releases otherwise) and reports each
// on g.results; it stops at its first error.
func (g *generation) startPublisher(pctx context.Context, pcancel context.CancelFunc) {
	g.jobs = make(chan pubJob, 64)
	g.results = make(chan pubResult, 64)
	g.pcancel = pcancel
	g.pubDone = make(chan struct{})
	go func() {
		defer close(g.pubDone)
		for j := range g.jobs {
			if j.ps != nil {
				err := g.o.publishPartials(pctx, g.st, j.ps)
				g.results <- pubResult{ps: j.ps, err: err}
				if err != nil {
					return
				}
				continue
			}
			err := g.o.publish(pctx, g.st, j.ws, j.releasedAt)
			var starts []int64
			if err == nil {
				for _, w := range j.ws {
					starts = append(starts, w.Start)
				}
			}
			g.results <- pubResult{starts: starts, err: err}
			if err != nil {
				return
			}
		}
	}()
}

// handle takes a publisher's report: what it published is final in the
// core, and its events no longer hold back commits.
func (g *generation) handle(r pubResult) error {
	g.pending--
	if r.err != nil {
		return r.err
	}
	g.c.final(r.starts...)
	for _, p := range r.ps {
		g.c.finalPartial(p.pid, p.p.Start)
	}
	return nil
}

// pollClosed closes the windows the watermark allows and hands those
// whose scheduled publication time had come a tick ago (core.release)
// to the publisher; the others wait in the core, so that a window the
// data closed early is published no earlier than one the clock closes.
// The tick of margin: a window the clock closes (applyCaughtUp, after
// this on the first tick at or after its schedule) is released at the
// next tick, and so is one the data closed. It reports whether it closed
// any window.
func (g *generation) pollClosed() bool {
	o, c := g.o, g.c
	if g.pending >= cap(g.jobs) {
		return false // the publisher is behind (broker down): back-pressure
	}
	if c.split {
		// Stage 1: partials go to the partials topic as soon as they
		// close; stage 2 holds the publication (merge.go).
		if ps := c.pollPartials(); len(ps) > 0 {
			g.jobs <- pubJob{ps: ps}
			g.pending++
			return true
		}
		return false
	}
	ws, closed := c.release(o.now().Add(-tickInterval(o.cfg)).UnixMilli())
	if len(ws) == 0 {
		return closed
	}
	o.observeClosed(ws)
	g.jobs <- pubJob{ws: ws, releasedAt: o.now()}
	g.pending++
	return true
}

// finish waits for every pending publication (until c2 ends).
func (g *generation) finish(c2 context.Context) error {
	close(g.jobs)
	for g.pending > 0 {
		select {
		case r := <-g.results:
			if err := g.handle(r); err != nil {
				return err
			}
		case <-c2.Done():
			g.pcancel()
			<-g.pubDone
			return c2.Err()
		}
	}
	<-g.pubDone
	return nil
}

// fail is the generation's result for a publication error: a simulated
// crash as it is (no drain, no commit), nil when the generation or the
// run ended, else the error.
func (g *generation) fail(err error) error {
	if errors.Is(err, errCrash) {
		return err
	}
	if g.gctx.Err() != nil || g.ctx.Err() != nil {
		return nil
	}
	return err
}

// flushAndCommit writes the dead letters and commits the offsets below
// which every event belongs to a final window (core.commitOffsets); a
// failure is retried at the next commit.
func (g *generation) flushAndCommit(c2 context.Context) {
	o := g.o
	if len(g.dlq) > 0 {
		if err := o.retry(c2, "dead_letter", func(c3 context.Context) error { return g.st.w.WriteMessages(c3, g.dlq...) }); err != nil {
			return // keep them; offsets below stay uncommitted
		}
		o.m.deadLetter(len(g.dlq))
		g.dlq = g.dlq[:0]
	}
	offs := g.c.commitOffsets()
	if sameOffsets(offs, g.committed) {
		return
	}
	if err := g.gen.CommitOffsets(offs); err != nil {
		o.m.brokerErrors.WithLabelValues("commit").Inc()
		o.log.Warn("committing offsets failed; will retry", "err", err)
		return
	}
	o.m.committed()
	g.committed = offs
}

// endGeneration ends the generation at a rebalance or when the group
// closed: commit what is final (may fail if the generation is already
// gone), drop all state; the next generation replays from the committed
// offsets.
func (g *generation) endGeneration() error {
	g.stopFetch()
	g.o.health.set(false, "rebalancing")
	dctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), 10*time.Second)
	defer cancel()
	if err := g.finish(dctx); errors.Is(err, errCrash) {
		return err
	}
	g.flushAndCommit(dctx)
	g.o.log.Info("generation ended", "generation", g.gen.ID)
	return nil
}

// drain ends the run: stop fetching, consume what was fetched, publish
// what has closed and is due, commit. A window not due yet is not
// published early: its events hold back the commit, and the next run
// publishes it on schedule.
func (g *generation) drain() error {
	o := g.o
	g.stopFetch()
	o.health.set(false, "draining")
	dctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), 30*time.Second)
	defer cancel()
	for {
		select {
		case batch := <-g.items:
			g.consumeBatch(batch)
			continue
		default:
		}
		break
	}
	g.pollClosed()
	if err := g.finish(dctx); err != nil {
		if errors.Is(err, errCrash) {
			return err
		}
		o.log.Warn("drain: publishing closed windows failed", "err", err)
	}
	g.flushAndCommit(dctx)
	o.log.Info("drained", o.m.logArgs([]any{"generation", g.gen.ID}, "open_windows", g.c.openWindows())...)
	return nil
}

// consume feeds one decoded message (or a fetcher's caught-up marker) to
// the core and counts the outcome. An event dropped by
// windows.max_open_windows is retried once after makeRoom (if not nil)
// closed the windows the watermark allows, so that only windows that are
// really open count against the cap.
func (o *Operator) consume(c *core, it *item, dlq *[]kafka.Message, makeRoom func() bool) {
	m := &it.m
	if !it.caughtUp.IsZero() {
		c.handleItem(it) // not a message: advances the partition's watermark
		return
	}
	o.m.eventIn(m.Topic)
	o.shape.observe(o.log, m.Value, it.absent, it.wrong)
	out, reason, status := c.handleItem(it)
	if status == windows.TooManyWindows && makeRoom != nil && makeRoom() {
		// Safe to repeat: the first Add changed only the partition's
		// watermark (to this event's arrival time, which it sets again)
		// and the core's next offset (to the same value).
		out, reason, status = c.handleItem(it)
	}
	deadLetter := func(why string) {
		if o.cfg.Kafka.DeadLetterTopic != "" {
			*dlq = append(*dlq, kafka.Message{
				Topic: o.cfg.Kafka.DeadLetterTopic, Key: m.Key, Value: m.Value,
				Headers: []kafka.Header{
					{Key: "dpstream-reason", Value: []byte(why)},
					{Key: "dpstream-source", Value: []byte(m.Topic + "/" + strconv.Itoa(m.Partition) + "/" + strconv.FormatInt(m.Offset, 10))},
				},
			})
		}
	}
	switch out {
	case outAccepted:
		o.m.decodedEvent()
	case outSkipped:
		o.m.skip(reason)
		deadLetter(reason.String())
	case outNoTime:
		// Without a record timestamp there is no trusted arrival time to
		// judge the event by: bad input.
		if it.reason == schema.ReasonNone {
			o.m.decodedEvent()
		}
		o.m.skipNamed(noTimestampReason)
		deadLetter(noTimestampReason)
	case outLate:
		o.m.decodedEvent()
		o.m.lateEvent()
	case outNotPublic:
		o.m.decodedEvent()
		o.m.skipNamed("not_public_group")
	default:
		o.m.decodedEvent()
		o.m.skipNamed(status.String())
	}
}

// sameOffsets reports whether two sets of offsets are equal.
func sameOffsets(a, b map[string]map[int]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if len(ps) != len(b[t]) {
			return false
		}
		for p, o := range ps {
			if bo, ok := b[t][p]; !ok || bo != o {
				return false
			}
		}
	}
	return true
}

// tickInterval is how often the loop polls for closed windows: a tenth of
// the idle timeout, between 10 ms and 1 s.
func tickInterval(c Config) time.Duration {
	d := c.Windows.IdleTimeout / 10
	return min(max(d, 10*time.Millisecond), time.Second)
}
