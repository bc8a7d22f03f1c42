package operator

// merge.go is stage 2 of the scale-out topology (KafkaConfig.ScaleOut):
// the "merge" node. One instance at a time — the owner of the partials
// topic's single partition in the consumer group GroupID + ".merge" —
// reads the partial states stage 1 wrote, merges the partials of every
// input partition of a window (windows.MergePartials re-applies every
// bound per unit across the whole input), and hands the merged window to
// the same noise → publish path as a single instance, with the same state
// topic (finality, intent, ledger). Any other instance waits as a standby
// and takes over on a rebalance.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/windows"
)

// runMerge runs stage 2 until ctx ends: it joins the merge group and, in
// every generation in which it owns the partials topic, merges and
// publishes.
func (o *Operator) runMerge(ctx context.Context, cl *clients, w *kafka.Writer) error {
	k := o.cfg.Kafka
	// The merging instance is the one the input group gives the smaller
	// share (balance.go).
	balancers := []kafka.GroupBalancer{mergeBalancer{tokenData{o.token}}, kafka.RangeGroupBalancer{}}
	g := &groupRunner{
		o: o, name: "merge group",
		cfg:     o.groupConfig(cl, k.mergeGroup(), []string{k.partialsTopic()}, balancers, kafka.FirstOffset, "merge group"),
		joining: func() { o.health.stage("merge", "joining the merge group") },
		generation: func(ctx, gctx context.Context, gen *kafka.Generation) error {
			return o.mergeGeneration(ctx, gctx, gen, cl, w)
		},
	}
	return g.run(ctx)
}

// merger is stage 2 in one generation of the merge group in which this
// instance owns the partials topic: it reads the partial states, merges
// every window whose partials are all here and publishes it on schedule
// (the merge node of the topology; merged windows go to the same release
// and publish stages as a single instance's).
type merger struct {
	o   *Operator
	ctx context.Context // ends with the run or the generation
	gen *kafka.Generation
	pa  kafka.PartitionAssignment // the partials topic's one partition
	st  *runState
	rec *recovered

	wcfg     windows.Config
	seed     [32]byte
	size     int64
	asm      *assembler
	expected map[int32]bool // the ids of every input partition (partitionID)

	next       int64                               // the next window to publish
	pending    map[int64]map[int32]windows.Partial // window start → input partition → its first complete partial
	firstOff   map[int64]int64                     // window start → offset of its oldest chunk
	nextOffset int64                               // after the last message read (-1: none)
	committed  int64                               // the offset last committed (-2: none)

	// lanes and lanePending: the extra measures and histograms, and
	// their partials beside pending's (lanes_partials.go); nil without.
	lanes       []*lane
	lanePending map[int64]map[int32][]windows.Partial
}

// mergeGeneration is one generation of the merge group: a standby waits
// for the next; the owner of the partials topic takes over (recovery,
// as at a start) and merges.
func (o *Operator) mergeGeneration(ctx, gctx context.Context, gen *kafka.Generation, cl *clients, w *kafka.Writer) error {
	k := o.cfg.Kafka
	pas := gen.Assignments[k.partialsTopic()]
	if len(pas) == 0 {
		o.health.stage("merge", "standby (another instance merges)")
		select {
		case <-gctx.Done():
		case <-ctx.Done():
		}
		return nil
	}
	mctx, mcancel := ctxOr(ctx, gctx)
	defer mcancel()
	m, err := o.takeOver(mctx, gen, pas[0], cl, w)
	if m == nil {
		return err
	}
	o.log.Info("merging", "generation", gen.ID, "first_window", tsString(m.next), "input_partitions", len(m.expected))
	o.m.merging.Set(1) // before the stage line, which tests wait for
	o.m.merger.Store(true)
	o.health.stage("merge", "merging (this instance publishes)")
	defer func() {
		o.m.merging.Set(0)
		o.m.merger.Store(false)
		o.m.mergeGauges(0, 0)
	}()

	// The reader: the partials topic from the committed offset.
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: cl.brokers, Topic: k.partialsTopic(), Partition: m.pa.ID, Dialer: cl.dialer,
		MinBytes: 1, MaxBytes: 16 << 20, MaxWait: fetchMaxWait,
	})
	defer r.Close()
	offset := m.pa.Offset
	if offset < 0 {
		offset = kafka.FirstOffset
	}
	if err := r.SetOffset(offset); err != nil {
		return fmt.Errorf("%w: partials topic: %v", ErrKafka, err)
	}
	rctx, rcancel := context.WithCancel(mctx)
	defer rcancel()
	in := readPartials(rctx, r)
	m.newAssembler()
	return m.run(in)
}

