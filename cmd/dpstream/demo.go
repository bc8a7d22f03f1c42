package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/dpstream/dpstream/internal/keyfile"
	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
)

func init() { commands = append(commands, newDemoCmd) }

// Errors of the demo command.
var (
	// ErrDemo wraps every failure of a demo run (broker, operator, timeout).
	ErrDemo = errors.New("demo")
	// ErrDemoOptions wraps invalid demo flags.
	ErrDemoOptions = errors.New("demo: invalid option")
)

// demoPartitions is the number of input partitions the demo creates: more
// than one, so that the per-partition watermarks matter, and few, so the
// demo stays small.
const demoPartitions = 2

// demoOptions are the flags of dpstream demo.
type demoOptions struct {
	brokers         []string
	windows         int
	eventsPerWindow int
	seed            uint64
	epsilon, delta  float64
	mechanism       string
	json            bool
	keyFile         string
	timeout         time.Duration
	logLevel        string
}

// defaultDemoOptions are the flag defaults: three windows of 5000 readings
// finish in a few seconds on the embedded broker.
func defaultDemoOptions() demoOptions {
	return demoOptions{
		windows: 3, eventsPerWindow: 5000, seed: 1,
		epsilon: 1, delta: 1e-6, mechanism: "laplace",
		timeout: 2 * time.Minute, logLevel: "warn",
	}
}

func newDemoCmd() *cobra.Command {
	o := defaultDemoOptions()
	cmd := &cobra.Command{
		Use:   "demo [--windows N] [--events-per-window N] [--seed S] [--epsilon E --delta D --mechanism M] [--json] [--brokers HOST:PORT,...]",
		Short: "Run the real operator on synthetic smart-meter readings and show true vs private results",
		Long: `Demo needs no setup. It starts an embedded in-process Kafka-protocol broker
(or uses --brokers), creates fresh topics, produces a synthetic stream of
smart-meter readings (meters as privacy units, grouped by region, a
histogram of the reading status, the watt-hours of each reading clamped to
[0, 300]; a little bad input and a few late readings mixed in), runs the real
dpstream operator on it in-process, reads the releases back from the output
topic with the schema package's decoder, and prints per window a table of
true versus private values with their confidence intervals, the mechanism,
the noise scale and the budget spent. It stops after --windows windows.

True values are printed only because this is a demo on synthetic data: the
demo computes them itself from the generated readings, with the operator's
contribution bounds. dpstream never publishes them.

--json prints one JSON object per release (true values beside the private
ones) on standard output and everything else on standard error.

The noise key is random for each run unless --key-file gives one. With
--brokers the demo's topics (dpstream-demo-<id>-readings, -releases and
-releases.state) are left on the cluster, e.g. for the Python consumer in
examples/python.`,
		Example: `  dpstream demo
  dpstream demo --windows 5 --events-per-window 10000 --epsilon 0.5 --mechanism gaussian
  dpstream demo --json | jq -c '{key, true: .series[0].true, private: .series[0].private}'
  dpstream demo --brokers 127.0.0.1:9092`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			_, err := runDemo(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.brokers, "brokers", nil, "use these Kafka brokers (host:port) instead of the embedded broker")
	f.IntVar(&o.windows, "windows", o.windows, "stop after this many closed windows")
	f.IntVar(&o.eventsPerWindow, "events-per-window", o.eventsPerWindow, "synthetic readings per window")
	f.Uint64Var(&o.seed, "seed", o.seed, "seed of the synthetic stream (the noise comes from the key, not the seed)")
	f.Float64Var(&o.epsilon, "epsilon", o.epsilon, "per-window ε")
	f.Float64Var(&o.delta, "delta", o.delta, "per-window δ")
	f.StringVar(&o.mechanism, "mechanism", o.mechanism, "noise mechanism (see dpstream calibrate), or auto")
	f.BoolVar(&o.json, "json", false, "print one JSON object per release instead of tables")
	f.StringVar(&o.keyFile, "key-file", "", "secret noise key file (default: a random key for this run)")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "give up if the windows are not published within this time")
	f.StringVar(&o.logLevel, "log-level", o.logLevel, "operator log level on standard error: debug, info, warn or error")
	return cmd
}

