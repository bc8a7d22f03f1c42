package operator

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// metrics are the operator's Prometheus metrics. The core loop calls small
// methods on it and never reads it back, so metrics stay out of the logic.
// Labels carry only configuration names (topics, aggregates, mechanisms,
// skip reasons) and partition numbers, never event content.
//
// The metrics fall in two classes (see the README's metrics table):
//
//   - operational metrics do not depend on the units' data beyond what
//     the output and state topics publish anyway: configuration (budgets,
//     noise scales), broker operations (errors, rebalances, readiness),
//     windows closed and published (windows are emitted contiguously in
//     event time, empty ones included, so their number is the span of
//     event time already released, which the state topic records), and
//     releases written or found already published with the publication
//     latency (a post-processing of the private output). When they move
//     follows the clock, not the data: a window is closed, counted and
//     published at its scheduled time (core.due) or later, and the
//     latency is measured from then (issue 18). They are always
//     registered. One residue: dead letters are written only when there
//     is bad input, so broker_errors_total{op="dead_letter"} can move only
//     then (a broker failure is needed too).
//   - sensitive metrics are exact functions of the input events: messages
//     in, decoded and skipped per reason, late, dead-lettered, groups
//     withheld by private selection, windows holding events, the consumer
//     lag (exact message counts) and offset commits (a commit is made only
//     when the committable offset moved, so in a quiet period one unit's
//     bad or late message adds one); and with scale-out, the partials
//     written and what stage 2 waits for, which move when stage 1 closes
//     a window, and a record arriving after a window's end closes it
//     early (issue 18). One unit changes them by an
//     exact amount — a lone unit's group shows up in the number of groups
//     withheld, which defeats private group selection — so they are
//     registered only when observability.sensitive_metrics is on, and
//     their help text says so. When it is off, s is nil and every method
//     that feeds them returns at once.
type metrics struct {
	windowsClosed  prometheus.Counter
	windowsPub     prometheus.Counter
	releasesPub    prometheus.Counter
	releasesDup    prometheus.Counter
	publishLatency prometheus.Histogram
	noiseScale     *prometheus.GaugeVec
	spentEps       prometheus.Gauge
	spentDelta     prometheus.Gauge
	windowEps      prometheus.Gauge
	windowDelta    prometheus.Gauge
	totalEps       prometheus.Gauge
	totalDelta     prometheus.Gauge
	brokerErrors   *prometheus.CounterVec
	rebalances     prometheus.Counter
	// registryErrors counts failed schema registry requests and
	// registryBlocked the input partitions waiting for the registry
	// (registry_outage.go).
	registryErrors  prometheus.Counter
	registryBlocked prometheus.Gauge
	ready           prometheus.Gauge

	// The scale-out topology's stages (operational: assignments and which
	// instance merges).
	assigned prometheus.Gauge
	merging  prometheus.Gauge
	// partialsRejected counts the partials topic messages stage 2
	// rejected, by reason: not_partial, damaged, mac (not this
	// deployment's), old_format (dpp2 after the upgrade cutoff).
	partialsRejected *prometheus.CounterVec

	// s holds the sensitive metrics; nil unless
	// observability.sensitive_metrics is on.
	s *sensitiveMetrics

	// For the progress line and the run-time warnings (operational:
	// functions of what was published). The publisher (or, with
	// scale-out, stage 2) adds while the consuming loop reads: atomics.
	pubWindows, pubReleases atomic.Int64 // since the last progress line
	totWindows, totReleases atomic.Int64 // since the start
	lastEnd                 atomic.Int64 // end of the last published window (Unix ms)
	merger                  atomic.Bool  // scale-out: this instance merges (stage 2) now
	progressAt              time.Time    // the consuming loop's only
	warn                    runWarnings  // the publisher's only
}

// sensitiveMetrics are the metrics that count input data exactly.
type sensitiveMetrics struct {
	eventsIn       *prometheus.CounterVec
	decoded        prometheus.Counter
	skipped        *prometheus.CounterVec
	late           prometheus.Counter
	deadLettered   prometheus.Counter
	windowsOpen    prometheus.Gauge
	groupsWithheld prometheus.Counter
	lag            *prometheus.GaugeVec
	commits        prometheus.Counter
	// Scale-out: stage 1 writes a window's partial as soon as the
	// partition's data closes it (stage 2 holds the publication to its
	// schedule), so these move when a record arrives after a window's
	// end, not only on the clock (issue 18).
	partialsOut  prometheus.Counter
	mergeWaiting prometheus.Gauge
	mergeMissing prometheus.Gauge
	// skip counters per schema.Reason and input counters per topic,
	// resolved once (hot path).
	skipByReason [schema.NumReasons]prometheus.Counter
	inByTopic    map[string]prometheus.Counter
	n            int64 // input messages since the last progress line
}

