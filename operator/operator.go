package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// Operator is the running sidecar: it consumes the input topics with a
// consumer group, aggregates events into windows, and publishes the noised
// releases of every closed window. Make one with New and call Run.
type Operator struct {
	cfg      Config
	key      privacy.Key
	log      *slog.Logger
	reg      *prometheus.Registry
	m        *metrics
	now      func() time.Time
	plan     *plan
	instance string
	hook     func(Published)
	health   health

	// crash, when set (tests only), is asked at each publication stage
	// ("half": write half of the releases; "releases": all written, state
	// not yet; "state": state written, offsets not yet committed); true
	// makes Run return errCrash at once, without draining or committing,
	// like a killed process.
	crash func(stage string) bool

	mu          sync.Mutex
	metricsAddr string
	addrReady   chan struct{}
}

// Published is what the release hook receives after every window whose
// releases were all acknowledged. Window holds the exact (not private)
// aggregates: it is for tests and the demo, never for publication.
type Published struct {
	Window   windows.Window
	Releases []schema.Release // written now, in write order
	Skipped  int              // releases not written: their keys were already published
	Withheld int              // groups withheld by private group selection
	Latency  time.Duration    // from close to acknowledgement
}

// errCrash is returned by Run when a test's crash hook fired.
var errCrash = errors.New("operator: simulated crash")

// Option configures New.
type Option func(*Operator)

// WithLogger sets the logger (default: JSON or text on stderr per the
// observability config).
func WithLogger(l *slog.Logger) Option { return func(o *Operator) { o.log = l } }

// WithClock sets the processing-time clock (idle detection, latency).
func WithClock(now func() time.Time) Option { return func(o *Operator) { o.now = now } }

// WithRegistry sets the Prometheus registry the metrics are registered in
// and served from (default: a new registry with Go and process collectors).
func WithRegistry(r *prometheus.Registry) Option { return func(o *Operator) { o.reg = r } }

// WithKey sets the secret noise key instead of loading it from
// privacy.key_file / privacy.key_env.
func WithKey(k privacy.Key) Option { return func(o *Operator) { o.key = k } }

// WithReleaseHook calls fn, on the operator's publishing goroutine, after
// every window is published. fn must not block for long.
func WithReleaseHook(fn func(Published)) Option { return func(o *Operator) { o.hook = fn } }

// New validates cfg, loads the key, calibrates every released vector and
// returns an operator ready to Run. It does not touch the network.
func New(cfg Config, opts ...Option) (*Operator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := &Operator{cfg: cfg, now: time.Now, addrReady: make(chan struct{})}
	for _, opt := range opts {
		opt(o)
	}
	if o.log == nil {
		o.log = NewLogger(cfg.Observability, os.Stderr)
	}
	if o.key.IsZero() {
		k, _, err := privacy.LoadKey(cfg.Privacy.KeyFile, cfg.Privacy.KeyEnv, false)
		if err != nil {
			return nil, fmt.Errorf("operator: loading the secret key: %w", err)
		}
		o.key = k
	}
	if o.reg == nil {
		o.reg = prometheus.NewRegistry()
		o.reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	}
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, fmt.Errorf("operator: registering metrics: %w", err)
	}
	o.m = m
	dec, err := schema.NewDecoder(cfg.Schema)
	if err != nil {
		return nil, err
	}
	o.plan, err = newPlan(cfg, dec, windowsConfig(cfg, dec.NumBuckets()))
	if err != nil {
		return nil, err
	}
	o.instance = cfg.Kafka.Instance
	if o.instance == "" {
		o.instance, _ = os.Hostname()
	}
	o.m.windowEps.Set(o.plan.window.Epsilon)
	o.m.windowDelta.Set(o.plan.window.Delta)
	o.m.totalEps.Set(o.plan.total.Epsilon)
	o.m.totalDelta.Set(o.plan.total.Delta)
	for _, ap := range o.plan.aggs {
		for _, n := range ap.noises {
			o.m.noiseScale.WithLabelValues(ap.name, n.series, n.mech.Name()).Set(n.scale)
		}
	}
	if s := o.plan.sel; s != nil {
		o.m.noiseScale.WithLabelValues("selection", "units", s.noise.mech.Name()).Set(s.noise.scale)
	}
	o.health.set(false, "starting")
	return o, nil
}

