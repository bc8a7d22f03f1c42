package main

// dpstream.go runs dpstream's real release path: operator.New and Run,
// configured through the exported Config only, against franz-go's
// in-process fake broker (kfake), as `dpstream demo` does. Every
// repetition is one window holding the same events (shifted in time): a
// window has its own release id, so its noise is independent of the other
// windows' (DESIGN §1, "noise is derived deterministically from a secret
// key and the release identity").

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/dpstream/dpstream/internal/demo"
	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/operator/keyfile"
	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
)

// ErrDpstream wraps failures of a dpstream run (broker, operator, timeout).
var ErrDpstream = errors.New("peers: dpstream")

// Input fields of the synthetic events (msgpack maps).
const (
	fieldTime     = "ts"
	fieldUnit     = "u"
	fieldValue    = "v"
	fieldCategory = "c"
)

// Window timing of a dpstream run. The windows are simulated time: base is
// 2024-05-01T00:00:00Z in unix ms (any boundary works), a window lasts
// windowSize, and the operator's clock is moved by the harness so a window
// closes as soon as its events are all read (idleTimeout, the smallest
// whole second, is how far the clock is set past a window's end).
const (
	base        = int64(1714521600000)
	windowSize  = time.Minute
	idleTimeout = time.Second
	// pipelineDepth is how many windows the producer may run ahead of the
	// publications: enough to keep the operator busy, few enough to bound
	// the broker's memory per step.
	pipelineDepth = 2
	// segmentBytes is the fake broker's log segment size: small, so that
	// deleting the records of published windows (trimInput) frees their
	// memory (the broker drops whole segments only).
	segmentBytes = 4 << 20
	// runTimeout bounds one run (a stuck run fails instead of hanging).
	runTimeout = 30 * time.Minute
)

// dpstreamAggregates are dpstream's aggregate names measured, one run each
// (every aggregate gets the whole window budget, as the peers' do).
var dpstreamAggregates = []string{operator.AggCount, operator.AggUnits, operator.AggSum, operator.AggMean,
	operator.AggVariance, operator.AggHistogram, operator.AggQuantiles}

// dpstreamConfig is the operator configuration of aggregate agg at
// setting s as run describes it (windows.quantile_mechanism, the bounds),
// reading input and writing releases under name.
func dpstreamConfig(s Setting, agg string, run dpRun, brokers []string, input, name string) operator.Config {
	c := operator.Default()
	c.Kafka = demo.InProcessKafka(brokers, input, name+"-out", name, "peers")
	c.Schema = schema.Config{
		Format: schema.FormatMsgpack, TimeField: fieldTime, TimeFormat: schema.TimeUnixMillis,
		UnitField:  fieldUnit,
		Histogram:  &schema.Histogram{Field: fieldCategory, Categories: Categories},
		ValueField: fieldValue, Lower: Lower, Upper: Upper,
	}
	c.Windows.Size = windowSize
	c.Windows.AllowedLateness = 0
	c.Windows.IdleTimeout = idleTimeout
	c.Windows.Start = time.UnixMilli(base).UTC().Format(time.RFC3339)
	c.Windows.MaxOpenWindows = 0 // the harness bounds the open windows (pipelineDepth)
	c.Windows.Aggregates = []string{agg}
	c.Windows.Quantiles = Ranks
	c.Windows.QuantileMechanism = run.quantiles
	// QuantileBranching stays at its default (16, Google's
	// BoundedQuantiles'), QuantileDepth too (4) unless run sets it.
	c.Windows.QuantileDepth = run.depth
	c.Bounds = operator.BoundsConfig{MaxGroups: 1, MaxBuckets: s.Cells(), MaxPerBucket: s.Bound, MaxValues: s.Bound}
	if run.bound == BoundTotal {
		// The setting's natural bound: a unit has at most s.Bound events
		// in the window in all, however they spread over the cells.
		c.Bounds.MaxContributions = s.Bound
	}
	c.Privacy.Epsilon, c.Privacy.Delta = s.Epsilon, s.Delta
	c.Privacy.Mechanism = operator.Auto
	c.Privacy.KeyFile, c.Privacy.KeyEnv = "", keyfile.Env // the key is passed with operator.WithKey
	c.Observability.Listen = ""
	c.Observability.LogLevel = "error"
	return c
}

