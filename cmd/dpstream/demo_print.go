package main

// demo_print.go renders a demo run: the header, one table per window, the
// summary, and the --json lines.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/schema"
)

// demoTruthNotice is printed with every demo output.
const demoTruthNotice = "TRUE values are shown only because this is a demo on synthetic data; dpstream never publishes them."

func utc(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func printDemoHeader(w io.Writer, o demoOptions, res *demoResult, note, keyNote string) {
	c := res.Stream
	broker := strings.Join(res.Brokers, ",")
	if res.Embedded {
		broker = "embedded in-process Kafka-protocol broker (kfake) at " + broker
	}
	bad := 0
	for _, n := range c.Bad {
		bad += n
	}
	fmt.Fprintf(w, "dpstream demo: synthetic smart-meter readings through the real operator\n\n")
	fmt.Fprintf(w, "  broker      %s\n", broker)
	fmt.Fprintf(w, "  topics      %s (%d partitions) -> %s\n", res.InputTopic, demoPartitions, res.OutputTopic)
	fmt.Fprintf(w, "  stream      seed %d: %s of %v from %s; %d readings, %d of them delayed within the lateness;\n",
		o.seed, plural(o.windows, "window"), synthWindowDuration, utc(synthBase).Format(time.RFC3339), c.Readings, c.Delayed)
	fmt.Fprintf(w, "              mixed in: %d bad messages, %d late readings, %d readings of a region outside the public list\n",
		bad, c.Late, c.NotPublic)
	fmt.Fprintf(w, "  schema      unit %q; group by %q (public: %s); histogram of %q (%s); value %q in [%g, %g] Wh\n",
		synthUnitField, synthRegionField, strings.Join(synthRegions, ", "), synthStatusField, strings.Join(synthStatuses, ", "),
		synthValueField, synthLower, synthUpper)
	b := synthBounds
	fmt.Fprintf(w, "  bounds      per meter and window: %d region, %d statuses x %d readings, %d readings counted and summed\n",
		b.MaxGroups, b.MaxBuckets, b.MaxPerBucket, b.MaxValues)
	fmt.Fprintf(w, "  privacy     per window ε=%g, δ=%g, mechanism %s, %g%% intervals; noise key %s\n",
		o.epsilon, o.delta, o.mechanism, 100*operator.Default().Privacy.Confidence, keyNote)
	for i, part := range strings.Split(note, "; ") {
		label := ""
		if i == 0 {
			label = "accounting"
		}
		fmt.Fprintf(w, "  %-11s %s\n", label, part)
	}
	fmt.Fprintf(w, "\n  %s\n  The mean is derived from the noised sum and count (no noise of its own).\n\n", demoTruthNotice)
}

// noteAccounting returns the accountant a release's note names ("pld",
// "tightest (certified by pld)", ...), or "as recorded in the release" when
// the note names none. The operator writes ", accounting NAME" and, when
// another accountant certified the calibration, " (certified by NAME)".
func noteAccounting(note string) string {
	const key = "accounting "
	i := strings.Index(note, key)
	if i < 0 {
		return "as recorded in the release"
	}
	rest := note[i+len(key):]
	if j := strings.IndexAny(rest, ";,"); j >= 0 {
		rest = rest[:j]
	}
	if rest = strings.TrimSpace(rest); rest == "" {
		return "as recorded in the release"
	}
	return "accounting " + rest
}

// releaseLedger describes the budget of one window as its release records
// it: the window's budget and, with a horizon, the budget spent in the
// horizon so far (this window included) out of the horizon's total.
func releaseLedger(r *schema.Release) string {
	b, s, h := r.Budget, r.Spent, r.Horizon
	if h == (schema.Horizon{}) {
		return fmt.Sprintf("budget ε=%g, δ=%g per window (no horizon; the release records spent ε=%g, δ=%g; %s)",
			b.Epsilon, b.Delta, s.Epsilon, s.Delta, noteAccounting(r.Note))
	}
	return fmt.Sprintf("budget ε=%g, δ=%g per window; spent so far in the horizon %s to %s UTC: ε=%g, δ=%g of ε=%g, δ=%g (%s)",
		b.Epsilon, b.Delta, utc(h.Start).Format("2006-01-02 15:04"), utc(h.End).Format("2006-01-02 15:04"),
		s.Epsilon, s.Delta, h.Budget.Epsilon, h.Budget.Delta, noteAccounting(r.Note))
}

// summaryLedger is the budget line of the summary, from the last release
// read back. With a horizon it prints that release's ledger. Without one
// each release records only its own window's spend, and the demo adds the
// windows up by basic composition (an upper bound; it says so).
func summaryLedger(r *schema.Release, windows int) string {
	if r == nil {
		return "no releases read back"
	}
	if r.Horizon != (schema.Horizon{}) {
		h := r.Horizon
		return fmt.Sprintf("spent ε=%g, δ=%g of ε=%g, δ=%g in the horizon %s to %s UTC, as recorded in the last release (%s)",
			r.Spent.Epsilon, r.Spent.Delta, h.Budget.Epsilon, h.Budget.Delta,
			utc(h.Start).Format("2006-01-02 15:04"), utc(h.End).Format("2006-01-02 15:04"), noteAccounting(r.Note))
	}
	n := float64(windows)
	return fmt.Sprintf("spent ε=%.6g, δ=%.6g over %s (each release records ε=%g, δ=%g for its window, %s, no horizon; summed across windows by basic composition)",
		n*r.Spent.Epsilon, n*r.Spent.Delta, plural(windows, "window"), r.Spent.Epsilon, r.Spent.Delta, noteAccounting(r.Note))
}

// plural returns "1 window", "2 windows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// fmtNum formats x with d decimals, "-" for NaN.
func fmtNum(x float64, d int) string {
	if math.IsNaN(x) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', d, 64)
}

// fmtTrue formats a true value: integers without decimals.
func fmtTrue(x float64) string {
	if x == math.Trunc(x) {
		return fmtNum(x, 0)
	}
	return fmtNum(x, 1)
}

func printDemoWindow(w io.Writer, win *demoWindow, n, total int, cfg operator.Config) {
	id, ledger := "", "no releases"
	if len(win.Releases) > 0 {
		r := &win.Releases[0]
		id, ledger = r.ReleaseID, releaseLedger(r)
	}
	fmt.Fprintf(w, "window %d of %d: %s to %s UTC, release %s\n", n, total,
		utc(win.Start).Format("2006-01-02 15:04"), utc(win.End).Format("15:04"), id)
	fmt.Fprintf(w, "  %d releases, published %v after the window closed; %s\n\n",
		len(win.Releases), win.Latency.Round(10*time.Microsecond), ledger)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	level := 0.0
	if len(win.Releases) > 0 {
		level = win.Releases[0].Series[0].Level
	}
	fmt.Fprintf(tw, "  REGION\tAGGREGATE\tBUCKET\tTRUE\tPRIVATE\t%g%% CI\tIN CI\tMECHANISM\tSCALE\n", 100*level)
	for i := range win.Releases {
		r := &win.Releases[i]
		si := displayed(r)
		s := &r.Series[si]
		tv := trueValues(r, si, win.Truth[groupValue(r)])
		for j := range s.Len() {
			bucket := ""
			if j < len(s.Labels) {
				bucket = s.Labels[j]
			} else if r.Kind == schema.KindSum || r.Kind == schema.KindMean || r.Kind == schema.KindVariance {
				bucket = synthValueField
			}
			t, in := math.NaN(), "-"
			if j < len(tv) {
				t = tv[j]
				if !math.IsNaN(t) {
					in = "no"
					if s.Lo[j] <= t && t <= s.Hi[j] {
						in = "yes"
					}
				}
			}
			scale := strconv.FormatFloat(s.Scale, 'g', 5, 64)
			if s.Mechanism == schema.DerivedMechanism {
				scale = "-"
			}
			d := 1
			if s.Ints != nil {
				d = 0 // integer noise: integer values and intervals
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t[%s, %s]\t%s\t%s\t%s\n", groupValue(r), r.Aggregate, bucket,
				fmtTrue(t), fmtNum(s.Value(j), d), fmtNum(s.Lo[j], d), fmtNum(s.Hi[j], d), in, s.Mechanism, scale)
		}
		printRunningRow(tw, win, r)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func printDemoSummary(w io.Writer, o demoOptions, res *demoResult) {
	releases := 0
	var last *schema.Release // the last release read back: its ledger is the newest
	var maxLat time.Duration
	for _, win := range res.Windows {
		releases += len(win.Releases)
		if len(win.Releases) > 0 {
			last = &win.Releases[len(win.Releases)-1]
		}
		maxLat = max(maxLat, win.Latency)
	}
	fmt.Fprintf(w, "summary\n")
	fmt.Fprintf(w, "  output      %s, %d releases read back from %s and decoded with schema.DecodeRelease\n",
		plural(len(res.Windows), "window"), releases, res.OutputTopic)
	pct := 0.0
	if res.Checked > 0 {
		pct = 100 * float64(res.Covered) / float64(res.Checked)
	}
	fmt.Fprintf(w, "  coverage    the true value lies in its interval for %d of %d values (%.1f%%; each interval is at least %g%%)\n",
		res.Covered, res.Checked, pct, 100*operator.Default().Privacy.Confidence)
	fmt.Fprintf(w, "  budget      %s\n", summaryLedger(last, len(res.Windows)))
	var reasons []string
	for _, k := range slices.Sorted(maps.Keys(res.Skipped)) {
		reasons = append(reasons, fmt.Sprintf("%s=%g", k, res.Skipped[k]))
	}
	fmt.Fprintf(w, "  input       the operator read %g messages; skipped: %s; late: %g\n", res.EventsIn, strings.Join(reasons, " "), res.Late)
	fmt.Fprintf(w, "  latency     publish after window close: at most %v\n", maxLat.Round(10*time.Microsecond))
	if !res.Embedded {
		fmt.Fprintf(w, "  topics      left on the cluster: %s, %s, %s.state\n", res.InputTopic, res.OutputTopic, res.OutputTopic)
	}
}

// demoJSONSeries is one series of a --json line.
type demoJSONSeries struct {
	Name      string     `json:"name"`
	Mechanism string     `json:"mechanism"`
	Scale     float64    `json:"scale"`
	Level     float64    `json:"ci_level"`
	Labels    []string   `json:"labels,omitempty"`
	Private   []float64  `json:"private"`
	Lo        []float64  `json:"ci_lo"`
	Hi        []float64  `json:"ci_hi"`
	True      []*float64 `json:"true"` // null where there is none (the mean of no values)
}

// demoJSONRelease is one --json line: the decoded release with the demo's
// true values beside the private ones.
type demoJSONRelease struct {
	Key          string            `json:"key"`
	ReleaseID    string            `json:"release_id"`
	WindowStart  string            `json:"window_start"`
	WindowEnd    string            `json:"window_end"`
	Aggregate    string            `json:"aggregate"`
	Kind         string            `json:"kind"`
	Group        map[string]string `json:"group"`
	Epsilon      float64           `json:"epsilon"`
	Delta        float64           `json:"delta"`
	PrivacyUnit  string            `json:"privacy_unit"`
	Series       []demoJSONSeries  `json:"series"`
	TrueIsExact  bool              `json:"true_is_exact"`
	PublishDelay float64           `json:"publish_latency_ms"`
	Notice       string            `json:"notice"`
}

func writeDemoJSON(w io.Writer, win *demoWindow) error {
	enc := json.NewEncoder(w)
	for i := range win.Releases {
		r := &win.Releases[i]
		g := win.Truth[groupValue(r)]
		out := demoJSONRelease{
			Key: r.Key(), ReleaseID: r.ReleaseID,
			WindowStart: utc(r.WindowStart).Format(time.RFC3339), WindowEnd: utc(r.WindowEnd).Format(time.RFC3339),
			Aggregate: r.Aggregate, Kind: string(r.Kind), Group: map[string]string{},
			Epsilon: r.Budget.Epsilon, Delta: r.Budget.Delta, PrivacyUnit: r.Unit,
			TrueIsExact:  g != nil && g.Exact,
			PublishDelay: float64(win.Latency.Microseconds()) / 1000,
			Notice:       demoTruthNotice,
		}
		for _, gv := range r.Group {
			out.Group[gv.Name] = gv.Value
		}
		for si := range r.Series {
			s := &r.Series[si]
			js := demoJSONSeries{Name: s.Name, Mechanism: s.Mechanism, Scale: s.Scale, Level: s.Level, Labels: s.Labels,
				Lo: s.Lo, Hi: s.Hi, Private: make([]float64, s.Len()), True: []*float64{}}
			for j := range s.Len() {
				js.Private[j] = s.Value(j)
			}
			if rs, t := runningSeries(win, r); rs == s && !math.IsNaN(t) {
				js.True = append(js.True, &t)
			}
			for _, t := range trueValues(r, si, g) {
				if math.IsNaN(t) {
					js.True = append(js.True, nil)
				} else {
					js.True = append(js.True, &t)
				}
			}
			out.Series = append(out.Series, js)
		}
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("%w: writing JSON: %v", ErrDemo, err)
		}
	}
	return nil
}