// NewLogger returns the slog logger the observability config asks for.
func NewLogger(c ObservabilityConfig, w *os.File) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	ho := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, ho))
	}
	return slog.New(slog.NewJSONHandler(w, ho))
}

// Note returns the accounting note every release carries: how the window's
// budget was split and how each vector was calibrated.
func (o *Operator) Note() string { return o.plan.note }

// Registry returns the Prometheus registry of the operator's metrics.
func (o *Operator) Registry() *prometheus.Registry { return o.reg }

// MetricsAddr waits until the metrics listener is bound (or ctx ends) and
// returns its address; "" when observability.listen is empty.
func (o *Operator) MetricsAddr(ctx context.Context) string {
	select {
	case <-o.addrReady:
	case <-ctx.Done():
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.metricsAddr
}

// Ready reports whether the operator consumes with a full assignment.
func (o *Operator) Ready() bool { return o.health.ready.Load() }

// Run runs the sidecar until ctx ends (SIGTERM in the command), then drains:
// it stops fetching, publishes the windows that have already closed,
// commits the final offsets and leaves the group. Open windows are not
// published early; the next run rebuilds them by replaying from the
// committed offsets. Broker errors are retried with backoff; Run returns
// only on ctx's end or on an unrecoverable error.
func (o *Operator) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (defers run last-in first-out)
	defer cancel()
	if addr := o.cfg.Observability.Listen; addr != "" {
		bound := make(chan string, 1)
		errc := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- o.health.serve(ctx, addr, o.reg, bound)
		}()
		select {
		case a := <-bound:
			o.mu.Lock()
			o.metricsAddr = a
			o.mu.Unlock()
		case err := <-errc:
			return fmt.Errorf("operator: observability.listen %s: %w", addr, err)
		}
	}
	close(o.addrReady)

	cl, err := newClients(o.cfg.Kafka)
	if err != nil {
		return err
	}
	defer cl.close()
	k := o.cfg.Kafka
	o.log.Info("starting", "brokers", cl.brokers, "input_topics", k.InputTopics, "output_topic", k.OutputTopic,
		"group_id", k.GroupID, "note", o.plan.note)
	for _, ch := range o.plan.choices {
		o.log.Info("mechanism chosen automatically", "choice", ch)
	}

	// Topics: the state topic is the operator's own (compacted); output
	// and dead-letter topics are created only when asked to.
	var rec recovered
	err = o.retry(ctx, "setup", func(ctx context.Context) error {
		if err := cl.createTopics(ctx, 1, map[string]string{"cleanup.policy": "compact"}, k.stateTopic()); err != nil {
			return err
		}
		if k.CreateTopics {
			ts := []string{k.OutputTopic}
			if k.DeadLetterTopic != "" {
				ts = append(ts, k.DeadLetterTopic)
			}
			if err := cl.createTopics(ctx, 1, nil, ts...); err != nil {
				return err
			}
		}
		// The input topics must exist before joining, or the first
		// assignment is empty.
		if _, err := cl.partitions(ctx, k.InputTopics...); err != nil {
			return err
		}
		o.health.set(false, "reading the state and output topics")
		r, err := recoverState(ctx, cl, k.stateTopic(), k.GroupID, k.OutputTopic)
		if err != nil {
			return err
		}
		rec = r
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			o.log.Info("stopped before the setup completed")
			return nil
		}
		return err
	}
	o.log.Info("recovered", "closed_through", tsString(rec.closedThrough), "published_pending", len(rec.published),
		"output_scanned", rec.scanned, "output_foreign", rec.foreign)

	w := &kafka.Writer{
		Addr:         kafka.TCP(cl.brokers...),
		Transport:    cl.transport,
		Balancer:     kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: max(k.BatchTimeout, time.Millisecond),
		BatchSize:    1000,
		MaxAttempts:  3,
	}
	defer w.Close()

	startOffset := kafka.FirstOffset
	if k.StartOffset == "latest" {
		startOffset = kafka.LastOffset
	}
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:               k.GroupID,
		Brokers:          cl.brokers,
		Dialer:           cl.dialer,
		Topics:           k.InputTopics,
		SessionTimeout:   k.SessionTimeout,
		RebalanceTimeout: k.SessionTimeout,
		JoinGroupBackoff: k.RetryBackoff,
		StartOffset:      startOffset,
		// Rebalance when input partitions appear (a topic created after
		// the join, or partitions added), so the assignment stays complete.
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 5 * time.Second,
		Logger:                 kafka.LoggerFunc(func(f string, a ...any) { o.log.Debug("kafka-go group: " + fmt.Sprintf(f, a...)) }),
		ErrorLogger:            kafka.LoggerFunc(func(f string, a ...any) { o.log.Warn("kafka-go group: " + fmt.Sprintf(f, a...)) }),
	})
	if err != nil {
		return fmt.Errorf("%w: consumer group: %v", ErrKafka, err)
	}
	defer group.Close()

	st := &runState{cl: cl, w: w, rec: &rec}
	for {
		o.health.set(false, "joining the consumer group")
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			o.m.brokerErrors.WithLabelValues("join").Inc()
			o.log.Warn("joining the consumer group failed; retrying", "err", err)
			if !sleep(ctx, k.RetryBackoff) {
				break
			}
			continue
		}
		o.m.rebalances.Inc()
		done := make(chan error, 1)
		gen.Start(func(gctx context.Context) { done <- o.runGeneration(ctx, gctx, gen, st) })
		if err := <-done; err != nil {
			o.health.set(false, "stopped")
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	o.health.set(false, "stopped")
	o.log.Info("stopped")
	return nil
}