// runKey derives a run's noise key from the seed and the run's name: runs
// are reproducible and different runs have independent noise.
func runKey(seed uint64, name string) rng.Key {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	h := sha256.Sum256(append(append([]byte("dpstream peers key\x00"), b[:]...), name...))
	k, _ := rng.KeyFromBytes(h[:]) // 32 bytes: never fails
	return k
}

// encodeEvents returns the msgpack messages of d's events in window w,
// their event times spread evenly over the window in the data's order.
// The messages are built by hand (a fixed layout: a 4-entry map, the time
// as int64, the unit as int32, the value as float64, the category as a
// one-letter string) so that the harness costs little beside the
// operator.
func encodeEvents(d *Data, w int) []*kgo.Record {
	start := base + int64(w)*windowSize.Milliseconds()
	span := windowSize.Milliseconds() - 1
	n := int64(len(d.Events))
	recs := make([]*kgo.Record, len(d.Events))
	for i, e := range d.Events {
		ts := start + int64(i)*span/n
		b := make([]byte, 0, msgLen)
		b = append(b, 0x84, 0xa2, 't', 's', 0xd3)
		b = binary.BigEndian.AppendUint64(b, uint64(ts))
		b = append(b, 0xa1, 'u', 0xd2)
		b = binary.BigEndian.AppendUint32(b, uint32(e.Unit))
		b = append(b, 0xa1, 'v', 0xcb)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.Value))
		b = append(b, 0xa1, 'c', 0xa1, Categories[e.Category][0])
		recs[i] = &kgo.Record{Value: b, Timestamp: time.UnixMilli(ts)}
	}
	return recs
}

// msgLen is the length of an encoded event: map header 1, "ts" 3 + 9,
// "u" 2 + 5, "v" 2 + 9, "c" 2 + 2.
const msgLen = 1 + 3 + 9 + 2 + 5 + 2 + 9 + 2 + 2

// trimInput deletes the input's records before offset (DeleteRecords).
func trimInput(ctx context.Context, cl *kgo.Client, topic string, offset int64) error {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err == nil {
					err = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: deleting read input records: %v", ErrDpstream, err)
	}
	return nil
}

// runDpstream runs each aggregate of aggs over reps windows of d's events
// (one operator per aggregate, all reading one input topic on one fake
// broker) and returns the release of each window, in window order, per
// aggregate.
func runDpstream(ctx context.Context, d *Data, run dpRun, reps int, seed uint64, logw io.Writer) (map[string][]schema.Release, error) {
	aggs := run.aggregates
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	prefix := fmt.Sprintf("peers-%s-%d", d.Setting.Name, seed)
	input := prefix + "-in"
	// One input partition: the harness's clock logic needs the events of
	// a window read before the next window's.
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, input),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(segmentBytes)}))
	if err != nil {
		return nil, fmt.Errorf("%w: starting the fake broker: %v", ErrDpstream, err)
	}
	defer cl.Close()

	h := &harness{ctx: ctx, reps: reps, rels: map[string]map[int64]schema.Release{}, cond: make(chan struct{}, 1),
		errc: make(chan error, len(aggs))}
	h.clock.Store(base)
	runCtx, stop := context.WithCancel(ctx)
	defer h.stopAll(stop)
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelError}))
	for _, agg := range aggs {
		name := prefix + "-" + agg
		if err := h.start(runCtx, agg, dpstreamConfig(d.Setting, agg, run, cl.ListenAddrs(), input, name), runKey(seed, name), logger); err != nil {
			return nil, err
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.DefaultProduceTopic(input),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: producer: %v", ErrDpstream, err)
	}
	defer prod.Close()
	if err := h.produce(prod, d, input); err != nil {
		return nil, err
	}
	if err := h.wait(reps); err != nil {
		return nil, err
	}
	return h.releases(aggs)
}