// sensitiveHelp ends the help text of every sensitive metric.
const sensitiveHelp = " Exact count of input data: sensitive (registered only with observability.sensitive_metrics)."

// newMetrics registers the operational metrics in reg, and the sensitive
// ones too when sensitive is true.
func newMetrics(reg prometheus.Registerer, sensitive bool) (*metrics, error) {
	const ns = "dpstream"
	m := &metrics{
		windowsClosed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "windows_closed_total",
			Help: "Windows closed and handed to the publisher, each at its scheduled publication time (end + allowed_lateness + idle_timeout) or later (windows are emitted contiguously in event time, empty ones included)."}),
		windowsPub: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "windows_published_total",
			Help: "Windows whose releases were all acknowledged by the brokers."}),
		releasesPub: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "releases_published_total",
			Help: "Release messages written and acknowledged (what the output topic shows)."}),
		releasesDup: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "releases_already_published_total",
			Help: "Release messages not written because their key was already published (replay after a restart)."}),
		publishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "publish_latency_seconds",
			Help:    "From a window's release to the publisher (at its scheduled publication time end + allowed_lateness + idle_timeout, or later when catching up) to the acknowledgement of all its releases.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		noiseScale: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "noise_scale",
			Help: "Noise scale of the last window, per aggregate, series and mechanism."}, []string{"aggregate", "series", "mechanism"}),
		spentEps: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_spent_epsilon",
			Help: "ε spent in the current horizon through the last published window, from the tight accountant at budget_spent_delta (the per-window ε without a horizon). Every published window counts, whether its groups were released or withheld; the same as the releases' spent_epsilon."}),
		spentDelta: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_spent_delta",
			Help: "δ spent in the current horizon through the last published window (the per-window δ without a horizon). Every published window counts, whether its groups were released or withheld."}),
		windowEps: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_window_epsilon",
			Help: "The ε of one window's release (at budget_window_delta)."}),
		windowDelta: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_window_delta",
			Help: "The δ of one window's release."}),
		totalEps: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_total_epsilon",
			Help: "The configured total ε: per horizon, or per window without a horizon."}),
		totalDelta: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_total_delta",
			Help: "The configured total δ: per horizon, or per window without a horizon."}),
		brokerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "broker_errors_total",
			Help: "Errors talking to the brokers, per operation (retried)."}, []string{"op"}),
		registryErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "registry_errors_total",
			Help: "Schema registry requests that failed to get an answer (unreachable, timeout, 5xx, 429, any status but the schema or a definite 404); the message waits and is decoded again, nothing is skipped."}),
		registryBlocked: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "registry_blocked_partitions",
			Help: "Input partitions whose decoding waits for the schema registry (a registry outage: backpressure, no message skipped)."}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "rebalances_total",
			Help: "Consumer group generations joined."}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "ready",
			Help: "1 when the operator consumes with a full assignment, else 0."}),
		assigned: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "input_partitions_assigned",
			Help: "Input partitions this instance reads in the current generation (0 between generations)."}),
		merging: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "merging",
			Help: "Scale-out: 1 while this instance runs stage 2 (merge, noise, publish), else 0."}),
		partialsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "partials_rejected_total",
			Help: "Scale-out, on the merging instance: partials topic messages rejected, by reason (not_partial: not a partial state; damaged: inconsistent chunks; mac: not written by this deployment, e.g. another deployment's under the same key; old_format: the previous format after the upgrade cutoff)."},
			[]string{"reason"}),
	}
	cs := []prometheus.Collector{m.windowsClosed, m.windowsPub, m.releasesPub, m.releasesDup, m.publishLatency,
		m.noiseScale, m.spentEps, m.spentDelta, m.windowEps, m.windowDelta, m.totalEps, m.totalDelta,
		m.brokerErrors, m.rebalances, m.ready, m.assigned, m.merging, m.partialsRejected, m.registryErrors, m.registryBlocked}
	if sensitive {
		s := &sensitiveMetrics{
			eventsIn: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_in_total",
				Help: "Input messages received, per topic." + sensitiveHelp}, []string{"topic"}),
			decoded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "events_decoded_total",
				Help: "Input messages decoded into events." + sensitiveHelp}),
			skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_skipped_total",
				Help: "Input messages skipped, per reason (schema reasons, not_public_group, windows statuses such as too_many_windows, and unit_cap / group_cap counted when a window closes)." + sensitiveHelp}, []string{"reason"}),
			late: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "events_late_total",
				Help: "Events for windows that were already closed, dropped." + sensitiveHelp}),
			deadLettered: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "events_dead_lettered_total",
				Help: "Bad input messages written to the dead-letter topic." + sensitiveHelp}),
			windowsOpen: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "windows_open",
				Help: "Windows currently holding events." + sensitiveHelp}),
			groupsWithheld: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "groups_not_selected_total",
				Help: "Groups withheld by differentially private group selection (one unit alone in a group changes it by one)." + sensitiveHelp}),
			lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "consumer_lag",
				Help: "Messages between the last one processed and the partition's high watermark." + sensitiveHelp}, []string{"topic", "partition"}),
			commits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "offset_commits_total",
				Help: "Successful input offset commits (one is made only when the committable offset moved)." + sensitiveHelp}),
			partialsOut: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "partials_written_total",
				Help: "Scale-out: partial states (one per window and input partition, empty ones included) written to the partials topic and acknowledged. Stage 1 writes a window's partial when the partition's data closes it, so when it moves follows the data." + sensitiveHelp}),
			mergeWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "merge_windows_waiting",
				Help: "Scale-out, on the merging instance: windows with partials received that are not published yet (a partial of an earlier window or of another partition is missing, or the window's scheduled publication time has not come). When it moves follows the data." + sensitiveHelp}),
			mergeMissing: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "merge_partitions_missing",
				Help: "Scale-out, on the merging instance: input partitions whose partial of the next window to publish has not arrived (publication waits for them). When it moves follows the data." + sensitiveHelp}),
			inByTopic: map[string]prometheus.Counter{},
		}
		cs = append(cs, s.eventsIn, s.decoded, s.skipped, s.late, s.deadLettered, s.windowsOpen, s.groupsWithheld, s.lag, s.commits,
			s.partialsOut, s.mergeWaiting, s.mergeMissing)
		for r := range schema.NumReasons {
			if schema.Reason(r) == schema.ReasonNone {
				continue // not a skip: no reason="none" series
			}
			s.skipByReason[r] = s.skipped.WithLabelValues(schema.Reason(r).String())
		}
		m.s = s
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// sensitive reports whether the sensitive metrics (and the exact counts in
// logs) are on.
func (m *metrics) sensitive() bool { return m.s != nil }

