package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/keyfile"
	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// Operator is the running sidecar: it consumes the input topics with a
// consumer group, aggregates events into windows, and publishes the noised
// releases of every closed window. Make one with New and call Run.
type Operator struct {
	cfg  Config
	key  rng.Key
	log  *slog.Logger
	reg  *prometheus.Registry
	m    *metrics
	now  func() time.Time
	plan *plan
	// shown is the plan whose budget and noise scales the gauges show
	// (planMetrics): the plan, or its recalibration while it releases.
	shown    atomic.Pointer[plan]
	instance string
	hook     func(Published)
	// schemas caches the writer schemas of framed Avro input (nil for
	// other formats), shared by the fetchers (registry.go).
	schemas *schema.Schemas
	// registry is the schemas' registry client (nil without one) and
	// registryDown is on during a registry outage (registry_outage.go).
	registry     *registryClient
	registryDown atomic.Bool
	// registryHeld counts this instance's partitions waiting for the
	// registry; while it is above 0 every other partition waits too
	// (registry_outage.go).
	registryHeld atomic.Int32
	// avroOut is output.format avro's encoder and registered schema id
	// (output_avro.go); set by Run before anything publishes.
	avroOut *avroOutput
	// trustedCreateTime: the caller produces the input itself with the
	// timestamps it means (WithTrustedCreateTime): no CreateTime warning.
	trustedCreateTime bool
	health            health
	shape             *shapeCheck // the input-shape check (shape.go)
	token             []byte      // scale-out: this instance's token in both consumer groups (balance.go)
	// identity is this deployment's, recorded in every state record and
	// checked against the recorded one at start (deployment.go); set by
	// Run before anything reads the state.
	identity *deploymentRecord
	// origin is the first window the instances of a scale-out deployment
	// without windows.start agreed on (origin.go); set by Run before
	// either stage starts, 0 otherwise.
	origin int64

	// crash, when set (tests only), is asked at each crash point of the
	// publication protocol (crash.go); true makes Run return errCrash at
	// once, without draining or committing, like a killed process.
	crash func(crashPoint) bool

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
	Latency  time.Duration    // from the window's release (at or after its scheduled publication time) to acknowledgement
}

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
func WithKey(k rng.Key) Option { return func(o *Operator) { o.key = k } }

// WithReleaseHook calls fn, on the operator's publishing goroutine, after
// every window is published. fn must not block for long.
func WithReleaseHook(fn func(Published)) Option { return func(o *Operator) { o.hook = fn } }

// WithTrustedCreateTime tells the operator that the caller produces the
// input topics' records itself, stamped with the arrival times it means
// (e.g. the demo on its own embedded broker): the start-up warning about
// input topics with message.timestamp.type=CreateTime is not logged. A
// deployment whose producers the privacy units can influence must not use
// it.
func WithTrustedCreateTime() Option { return func(o *Operator) { o.trustedCreateTime = true } }

