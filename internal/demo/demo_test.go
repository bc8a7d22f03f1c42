package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/schema"
)

// smallDemo returns demo options that finish in a couple of seconds.
func smallDemo() Options {
	o := DefaultOptions()
	o.Windows, o.EventsPerWindow, o.Seed = 3, 1000, 7
	o.Timeout = 90 * time.Second
	return o
}

// maxDemoMisses is the largest number of displayed values (of 132) whose
// true value may fall outside its 95% interval. Each interval covers with
// probability ≥ 0.95 and different releases use independent noise (one
// stream per release message; the values of a histogram are independent
// draws; a quantiles release's three intervals hold together with
// probability ≥ 0.95, which only makes misses rarer), so the misses are
// dominated by Binomial(132, 0.05), and P(Bin(132, 0.05) > 21) = 7.0e-7
// (exact binomial tail, computed with math.comb). The noise depends on the
// run's random release ids, so this is the test's false-failure rate per
// run.
const maxDemoMisses = 21

// demoRowsPerRegion is the number of displayed values per window and
// region: count, one per status, sum, mean, units, stddev and the three
// quantiles.
var demoRowsPerRegion = 1 + len(synthStatuses) + 2 + 1 + 1 + 3

// TestDemoEmbedded runs the demo on the embedded broker and checks its
// output: every window present with all its releases, each decoded release
// consistent with the configuration, the demo's true values equal to the
// operator's exact bounded aggregates, the operator's bad-input and late
// counters equal to what the generator planted, and the true values inside
// their intervals at the stated rate.
func TestDemoEmbedded(t *testing.T) {
	o := smallDemo()
	var out, errs bytes.Buffer
	res, err := Run(context.Background(), o, &out, &errs)
	if err != nil {
		t.Fatalf("demo: %v\nstderr:\n%s", err, errs.String())
	}
	if testing.Verbose() {
		t.Log("\n" + out.String())
	}
	checkDemoResult(t, o, res)

	// The text: a header with the notice, one table per window with one row
	// per displayed value, a summary.
	text := out.String()
	for _, want := range []string{"dpstream demo:", truthNotice, "summary", "coverage", "budget      spent ε=3, δ=3e-06 over 3 windows"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for i, w := range res.Windows {
		head := fmt.Sprintf("window %d of %d: %s", i+1, o.Windows, utc(w.Start).Format("2006-01-02 15:04"))
		if !strings.Contains(text, head) {
			t.Errorf("output lacks the header %q", head)
		}
	}
	rows, runningRows := 0, 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && slices.Contains(Regions, f[0]) {
			if slices.Contains(f, "running") { // running count and sum (running.go)
				runningRows++
				continue
			}
			rows++
		}
	}
	if want := o.Windows * len(Regions) * 2; runningRows != want {
		t.Errorf("%d running rows, want %d", runningRows, want)
	}
	if want := o.Windows * len(Regions) * demoRowsPerRegion; rows != want {
		t.Errorf("%d table rows, want %d", rows, want)
	}
	if errs.Len() > 0 {
		t.Logf("stderr:\n%s", errs.String())
	}
	// On its own embedded broker the demo is the trusted producer of its
	// CreateTime topic: no warning about it (the code before warned).
	if strings.Contains(errs.String(), "CreateTime") {
		t.Errorf("the demo warns about its own topic's CreateTime:\n%s", errs.String())
	}
	// Negative counts and whole-range quantile intervals are explained.
	if !strings.Contains(text, negativeNote) {
		t.Errorf("output lacks the note on negative counts")
	}
	if quantileNote(res) != "" && !strings.Contains(text, "  quantiles   ") {
		t.Errorf("whole-range quantile intervals without the note")
	}
}

// TestQuantileNote: the summary's quantiles line counts the intervals
// that are the whole range, and is empty when none is.
func TestQuantileNote(t *testing.T) {
	q := func(lo, hi float64) schema.Release {
		return schema.Release{Kind: schema.KindQuantiles, Series: []schema.Series{{Name: schema.SeriesQuantiles,
			Lo: []float64{lo, 10}, Hi: []float64{hi, 20}}}}
	}
	res := &Result{Windows: []Window{{Releases: []schema.Release{q(synthLower, synthUpper), q(5, 6)}}}}
	if got := quantileNote(res); !strings.HasPrefix(got, "1 of 4 intervals are the whole range [0, 300]") {
		t.Errorf("quantileNote = %q", got)
	}
	res.Windows[0].Releases = res.Windows[0].Releases[1:]
	if got := quantileNote(res); got != "" {
		t.Errorf("quantileNote without whole-range intervals = %q", got)
	}
}