// takeOver reads what earlier owners left in the state topic (an
// unfinished publication is completed first, see resume) and how many
// input partitions every window needs, and returns the merger; nil with
// the generation's result when it cannot merge (nil: the generation or
// the run ended).
func (o *Operator) takeOver(mctx context.Context, gen *kafka.Generation, pa kafka.PartitionAssignment, cl *clients, w *kafka.Writer) (*merger, error) {
	k := o.cfg.Kafka
	o.health.stage("merge", "reading the state and output topics")
	var rec recovered
	var expected map[int32]bool
	err := o.retry(mctx, "merge_setup", func(c context.Context) error {
		r, err := recoverState(c, cl, k.stateTopic(), k.GroupID, k.OutputTopic, k.namespace())
		if err != nil {
			return err
		}
		if expected, err = o.inputPartitionIDs(c, cl); err != nil {
			return err
		}
		rec = r
		return nil
	})
	if err != nil {
		if mctx.Err() != nil {
			return nil, nil
		}
		return nil, err
	}
	st := &runState{cl: cl, w: w, rec: &rec}
	if err := o.resume(mctx, st); err != nil {
		if mctx.Err() != nil {
			return nil, nil
		}
		o.log.Error("refusing to merge", "err", err)
		return nil, err
	}
	m := &merger{
		o: o, ctx: mctx, gen: gen, pa: pa, st: st, rec: &rec,
		wcfg: windowsConfig(o.cfg, len(o.plan.labels)), seed: seedFromKey(o.key), size: o.plan.size,
		expected: expected, next: st.emitFrom(o.plan),
		pending: map[int64]map[int32]windows.Partial{}, firstOff: map[int64]int64{},
		nextOffset: -1, committed: -2,
	}
	if hasLanes(o.cfg) {
		var err error
		if m.lanes, err = lanesOf(o.cfg); err != nil {
			return nil, err
		}
		m.lanePending = map[int64]map[int32][]windows.Partial{}
	}
	return m, nil
}

// newAssembler sets up the assembler of the partials' chunks.
func (m *merger) newAssembler() {
	o, k, rec := m.o, m.o.cfg.Kafka, m.rec
	// Partials bound to this deployment; the previous format only for
	// the windows in flight at the upgrade (assembler.v2Before).
	cur := partialBindingOf(k, o.plan.digest)
	m.asm = newAssembler(partialMACKey(o.key, cur), partialMACKeyV2(o.key), rec.boundFrom)
	if pb, ok := previousBinding(rec, cur); ok {
		// A configuration change since the last publication: the
		// partials of the windows in flight were written under the
		// previous binding, and stage 1 committed behind them.
		m.asm.prevKey, m.asm.prevBefore = partialMACKey(o.key, pb), max(m.next, o.plan.alignUp(o.now().UnixMilli()))
		o.log.Info("the configuration changed since the last publication: partials of the previous configuration are accepted for windows before the cutoff",
			"cutoff", tsString(m.asm.prevBefore))
	}
}

// partialMsg is a message of the partials topic, or the reader's error.
type partialMsg struct {
	m   kafka.Message
	err error
}

