package operator

// Tests that exact counts of input data do not leak through the metrics and
// logs by default (observability.sensitive_metrics off), without a broker:
// an in-process harness drives the operator's own consume, close and
// publish bookkeeping (consume, observeClosed, releaseWindow,
// observePublished, the tick's gauges) on neighbouring inputs — streams
// that differ by all the messages of one unit — and compares what /metrics
// serves and what the log says. All deterministic (fixed streams, fixed
// key, fixed clock): no statistical false-failure rate.

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/spf13/pflag"
)

// operationalMetrics are the metric families that do not depend on the
// units' data: the only ones registered by default. A new metric must be
// classified here (operational) or in sensitiveMetricNames.
var operationalMetrics = []string{
	"dpstream_windows_closed_total", "dpstream_windows_published_total",
	"dpstream_releases_published_total", "dpstream_releases_already_published_total",
	"dpstream_publish_latency_seconds", "dpstream_noise_scale",
	"dpstream_budget_spent_epsilon", "dpstream_budget_spent_delta",
	"dpstream_budget_window_epsilon", "dpstream_budget_window_delta",
	"dpstream_budget_total_epsilon", "dpstream_budget_total_delta",
	"dpstream_broker_errors_total", "dpstream_rebalances_total", "dpstream_ready",
	"dpstream_registry_errors_total", "dpstream_registry_blocked_partitions",
	"dpstream_input_partitions_assigned", "dpstream_merging",
}

// sensitiveMetricNames are the metric families that count input data
// exactly: registered only with observability.sensitive_metrics.
var sensitiveMetricNames = []string{
	"dpstream_events_in_total", "dpstream_events_decoded_total", "dpstream_events_skipped_total",
	"dpstream_events_late_total", "dpstream_events_dead_lettered_total", "dpstream_windows_open",
	"dpstream_groups_not_selected_total", "dpstream_consumer_lag", "dpstream_offset_commits_total",
	"dpstream_partials_written_total", "dpstream_merge_windows_waiting", "dpstream_merge_partitions_missing",
}

// observed is what an in-process run exposed.
type observed struct {
	metrics  string // the /metrics body
	logs     string // the JSON log, info and above
	families []string
	help     map[string]string // help text per family
	withheld int               // groups withheld by selection (the truth)
	releases int
}