// validate checks the options that the operator's own validation does not
// cover.
func (o demoOptions) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrDemoOptions}, args...)...))
	}
	if o.windows < 1 || o.windows > maxSynthWindows {
		bad("--windows must be in [1, %d]", maxSynthWindows)
	}
	if o.eventsPerWindow < 1 || o.eventsPerWindow > maxSynthEvents {
		bad("--events-per-window must be in [1, %d]", maxSynthEvents)
	}
	if !(o.epsilon > 0) || math.IsInf(o.epsilon, 0) {
		bad("--epsilon must be a finite number > 0")
	}
	if !(o.delta >= 0 && o.delta < 1) {
		bad("--delta must be in [0, 1)")
	}
	if o.mechanism != operator.Auto {
		if _, err := privacy.Parse(o.mechanism); err != nil {
			bad("--mechanism %q is not a known mechanism or auto", o.mechanism)
		}
	}
	if o.timeout <= 0 {
		bad("--timeout must be positive")
	}
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("--log-level %q is not debug, info, warn or error", o.logLevel)
	}
	return errors.Join(errs...)
}

// demoConfig is the operator configuration of a demo run.
func demoConfig(o demoOptions, brokers []string, input, output, group string) operator.Config {
	c := operator.Default()
	c.Kafka.Brokers = brokers
	c.Kafka.InputTopics = []string{input}
	c.Kafka.OutputTopic = output
	c.Kafka.GroupID = group
	// The namespace is unique per run: a fixed --key-file with another
	// seed must never reuse release ids (equal ids carry equal noise).
	c.Kafka.ReleaseNamespace = group
	c.Kafka.Instance = "dpstream-demo"
	c.Kafka.ClientID = "dpstream-demo"
	c.Kafka.CreateTopics = true
	c.Kafka.CommitInterval = 500 * time.Millisecond
	c.Kafka.RetryBackoff = 100 * time.Millisecond
	c.Kafka.RetryBackoffMax = 2 * time.Second
	// The smallest session timeout Kafka accepts by default
	// (group.min.session.timeout.ms = 6000).
	c.Kafka.SessionTimeout = 6 * time.Second
	c.Schema = schema.Config{
		Format:     schema.FormatAuto,
		TimeField:  synthTimeField,
		TimeFormat: schema.TimeUnixMillis,
		UnitField:  synthUnitField,
		GroupBy:    []string{synthRegionField},
		Histogram:  &schema.Histogram{Field: synthStatusField, Categories: synthStatuses},
		ValueField: synthValueField, Lower: synthLower, Upper: synthUpper,
	}
	c.Windows.Size = synthWindowDuration
	c.Windows.AllowedLateness = synthLateness
	// The synthetic stream's first window: releases start there.
	c.Windows.Start = time.UnixMilli(synthBase).UTC().Format(time.RFC3339)
	// Windows close by the records' arrival times (the stream ends with a
	// closing reading on every partition); a partition read to its end is
	// advanced to the demo's clock (demoClock) minus this.
	c.Windows.IdleTimeout = 10 * time.Second
	c.Windows.Aggregates = slices.Clone(aggregateOrder)
	c.Windows.Running = true // running count and sum since the first window (demo_running.go)
	// A 16-ary tree of depth 2: 256 leaves of 1.17 Wh over [0, 300] Wh.
	// The default depth 4 resolves far finer than a demo window's few
	// hundred readings per region can use, for twice the noise levels.
	c.Windows.QuantileBranching, c.Windows.QuantileDepth = 16, 2
	c.Windows.Quantiles = []float64{0.5, 0.9, 0.99}
	c.Bounds = operator.BoundsConfig{MaxGroups: synthBounds.MaxGroups, MaxBuckets: synthBounds.MaxBuckets,
		MaxPerBucket: synthBounds.MaxPerBucket, MaxValues: synthBounds.MaxValues}
	c.Privacy.Epsilon, c.Privacy.Delta = o.epsilon, o.delta
	c.Privacy.Mechanism = o.mechanism
	c.Privacy.PublicGroups = nil
	for _, r := range synthRegions {
		c.Privacy.PublicGroups = append(c.Privacy.PublicGroups, []string{r})
	}
	c.Privacy.KeyFile, c.Privacy.KeyEnv = "", keyfile.Env // the key is passed with operator.WithKey
	c.Observability.Listen = ""
	c.Observability.LogLevel = o.logLevel
	c.Observability.LogFormat = "text"
	// The demo's summary reads the exact input counters (synthetic data,
	// printed next to the truth anyway).
	c.Observability.SensitiveMetrics = true
	return c
}

