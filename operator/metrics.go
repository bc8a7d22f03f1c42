package operator

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// metrics are the operator's Prometheus metrics. The core loop calls small
// methods on it and never reads it back, so metrics stay out of the logic.
// Labels carry only configuration names (topics, aggregates, mechanisms,
// skip reasons) and partition numbers, never event content.
type metrics struct {
	eventsIn       *prometheus.CounterVec
	decoded        prometheus.Counter
	skipped        *prometheus.CounterVec
	late           prometheus.Counter
	deadLettered   prometheus.Counter
	windowsOpen    prometheus.Gauge
	windowsClosed  prometheus.Counter
	windowsPub     prometheus.Counter
	releasesPub    prometheus.Counter
	releasesDup    prometheus.Counter
	groupsDropped  prometheus.Counter
	publishLatency prometheus.Histogram
	lag            *prometheus.GaugeVec
	noiseScale     *prometheus.GaugeVec
	spentEps       prometheus.Gauge
	spentDelta     prometheus.Gauge
	windowEps      prometheus.Gauge
	windowDelta    prometheus.Gauge
	totalEps       prometheus.Gauge
	totalDelta     prometheus.Gauge
	commits        prometheus.Counter
	brokerErrors   *prometheus.CounterVec
	rebalances     prometheus.Counter
	ready          prometheus.Gauge
	// skip counters per schema.Reason and input counters per topic,
	// resolved once (hot path).
	skipByReason [schema.NumReasons]prometheus.Counter
	inByTopic    map[string]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns = "dpstream"
	m := &metrics{
		eventsIn: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_in_total",
			Help: "Input messages received, per topic."}, []string{"topic"}),
		decoded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "events_decoded_total",
			Help: "Input messages decoded into events."}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_skipped_total",
			Help: "Input messages skipped, per reason (schema reasons, not_public_group, windows statuses such as too_many_windows, and unit_cap / group_cap counted when a window closes)."}, []string{"reason"}),
		late: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "events_late_total",
			Help: "Events for windows that were already closed, dropped."}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "events_dead_lettered_total",
			Help: "Bad input messages written to the dead-letter topic."}),
		windowsOpen: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "windows_open",
			Help: "Windows currently open."}),
		windowsClosed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "windows_closed_total",
			Help: "Windows closed."}),
		windowsPub: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "windows_published_total",
			Help: "Windows whose releases were all acknowledged by the brokers."}),
		releasesPub: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "releases_published_total",
			Help: "Release messages written and acknowledged."}),
		releasesDup: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "releases_already_published_total",
			Help: "Release messages not written because their key was already published (replay after a restart)."}),
		groupsDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "groups_not_selected_total",
			Help: "Groups withheld by differentially private group selection."}),
		publishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "publish_latency_seconds",
			Help:    "From a window's close to the acknowledgement of all its releases.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "consumer_lag",
			Help: "Messages between the last one processed and the partition's high watermark."}, []string{"topic", "partition"}),
		noiseScale: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "noise_scale",
			Help: "Noise scale of the last window, per aggregate, series and mechanism."}, []string{"aggregate", "series", "mechanism"}),
		spentEps: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_spent_epsilon",
			Help: "ε spent in the current horizon through the last published window, from the tight accountant at budget_spent_delta (the per-window ε without a horizon)."}),
		spentDelta: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_spent_delta",
			Help: "δ spent in the current horizon through the last published window (the per-window δ without a horizon)."}),
		windowEps: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_window_epsilon",
			Help: "The ε of one window's release (at budget_window_delta)."}),
		windowDelta: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_window_delta",
			Help: "The δ of one window's release."}),
		totalEps: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_total_epsilon",
			Help: "The configured total ε: per horizon, or per window without a horizon."}),
		totalDelta: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "budget_total_delta",
			Help: "The configured total δ: per horizon, or per window without a horizon."}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "offset_commits_total",
			Help: "Successful input offset commits."}),
		brokerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "broker_errors_total",
			Help: "Errors talking to the brokers, per operation (retried)."}, []string{"op"}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "rebalances_total",
			Help: "Consumer group generations joined."}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "ready",
			Help: "1 when the operator consumes with a full assignment, else 0."}),
	}
	cs := []prometheus.Collector{m.eventsIn, m.decoded, m.skipped, m.late, m.deadLettered, m.windowsOpen,
		m.windowsClosed, m.windowsPub, m.releasesPub, m.releasesDup, m.groupsDropped, m.publishLatency, m.lag,
		m.noiseScale, m.spentEps, m.spentDelta, m.windowEps, m.windowDelta, m.totalEps, m.totalDelta, m.commits, m.brokerErrors,
		m.rebalances, m.ready}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.inByTopic = map[string]prometheus.Counter{}
	for r := range schema.NumReasons {
		m.skipByReason[r] = m.skipped.WithLabelValues(schema.Reason(r).String())
	}
	return m, nil
}

func (m *metrics) eventIn(topic string) {
	c, ok := m.inByTopic[topic]
	if !ok {
		c = m.eventsIn.WithLabelValues(topic)
		m.inByTopic[topic] = c
	}
	c.Inc()
}

func (m *metrics) skip(r schema.Reason) {
	if int(r) < len(m.skipByReason) {
		m.skipByReason[r].Inc()
		return
	}
	m.skipped.WithLabelValues(r.String()).Inc()
}

func (m *metrics) setLag(topic string, partition int, lag int64) {
	m.lag.WithLabelValues(topic, strconv.Itoa(partition)).Set(float64(lag))
}

// Skip reasons of events dropped by the windows package's memory caps,
// counted when their window closes (windows.Drops).
const (
	reasonUnitCap  = "unit_cap"
	reasonGroupCap = "group_cap"
)

// windowDrops counts the events the memory caps dropped from closed
// windows: bounds.max_units (unit_cap) and windows.max_open_groups
// (group_cap). It returns the number of windows in which the group cap was
// reached.
func (m *metrics) windowDrops(ws []windows.Window) (groupCapped int) {
	for i := range ws {
		d := ws[i].Drops
		if d.UnitCap > 0 {
			m.skipped.WithLabelValues(reasonUnitCap).Add(float64(d.UnitCap))
		}
		if d.GroupCap > 0 {
			m.skipped.WithLabelValues(reasonGroupCap).Add(float64(d.GroupCap))
			groupCapped++
		}
	}
	return groupCapped
}