// runObserved feeds msgs (partition 0 of topic "in", high watermark at the
// end of msgs, arrival times from their Time) through an operator as its
// Kafka loop does: consume each message, then a tick (close and publish
// what the watermark allows, the tick's gauges); the stream's closing
// sentinel closes the last window, and a few more ticks follow. Releases
// are built and counted as publish does, without writing them. The
// operator's clock does not move while a window is published, so
// latencies are 0.
func runObserved(t *testing.T, c Config, msgs []kafka.Message) observed {
	t.Helper()
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	now := time.UnixMilli(testBase)
	op, err := New(c, WithKey(testKey()), WithRegistry(reg), WithClock(func() time.Time { return now }),
		WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	co, err := newCore(c, op.plan, op.key, testBase)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.assign([]tp{{"in", 0}}); err != nil {
		t.Fatal(err)
	}
	var res observed
	published := map[string]int64{}
	tick := func() {
		if ws := co.poll(); len(ws) > 0 {
			op.observeClosed(ws)
			for i := range ws {
				w := &ws[i]
				out, dup, wh, err := op.plan.releaseWindow(w, op.key, c.Kafka.namespace(), op.instance, published)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range out {
					published[m.key] = w.End
				}
				spent, _ := op.plan.spent(w.Start)
				op.observePublished(w, out, dup, wh, now.Sub(now), spent)
				co.final(w.Start)
				res.withheld += wh
				res.releases += len(out)
			}
		}
		op.m.tick(co)
	}
	var dlq []kafka.Message
	for i, m := range msgs {
		it := item{m: kafka.Message{Topic: "in", Partition: 0, Offset: int64(i), HighWaterMark: int64(len(msgs)),
			Key: m.Key, Value: m.Value, Time: m.Time}}
		decode(co.dec, &it)
		op.consume(co, &it, &dlq, nil)
		tick()
	}
	op.m.deadLetter(len(dlq))
	for range 3 {
		now = now.Add(c.Windows.IdleTimeout)
		tick()
	}

	var h health
	rec := httptest.NewRecorder()
	h.handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	res.metrics, res.logs = rec.Body.String(), logs.String()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	res.help = map[string]string{}
	for _, mf := range mfs {
		res.families = append(res.families, mf.GetName())
		res.help[mf.GetName()] = mf.GetHelp()
	}
	return res
}

// neighbourMessages returns a known stream — 3 windows of 90 units in the
// regions east, north and south, then a sentinel that closes the last
// window — and, with lone, the same stream plus every message of one more
// unit "lone": two events in window 1 in region, one malformed message,
// and, once window 0 has closed, one event for window 0 in north (late).
// The lone unit's messages carry the event and arrival times of a message
// of the stream, so they move no watermark.
func neighbourMessages(lone bool, region string) []kafka.Message {
	s := genStream(21, 3, 90)
	msgs := s.messages(0, time.Second) // testConfig's allowed lateness; msgs[i] is s.events[i]
	if !lone {
		return msgs
	}
	size := testSize.Milliseconds()
	first := func(from int64) int {
		return slices.IndexFunc(s.events, func(e testEvent) bool { return e.time >= from })
	}
	i1, i2 := first(testBase+size), first(testBase+2*size)
	ev := func(region string, ts int64) kafka.Message {
		return kafka.Message{Key: []byte("lone"), Value: testEvent{"lone", region, "b", 7, ts}.encode(1)}
	}
	var out []kafka.Message
	for i, m := range msgs {
		out = append(out, m)
		lone := len(out)
		switch i {
		case i1:
			t := s.events[i].time
			out = append(out, ev(region, t), ev(region, t), kafka.Message{Key: []byte("lone"), Value: []byte("{not json")})
		case i2:
			// Window 0 closed at watermark ≥ its end + 1 s. In a public
			// group, so that the event reaches the windows.
			out = append(out, ev("north", testBase+size/2))
		}
		for j := lone; j < len(out); j++ {
			out[j].Time = m.Time // the lone unit's messages arrive with the message before them
		}
	}
	return out
}

// neighbourScenarios are configurations with the region of the lone unit
// that makes one sensitive count differ.
var neighbourScenarios = []struct {
	name   string
	region string
	set    func(*Config)
	differ string // a sensitive series that must differ, as in /metrics
}{
	{"private group selection, lone unit's own group", "west",
		func(c *Config) { c.Privacy.PublicGroups = nil }, "dpstream_groups_not_selected_total "},
	{"public groups, lone unit outside them", "west",
		func(*Config) {}, `dpstream_events_skipped_total{reason="not_public_group"} `},
	{"unit cap reached by the lone unit", "north",
		func(c *Config) { c.Bounds.MaxUnits = 90 }, `dpstream_events_skipped_total{reason="unit_cap"} `},
	{"event level, group cap reached by the lone event", "west",
		func(c *Config) {
			c.Schema.UnitField = ""
			c.Windows.MaxOpenGroups = 3
			c.Privacy.PublicGroups = nil
		}, `dpstream_events_skipped_total{reason="group_cap"} `},
}

// TestDefaultMetricsIndependentOfData: for neighbouring inputs (with and
// without one unit's messages: a lone unit in its own group under private
// group selection, in a non-public group, over bounds.max_units, over
// windows.max_open_groups; each with a malformed and a late message) the
// default /metrics output is byte-identical, while with
// observability.sensitive_metrics on it differs in the series that count
// the unit. Old code: events_in_total, groups_not_selected_total etc. were
// always served, so the default outputs differed.
func TestDefaultMetricsIndependentOfData(t *testing.T) {
	for _, sc := range neighbourScenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, sensitive := range []bool{false, true} {
				c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
				c.Kafka.DeadLetterTopic = "dead" // the dead-letter counter too
				sc.set(&c)
				c.Observability.SensitiveMetrics = sensitive
				a := runObserved(t, c, neighbourMessages(false, sc.region))
				b := runObserved(t, c, neighbourMessages(true, sc.region))
				if a.releases == 0 || a.releases != b.releases {
					t.Fatalf("sensitive=%v: %d and %d releases: the scenario must release the same groups", sensitive, a.releases, b.releases)
				}
				if strings.Contains(sc.name, "selection") && b.withheld != a.withheld+1 {
					t.Fatalf("sensitive=%v: withheld %d and %d: the lone unit's group should be withheld", sensitive, a.withheld, b.withheld)
				}
				if !sensitive {
					if a.metrics != b.metrics {
						t.Errorf("default /metrics differs between neighbouring inputs:\n%s", lineDiff(a.metrics, b.metrics))
					}
					continue
				}
				if a.metrics == b.metrics {
					t.Error("with sensitive_metrics, /metrics does not differ between neighbouring inputs")
				}
				for _, s := range []string{sc.differ, `dpstream_events_in_total{topic="in"} `,
					`dpstream_events_skipped_total{reason="malformed"} `, "dpstream_events_late_total ",
					"dpstream_events_dead_lettered_total "} {
					if seriesLine(a.metrics, s) == seriesLine(b.metrics, s) {
						t.Errorf("with sensitive_metrics, %q is the same for both inputs (%q)", s, seriesLine(a.metrics, s))
					}
				}
			}
		})
	}
}