// runState is what survives across generations.
type runState struct {
	cl  *clients
	w   *kafka.Writer
	rec *recovered // closedThrough and the keys published after it
}

// runGeneration consumes one consumer group generation. It returns nil when
// the generation ends (rebalance) or ctx ends (after draining), and an
// error only for unrecoverable problems.
func (o *Operator) runGeneration(ctx, gctx context.Context, gen *kafka.Generation, st *runState) error {
	k := o.cfg.Kafka
	var assigned []tp
	for topic, pas := range gen.Assignments {
		for _, pa := range pas {
			assigned = append(assigned, tp{topic, pa.ID})
		}
	}
	// Scale-out needs the merge stage: one instance must own every input
	// partition, or two instances would publish different releases of the
	// same window. Refuse to consume with a partial assignment.
	var total int
	mctx, mcancel := ctxOr(ctx, gctx)
	defer mcancel()
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
		return nil // generation or run ended
	}
	if len(assigned) != total {
		o.health.set(false, fmt.Sprintf("assigned %d of %d input partitions", len(assigned), total))
		o.log.Error("this instance was assigned only part of the input partitions; it will not consume. "+
			"Run exactly one dpstream instance per consumer group (scale-out needs the merge stage)",
			"assigned", len(assigned), "partitions", total, "generation", gen.ID)
		// Leave the generation after a pause, so that a topic created or
		// grown after the join gets a fresh, complete assignment.
		t := time.NewTimer(min(5*time.Second, k.RetryBackoffMax))
		defer t.Stop()
		select {
		case <-t.C:
		case <-gctx.Done():
		case <-ctx.Done():
		}
		return nil
	}

	c, err := newCore(o.cfg, o.plan, o.key, st.rec.closedThrough)
	if err != nil {
		return err
	}
	if err := c.assign(assigned); err != nil {
		return err
	}
	o.log.Info("generation started", "generation", gen.ID, "partitions", len(assigned))

	// Fetchers: one reader per partition, feeding one channel; the loop
	// below owns all state.
	fctx, stopFetch := context.WithCancel(gctx)
	defer stopFetch()
	msgs := make(chan []item, 64)
	var fwg sync.WaitGroup
	for topic, pas := range gen.Assignments {
		for _, pa := range pas {
			fwg.Add(1)
			go func() {
				defer fwg.Done()
				o.fetch(fctx, st.cl, topic, pa, msgs)
			}()
		}
	}
	defer func() { stopFetch(); fwg.Wait() }()
	o.health.set(true, "")
	o.m.ready.Set(1)
	defer o.m.ready.Set(0)

	tick := time.NewTicker(tickInterval(o.cfg))
	defer tick.Stop()
	var dlq []kafka.Message
	lastCommit := o.now()
	var committed map[string]map[int]int64

	flushAndCommit := func(c2 context.Context) {
		if len(dlq) > 0 {
			if err := o.retry(c2, "dead_letter", func(c3 context.Context) error { return st.w.WriteMessages(c3, dlq...) }); err != nil {
				return // keep them; offsets below stay uncommitted
			}
			o.m.deadLettered.Add(float64(len(dlq)))
			dlq = dlq[:0]
		}
		offs := c.commitOffsets()
		if sameOffsets(offs, committed) {
			return
		}
		if err := gen.CommitOffsets(offs); err != nil {
			o.m.brokerErrors.WithLabelValues("commit").Inc()
			o.log.Warn("committing offsets failed; will retry", "err", err)
			return
		}
		o.m.commits.Inc()
		committed = offs
	}

	// Publication runs on its own goroutine so that consumption does not
	// stall while releases and the state record are written; windows are
	// published in order, and a window's events hold back commits until
	// the publisher reports it final.
	type job struct {
		ws       []windows.Window
		closedAt time.Time
	}
	type result struct {
		starts []int64
		err    error
	}
	jobs := make(chan job, 64)
	results := make(chan result, 64)
	pctx, pcancel := context.WithCancel(gctx)
	defer pcancel()
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for j := range jobs {
			err := o.publish(pctx, st, j.ws, j.closedAt)
			var starts []int64
			if err == nil {
				for _, w := range j.ws {
					starts = append(starts, w.Start)
				}
			}
			results <- result{starts, err}
			if err != nil {
				return
			}
		}
	}()
	pending := 0 // jobs sent and not yet reported
	handle := func(r result) error {
		pending--
		if r.err != nil {
			return r.err
		}
		c.final(r.starts...)
		return nil
	}
	pollClosed := func() {
		if pending >= cap(jobs) {
			return // the publisher is behind (broker down): back-pressure
		}
		ws := c.poll(o.now())
		if len(ws) == 0 {
			return
		}
		o.m.windowsClosed.Add(float64(len(ws)))
		if n := o.m.windowDrops(ws); n > 0 {
			o.log.Warn("windows.max_open_groups was reached: these windows' releases are not covered by the privacy guarantee; raise the cap",
				"windows", n, "max_open_groups", o.cfg.Windows.MaxOpenGroups)
		}
		jobs <- job{ws, o.now()}
		pending++
	}
	// makeRoom closes the windows the watermark allows, when an event hit
	// windows.max_open_windows: the windows package only closes windows on
	// Poll, so between ticks a fast catch-up could otherwise reach the cap
	// with windows that are already closable. It reports whether it polled.
	makeRoom := func() bool {
		before := pending
		pollClosed()
		return pending > before
	}
	// finish waits for every pending publication (until c2 ends).
	finish := func(c2 context.Context) error {
		close(jobs)
		for pending > 0 {
			select {
			case r := <-results:
				if err := handle(r); err != nil {
					return err
				}
			case <-c2.Done():
				pcancel()
				<-pubDone
				return c2.Err()
			}
		}
		<-pubDone
		return nil
	}
	fail := func(err error) error {
		if errors.Is(err, errCrash) {
			return err // a simulated crash: no drain, no commit
		}
		if gctx.Err() != nil || ctx.Err() != nil {
			return nil
		}
		return err
	}

	for {
		select {
		case batch := <-msgs:
			for i := range batch {
				o.consume(c, &batch[i], &dlq, makeRoom)
			}
		case r := <-results:
			if err := handle(r); err != nil {
				close(jobs)
				return fail(err)
			}
		case <-tick.C:
			pollClosed()
			o.m.windowsOpen.Set(float64(c.openWindows()))
			c.lags(func(t tp, lag int64) { o.m.setLag(t.topic, t.partition, lag) })
			if o.now().Sub(lastCommit) >= k.CommitInterval {
				flushAndCommit(gctx)
				lastCommit = o.now()
			}
		case <-gctx.Done():
			// Rebalance or group closed: commit what is final (may fail if
			// the generation is already gone), drop all state; the next
			// generation replays from the committed offsets.
			stopFetch()
			o.health.set(false, "rebalancing")
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := finish(dctx); errors.Is(err, errCrash) {
				return err
			}
			flushAndCommit(dctx)
			o.log.Info("generation ended", "generation", gen.ID)
			return nil
		case <-ctx.Done():
			// Drain: stop fetching, publish what has closed, commit.
			stopFetch()
			o.health.set(false, "draining")
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			for {
				select {
				case batch := <-msgs:
					for i := range batch {
						o.consume(c, &batch[i], &dlq, makeRoom)
					}
					continue
				default:
				}
				break
			}
			pollClosed()
			if err := finish(dctx); err != nil {
				if errors.Is(err, errCrash) {
					return err
				}
				o.log.Warn("drain: publishing closed windows failed", "err", err)
			}
			flushAndCommit(dctx)
			o.log.Info("drained", "generation", gen.ID, "open_windows", c.openWindows())
			return nil
		}
	}
}

