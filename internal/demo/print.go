package demo

// print.go renders a demo run as text: the header, one table per window
// and the summary (json.go: the --json lines).

import (
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

// truthNotice is printed with every demo output.
const truthNotice = "TRUE values are shown only because this is a demo on synthetic data; dpstream never publishes them."

// negativeNote says, with every demo output, why a published count can be
// negative.
const negativeNote = "A small count can come out negative: the noise is not clipped, which keeps every value unbiased and its interval valid " +
	"(clip at 0 downstream if you must; post-processing costs no privacy)."

// utc is the time of ms (unix ms) in UTC.
func utc(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// printHeader prints what the run does: broker, topics, stream, schema,
// bounds, budget and accounting, and the notice about true values.
func printHeader(w io.Writer, o Options, res *Result, note, keyNote string) {
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
	fmt.Fprintf(w, "  topics      %s (%d partitions) -> %s\n", res.InputTopic, Partitions, res.OutputTopic)
	fmt.Fprintf(w, "  stream      seed %d: %s of %v from %s; %d readings, %d of them delayed within the lateness;\n",
		o.Seed, plural(o.Windows, "window"), WindowSize, utc(streamBase).Format(time.RFC3339), c.Readings, c.Delayed)
	fmt.Fprintf(w, "              mixed in: %d bad messages, %d late readings, %d readings of a region outside the public list\n",
		bad, c.Late, c.NotPublic)
	fmt.Fprintf(w, "  schema      unit %q; group by %q (public: %s); histogram of %q (%s); value %q in [%g, %g] Wh\n",
		synthUnitField, synthRegionField, strings.Join(Regions, ", "), synthStatusField, strings.Join(synthStatuses, ", "),
		synthValueField, synthLower, synthUpper)
	b := synthBounds
	fmt.Fprintf(w, "  bounds      per meter and window: %d region, %d statuses x %d readings, %d readings counted and summed\n",
		b.MaxGroups, b.MaxBuckets, b.MaxPerBucket, b.MaxValues)
	fmt.Fprintf(w, "  privacy     per window ε=%g, δ=%g, mechanism %s, %g%% intervals; noise key %s\n",
		o.Epsilon, o.Delta, o.Mechanism, 100*operator.Default().Privacy.Confidence, keyNote)
	for i, part := range strings.Split(note, "; ") {
		label := ""
		if i == 0 {
			label = "accounting"
		}
		fmt.Fprintf(w, "  %-11s %s\n", label, part)
	}
	fmt.Fprintf(w, "\n  %s\n  The mean is derived from the noised sum and count (no noise of its own).\n  %s\n\n", truthNotice, negativeNote)
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

// printWindow prints window n of total: its release, latency and ledger,
// and a table of true versus private values with their intervals.
func printWindow(w io.Writer, win *Window, n, total int) {
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

// printSummary prints the run's summary: releases read, coverage of the
// intervals, budget spent, the operator's input counters and latency.
func printSummary(w io.Writer, o Options, res *Result) {
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
	if note := quantileNote(res); note != "" {
		fmt.Fprintf(w, "  quantiles   %s\n", note)
	}
	if !res.Embedded {
		fmt.Fprintf(w, "  topics      left on the cluster: %s, %s, %s.state\n", res.InputTopic, res.OutputTopic, res.OutputTopic)
	}
}

// quantileNote explains, when some released quantile intervals are the
// whole value range, why: a quantile's interval holds for every noised
// prefix count of its tree at once (the accounting line's ± ranks), and
// when that rank error exceeds what a group's readings can pin down the
// interval is [lower, upper]; the point values are still the estimates.
// It is "" when no interval is the whole range.
func quantileNote(res *Result) string {
	whole, all := 0, 0
	for _, win := range res.Windows {
		for _, r := range win.Releases {
			if r.Kind != schema.KindQuantiles {
				continue
			}
			for _, s := range r.Series {
				if s.Name != schema.SeriesQuantiles {
					continue
				}
				for j := range s.Lo {
					all++
					if s.Lo[j] <= synthLower && s.Hi[j] >= synthUpper {
						whole++
					}
				}
			}
		}
	}
	if whole == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d intervals are the whole range [%g, %g]: a quantile's interval holds for all its tree's noised counts at once "+
		"(the ± ranks on the accounting line), more than a region's readings per window can pin down here; the values are still estimates. "+
		"More readings per group and window, a larger ε or a shallower tree narrow them (dpstream plan)", whole, all, synthLower, synthUpper)
}