// checkDemoResult checks what a demo run returned (see TestDemoEmbedded).
func checkDemoResult(t *testing.T, o Options, res *Result) {
	t.Helper()
	if len(res.Windows) != o.Windows {
		t.Fatalf("%d windows, want %d", len(res.Windows), o.Windows)
	}
	size := WindowSize.Milliseconds()
	for i, w := range res.Windows {
		if want := streamBase + int64(i)*size; w.Start != want || w.End != want+size {
			t.Errorf("window %d is [%d, %d), want [%d, %d)", i, w.Start, w.End, want, want+size)
		}
		if want := len(Regions) * len(AggregateOrder); len(w.Releases) != want {
			t.Errorf("window %d: %d releases, want %d", i, len(w.Releases), want)
		}
		seen := map[string]bool{}
		for _, r := range w.Releases {
			k := groupValue(&r) + "/" + r.Aggregate
			if seen[k] {
				t.Errorf("window %d: %s released twice", i, k)
			}
			seen[k] = true
			if r.WindowStart != w.Start || r.Budget.Epsilon != o.Epsilon || r.Budget.Delta != o.Delta ||
				r.Unit != synthUnitField || r.Bounds.MaxValues != int64(synthBounds.MaxValues) || r.Bounds.Upper != synthUpper {
				t.Errorf("window %d, %s: inconsistent metadata %+v", i, k, r)
			}
			for _, s := range r.Series {
				for j := range s.Len() {
					if !(s.Lo[j] <= s.Value(j) && s.Value(j) <= s.Hi[j]) {
						t.Errorf("%s series %s: value %g outside its own interval [%g, %g]", k, s.Name, s.Value(j), s.Lo[j], s.Hi[j])
					}
				}
				if want := wantMechanism(t, o.Mechanism, s.Name); want != "" && s.Mechanism != want {
					t.Errorf("%s series %s: mechanism %q, want %q", k, s.Name, s.Mechanism, want)
				}
			}
		}
		for _, reg := range Regions {
			if w.Truth[reg] == nil || w.Truth[reg].Count == 0 {
				t.Errorf("window %d: no true readings in %s", i, reg)
			}
		}
	}
	if res.Mismatches != 0 || res.Inexact != 0 {
		t.Errorf("demo truth: %d values differ from the operator's bounded aggregates, %d groups inexact; want 0, 0", res.Mismatches, res.Inexact)
	}
	// The operator counted exactly the planted bad input and late readings.
	c := res.Stream
	for reason, n := range c.Bad {
		if got := res.Skipped[reason]; got != float64(n) {
			t.Errorf("skipped %s: operator counted %g, generator planted %d", reason, got, n)
		}
	}
	if got := res.Skipped["not_public_group"]; got != float64(c.NotPublic) {
		t.Errorf("not_public_group: operator counted %g, generator planted %d", got, c.NotPublic)
	}
	if res.Late != float64(c.Late) || c.Late == 0 {
		t.Errorf("late: operator counted %g, generator planted %d (want equal and > 0)", res.Late, c.Late)
	}
	if res.EventsIn != float64(c.Messages) {
		t.Errorf("operator read %g messages, %d were produced", res.EventsIn, c.Messages)
	}
	if want := o.Windows * len(Regions) * demoRowsPerRegion; res.Checked != want {
		t.Errorf("checked %d values, want %d", res.Checked, want)
	}
	if misses := res.Checked - res.Covered; misses > maxDemoMisses {
		t.Errorf("%d of %d true values outside their 95%% interval (allowed %d)", misses, res.Checked, maxDemoMisses)
	}
}

// wantMechanism is the mechanism a series must report for the configured
// one: its integer or real release version (operator.ReleaseMechanism),
// "derived" for the mean, "" (any) with auto.
func wantMechanism(t *testing.T, configured, series string) string {
	t.Helper()
	switch series {
	case schema.SeriesMean, schema.SeriesVariance, schema.SeriesStddev, schema.SeriesRankError, schema.SeriesRunning:
		return schema.DerivedMechanism
	}
	if configured == operator.Auto {
		return ""
	}
	// The quantiles report the noise of their tree's node counts.
	integer := series == schema.SeriesCount || series == schema.SeriesCounts || series == schema.SeriesUnits || series == schema.SeriesQuantiles
	m, err := operator.ReleaseMechanism(configured, integer)
	if err != nil {
		t.Fatal(err)
	}
	return m.Name()
}

// TestDemoJSON: --json prints exactly one JSON object per release on
// stdout, each with true values beside the private ones, and nothing else.
func TestDemoJSON(t *testing.T) {
	o := smallDemo()
	o.Windows, o.JSON, o.Mechanism = 2, true, "gaussian"
	var out, errs bytes.Buffer
	res, err := Run(context.Background(), o, &out, &errs)
	if err != nil {
		t.Fatalf("demo: %v\nstderr:\n%s", err, errs.String())
	}
	checkDemoResult(t, o, res)
	if !strings.Contains(errs.String(), truthNotice) {
		t.Error("the notice about true values is not on stderr")
	}
	var lines []jsonRelease
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r jsonRelease
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("stdout line is not a release object: %v\n%s", err, sc.Text())
		}
		lines = append(lines, r)
	}
	if want := o.Windows * len(Regions) * len(AggregateOrder); len(lines) != want {
		t.Fatalf("%d JSON lines, want %d", len(lines), want)
	}
	for _, r := range lines {
		if r.Notice != truthNotice || !r.TrueIsExact || r.Group["region"] == "" || r.Epsilon != o.Epsilon {
			t.Errorf("%s: bad fields %+v", r.Key, r)
		}
		if _, _, _, err := schema.SplitKey(r.Key); err != nil {
			t.Errorf("%s: %v", r.Key, err)
		}
		for _, s := range r.Series {
			if len(s.True) != len(s.Private) || len(s.Lo) != len(s.Private) || len(s.Hi) != len(s.Private) {
				t.Errorf("%s series %s: lengths true %d, private %d, lo %d, hi %d", r.Key, s.Name, len(s.True), len(s.Private), len(s.Lo), len(s.Hi))
			}
			for j, v := range s.True {
				if v == nil || math.IsNaN(*v) {
					t.Errorf("%s series %s: true value %d missing", r.Key, s.Name, j)
				}
			}
		}
	}
}