// consume feeds one decoded message to the core and counts the outcome.
// An event dropped by windows.max_open_windows is retried once after
// makeRoom (if not nil) closed the windows the watermark allows, so that
// only windows that are really open count against the cap.
func (o *Operator) consume(c *core, it *item, dlq *[]kafka.Message, makeRoom func() bool) {
	m := &it.m
	o.m.eventIn(m.Topic)
	out, reason, status := c.handleItem(it)
	if status == windows.TooManyWindows && makeRoom != nil && makeRoom() {
		// Safe to repeat: the first Add changed only the partition's
		// watermark (to at least this event's time) and the core's next
		// offset (to the same value).
		out, reason, status = c.handleItem(it)
	}
	switch out {
	case outAccepted:
		o.m.decoded.Inc()
	case outSkipped:
		o.m.skip(reason)
		if o.cfg.Kafka.DeadLetterTopic != "" {
			*dlq = append(*dlq, kafka.Message{
				Topic: o.cfg.Kafka.DeadLetterTopic, Key: m.Key, Value: m.Value,
				Headers: []kafka.Header{
					{Key: "dpstream-reason", Value: []byte(reason.String())},
					{Key: "dpstream-source", Value: []byte(m.Topic + "/" + strconv.Itoa(m.Partition) + "/" + strconv.FormatInt(m.Offset, 10))},
				},
			})
		}
	case outLate:
		o.m.decoded.Inc()
		o.m.late.Inc()
	case outNotPublic:
		o.m.decoded.Inc()
		o.m.skipped.WithLabelValues("not_public_group").Inc()
	default:
		o.m.decoded.Inc()
		o.m.skipped.WithLabelValues(status.String()).Inc()
	}
}