// New validates cfg, loads the key, calibrates every released vector and
// returns an operator ready to Run. It does not touch the network.
func New(cfg Config, opts ...Option) (*Operator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := &Operator{cfg: cfg, now: time.Now, addrReady: make(chan struct{}), token: newBalancerToken()}
	for _, opt := range opts {
		opt(o)
	}
	if o.log == nil {
		o.log = NewLogger(cfg.Observability, os.Stderr)
	}
	if o.key.IsZero() {
		k, _, err := keyfile.Load(cfg.Privacy.KeyFile, cfg.Privacy.KeyEnv, false)
		if err != nil {
			return nil, fmt.Errorf("operator: loading the secret key: %w", err)
		}
		o.key = k
	}
	if o.reg == nil {
		o.reg = prometheus.NewRegistry()
		o.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m, err := newMetrics(o.reg, cfg.Observability.SensitiveMetrics)
	if err != nil {
		return nil, fmt.Errorf("operator: registering metrics: %w", err)
	}
	o.m = m
	dec, err := schema.NewDecoder(cfg.Schema)
	if err != nil {
		return nil, err
	}
	if o.schemas, err = o.newSchemas(); err != nil {
		return nil, err
	}
	o.plan, err = newPlan(cfg, dec, windowsConfig(cfg, dec.NumBuckets()))
	if err != nil {
		return nil, err
	}
	if o.plan.digest, err = ReleaseDigest(cfg); err != nil {
		return nil, err
	}
	o.instance = cfg.Kafka.Instance
	switch {
	case o.instance != "":
	case cfg.Kafka.ScaleOut:
		// Any instance may publish any window: the release bytes must not
		// depend on which one did.
		o.instance = cfg.Kafka.GroupID
	default:
		o.instance, _ = os.Hostname()
	}
	o.planMetrics(o.plan)
	if cfg.Observability.ShapeCheck {
		sdec, err := o.newInputDecoder()
		if err != nil {
			return nil, err
		}
		o.shape = newShapeCheck(sdec, &o.health)
	}
	o.health.set(false, "starting")
	return o, nil
}

// planMetrics sets the gauges of the budget and the noise scales to p's,
// the plan that releases now (nothing to do if they show p already): the
// recalibrated plan until its horizon ends, then the configuration's own.
func (o *Operator) planMetrics(p *plan) {
	if o.shown.Swap(p) == p {
		return
	}
	o.m.windowEps.Set(p.window.Epsilon)
	o.m.windowDelta.Set(p.window.Delta)
	o.m.totalEps.Set(p.total.Epsilon)
	o.m.totalDelta.Set(p.total.Delta)
	for _, ap := range p.aggs {
		for _, n := range ap.noises {
			o.m.noiseScale.WithLabelValues(ap.name, n.series, n.mech.Name()).Set(n.scale)
		}
	}
	if s := p.sel; s != nil {
		o.m.noiseScale.WithLabelValues("selection", "units", s.noise.mech.Name()).Set(s.noise.scale)
	}
}

// NewLogger returns the slog logger the observability config asks for.
func NewLogger(c ObservabilityConfig, w *os.File) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	ho := &slog.HandlerOptions{Level: lvl, ReplaceAttr: readableDurations}
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
	if err := o.serveObservability(ctx, &wg); err != nil {
		return err
	}

	cl, err := newClients(o.cfg.Kafka)
	if err != nil {
		return err
	}
	defer cl.close()
	k := o.cfg.Kafka
	o.log.Info("starting", "brokers", cl.brokers, "input_topics", k.InputTopics, "output_topic", k.OutputTopic,
		"group_id", k.GroupID)
	o.logSizing() // the plan summary, one line per series (sizing.go)
	for _, ch := range o.plan.choices {
		o.log.Info("mechanism chosen automatically", "choice", ch)
	}

	if stop, err := o.startRegistries(ctx); stop {
		return err
	}
	rec, err := o.setup(ctx, cl)
	if err != nil {
		if ctx.Err() != nil {
			o.log.Info("stopped before the setup completed")
			return nil
		}
		return err
	}
	o.log.Info("recovered", "closed_through", tsString(rec.closedThrough), "origin", originString(rec.origin),
		"published_pending", len(rec.published), "unfinished_publication", len(rec.intent),
		"output_scanned", rec.scanned, "output_foreign", rec.foreign)
	o.checkTimestampTypes(ctx, cl) // warns about CreateTime input topics; never fails

	w := newWriter(cl, k)
	defer w.Close()

	st := &runState{cl: cl, w: w, rec: &rec}
	mergeErr := make(chan error, 1)
	if k.ScaleOut {
		// Stage 2 (merge, noise, publish) runs beside stage 1 and does
		// what resume does when it takes over; stage 1 only needs the
		// first window, which every instance must agree on: windows.start,
		// or else the origin recorded (or first proposed) in the state
		// topic.
		if start, ok := o.cfg.Windows.startMillis(); ok {
			st.from = o.plan.alignUp(start)
		} else {
			origin, err := o.agreedOrigin(ctx, cl)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			o.origin, st.from = origin, origin
			o.log.Info("origin agreed in the state topic", "origin", tsString(origin))
		}
		mergeDone := make(chan struct{})
		go func() {
			defer close(mergeDone)
			if err := o.runMerge(ctx, cl, w); err != nil {
				mergeErr <- err
				cancel()
			}
		}()
		defer func() { cancel(); <-mergeDone }() // before the writer closes
	} else if err := o.resume(ctx, st); err != nil {
		o.health.set(false, "refused to start: see the log")
		if ctx.Err() != nil {
			return nil
		}
		o.log.Error("refusing to start", "err", err)
		return err
	}
	o.log.Info("releasing from", "first_window", tsString(st.from), "config_digest", o.plan.digest[:16], "scale_out", k.ScaleOut)

	g := o.inputGroup(cl, st)
	if err := g.run(ctx); err != nil {
		o.health.set(false, "stopped")
		return err
	}
	o.health.set(false, "stopped")
	select {
	case err := <-mergeErr:
		return err
	default:
	}
	o.log.Info("stopped")
	return nil
}

// serveObservability starts the metrics and health listener
// (observability.listen, none when empty) on a goroutine counted by wg,
// and records its address for MetricsAddr once it is bound.
func (o *Operator) serveObservability(ctx context.Context, wg *sync.WaitGroup) error {
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
	return nil
}