// readPartials reads r on its own goroutine until ctx ends or a read
// fails (the error is the last value sent); the channel closes then.
func readPartials(ctx context.Context, r *kafka.Reader) <-chan partialMsg {
	in := make(chan partialMsg, 256)
	go func() {
		defer close(in)
		for {
			m, err := r.ReadMessage(ctx)
			select {
			case in <- partialMsg{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return in
}

// run is the merger's loop: it takes the partials as they come, publishes
// the windows that are complete and due, and commits the partials offset
// every commit interval.
func (m *merger) run(in <-chan partialMsg) error {
	o := m.o
	m.gauges()
	tick := time.NewTicker(o.cfg.Kafka.CommitInterval)
	defer tick.Stop()
	// hold re-checks the windows that wait for their scheduled time.
	hold := time.NewTicker(tickInterval(o.cfg))
	defer hold.Stop()
	for {
		select {
		case mm, ok := <-in:
			if !ok {
				return nil
			}
			if mm.err != nil {
				if m.ctx.Err() != nil {
					m.commit()
					return nil
				}
				o.m.brokerErrors.WithLabelValues("merge_fetch").Inc()
				return fmt.Errorf("%w: reading the partials topic: %v", ErrKafka, mm.err)
			}
			if !m.add(mm.m) {
				continue
			}
			if stop, err := m.publishReady(); stop {
				return err
			}
		case <-hold.C:
			if stop, err := m.publishReady(); stop {
				return err
			}
		case <-tick.C:
			m.commit()
		case <-m.ctx.Done():
			m.commit() // may fail when the generation is gone; the next owner replays from the last commit
			return nil
		}
	}
}

// gauges shows what publication waits for (metrics.go; sensitive).
func (m *merger) gauges() {
	if !m.o.m.sensitive() {
		return
	}
	missing := 0
	for id := range m.expected {
		if _, ok := m.pending[m.next][id]; !ok {
			missing++
		}
	}
	m.o.m.mergeGauges(len(m.pending), missing)
}

// commit commits the partials offset below which every chunk belongs to a
// published window (or to nothing); a failure is retried at the next
// commit.
func (m *merger) commit() {
	off := m.nextOffset
	if off < 0 {
		return
	}
	for _, f := range m.firstOff {
		off = min(off, f)
	}
	if f, ok := m.asm.oldest(); ok {
		off = min(off, f)
	}
	if off == m.committed {
		return
	}
	if err := m.gen.CommitOffsets(map[string]map[int]int64{m.o.cfg.Kafka.partialsTopic(): {m.pa.ID: off}}); err != nil {
		m.o.m.brokerErrors.WithLabelValues("commit").Inc()
		m.o.log.Warn("committing the partials offset failed; will retry", "err", err)
		return
	}
	m.committed = off
}

// publishReady publishes every window, in order, whose partials are all
// here and whose scheduled publication time (scheduledAt) has come by the
// operator's clock: stage 1 writes a window's partials as soon as its
// data closes it, so without the hold a record arriving after a window's
// end would show in when the window is published (issue 18). It reports
// whether the generation must end, and why.
func (m *merger) publishReady() (stop bool, err error) {
	o := m.o
	for complete(m.pending[m.next], m.expected) && !o.now().Before(scheduledAt(o.cfg, m.next+m.size)) {
		parts := make([]windows.Partial, 0, len(m.expected))
		for _, pid := range slices.Sorted(maps.Keys(m.pending[m.next])) {
			parts = append(parts, m.pending[m.next][pid])
		}
		win, err := windows.MergePartials(m.wcfg, m.seed, parts)
		if err != nil {
			return true, fmt.Errorf("operator: merging window %s: %w", tsString(m.next), err)
		}
		if err := m.mergeLanes(&win, m.next); err != nil {
			return true, err
		}
		if err := o.publish(m.ctx, m.st, []windows.Window{win}, o.now()); err != nil {
			if errors.Is(err, errCrash) || m.ctx.Err() == nil {
				return true, err
			}
			return true, nil
		}
		delete(m.pending, m.next)
		delete(m.lanePending, m.next)
		delete(m.firstOff, m.next)
		m.next += m.size
		m.asm.drop(m.next)
	}
	m.gauges()
	return false, nil
}

// add takes one message of the partials topic: a chunk of a partial
// state, assembled with the others of its partial; it reports whether a
// partial was completed and is now pending. Messages that are not this
// deployment's partials are counted and skipped.
func (m *merger) add(msg kafka.Message) bool {
	m.nextOffset = msg.Offset + 1
	c, p, lanes, first, ok := m.assemble(msg)
	if !ok {
		return false
	}
	o := m.o
	if !m.expected[c.id.pid] {
		// A partition added to the input since this generation
		// started: count it from now on.
		ids, err := o.inputPartitionIDs(m.ctx, m.st.cl)
		if err != nil || !ids[c.id.pid] {
			o.log.Warn("skipping a partial state of an unknown input partition", "partition_id", c.id.pid)
			return false
		}
		m.expected = ids
	}
	ps := m.pending[c.id.start]
	if ps == nil {
		ps = map[int32]windows.Partial{}
		m.pending[c.id.start] = ps
	}
	if _, dup := ps[c.id.pid]; dup {
		return false // first complete partial wins: a replay after a rebalance may write a shorter one later
	}
	if len(p.Partitions) != 1 || p.Partitions[0] != c.id.pid || p.Start != c.id.start {
		o.m.partialsRejected.WithLabelValues("damaged").Inc()
		o.log.Warn("skipping a partial state whose content does not match its message", "offset", msg.Offset)
		return false
	}
	ps[c.id.pid] = p
	if m.lanes != nil {
		if m.lanePending[c.id.start] == nil {
			m.lanePending[c.id.start] = map[int32][]windows.Partial{}
		}
		m.lanePending[c.id.start][c.id.pid] = lanes
	}
	if f, ok := m.firstOff[c.id.start]; !ok || first < f {
		m.firstOff[c.id.start] = first
	}
	return true
}

// assemble decodes msg as a chunk of a partial state and adds it to the
// assembler; ok is true when it completed a partial of a window not yet
// final, which is returned decoded with the offset of its first chunk.
// Rejections are counted by reason and logged without content.
func (m *merger) assemble(msg kafka.Message) (c partialChunk, p windows.Partial, lanes []windows.Partial, first int64, ok bool) {
	o := m.o
	c, err := decodePartialChunk(msg.Value)
	if err != nil {
		o.m.partialsRejected.WithLabelValues("not_partial").Inc()
		o.log.Warn("skipping a message of the partials topic that is not a partial state", "offset", msg.Offset)
		return c, p, nil, 0, false
	}
	if c.id.start < m.next {
		return c, p, nil, 0, false // a window already final (a replayed stage 1 writes it again)
	}
	b, first, err := m.asm.add(c, msg.Offset)
	switch {
	case errors.Is(err, errPartialV2):
		// Never written by this deployment after the cutoff: a
		// replay, or an instance of an earlier version still
		// running (upgrades stop every instance first).
		o.m.partialsRejected.WithLabelValues("old_format").Inc()
		o.log.Error("rejecting a partial state of the previous format (dpp2) for a window after the upgrade cutoff: "+
			"a replay, or an instance of an earlier version still writes; stop every instance of an earlier version, "+
			"then see the upgrade notes if a window waits for this partition",
			"offset", msg.Offset, "window", tsString(c.id.start), "partition_id", c.id.pid, "cutoff", tsString(m.rec.boundFrom))
		return c, p, nil, 0, false
	case errors.Is(err, errPartialMAC):
		o.m.partialsRejected.WithLabelValues("mac").Inc()
		o.log.Warn("rejecting a partial state that this deployment did not write (damaged, another deployment's: "+
			"another key, namespace, configuration, input topics or partials topic; or this deployment's from before a key "+
			"rotation or two configuration changes): if a window waits for this partition, replay its input (see the upgrade notes)",
			"offset", msg.Offset, "window", tsString(c.id.start), "partition_id", c.id.pid)
		return c, p, nil, 0, false
	case err != nil:
		o.m.partialsRejected.WithLabelValues("damaged").Inc()
		o.log.Warn("skipping a damaged partial state", "offset", msg.Offset, "err", err)
		return c, p, nil, 0, false
	case b == nil:
		return c, p, nil, 0, false
	}
	p, lanes, err = decodePartial(b, len(m.lanes))
	if err != nil {
		o.m.partialsRejected.WithLabelValues("damaged").Inc()
		o.log.Warn("skipping an undecodable partial state", "offset", msg.Offset, "err", err)
		return c, p, nil, 0, false
	}
	return c, p, lanes, first, true
}

// complete reports whether ps has a partial of every expected partition.
func complete(ps map[int32]windows.Partial, expected map[int32]bool) bool {
	if len(ps) < len(expected) {
		return false
	}
	for id := range expected {
		if _, ok := ps[id]; !ok {
			return false
		}
	}
	return true
}

// inputPartitionIDs returns the windows package's ids of every input
// partition (see partitionID).
func (o *Operator) inputPartitionIDs(ctx context.Context, cl *clients) (map[int32]bool, error) {
	parts, err := cl.partitions(ctx, o.cfg.Kafka.InputTopics...)
	if err != nil {
		return nil, err
	}
	topics := slices.Sorted(slices.Values(o.cfg.Kafka.InputTopics))
	ids := map[int32]bool{}
	for t, ps := range parts {
		for _, p := range ps {
			id, err := partitionID(topics, tp{t, p})
			if err != nil {
				return nil, err
			}
			ids[id] = true
		}
	}
	return ids, nil
}

// previousBinding returns the partials binding of the configuration that
// published the last final window, as the state record says (its digest
// and identity), when it differs from cur (ok false: the same, or not
// recorded).
func previousBinding(rec *recovered, cur partialBinding) (partialBinding, bool) {
	d := rec.deployment
	if d == nil || rec.digest == "" {
		return partialBinding{}, false
	}
	pb := partialBinding{namespace: d.Namespace, digest: rec.digest, inputTopics: d.InputTopics, partialsTopic: d.PartialsTopic}
	if pb.partialsTopic == "" {
		pb.partialsTopic = cur.partialsTopic
	}
	if bytes.Equal(pb.encode(), cur.encode()) {
		return partialBinding{}, false
	}
	return pb, true
}