// publish writes the releases of the closed windows ws (in order), then the
// state record; it retries until done or ctx ends.
func (o *Operator) publish(ctx context.Context, st *runState, ws []windows.Window, closedAt time.Time) error {
	k := o.cfg.Kafka
	type done struct {
		w   *windows.Window
		out []outMsg
		dup int
		wh  int
	}
	var all []done
	var msgs []kafka.Message
	for i := range ws {
		w := &ws[i]
		out, dup, wh, err := o.plan.releaseWindow(w, o.key, k.namespace(), o.instance, st.rec.published)
		if err != nil {
			return err
		}
		for _, r := range out {
			msgs = append(msgs, kafka.Message{Topic: k.OutputTopic, Key: []byte(r.key), Value: r.value})
		}
		all = append(all, done{w, out, dup, wh})
	}
	if o.crash != nil && len(msgs) > 1 && o.crash("half") {
		// Tests: a crash in the middle of a window's publication.
		_ = st.w.WriteMessages(ctx, msgs[:len(msgs)/2]...)
		return errCrash
	}
	if len(msgs) > 0 {
		if err := o.retry(ctx, "publish", func(c context.Context) error { return st.w.WriteMessages(c, msgs...) }); err != nil {
			return err
		}
	}
	if o.crash != nil && o.crash("releases") {
		return errCrash
	}
	closedThrough := ws[len(ws)-1].End
	for _, d := range all {
		for _, r := range d.out {
			st.rec.published[r.key] = d.w.End
		}
	}
	// Record that these windows are final before their events stop
	// holding back commits.
	err := o.retry(ctx, "state", func(c context.Context) error {
		sm, err := stateMessage(c, st.cl, k.stateTopic(), k.GroupID, k.OutputTopic, closedThrough)
		if err != nil {
			return err
		}
		return st.w.WriteMessages(c, sm)
	})
	if err != nil {
		return err
	}
	if o.crash != nil && o.crash("state") {
		return errCrash
	}
	st.rec.closedThrough = closedThrough
	for key, end := range st.rec.published {
		if end <= closedThrough {
			delete(st.rec.published, key)
		}
	}
	lat := o.now().Sub(closedAt)
	for _, d := range all {
		o.m.windowsPub.Inc()
		o.m.releasesPub.Add(float64(len(d.out)))
		o.m.releasesDup.Add(float64(d.dup))
		o.m.groupsDropped.Add(float64(d.wh))
		o.m.publishLatency.Observe(lat.Seconds())
		if len(d.out) > 0 {
			sp, _ := o.plan.spent(d.w.Start)
			o.m.spentEps.Set(sp.Epsilon)
			o.m.spentDelta.Set(sp.Delta)
		}
		o.log.Info("window published", "start", tsString(d.w.Start), "releases", len(d.out),
			"already_published", d.dup, "groups_withheld", d.wh, "latency", lat)
		if o.hook != nil {
			rels := make([]schema.Release, len(d.out))
			for i, r := range d.out {
				rels[i] = r.rel
			}
			o.hook(Published{Window: *d.w, Releases: rels, Skipped: d.dup, Withheld: d.wh, Latency: lat})
		}
	}
	return nil
}