// setup creates the topics the operator owns or is asked to create (the
// state topic is the operator's own, compacted; output and dead-letter
// topics only with kafka.create_topics), checks that the input topics
// exist, fixes this deployment's identity and reads what earlier runs
// left (recoverState); it retries until done or ctx ends.
func (o *Operator) setup(ctx context.Context, cl *clients) (recovered, error) {
	k := o.cfg.Kafka
	var rec recovered
	err := o.retry(ctx, "setup", func(ctx context.Context) error {
		// Compacted, with hourly segments: Kafka compacts only closed
		// segments (segment.ms defaults to 7 days), and every start — and
		// with scale-out every rebalance — reads this topic to its end.
		if err := cl.createTopics(ctx, 1, map[string]string{"cleanup.policy": "compact", "segment.ms": stateSegmentMs}, k.stateTopic()); err != nil {
			return err
		}
		if k.ScaleOut {
			// One partition: stage 2 runs on one instance at a time and
			// publishes windows in order, as a single instance does.
			if err := cl.createTopics(ctx, 1, nil, k.partialsTopic()); err != nil {
				return err
			}
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
		cid, err := cl.clusterID(ctx, k.stateTopic())
		if err != nil {
			return err
		}
		o.identity = o.deployment(cid)
		r, err := recoverState(ctx, cl, k.stateTopic(), k.GroupID, k.OutputTopic, k.namespace())
		if err != nil {
			return err
		}
		rec = r
		return nil
	})
	return rec, err
}

// inputGroup returns the runner of the input consumer group, whose
// generations are the input topology (generation.go).
func (o *Operator) inputGroup(cl *clients, st *runState) *groupRunner {
	k := o.cfg.Kafka
	startOffset := kafka.FirstOffset
	if k.StartOffset == "latest" {
		startOffset = kafka.LastOffset
	}
	// Scale-out: the instance that merges reads fewer input partitions
	// (balance.go); "range", kafka-go's default, when an instance of an
	// older version is in the group.
	var balancers []kafka.GroupBalancer
	if k.ScaleOut {
		balancers = []kafka.GroupBalancer{inputBalancer{tokenData{o.token}}, kafka.RangeGroupBalancer{}}
	}
	gcfg := o.groupConfig(cl, k.GroupID, k.InputTopics, balancers, startOffset, "group")
	// Rebalance when input partitions appear (a topic created after the
	// join, or partitions added), so the assignment stays complete.
	gcfg.WatchPartitionChanges, gcfg.PartitionWatchInterval = true, 5*time.Second
	return &groupRunner{
		o: o, name: "consumer group", cfg: gcfg,
		joining:    func() { o.health.set(false, "joining the consumer group") },
		joinFailed: func(err error) { o.health.brokerError("join", err) },
		joined:     func() { o.m.rebalances.Inc() },
		generation: func(ctx, gctx context.Context, gen *kafka.Generation) error {
			return o.runGeneration(ctx, gctx, gen, st)
		},
	}
}

// stateSegmentMs is the state topic's segment.ms, one hour: a segment is
// compacted after it closes, so the topic holds about an hour of records
// beyond the last one per key.
const stateSegmentMs = "3600000"

// retry runs fn until it succeeds or ctx ends, with exponential backoff
// between attempts; it returns ctx's error in the latter case.
func (o *Operator) retry(ctx context.Context, op string, fn func(context.Context) error) error {
	backoff := o.cfg.Kafka.RetryBackoff
	for {
		err := fn(ctx)
		if err == nil {
			o.health.brokerError(op, nil)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrConfig) || errors.Is(err, ErrState) || errors.Is(err, schema.ErrInvalidRelease) {
			return err
		}
		o.health.brokerError(op, err) // /readyz shows the cause
		o.m.brokerErrors.WithLabelValues(op).Inc()
		if errors.Is(err, ErrTopicMissing) {
			// A configuration error (a misspelt topic, or one not
			// created yet) that retrying alone does not fix.
			o.log.Error("a configured topic does not exist; not consuming, retrying", "op", op, "err", err, "backoff", backoff)
		} else {
			o.log.Warn("broker operation failed; retrying", "op", op, "err", err, "backoff", backoff)
		}
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

// originString formats a recorded origin, "none" when none is recorded
// (0: a deployment's first start), not the epoch.
func originString(ms int64) string {
	if ms == 0 {
		return "none"
	}
	return tsString(ms)
}

func tsString(ms int64) string {
	if ms == noClosedWindow {
		return "none"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