// TestRunInfeasibleBudget: an infeasible budget is the operator's error,
// reported before any broker is started (the flag checks are
// cmd/dpstream's TestDemoOptions).
func TestRunInfeasibleBudget(t *testing.T) {
	var out bytes.Buffer
	o := smallDemo()
	o.Mechanism, o.Delta = "gaussian", 0
	if _, err := Run(context.Background(), o, &out, &out); err == nil {
		t.Error("gaussian with δ = 0: want an error")
	}
}

// TestSynthDeterministic: the same config gives the same messages, and a
// different seed a different stream.
func TestSynthDeterministic(t *testing.T) {
	cfg := StreamConfig{Seed: 3, Windows: 2, EventsPerWindow: 1500, Partitions: 2, Base: streamBase,
		Size: WindowSize, Lateness: Lateness}
	a, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(cfg)
	if len(a.Msgs) != len(b.Msgs) {
		t.Fatalf("lengths %d and %d", len(a.Msgs), len(b.Msgs))
	}
	for i := range a.Msgs {
		if !bytes.Equal(a.Msgs[i].Value, b.Msgs[i].Value) || a.Msgs[i].Partition != b.Msgs[i].Partition || a.Msgs[i].Late != b.Msgs[i].Late {
			t.Fatalf("message %d differs", i)
		}
	}
	cfg.Seed = 4
	c, _ := Generate(cfg)
	if len(c.Msgs) == len(a.Msgs) && bytes.Equal(c.Msgs[0].Value, a.Msgs[0].Value) && bytes.Equal(c.Msgs[1].Value, a.Msgs[1].Value) {
		t.Error("seeds 3 and 4 start with the same messages")
	}
	if _, err := Generate(StreamConfig{Windows: 0}); !errors.Is(err, errStream) {
		t.Errorf("invalid config: got %v", err)
	}
}

// TestSynthDecodes: every generated message decodes (or fails) under the
// demo's schema exactly as the generator says: bad input with its planted
// reason, valid readings with their fields, and the counts add up.
func TestSynthDecodes(t *testing.T) {
	s, err := Generate(StreamConfig{Seed: 5, Windows: 2, EventsPerWindow: 3000, Partitions: 2, Base: streamBase,
		Size: WindowSize, Lateness: Lateness})
	if err != nil {
		t.Fatal(err)
	}
	cfg := OperatorConfig(DefaultOptions(), []string{"127.0.0.1:9"}, "in", "out", "g")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("demo config: %v", err)
	}
	dec, err := schema.NewDecoder(cfg.Schema)
	if err != nil {
		t.Fatal(err)
	}
	var e schema.Event
	for i, m := range s.Msgs {
		err := dec.Decode(m.Value, &e)
		if m.Bad != "" {
			if got := schema.ReasonOf(err).String(); got != m.Bad {
				t.Errorf("message %d: reason %q, planted %q", i, got, m.Bad)
			}
			continue
		}
		if err != nil {
			t.Fatalf("message %d does not decode: %v", i, err)
		}
		rd := m.Reading
		if e.Time != rd.Time || e.Unit != rd.Meter || e.Group != schema.MakeGroup(rd.Region) || e.Value != rd.Wh ||
			e.Bucket != slices.Index(synthStatuses, rd.Status) {
			t.Errorf("message %d decodes to %+v, generated %+v", i, e, *rd)
		}
		if m.Partition != PartitionOf(m.Key, 2) {
			t.Errorf("message %d: partition %d, key hashes to %d", i, m.Partition, PartitionOf(m.Key, 2))
		}
	}
	c := s.counts()
	bad := 0
	for _, n := range c.Bad {
		bad += n
	}
	if c.Readings+bad+c.Late+c.NotPublic+c.Closing != c.Messages || len(c.Bad) != 5 || c.Late == 0 || c.Delayed == 0 || c.Closing != 2 {
		t.Errorf("counts do not add up or miss a kind: %+v", c)
	}
	// Every published window has readings in every region.
	tr := s.truth()
	if len(tr) != 2 {
		t.Fatalf("truth has %d windows", len(tr))
	}
	for start, gs := range tr {
		for _, reg := range Regions {
			if g := gs[reg]; g == nil || g.Count == 0 || !g.Exact {
				t.Errorf("window %d region %s: %+v", start, reg, g)
			}
		}
	}
}
