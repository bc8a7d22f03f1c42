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

// mergeGeneration is one generation of the merge group.
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
	pa := pas[0]
	mctx, mcancel := ctxOr(ctx, gctx)
	defer mcancel()

	// Take over: what earlier owners left in the state topic (an
	// unfinished publication is completed first), and how many input
	// partitions every window needs.
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
			return nil
		}
		return err
	}
	st := &runState{cl: cl, w: w, rec: &rec}
	if err := o.resume(mctx, st); err != nil {
		if mctx.Err() != nil {
			return nil
		}
		o.log.Error("refusing to merge", "err", err)
		return err
	}
	wcfg := windowsConfig(o.cfg, len(o.plan.labels))
	seed := seedFromKey(o.key)
	next := st.emitFrom(o.plan)
	size := o.plan.size
	o.log.Info("merging", "generation", gen.ID, "first_window", tsString(next), "input_partitions", len(expected))
	o.m.merging.Set(1) // before the stage line, which tests wait for
	o.health.stage("merge", "merging (this instance publishes)")
	defer func() {
		o.m.merging.Set(0)
		o.m.mergeGauges(0, 0)
	}()

	// The reader: the partials topic from the committed offset.
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: cl.brokers, Topic: k.partialsTopic(), Partition: pa.ID, Dialer: cl.dialer,
		MinBytes: 1, MaxBytes: 16 << 20, MaxWait: fetchMaxWait,
	})
	defer r.Close()
	offset := pa.Offset
	if offset < 0 {
		offset = kafka.FirstOffset
	}
	if err := r.SetOffset(offset); err != nil {
		return fmt.Errorf("%w: partials topic: %v", ErrKafka, err)
	}
	type msg struct {
		m   kafka.Message
		err error
	}
	in := make(chan msg, 256)
	rctx, rcancel := context.WithCancel(mctx)
	defer rcancel()
	go func() {
		defer close(in)
		for {
			m, err := r.ReadMessage(rctx)
			select {
			case in <- msg{m, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	// Partials bound to this deployment; the previous format only for
	// the windows in flight at the upgrade (assembler.v2Before).
	asm := newAssembler(partialMACKey(o.key, partialBindingOf(k, o.plan.digest)), partialMACKeyV2(o.key), rec.boundFrom)
	if pb, ok := previousBinding(&rec, partialBindingOf(k, o.plan.digest)); ok {
		// A configuration change since the last publication: the
		// partials of the windows in flight were written under the
		// previous binding, and stage 1 committed behind them.
		asm.prevKey, asm.prevBefore = partialMACKey(o.key, pb), max(next, o.plan.alignUp(o.now().UnixMilli()))
		o.log.Info("the configuration changed since the last publication: partials of the previous configuration are accepted for windows before the cutoff",
			"cutoff", tsString(asm.prevBefore))
	}
	pending := map[int64]map[int32]windows.Partial{} // window start → input partition → its first complete partial
	// gauges shows what publication waits for (metrics.go; sensitive).
	gauges := func() {
		if !o.m.sensitive() {
			return
		}
		missing := 0
		for id := range expected {
			if _, ok := pending[next][id]; !ok {
				missing++
			}
		}
		o.m.mergeGauges(len(pending), missing)
	}
	gauges()
	firstOff := map[int64]int64{} // window start → offset of its oldest chunk
	nextOffset := int64(-1)       // after the last message read
	committed := int64(-2)
	commit := func() {
		off := nextOffset
		if off < 0 {
			return
		}
		for _, f := range firstOff {
			off = min(off, f)
		}
		if f, ok := asm.oldest(); ok {
			off = min(off, f)
		}
		if off == committed {
			return
		}
		if err := gen.CommitOffsets(map[string]map[int]int64{k.partialsTopic(): {pa.ID: off}}); err != nil {
			o.m.brokerErrors.WithLabelValues("commit").Inc()
			o.log.Warn("committing the partials offset failed; will retry", "err", err)
			return
		}
		committed = off
	}
	// publishReady publishes every window, in order, whose partials are
	// all here and whose scheduled publication time (scheduledAt) has
	// come by the operator's clock: stage 1 writes a window's partials as
	// soon as its data closes it, so without the hold a record arriving
	// after a window's end would show in when the window is published
	// (issue 18). It reports whether the generation must end, and why.
	publishReady := func() (stop bool, err error) {
		for complete(pending[next], expected) && !o.now().Before(scheduledAt(o.cfg, next+size)) {
			parts := make([]windows.Partial, 0, len(expected))
			for _, pid := range slices.Sorted(maps.Keys(pending[next])) {
				parts = append(parts, pending[next][pid])
			}
			win, err := windows.MergePartials(wcfg, seed, parts)
			if err != nil {
				return true, fmt.Errorf("operator: merging window %s: %w", tsString(next), err)
			}
			if err := o.publish(mctx, st, []windows.Window{win}, o.now()); err != nil {
				if errors.Is(err, errCrash) || mctx.Err() == nil {
					return true, err
				}
				return true, nil
			}
			delete(pending, next)
			delete(firstOff, next)
			next += size
			asm.drop(next)
		}
		gauges()
		return false, nil
	}
	tick := time.NewTicker(k.CommitInterval)
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
				if mctx.Err() != nil {
					commit()
					return nil
				}
				o.m.brokerErrors.WithLabelValues("merge_fetch").Inc()
				return fmt.Errorf("%w: reading the partials topic: %v", ErrKafka, mm.err)
			}
			nextOffset = mm.m.Offset + 1
			c, err := decodePartialChunk(mm.m.Value)
			if err != nil {
				o.m.partialsRejected.WithLabelValues("not_partial").Inc()
				o.log.Warn("skipping a message of the partials topic that is not a partial state", "offset", mm.m.Offset)
				continue
			}
			if c.id.start < next {
				continue // a window already final (a replayed stage 1 writes it again)
			}
			b, first, err := asm.add(c, mm.m.Offset)
			if errors.Is(err, errPartialV2) {
				// Never written by this deployment after the cutoff: a
				// replay, or an instance of an earlier version still
				// running (upgrades stop every instance first).
				o.m.partialsRejected.WithLabelValues("old_format").Inc()
				o.log.Error("rejecting a partial state of the previous format (dpp2) for a window after the upgrade cutoff: "+
					"a replay, or an instance of an earlier version still writes; stop every instance of an earlier version, "+
					"then see the upgrade notes if a window waits for this partition",
					"offset", mm.m.Offset, "window", tsString(c.id.start), "partition_id", c.id.pid, "cutoff", tsString(rec.boundFrom))
				continue
			}
			if errors.Is(err, errPartialMAC) {
				o.m.partialsRejected.WithLabelValues("mac").Inc()
				o.log.Warn("rejecting a partial state that this deployment did not write (damaged, another deployment's: "+
					"another key, namespace, configuration, input topics or partials topic; or this deployment's from before a key "+
					"rotation or two configuration changes): if a window waits for this partition, replay its input (see the upgrade notes)",
					"offset", mm.m.Offset, "window", tsString(c.id.start), "partition_id", c.id.pid)
				continue
			}
			if err != nil {
				o.m.partialsRejected.WithLabelValues("damaged").Inc()
				o.log.Warn("skipping a damaged partial state", "offset", mm.m.Offset, "err", err)
				continue
			}
			if b == nil {
				continue
			}
			var p windows.Partial
			if err := p.UnmarshalBinary(b); err != nil {
				o.m.partialsRejected.WithLabelValues("damaged").Inc()
				o.log.Warn("skipping an undecodable partial state", "offset", mm.m.Offset, "err", err)
				continue
			}
			if !expected[c.id.pid] {
				// A partition added to the input since this generation
				// started: count it from now on.
				ids, err := o.inputPartitionIDs(mctx, cl)
				if err != nil || !ids[c.id.pid] {
					o.log.Warn("skipping a partial state of an unknown input partition", "partition_id", c.id.pid)
					continue
				}
				expected = ids
			}
			ps := pending[c.id.start]
			if ps == nil {
				ps = map[int32]windows.Partial{}
				pending[c.id.start] = ps
			}
			if _, dup := ps[c.id.pid]; dup {
				continue // first complete partial wins: a replay after a rebalance may write a shorter one later
			}
			if len(p.Partitions) != 1 || p.Partitions[0] != c.id.pid || p.Start != c.id.start {
				o.m.partialsRejected.WithLabelValues("damaged").Inc()
				o.log.Warn("skipping a partial state whose content does not match its message", "offset", mm.m.Offset)
				continue
			}
			ps[c.id.pid] = p
			if f, ok := firstOff[c.id.start]; !ok || first < f {
				firstOff[c.id.start] = first
			}
			if stop, err := publishReady(); stop {
				return err
			}
		case <-hold.C:
			if stop, err := publishReady(); stop {
				return err
			}
		case <-tick.C:
			commit()
		case <-mctx.Done():
			commit() // may fail when the generation is gone; the next owner replays from the last commit
			return nil
		}
	}
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