// eventIn counts one input message of topic (sensitive). It is called for
// every message: small enough to inline, so that with sensitive metrics
// off it costs one nil check.
func (m *metrics) eventIn(topic string) {
	if m.s != nil {
		m.s.eventIn(topic)
	}
}

func (s *sensitiveMetrics) eventIn(topic string) {
	s.n++
	c, ok := s.inByTopic[topic]
	if !ok {
		c = s.eventsIn.WithLabelValues(topic)
		s.inByTopic[topic] = c
	}
	c.Inc()
}

// decodedEvent counts one message decoded into an event (sensitive).
func (m *metrics) decodedEvent() {
	if m.s != nil {
		m.s.decoded.Inc()
	}
}

// skip counts one message skipped as bad input for reason r (sensitive).
func (m *metrics) skip(r schema.Reason) {
	if m.s != nil {
		m.s.skip(r)
	}
}

func (s *sensitiveMetrics) skip(r schema.Reason) {
	if int(r) < len(s.skipByReason) && s.skipByReason[r] != nil {
		s.skipByReason[r].Inc()
		return
	}
	s.skipped.WithLabelValues(r.String()).Inc()
}

// skipNamed counts one decoded event skipped for a reason outside the
// schema's (not_public_group, a windows status) (sensitive).
func (m *metrics) skipNamed(reason string) {
	if m.s != nil {
		m.s.skipped.WithLabelValues(reason).Inc()
	}
}

// lateEvent counts one event of an already closed window (sensitive).
func (m *metrics) lateEvent() {
	if m.s != nil {
		m.s.late.Inc()
	}
}

// deadLetter counts n messages written to the dead-letter topic
// (sensitive).
func (m *metrics) deadLetter(n int) {
	if m.s != nil {
		m.s.deadLettered.Add(float64(n))
	}
}

// committed counts one successful offset commit (sensitive).
func (m *metrics) committed() {
	if m.s != nil {
		m.s.commits.Inc()
	}
}