// harness drives the operators of one runDpstream: their shared clock,
// the releases their hooks report, and how many of them still run.
type harness struct {
	ctx     context.Context
	reps    int
	clock   atomic.Int64 // the operators' clock (Unix ms)
	mu      sync.Mutex
	rels    map[string]map[int64]schema.Release // aggregate → window start → release
	cond    chan struct{}                       // signalled after every publication
	errc    chan error                          // an operator's Run returned
	running int
}

// now is the operators' clock.
func (h *harness) now() time.Time { return time.UnixMilli(h.clock.Load()) }

// start runs one operator releasing aggregate agg under cfg and key.
func (h *harness) start(ctx context.Context, agg string, cfg operator.Config, key rng.Key, logger *slog.Logger) error {
	h.rels[agg] = make(map[int64]schema.Release)
	op, err := operator.New(cfg, operator.WithKey(key), operator.WithLogger(logger), operator.WithClock(h.now),
		operator.WithReleaseHook(func(p operator.Published) {
			h.mu.Lock()
			for _, r := range p.Releases {
				h.rels[agg][r.WindowStart] = r
			}
			h.mu.Unlock()
			select {
			case h.cond <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrDpstream, agg, err)
	}
	h.running++
	go func() { h.errc <- op.Run(ctx) }()
	return nil
}

// stopAll stops the operators and waits for every Run to return.
func (h *harness) stopAll(stop context.CancelFunc) {
	stop()
	for range h.running {
		<-h.errc
	}
}

// published is the number of windows every operator has published.
func (h *harness) published() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.reps
	for _, m := range h.rels {
		n = min(n, len(m))
	}
	return n
}

// wait returns once every operator has published n windows.
func (h *harness) wait(n int) error {
	for h.published() < n {
		select {
		case <-h.cond:
		case err := <-h.errc:
			h.running--
			return fmt.Errorf("%w: an operator stopped: %v", ErrDpstream, err)
		case <-h.ctx.Done():
			return fmt.Errorf("%w: %d of %d windows published: %v", ErrDpstream, h.published(), h.reps, h.ctx.Err())
		}
	}
	return nil
}

// produce writes the events of every window to input, window by window,
// at most pipelineDepth windows ahead of the slowest operator, moving the
// clock past each window's schedule once its events are written and
// deleting the input the operators have read.
func (h *harness) produce(prod *kgo.Client, d *Data, input string) error {
	// ends[w] is the input offset after window w's events.
	ends := make([]int64, h.reps)
	trimmed := 0
	for w := range h.reps {
		if err := h.wait(w - pipelineDepth); err != nil {
			return err
		}
		// The windows every operator published, but the last, are read:
		// their events can go (the last stays, in case an operator
		// re-reads from its last commit).
		if done := h.published() - 1; done > trimmed {
			if err := trimInput(h.ctx, prod, input, ends[done-1]); err != nil {
				return err
			}
			trimmed = done
		}
		recs := encodeEvents(d, w)
		if err := prod.ProduceSync(h.ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("%w: producing window %d: %v", ErrDpstream, w, err)
		}
		ends[w] = recs[len(recs)-1].Offset + 1
		// Window w is complete. A live window is published no earlier
		// than end + allowed_lateness (0) + idle_timeout by the
		// operator's clock, at the first tick (idle_timeout/10) after
		// that: a second idle timeout covers both and stays far inside
		// the next window.
		end := base + int64(w+1)*windowSize.Milliseconds()
		h.clock.Store(end + 2*idleTimeout.Milliseconds())
	}
	return nil
}

// releases returns the release of every window, in window order, per
// aggregate.
func (h *harness) releases(aggs []string) (map[string][]schema.Release, error) {
	out := make(map[string][]schema.Release, len(aggs))
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, agg := range aggs {
		for w := range h.reps {
			r, ok := h.rels[agg][base+int64(w)*windowSize.Milliseconds()]
			if !ok {
				return nil, fmt.Errorf("%w: %s: window %d has no release", ErrDpstream, agg, w)
			}
			out[agg] = append(out[agg], r)
		}
	}
	return out, nil
}