// demoWindow is one published window as the demo read it back.
type demoWindow struct {
	Start, End int64
	// Releases are decoded from the output topic, sorted by region and
	// aggregate in configuration order.
	Releases []schema.Release
	// Truth is the demo's own exact aggregate per region.
	Truth map[string]*groupTruth
	// Latency is the operator's publish latency after the window closed.
	Latency time.Duration
	// Running holds the true running totals through this window
	// (runningTruths).
	Running map[string]float64
}

// demoResult is what a demo run produced, for tests.
type demoResult struct {
	Brokers                 []string
	Embedded                bool
	InputTopic, OutputTopic string
	Windows                 []demoWindow
	Stream                  synthCounts
	// Checked and Covered count the displayed values and those whose true
	// value lies in the published interval.
	Checked, Covered int
	// Mismatches counts values where the demo's truth differs from the
	// operator's exact bounded aggregate (should be 0); Inexact counts
	// groups whose truth depends on random bounding.
	Mismatches, Inexact int
	// Metrics read from the operator's registry at the end.
	EventsIn, Late float64
	Skipped        map[string]float64
}

// runDemo runs the demo and writes its report to stdout (tables, or JSON
// lines) and stderr (logs; with JSON also the report text).
func runDemo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) (*demoResult, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	text := stdout
	if o.json {
		text = stderr
	}
	key, keyNote, err := demoKey(o.keyFile)
	if err != nil {
		return nil, err
	}
	res := &demoResult{Brokers: o.brokers, Skipped: map[string]float64{}}
	if len(o.brokers) == 0 {
		cl, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("%w: starting the embedded broker: %v", ErrDemo, err)
		}
		defer cl.Close()
		res.Brokers, res.Embedded = cl.ListenAddrs(), true
	}
	id := randomID()
	group := "dpstream-demo-" + id
	res.InputTopic, res.OutputTopic = group+"-readings", group+"-releases"
	cfg := demoConfig(o, res.Brokers, res.InputTopic, res.OutputTopic, group)

	// The operator before any topic: bad settings (an infeasible budget)
	// fail here, before anything is created or produced.
	var (
		mu     sync.Mutex
		pubs   []operator.Published
		notify = make(chan struct{}, 1)
	)
	reg := prometheus.NewRegistry()
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(o.logLevel)) // validated above
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	stream, err := generate(synthConfig{Seed: o.seed, Windows: o.windows, EventsPerWindow: o.eventsPerWindow,
		Partitions: demoPartitions, Base: synthBase, Size: synthWindowDuration, Lateness: synthLateness})
	if err != nil {
		return nil, err
	}
	op, err := operator.New(cfg, operator.WithKey(key), operator.WithRegistry(reg), operator.WithLogger(logger),
		operator.WithClock(demoClock(stream, cfg.Windows.IdleTimeout)),
		operator.WithReleaseHook(func(p operator.Published) {
			mu.Lock()
			pubs = append(pubs, p)
			mu.Unlock()
			select {
			case notify <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		return nil, err
	}

	res.Stream = stream.counts()
	truth := stream.truth()
	printDemoHeader(text, o, res, op.Note(), keyNote)

	if err := createDemoTopic(ctx, res.Brokers, res.InputTopic, demoPartitions); err != nil {
		return nil, err
	}
	if err := produceStream(ctx, res.Brokers, res.InputTopic, stream); err != nil {
		return nil, err
	}

	runCtx, stopOp := context.WithCancel(ctx)
	defer stopOp()
	errc := make(chan error, 1)
	go func() { errc <- op.Run(runCtx) }()
	opDone := false
	defer func() {
		if !opDone {
			stopOp()
			<-errc
		}
	}()

	byStart := map[int64]*demoWindow{}
	published := map[int64]*operator.Published{}
	wins := make([]*demoWindow, o.windows)
	for i := range wins {
		s := stream.windowStart(i)
		wins[i] = &demoWindow{Start: s, End: s + synthWindowDuration.Milliseconds(), Truth: truth[s]}
		byStart[s] = wins[i]
	}
	readCtx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	var relc <-chan kafka.Message
	var readErr <-chan error
	seen := map[string]bool{}
	done := 0
	for done < o.windows {
		select {
		case <-notify:
			mu.Lock()
			for i := range pubs {
				p := pubs[i]
				published[p.Window.Start] = &p
				if w := byStart[p.Window.Start]; w != nil {
					w.Latency = p.Latency
					res.Mismatches += compareTruth(w.Truth, &p)
				}
			}
			pubs = pubs[:0]
			mu.Unlock()
			if relc == nil {
				// The output topic exists once a window was published.
				relc, readErr = readTopic(readCtx, res.Brokers, res.OutputTopic)
			}
		case m := <-relc:
			r, err := schema.DecodeRelease(m.Value)
			if err != nil {
				return res, fmt.Errorf("%w: output message at offset %d does not decode: %v", ErrDemo, m.Offset, err)
			}
			if seen[r.Key()] {
				continue // a re-published release (identical bytes by design)
			}
			seen[r.Key()] = true
			if w := byStart[r.WindowStart]; w != nil {
				w.Releases = append(w.Releases, r)
			}
		case err := <-readErr:
			return res, fmt.Errorf("%w: reading %s: %v", ErrDemo, res.OutputTopic, err)
		case err := <-errc:
			opDone = true
			if err == nil {
				err = ctx.Err()
			}
			return res, fmt.Errorf("%w: the operator stopped before %d windows were published: %v", ErrDemo, o.windows, err)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return res, fmt.Errorf("%w: only %d of %d windows were published within --timeout %v", ErrDemo, done, o.windows, o.timeout)
			}
			return res, fmt.Errorf("%w: interrupted after %d of %d windows", ErrDemo, done, o.windows)
		}
		for done < o.windows {
			w := wins[done]
			p := published[w.Start]
			if p == nil || len(w.Releases) < len(p.Releases)+p.Skipped {
				break
			}
			sortReleases(w.Releases)
			w.Running = runningTruths(append(slices.Clone(res.Windows), *w))
			res.Windows = append(res.Windows, *w)
			done++
			if o.json {
				if err := writeDemoJSON(stdout, w); err != nil {
					return res, err
				}
			} else {
				printDemoWindow(text, w, done, o.windows, cfg)
			}
		}
	}
	stopRead()
	stopOp()
	select {
	case err := <-errc:
		opDone = true
		if err != nil {
			fmt.Fprintf(stderr, "demo: the operator stopped with an error after the demo finished: %v\n", err)
		}
	case <-time.After(40 * time.Second):
		fmt.Fprintln(stderr, "demo: the operator did not stop within 40s; exiting anyway")
		opDone = true // abandon it: the process exits
	}
	for _, w := range res.Windows {
		ch, cov, inexact := coverage(&w)
		res.Checked += ch
		res.Covered += cov
		res.Inexact += inexact
	}
	readDemoMetrics(reg, res)
	printDemoSummary(text, o, res)
	if res.Mismatches > 0 {
		fmt.Fprintf(stderr, "demo: WARNING: %d true values computed by the demo differ from the operator's exact bounded aggregates\n", res.Mismatches)
	}
	return res, nil
}

// demoKey returns the noise key: from keyFile, or a fresh random one.
func demoKey(keyFile string) (rng.Key, string, error) {
	if keyFile != "" {
		k, err := keyfile.Read(keyFile)
		if err != nil {
			return rng.Key{}, "", err
		}
		return k, "from " + keyFile, nil
	}
	k, err := keyfile.NewRandomKey()
	if err != nil {
		return rng.Key{}, "", err
	}
	return k, "random for this run (--key-file to fix it)", nil
}

// demoClock is the operator's clock in the demo. The demo compresses
// simulated time: its records carry their simulated arrival times
// (synthMsg.Arrival, 2024), so the operator's clock must be on the same
// time line, or a partition read to its end would be advanced to today and
// every window since the stream's start released. It starts idle after
// the stream's last arrival, as if the stream had just been produced live,
// and runs at the real rate (publish latencies stay real).
func demoClock(s *synthStream, idle time.Duration) func() time.Time {
	end := int64(math.MinInt64)
	for i := range s.Msgs {
		end = max(end, s.Msgs[i].Arrival)
	}
	start := time.UnixMilli(end).Add(idle)
	t0 := time.Now()
	return func() time.Time { return start.Add(time.Since(t0)) }
}

// randomID returns 8 random hex digits naming a demo run.
func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// createDemoTopic creates topic with n partitions and waits until the
// metadata shows all of them. Its records keep the timestamps the demo's
// producer gives them (message.timestamp.type=CreateTime), the simulated
// arrival times; the operator warns about it, rightly for a real
// deployment, where input topics should use LogAppendTime.
func createDemoTopic(ctx context.Context, brokers []string, topic string, n int) error {
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second}
	res, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: n, ReplicationFactor: -1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "message.timestamp.type", ConfigValue: "CreateTime"}}}}})
	if err != nil {
		return fmt.Errorf("%w: creating topic %s on %s: %v", ErrDemo, topic, strings.Join(brokers, ","), err)
	}
	if e := res.Errors[topic]; e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
		return fmt.Errorf("%w: creating topic %s: %v", ErrDemo, topic, e)
	}
	for {
		if ps, err := topicPartitions(ctx, brokers, topic); err == nil && len(ps) == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: topic %s did not appear: %v", ErrDemo, topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// topicPartitions returns the partition ids of topic, asking a broker
// directly.
func topicPartitions(ctx context.Context, brokers []string, topic string) ([]int, error) {
	var last error
	for _, b := range brokers {
		conn, err := (&kafka.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", b)
		if err != nil {
			last = err
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		ps, err := conn.ReadPartitions(topic)
		conn.Close()
		if err != nil {
			last = err
			continue
		}
		var ids []int
		for _, p := range ps {
			if p.Error == nil {
				ids = append(ids, p.ID)
			}
		}
		slices.Sort(ids)
		return ids, nil
	}
	return nil, last
}

// demoBalancer sends a message to partitionOf(key), so the partitions get
// exactly the sequences the generator planned.
var demoBalancer = kafka.BalancerFunc(func(m kafka.Message, parts ...int) int {
	return parts[partitionOf(m.Key, len(parts))]
})

// produceStream writes the stream's messages in order, each record stamped
// with its simulated arrival time. Each write call holds at most one batch
// per partition and waits for its acknowledgement, so every partition
// receives its messages in order.
func produceStream(ctx context.Context, brokers []string, topic string, s *synthStream) error {
	w := &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: topic, Balancer: demoBalancer,
		RequiredAcks: kafka.RequireAll, BatchTimeout: 2 * time.Millisecond, BatchSize: 2000, BatchBytes: 16 << 20,
		MaxAttempts: 1,
	}
	defer w.Close()
	const chunk = 2000
	msgs := make([]kafka.Message, 0, chunk)
	for i := 0; i < len(s.Msgs); i += chunk {
		msgs = msgs[:0]
		for _, m := range s.Msgs[i:min(i+chunk, len(s.Msgs))] {
			// The record timestamp is the simulated arrival time (a
			// CreateTime topic: the demo's producer is the trusted one).
			msgs = append(msgs, kafka.Message{Key: m.Key, Value: m.Value, Time: time.UnixMilli(m.Arrival)})
		}
		// A new topic may be missing from the writer's metadata for a
		// moment. WriteErrors says which messages failed (a partition's
		// batch fails or succeeds as a whole); retry only those, so
		// nothing is written twice and each partition keeps its order.
		for {
			err := w.WriteMessages(ctx, msgs...)
			if err == nil {
				break
			}
			var we kafka.WriteErrors
			if ctx.Err() != nil || !errors.As(err, &we) {
				return fmt.Errorf("%w: producing to %s: %v", ErrDemo, topic, err)
			}
			var failed []kafka.Message
			for j, e := range we {
				if e != nil {
					failed = append(failed, msgs[j])
				}
			}
			msgs = failed
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: producing to %s: %v", ErrDemo, topic, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// readTopic reads every partition of topic from the start until ctx ends,
// sending the messages on the returned channel; a partition listing error
// is sent on the error channel.
func readTopic(ctx context.Context, brokers []string, topic string) (<-chan kafka.Message, <-chan error) {
	out := make(chan kafka.Message, 1024)
	errc := make(chan error, 1)
	go func() {
		var parts []int
		for {
			ps, err := topicPartitions(ctx, brokers, topic)
			if err == nil && len(ps) > 0 {
				parts = ps
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		for _, p := range parts {
			go func() {
				r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p,
					MinBytes: 1, MaxBytes: 8 << 20, MaxWait: 100 * time.Millisecond})
				defer r.Close()
				if err := r.SetOffset(kafka.FirstOffset); err != nil {
					select {
					case errc <- err:
					default: // one error is enough
					}
					return
				}
				for {
					m, err := r.ReadMessage(ctx)
					if err != nil {
						return // ctx ended; other errors are retried inside the reader
					}
					select {
					case out <- m:
					case <-ctx.Done():
						return
					}
				}
			}()
		}
	}()
	return out, errc
}

// aggregateOrder is the display order of the aggregates.
var aggregateOrder = []string{operator.AggCount, operator.AggHistogram, operator.AggSum, operator.AggMean,
	operator.AggUnits, operator.AggVariance, operator.AggQuantiles}

// sortReleases sorts a window's releases by region (configuration order)
// and aggregate (display order).
func sortReleases(rs []schema.Release) {
	slices.SortFunc(rs, func(a, b schema.Release) int {
		ga, gb := slices.Index(synthRegions, groupValue(&a)), slices.Index(synthRegions, groupValue(&b))
		if ga != gb {
			return ga - gb
		}
		return slices.Index(aggregateOrder, a.Aggregate) - slices.Index(aggregateOrder, b.Aggregate)
	})
}

// groupValue returns the region of a release.
func groupValue(r *schema.Release) string {
	if len(r.Group) == 0 {
		return ""
	}
	return r.Group[0].Value
}

// trueValues returns the demo's true values for every value of series i of
// r, NaN where there is none (the mean of no values).
func trueValues(r *schema.Release, i int, g *groupTruth) []float64 {
	if g == nil {
		return nil
	}
	s := &r.Series[i]
	switch {
	case s.Name == schema.SeriesRunning:
		return nil // see runningSeries
	case r.Kind == schema.KindCount:
		return []float64{float64(g.Count)}
	case r.Kind == schema.KindHistogram:
		out := make([]float64, len(g.Hist))
		for j, c := range g.Hist {
			out[j] = float64(c)
		}
		return out
	case r.Kind == schema.KindSum:
		return []float64{g.Sum}
	case r.Kind == schema.KindUnits:
		return []float64{float64(g.Units)}
	case s.Name == schema.SeriesQuantiles:
		out := make([]float64, len(s.Labels))
		for j, l := range s.Labels {
			q, err := strconv.ParseFloat(l, 64)
			if err != nil {
				return nil
			}
			out[j] = g.Quantile(q)
		}
		return out
	case s.Name == schema.SeriesRankError:
		// The true rank error of each released quantile: how far rank·N
		// is from the ranks the released value takes among the kept
		// values (between the number below it and the number at or below).
		if len(r.Series) < 1 || r.Series[0].Len() != s.Len() {
			return nil
		}
		out := make([]float64, s.Len())
		n := float64(len(g.Kept))
		for j, l := range s.Labels {
			q, err := strconv.ParseFloat(l, 64)
			if err != nil {
				return nil
			}
			x := r.Series[0].Value(j)
			below := float64(sort.SearchFloat64s(g.Kept, x))
			atOrBelow := float64(sort.Search(len(g.Kept), func(i int) bool { return g.Kept[i] > x }))
			out[j] = math.Max(0, math.Max(below-q*n, q*n-atOrBelow))
		}
		return out
	case s.Name == schema.SeriesVariance:
		return []float64{g.Variance()}
	case s.Name == schema.SeriesStddev:
		return []float64{math.Sqrt(g.Variance())}
	case s.Name == schema.SeriesSumSq:
		return []float64{g.CentredSqSum}
	case s.Name == schema.SeriesSum: // the mean's centred sum
		return []float64{g.CentredSum}
	case s.Name == schema.SeriesCount:
		return []float64{float64(g.Values)}
	case s.Name == schema.SeriesMean:
		return []float64{g.Mean()}
	}
	return nil
}

// displayed returns the index of the series a table shows for r: the mean
// for a mean release and the standard deviation for a variance release
// (their other series are the inputs), the quantiles for a quantiles
// release, else the only one.
func displayed(r *schema.Release) int {
	for i, s := range r.Series {
		if s.Name == schema.SeriesMean || s.Name == schema.SeriesStddev {
			return i
		}
	}
	return 0
}

// coverage counts the displayed values of w, those whose true value lies in
// their interval, and the groups whose truth is inexact.
func coverage(w *demoWindow) (checked, covered, inexact int) {
	for gi := range w.Truth {
		if !w.Truth[gi].Exact {
			inexact++
		}
	}
	for i := range w.Releases {
		r := &w.Releases[i]
		si := displayed(r)
		s := &r.Series[si]
		for j, t := range trueValues(r, si, w.Truth[groupValue(r)]) {
			if math.IsNaN(t) || j >= s.Len() {
				continue
			}
			checked++
			if s.Lo[j] <= t && t <= s.Hi[j] {
				covered++
			}
		}
	}
	return checked, covered, inexact
}

// compareTruth counts the values where the demo's truth differs from the
// operator's exact bounded aggregates of p (sums to a relative 1e-12: the
// operator rounds an exact sum once, the demo adds in float64; the
// generated readings are whole watt-hours, so both are exact here).
func compareTruth(truth map[string]*groupTruth, p *operator.Published) int {
	bad := 0
	for _, reg := range synthRegions {
		t := truth[reg]
		if t == nil || !t.Exact {
			continue
		}
		var g struct {
			count, values int64
			hist          []int64
			sum, csum     float64
		}
		g.hist = make([]int64, len(synthStatuses))
		for _, og := range p.Window.Groups {
			if og.Key == schema.MakeGroup(reg) {
				g.count, g.values, g.sum, g.csum = og.Count, og.Values, og.Sum, og.CentredSum
				if og.Histogram != nil {
					g.hist = og.Histogram
				}
			}
		}
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
		if g.count != t.Count {
			bad++
		}
		if g.values != t.Values {
			bad++
		}
		if !near(g.sum, t.Sum) {
			bad++
		}
		if !near(g.csum, t.CentredSum) {
			bad++
		}
		if !slices.Equal(g.hist, t.Hist) {
			bad++
		}
	}
	return bad
}

// gatherCounters sums the counters of the metric family name in reg by the
// value of label (label "" sums every series under the key "").
func gatherCounters(reg *prometheus.Registry, name, label string) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			k := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					k = l.GetValue()
				}
			}
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out
}

func readDemoMetrics(reg *prometheus.Registry, res *demoResult) {
	for _, v := range gatherCounters(reg, "dpstream_events_in_total", "") {
		res.EventsIn += v
	}
	res.Late = gatherCounters(reg, "dpstream_events_late_total", "")[""]
	for k, v := range gatherCounters(reg, "dpstream_events_skipped_total", "reason") {
		if v > 0 {
			res.Skipped[k] = v
		}
	}
}