// partialsWritten counts n partial states written by stage 1 (sensitive).
func (m *metrics) partialsWritten(n int) {
	if m.s != nil {
		m.s.partialsOut.Add(float64(n))
	}
}

// mergeGauges sets what stage 2 waits for: windows with partials not yet
// published and input partitions missing from the next window (sensitive).
func (m *metrics) mergeGauges(waiting, missing int) {
	if m.s != nil {
		m.s.mergeWaiting.Set(float64(waiting))
		m.s.mergeMissing.Set(float64(missing))
	}
}

// tick updates the gauges read from the core on every tick: windows
// holding events and the consumer lag (sensitive; the core is not asked
// when they are off).
func (m *metrics) tick(c *core) {
	s := m.s
	if s == nil {
		return
	}
	s.windowsOpen.Set(float64(c.openWindows()))
	c.lags(func(t tp, lag int64) { s.lag.WithLabelValues(t.topic, strconv.Itoa(t.partition)).Set(float64(lag)) })
}

// Skip reasons of events dropped by the windows package's memory caps,
// counted when their window closes (windows.Drops).
const (
	reasonUnitCap  = "unit_cap"
	reasonGroupCap = "group_cap"
)

// windowsClosedBatch counts the windows one poll closed and the events the
// memory caps dropped from them: bounds.max_units (unit_cap) and
// windows.max_open_groups (group_cap), the latter two sensitive. It returns
// the number of windows in which the group cap was reached (for the
// warning; never exported unless sensitive).
func (m *metrics) windowsClosedBatch(ws []windows.Window) (groupCapped int) {
	m.windowsClosed.Add(float64(len(ws)))
	for i := range ws {
		d := ws[i].Drops
		if d.GroupCap > 0 {
			groupCapped++
		}
		if m.s == nil {
			continue
		}
		if d.UnitCap > 0 {
			m.s.skipped.WithLabelValues(reasonUnitCap).Add(float64(d.UnitCap))
		}
		if d.GroupCap > 0 {
			m.s.skipped.WithLabelValues(reasonGroupCap).Add(float64(d.GroupCap))
		}
	}
	return groupCapped
}

// windowPublished counts one published window: its releases written and
// already published, its publication latency, and (sensitive) the groups
// private selection withheld.
func (m *metrics) windowPublished(releases, dup, withheld int, lat time.Duration) {
	m.windowsPub.Inc()
	m.pubWindows.Add(1)
	m.pubReleases.Add(int64(releases))
	m.totWindows.Add(1)
	m.totReleases.Add(int64(releases))
	m.releasesPub.Add(float64(releases))
	m.releasesDup.Add(float64(dup))
	m.publishLatency.Observe(lat.Seconds())
	if m.s != nil {
		m.s.groupsWithheld.Add(float64(withheld))
	}
}

// logArgs returns the key-value pairs of a log line: args, followed by
// counts only when the sensitive metrics are on. counts are exact
// functions of the input data (groups withheld, windows holding events …),
// which logs must not carry by default.
func (m *metrics) logArgs(args []any, counts ...any) []any {
	if m.s == nil {
		return args
	}
	return append(args, counts...)
}

// observeClosed counts the windows one poll closed and warns when the
// group cap was reached in any of them (the number of such windows only
// with sensitive metrics on).
func (o *Operator) observeClosed(ws []windows.Window) {
	if n := o.m.windowsClosedBatch(ws); n > 0 {
		o.log.Warn("windows.max_open_groups was reached: these windows' releases are not covered by the privacy guarantee; raise the cap",
			o.m.logArgs([]any{"max_open_groups", o.cfg.Windows.MaxOpenGroups}, "windows", n)...)
	}
}

// observePublished counts and logs one published window w: releases
// written (out), releases already published, groups withheld by private
// group selection (counted and logged only with sensitive metrics on), the
// latency from its release to the publisher (at or after its scheduled
// publication time), and the budget spent in the horizon through w
// (spent, from the ledger: every published window counts, whether its
// groups were released or withheld, as in the releases' spent_epsilon).
// It then logs the run-time warnings (warnReleases).
func (o *Operator) observePublished(w *windows.Window, out []outMsg, dup, withheld int, lat time.Duration, spent schema.Budget) {
	o.m.windowPublished(len(out), dup, withheld, lat)
	o.m.spentEps.Set(spent.Epsilon)
	o.m.spentDelta.Set(spent.Delta)
	o.m.lastEnd.Store(w.End)
	o.log.Info("window published", o.m.logArgs([]any{"start", tsString(w.Start), "releases", len(out),
		"already_published", dup, "latency_ms", lat.Milliseconds()}, "groups_withheld", withheld)...)
	o.warnReleases(w, out, dup)
}

