package demo

// run.go: one demo run, from the options to the summary. collect.go reads
// the releases back while the operator runs.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/privacy/rng"
)

// operatorStopWait bounds the wait for the operator to stop after the
// last window was read; then the demo gives up on it (the process exits).
// Generous: a loaded machine may take seconds to commit and leave the group.
const operatorStopWait = 40 * time.Second

// run is the state of one demo run.
type run struct {
	o              Options
	stdout, stderr io.Writer
	// text receives the report text: stdout, or stderr with Options.JSON.
	text   io.Writer
	cfg    operator.Config
	res    *Result
	stream *Stream
	reg    *prometheus.Registry
	// The operator's release hook appends to pubs and signals notify.
	mu     sync.Mutex
	pubs   []operator.Published
	notify chan struct{}
}

// Run runs the demo and writes its report to stdout (tables, or JSON
// lines) and stderr (logs; with JSON also the report text). The result
// is returned, also with an error once the operator ran, for tests.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	r := &run{o: o, stdout: stdout, stderr: stderr, text: stdout, notify: make(chan struct{}, 1)}
	if o.JSON {
		r.text = stderr
	}
	key, keyNote, err := demoKey(o.KeyFile)
	if err != nil {
		return nil, err
	}
	r.res = &Result{Brokers: o.Brokers, Skipped: map[string]float64{}}
	if len(o.Brokers) == 0 {
		cl, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("%w: starting the embedded broker: %v", ErrRun, err)
		}
		defer cl.Close()
		r.res.Brokers, r.res.Embedded = cl.ListenAddrs(), true
	}
	op, err := r.newOperator(key)
	if err != nil {
		return nil, err
	}
	r.res.Stream = r.stream.counts()
	truth := r.stream.truth()
	printHeader(r.text, o, r.res, op.Note(), keyNote)

	if err := CreateTopic(ctx, r.res.Brokers, r.res.InputTopic, Partitions); err != nil {
		return nil, err
	}
	if err := Produce(ctx, r.res.Brokers, r.res.InputTopic, r.stream); err != nil {
		return nil, err
	}
	if err := r.runOperator(ctx, op, truth); err != nil {
		return r.res, err
	}
	r.finish()
	return r.res, nil
}

// newOperator names the run's topics, generates the stream and builds the
// operator, before any topic exists: bad settings (an infeasible budget)
// fail here, before anything is created or produced.
func (r *run) newOperator(key rng.Key) (*operator.Operator, error) {
	group := "dpstream-demo-" + RandomID()
	r.res.InputTopic, r.res.OutputTopic = group+"-readings", group+"-releases"
	r.cfg = OperatorConfig(r.o, r.res.Brokers, r.res.InputTopic, r.res.OutputTopic, group)
	r.reg = prometheus.NewRegistry()
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(r.o.LogLevel)) // validated by Options.Validate
	logger := slog.New(slog.NewTextHandler(r.stderr, &slog.HandlerOptions{Level: lvl}))
	stream, err := Generate(StreamConfig{Seed: r.o.Seed, Windows: r.o.Windows, EventsPerWindow: r.o.EventsPerWindow,
		Partitions: Partitions, Base: streamBase, Size: WindowSize, Lateness: Lateness})
	if err != nil {
		return nil, err
	}
	r.stream = stream
	opts := []operator.Option{operator.WithKey(key), operator.WithRegistry(r.reg), operator.WithLogger(logger),
		operator.WithClock(demoClock(stream, r.cfg.Windows.IdleTimeout)),
		operator.WithReleaseHook(r.published)}
	if r.res.Embedded {
		// Its own broker, its own topic and its own producer, stamping the
		// simulated arrival times: the CreateTime warning (right for a
		// deployment) would only puzzle here.
		opts = append(opts, operator.WithTrustedCreateTime())
	}
	return operator.New(r.cfg, opts...)
}

// published is the operator's release hook: it queues p for collect.
func (r *run) published(p operator.Published) {
	r.mu.Lock()
	r.pubs = append(r.pubs, p)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// runOperator runs op until the windows are read back (collect), then
// stops it.
func (r *run) runOperator(ctx context.Context, op *operator.Operator, truth map[int64]map[string]*GroupTruth) error {
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
	c := newCollector(r, truth)
	if err := c.collect(ctx, errc); err != nil {
		opDone = c.opDone
		return err
	}
	stopOp()
	select {
	case err := <-errc:
		if err != nil {
			fmt.Fprintf(r.stderr, "demo: the operator stopped with an error after the demo finished: %v\n", err)
		}
	case <-time.After(operatorStopWait):
		fmt.Fprintln(r.stderr, "demo: the operator did not stop within 40s; exiting anyway")
	}
	opDone = true // stopped, or abandoned: the process exits
	return nil
}

// finish checks the windows read against the truth, reads the operator's
// counters and prints the summary.
func (r *run) finish() {
	res := r.res
	for _, w := range res.Windows {
		ch, cov, inexact := coverage(&w)
		res.Checked += ch
		res.Covered += cov
		res.Inexact += inexact
	}
	readMetrics(r.reg, res)
	printSummary(r.text, r.o, res)
	if res.Mismatches > 0 {
		fmt.Fprintf(r.stderr, "demo: WARNING: %d true values computed by the demo differ from the operator's exact bounded aggregates\n", res.Mismatches)
	}
}