// TestMetricsClassified: by default only the operational families are
// registered; with sensitive_metrics every sensitive family is registered
// too, and each says in its help text that it is an exact count of input
// data. Guards against a new metric that nobody classified.
func TestMetricsClassified(t *testing.T) {
	for _, sensitive := range []bool{false, true} {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Kafka.DeadLetterTopic = "dead"
		c.Observability.SensitiveMetrics = sensitive
		r := runObserved(t, c, neighbourMessages(true, "north"))
		for _, f := range r.families {
			switch {
			case slices.Contains(operationalMetrics, f):
				if strings.Contains(r.help[f], "sensitive") {
					t.Errorf("operational metric %s: help %q says sensitive", f, r.help[f])
				}
			case !sensitive:
				t.Errorf("default registry serves %s, which is not an operational metric", f)
			case !slices.Contains(sensitiveMetricNames, f):
				t.Errorf("metric %s is classified neither operational nor sensitive", f)
			case !strings.Contains(r.help[f], "Exact count of input data: sensitive"):
				t.Errorf("sensitive metric %s: help %q does not say so", f, r.help[f])
			}
		}
		if sensitive {
			for _, f := range sensitiveMetricNames {
				if !slices.Contains(r.families, f) {
					t.Errorf("sensitive_metrics on: %s not served", f)
				}
			}
		}
	}
}

// TestLogsOmitExactCounts: the default log of a window with a withheld
// group does not carry the number withheld (old code logged
// groups_withheld on every "window published" line); with
// sensitive_metrics on it does. The windows.max_open_groups warning still
// fires by default (the guarantee does not hold for that window) but
// without counting windows.
func TestLogsOmitExactCounts(t *testing.T) {
	sel := neighbourScenarios[0]
	capped := neighbourScenarios[3]
	for _, sensitive := range []bool{false, true} {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Observability.LogLevel = "info"
		sel.set(&c)
		c.Observability.SensitiveMetrics = sensitive
		r := runObserved(t, c, neighbourMessages(true, sel.region))
		if r.withheld == 0 {
			t.Fatal("no group withheld: the scenario does not test the log")
		}
		if n := strings.Count(r.logs, `"msg":"window published"`); n < 3 {
			t.Fatalf("sensitive=%v: %d \"window published\" lines, want ≥ 3:\n%s", sensitive, n, r.logs)
		}
		if got := strings.Contains(r.logs, `"groups_withheld"`); got != sensitive {
			t.Errorf("sensitive=%v: log has groups_withheld = %v:\n%s", sensitive, got, r.logs)
		}

		c = testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		capped.set(&c)
		c.Observability.SensitiveMetrics = sensitive
		r = runObserved(t, c, neighbourMessages(true, capped.region))
		warn := ""
		for _, l := range strings.Split(r.logs, "\n") {
			if strings.Contains(l, "windows.max_open_groups was reached") {
				warn = l
			}
		}
		if warn == "" {
			t.Fatalf("sensitive=%v: no max_open_groups warning:\n%s", sensitive, r.logs)
		}
		if got := strings.Contains(warn, `"windows":`); got != sensitive {
			t.Errorf("sensitive=%v: max_open_groups warning counts windows = %v: %s", sensitive, got, warn)
		}
	}
}

// TestSensitiveMetricsConfig: observability.sensitive_metrics is off by
// default and set by the YAML file, DPSTREAM_OBSERVABILITY_SENSITIVE_METRICS
// and --set.
func TestSensitiveMetricsConfig(t *testing.T) {
	if Default().Observability.SensitiveMetrics {
		t.Fatal("observability.sensitive_metrics is on by default")
	}
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Observability.SensitiveMetrics {
		t.Error("Load without settings: sensitive_metrics on")
	}
	path := t.TempDir() + "/c.yaml"
	if err := os.WriteFile(path, []byte("observability:\n  sensitive_metrics: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(path, nil); err != nil || !c.Observability.SensitiveMetrics {
		t.Errorf("YAML sensitive_metrics: true loaded as %v (%v)", c.Observability.SensitiveMetrics, err)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse([]string{"--set", "observability.sensitive_metrics=true"}); err != nil {
		t.Fatal(err)
	}
	if c, err := Load("", fs); err != nil || !c.Observability.SensitiveMetrics {
		t.Errorf("--set observability.sensitive_metrics=true loaded as %v (%v)", c.Observability.SensitiveMetrics, err)
	}
	t.Setenv("DPSTREAM_OBSERVABILITY_SENSITIVE_METRICS", "true")
	if c, err := Load("", nil); err != nil || !c.Observability.SensitiveMetrics {
		t.Errorf("DPSTREAM_OBSERVABILITY_SENSITIVE_METRICS=true loaded as %v (%v)", c.Observability.SensitiveMetrics, err)
	}
}

// BenchmarkMetricsHotPath measures the per-message metric calls of the
// core loop (eventIn, decodedEvent) with sensitive metrics off (nil-safe
// no-ops) and on.
func BenchmarkMetricsHotPath(b *testing.B) {
	for _, sensitive := range []bool{false, true} {
		name := "off"
		if sensitive {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			m, err := newMetrics(prometheus.NewRegistry(), sensitive)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				m.eventIn("in")
				m.decodedEvent()
			}
		})
	}
}

// seriesLine returns the line of the Prometheus text body that starts with
// prefix ("" if none).
func seriesLine(body, prefix string) string {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// lineDiff lists the lines of a and b that the other lacks.
func lineDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range la {
		if !slices.Contains(lb, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range lb {
		if !slices.Contains(la, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