// Run-time warnings. Each is a function of what the window published —
// how many releases it wrote and the intervals they carry — which the
// output topic shows anyway: never of withheld groups or input counts
// (whether a window had a group that selection withheld is not public: a
// lone unit's group is exactly what selection hides).
const (
	// emptyWindowsWarn is how many consecutive published windows without
	// a release (under private group selection) trigger a warning: a few,
	// so that one quiet window does not.
	emptyWindowsWarn = 3
	// warnEvery is how often a warning whose cause persists is repeated.
	warnEvery = time.Hour
)

// runWarnings is the state of the run-time warnings.
type runWarnings struct {
	empty int                  // consecutive published windows that released nothing
	last  map[string]time.Time // when each cause was last logged
}

// warnOnce logs a warning for cause the first time, then at most once per
// warnEvery (by the operator's clock).
func (o *Operator) warnOnce(cause, msg string, args ...any) {
	rw := &o.m.warn
	if rw.last == nil {
		rw.last = map[string]time.Time{}
	}
	now := o.now()
	if t, ok := rw.last[cause]; ok && now.Sub(t) < warnEvery {
		return
	}
	rw.last[cause] = now
	o.log.Warn(msg, args...)
}

// seriesRanges gives, per "aggregate.series" (the aggregate's type: an
// extra measure's mean:voltage is a mean), the range every value of the
// series lies in whatever the data (an interval covering it says nothing).
// An aggregate with a bounded released value adds its entry here.
var seriesRanges = map[string]func(r *schema.Release) (lo, hi float64){
	AggMean + "." + schema.SeriesMean: func(r *schema.Release) (float64, float64) { return r.Bounds.Lower, r.Bounds.Upper },
}

// warnReleases warns when windows keep releasing nothing under private
// group selection, and when a released value's interval covers its whole
// possible range, each naming the settings to change.
func (o *Operator) warnReleases(w *windows.Window, out []outMsg, dup int) {
	p := o.plan
	if p.sel != nil {
		if len(out)+dup == 0 {
			o.m.warn.empty++
		} else {
			o.m.warn.empty = 0
		}
		if o.m.warn.empty >= emptyWindowsWarn {
			units95 := p.unitsForRelease(0.95)
			o.warnOnce("no_releases", "windows keep releasing no group: private group selection releases a group only if its units + noise reach the threshold, "+
				"or no events arrived; list the groups in privacy.public_groups, or raise the units per group and window (a longer windows.size, a larger privacy.epsilon); see `dpstream plan --units-per-group N`; "+
				"if an input-shape ERROR names a field (and /readyz), the events are skipped: fix the schema first",
				"windows_without_release", o.m.warn.empty, "threshold", p.sel.threshold, "units_for_95pct", units95,
				"setting", "privacy.public_groups")
		}
	}
	for i := range out {
		r := &out[i].rel
		for _, sr := range r.Series {
			rng, ok := seriesRanges[baseAggregate(r.Aggregate)+"."+sr.Name]
			if !ok {
				continue
			}
			lo, hi := rng(r)
			for j := range sr.Lo {
				if sr.Lo[j] <= lo && sr.Hi[j] >= hi {
					o.warnOnce("whole_range:"+r.Aggregate+"."+sr.Name,
						"a released confidence interval covers the whole possible range: the value says nothing; "+
							"more values per group and window (a longer windows.size), a larger privacy.epsilon, fewer windows.aggregates or a smaller bounds.max_values narrow it; see `dpstream plan`; "+
							"if an input-shape ERROR names a field (and /readyz), the events are skipped: fix the schema first",
						"aggregate", r.Aggregate, "series", sr.Name, "range", fmt.Sprintf("[%g, %g]", lo, hi),
						"setting", "windows.size")
					break
				}
			}
		}
	}
}

// readableDurations is the loggers' ReplaceAttr: a time.Duration is logged
// as a string such as "250ms" or "1m0s", not as raw nanoseconds, and a
// list of strings as "a,b" (the text format would print Go syntax).
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		a.Value = slog.StringValue(a.Value.Duration().String())
	case slog.KindAny:
		if l, ok := a.Value.Any().([]string); ok {
			a.Value = slog.StringValue(strings.Join(l, ","))
		}
	}
	return a
}