// fetchMaxWait is how long a fetch waits at the broker for new data.
const fetchMaxWait = 250 * time.Millisecond

// fetch reads one partition from pa.Offset and sends its messages, one
// fetched batch at a time, to out until ctx ends. It talks to the
// partition's leader directly (kafka-go's Reader hands messages over one at
// a time through channels, which costs more than the whole pipeline behind
// it); broker errors are retried with backoff, a lost leader is looked up
// again.
func (o *Operator) fetch(ctx context.Context, cl *clients, topic string, pa kafka.PartitionAssignment, out chan<- []item) {
	dec, err := schema.NewDecoder(o.cfg.Schema)
	if err != nil { // validated in New; never here
		o.log.Error("decoder", "err", err)
		return
	}
	offset := pa.Offset
	backoff := o.cfg.Kafka.RetryBackoff
	var conn *kafka.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	fail := func(op string, err error) bool {
		if ctx.Err() != nil {
			return false
		}
		o.m.brokerErrors.WithLabelValues(op).Inc()
		o.log.Warn("fetch failed; retrying", "op", op, "topic", topic, "partition", pa.ID, "err", err, "backoff", backoff)
		if conn != nil {
			conn.Close()
			conn = nil
		}
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, o.cfg.Kafka.RetryBackoffMax)
		return true
	}
	for ctx.Err() == nil {
		if conn == nil {
			info, err := cl.partitionInfo(ctx, topic)
			if err != nil {
				if !fail("fetch_metadata", err) {
					return
				}
				continue
			}
			var leader kafka.Broker
			for _, p := range info[topic] {
				if p.ID == pa.ID {
					leader = p.Leader
				}
			}
			addr := net.JoinHostPort(leader.Host, strconv.Itoa(leader.Port))
			conn, err = cl.dialer.DialLeader(ctx, "tcp", addr, topic, pa.ID)
			if err != nil {
				if !fail("fetch_connect", err) {
					return
				}
				continue
			}
			if offset < 0 { // FirstOffset or LastOffset: no committed offset
				_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
				first, last, err := conn.ReadOffsets()
				_ = conn.SetDeadline(time.Time{})
				if err != nil {
					if !fail("fetch_offsets", err) {
						return
					}
					continue
				}
				offset = first
				if pa.Offset == kafka.LastOffset {
					offset = last
				}
			}
		}
		if _, err := conn.Seek(offset, kafka.SeekAbsolute); err != nil {
			if !fail("fetch_seek", err) {
				return
			}
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(fetchMaxWait + 10*time.Second))
		batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 8 << 20, MaxWait: fetchMaxWait})
		hwm := batch.HighWaterMark()
		msgs := make([]item, 0, 256)
		var rerr error
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				rerr = err
				break
			}
			if m.Offset < offset {
				continue
			}
			m.Topic, m.Partition, m.HighWaterMark = topic, pa.ID, hwm
			msgs = append(msgs, item{m: m})
			it := &msgs[len(msgs)-1]
			decode(dec, it)
			offset = m.Offset + 1
		}
		cerr := batch.Close()
		if len(msgs) > 0 {
			select {
			case out <- msgs:
			case <-ctx.Done():
				return
			}
			backoff = o.cfg.Kafka.RetryBackoff
		}
		err := cerr
		if err == nil && rerr != nil && !errors.Is(rerr, io.EOF) {
			err = rerr
		}
		switch {
		case err == nil:
		case errors.Is(err, kafka.OffsetOutOfRange):
			// The committed offset is gone (retention): start from the
			// earliest data still there. Events lost to retention are
			// simply absent from their windows.
			o.log.Warn("offset out of range; restarting from the earliest offset", "topic", topic, "partition", pa.ID)
			offset = kafka.FirstOffset
			conn.Close()
			conn = nil
		default:
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && len(msgs) == 0 {
				continue // no data within the wait: fetch again
			}
			if !fail("fetch", err) {
				return
			}
		}
	}
}

// retry runs fn until it succeeds or ctx ends, with exponential backoff
// between attempts; it returns ctx's error in the latter case.
func (o *Operator) retry(ctx context.Context, op string, fn func(context.Context) error) error {
	backoff := o.cfg.Kafka.RetryBackoff
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrConfig) || errors.Is(err, schema.ErrInvalidRelease) {
			return err
		}
		o.m.brokerErrors.WithLabelValues(op).Inc()
		o.log.Warn("broker operation failed; retrying", "op", op, "err", err, "backoff", backoff)
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, o.cfg.Kafka.RetryBackoffMax)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ctxOr returns a context that ends when either a or b ends, and its
// cancel function.
func ctxOr(a, b context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return c, func() { stop(); cancel() }
}

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

func tsString(ms int64) string {
	if ms == noClosedWindow {
		return "none"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
