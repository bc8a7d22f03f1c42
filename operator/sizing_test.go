package operator

// Tests of the plan summary (sizing.go), the run-time warnings, the
// progress line and the readable logs and metrics of issue 12.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/spf13/pflag"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
)

// TestSizingIsThePlan: the summary's numbers are the calibrated plan's,
// exactly (scale, half-width, threshold, budget), and the expected values
// follow the documented assumptions.
func TestSizingIsThePlan(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Privacy.PublicGroups = nil // private selection
	p, err := planFor(c)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSizing(c, Sizes{UnitsPerGroup: 40, EventsPerUnit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Aggregates) != len(p.aggs) {
		t.Fatalf("%d aggregates, plan has %d", len(s.Aggregates), len(p.aggs))
	}
	for i, ap := range p.aggs {
		a := s.Aggregates[i]
		for j, n := range ap.noises {
			r := a.Series[j]
			if r.Scale != n.scale || r.HalfWidth == nil || *r.HalfWidth != n.half || r.Mechanism != n.mech.Name() || r.Level != 1-n.beta {
				t.Errorf("%s.%s: sizing %+v, plan scale %g half %g %s", ap.name, n.series, r, n.scale, n.half, n.mech.Name())
			}
		}
	}
	// Count: 40 units × min(5, max_values 3) = 120.
	cnt := s.Aggregates[0].Series[0]
	if cnt.Expected == nil || *cnt.Expected != 120 || *cnt.Relative != *cnt.HalfWidth/120 {
		t.Errorf("count: expected %v relative %v, want 120 and half/120", cnt.Expected, cnt.Relative)
	}
	if s.Selection == nil || s.Selection.Threshold != p.sel.threshold || s.Selection.Scale != p.sel.noise.scale {
		t.Fatalf("selection %+v, plan threshold %g", s.Selection, p.sel.threshold)
	}
	if s.Budget.WindowEpsilon != p.window.Epsilon || s.Budget.WindowDelta != p.window.Delta {
		t.Errorf("budget %+v, plan %+v", s.Budget, p.window)
	}
	// The mean's interval at the expected values is what the release
	// derives: whole range for tiny groups.
	tiny, err := NewSizing(c, Sizes{UnitsPerGroup: 1, EventsPerUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	mean := tiny.Aggregates[3].Series[2]
	if mean.Series != schema.SeriesMean || !mean.CoversRange {
		t.Errorf("mean of a 1-unit group: %+v, want covers_range", mean)
	}
}

// TestSizingReleaseProbability: the probability that a group of n units
// is released, against the real selection noise sampled 20 000 times per
// n (fixed stream). Tolerance 5 standard errors + 1e-3: a false failure
// has probability below 1e-6 per point.
func TestSizingReleaseProbability(t *testing.T) {
	for _, mech := range []string{"laplace", "gaussian"} {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Privacy.PublicGroups = nil
		c.Privacy.Mechanism = mech
		c.Privacy.Mechanisms = nil
		p, err := planFor(c)
		if err != nil {
			t.Fatal(err)
		}
		tau := p.sel.threshold
		s := rng.NewStream(testKey(), "sizing-test/"+mech)
		const trials = 20000
		for _, n := range []float64{tau - 4, tau - 1, tau, tau + 2} {
			hits := 0
			for range trials {
				v, err := p.sel.noise.add(s, n)
				if err != nil {
					t.Fatal(err)
				}
				if v >= tau {
					hits++
				}
			}
			got := float64(hits) / trials
			want := p.releaseProbability(n)
			se := math.Sqrt(want*(1-want)/trials) + 1e-3
			if math.Abs(got-want) > 5*se {
				t.Errorf("%s: n=%g τ=%g: release probability %g, sampled %g", mech, n, tau, want, got)
			}
		}
		if u := p.unitsForRelease(0.95); p.releaseProbability(float64(u)) < 0.95 || p.releaseProbability(float64(u-1)) >= 0.95 {
			t.Errorf("%s: units for 95%%: %d is not the smallest", mech, u)
		}
	}
}

// TestSizingSuggestions: --target: the "more units" answer is the
// smallest group size that reaches the target, and every suggestion marked
// as reaching it does, re-evaluated with the changed configuration.
func TestSizingSuggestions(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Privacy.PublicGroups = nil
	c.Privacy.Epsilon = 1
	sz := Sizes{UnitsPerGroup: 30, EventsPerUnit: 2}
	s, err := NewSizing(c, sz)
	if err != nil {
		t.Fatal(err)
	}
	const target = 0.2
	if err := s.Suggest(c, target); err != nil {
		t.Fatal(err)
	}
	if *s.Worst <= target {
		t.Fatalf("worst %g already below the target: the test needs a harder case", *s.Worst)
	}
	seen := map[string]bool{}
	for _, sg := range s.Suggestions {
		seen[sg.Setting] = true
		t.Logf("%+v", sg)
	}
	for _, k := range []string{"data", "windows.size", "privacy.epsilon", "bounds.max_values and bounds.max_per_bucket", "privacy.public_groups"} {
		if !seen[k] {
			t.Errorf("no suggestion for %s", k)
		}
	}
	worstAt := func(c Config, sz Sizes) float64 {
		s, err := NewSizing(c, sz)
		if err != nil {
			t.Fatal(err)
		}
		return *s.Worst
	}
	for _, sg := range s.Suggestions {
		switch sg.Setting {
		case "data":
			var n float64
			if err := json.Unmarshal([]byte(sg.Value), &n); err != nil {
				t.Fatal(err)
			}
			if worstAt(c, Sizes{n, sz.EventsPerUnit}) > target || worstAt(c, Sizes{n - 1, sz.EventsPerUnit}) <= target {
				t.Errorf("%d units: not the smallest group reaching %g", int(n), target)
			}
		case "privacy.epsilon":
			d := c
			if err := json.Unmarshal([]byte(sg.Value), &d.Privacy.Epsilon); err != nil {
				t.Fatal(err)
			}
			if got := worstAt(d, sz); got > target || !sg.Reaches {
				t.Errorf("ε %s gives %g, want ≤ %g", sg.Value, got, target)
			}
		case "windows.size":
			d := c
			var err error
			if d.Windows.Size, err = time.ParseDuration(sg.Value); err != nil {
				t.Fatal(err)
			}
			k := float64(d.Windows.Size / c.Windows.Size)
			if got := worstAt(d, Sizes{sz.UnitsPerGroup * k, sz.EventsPerUnit}); got > target {
				t.Errorf("windows.size %s gives %g, want ≤ %g", sg.Value, got, target)
			}
		}
	}
	if err := (&Sizing{}).Suggest(c, 0.1); err == nil {
		t.Error("--target without sizes accepted")
	}
}

// TestLoadReadableTypeErrors: type errors name the key, the bad value and
// an example; unknown keys suggest the nearest key; all at once, from the
// file and from the environment; lists never print in Go syntax. Old
// code: mapstructure's "'windows.size' time: missing unit in duration",
// one problem at a time.
func TestLoadReadableTypeErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	yaml := "kafka:\n  brokres: [a:1]\nwindows:\n  size: \"60\"\n  max_open_windows: many\nprivacy:\n  epsilon: one\n  public_groups: [north, [south]]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(file, nil)
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{
		`windows.size: "60" is not a duration; use e.g. 60s or 1m`,
		`windows.max_open_windows: "many" is not a whole number; use e.g. 4`,
		`privacy.epsilon: "one" is not a number; use e.g. 0.5`,
		`kafka.brokres: unknown key; did you mean kafka.brokers?`,
		`privacy.public_groups: ["north", ["south"]] is not a list of groups; use e.g. [[north], [south]]`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "[]interface") || strings.Contains(err.Error(), "map[") {
		t.Errorf("Go syntax in: %v", err)
	}
	t.Setenv("DPSTREAM_WINDOWS_SIZE", "60")
	if _, err := Load("", nil); err == nil || !strings.Contains(err.Error(), `windows.size: "60" is not a duration`) {
		t.Errorf("from the environment: %v", err)
	}
}

// TestPublicGroupsSyntax: privacy.public_groups from the file, the
// environment (groups separated by ';', values by ','), --set, and JSON,
// load to the same groups. Old code: the environment's string did not
// decode into a list of groups.
func TestPublicGroupsSyntax(t *testing.T) {
	want := [][]string{{"north", "day"}, {"south", "night"}}
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("privacy:\n  public_groups: [[north, day], [south, night]]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, nil)
	if err != nil || !reflect.DeepEqual(c.Privacy.PublicGroups, want) {
		t.Errorf("file: %v %v", c.Privacy.PublicGroups, err)
	}
	t.Setenv("DPSTREAM_PRIVACY_PUBLIC_GROUPS", "north,day;south,night")
	c, err = Load("", nil)
	if err != nil || !reflect.DeepEqual(c.Privacy.PublicGroups, want) {
		t.Errorf("environment: %v %v", c.Privacy.PublicGroups, err)
	}
	for _, set := range []string{"privacy.public_groups=north, day; south, night", `privacy.public_groups=[["north","day"],["south","night"]]`} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		AddFlags(fs)
		if err := fs.Parse([]string{"--set", set}); err != nil {
			t.Fatal(err)
		}
		c, err = Load("", fs)
		if err != nil || !reflect.DeepEqual(c.Privacy.PublicGroups, want) {
			t.Errorf("--set %s: %v %v", set, c.Privacy.PublicGroups, err)
		}
	}
}

// TestFileProblems: the key file missing, a directory, or with the wrong
// mode each say which; (unreadable is checked when not running as root,
// who reads every file).
func TestFileProblems(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.key")
	if err := os.WriteFile(open, bytes.Repeat([]byte("ab"), 32), 0o644); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(dir, "locked.key")
	if err := os.WriteFile(locked, bytes.Repeat([]byte("ab"), 32), 0o000); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		filepath.Join(dir, "none.key"): "is missing (no such file)",
		dir:                            "is not a regular file",
		open:                           "has the wrong mode 0644",
	}
	if os.Geteuid() != 0 {
		cases[locked] = "exists but is unreadable by this user"
	}
	for path, want := range cases {
		c := validConfig()
		c.Privacy.KeyFile = path
		ps := c.FileProblems()
		if len(ps) != 1 || !strings.Contains(ps[0], "privacy.key_file: ") || !strings.Contains(ps[0], want) {
			t.Errorf("%s: %q, want one problem saying %q", path, ps, want)
		}
	}
	c := validConfig()
	c.Observability.Listen = "localhost:99999"
	checkOneProblem(t, "listen port", c.Problems(), `observability.listen: "localhost:99999": port "99999" is not a number in 0–65535`)
}

// TestUnknownMechanismListsValid: an unknown mechanism's problem lists
// the valid names.
func TestUnknownMechanismListsValid(t *testing.T) {
	c := validConfig()
	c.Privacy.Mechanism = "lapalce"
	checkOneProblem(t, "unknown mechanism", c.Problems(), `privacy.mechanism: "lapalce" is not a known mechanism; use one of laplace, gaussian`)
}

// TestNoReasonNoneLabel: with sensitive metrics on, the skip counter has
// no reason="none" series (old code registered one for every reason,
// "none" included).
func TestNoReasonNoneLabel(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Observability.SensitiveMetrics = true
	r := runObserved(t, c, neighbourMessages(true, "north"))
	if strings.Contains(r.metrics, `reason="none"`) {
		t.Errorf("/metrics has reason=\"none\":\n%s", seriesLine(r.metrics, "dpstream_events_skipped_total{reason=\"none\"}"))
	}
	if !strings.Contains(r.metrics, `reason="malformed"`) {
		t.Error("the malformed message was not counted")
	}
}

// TestBudgetSpentCountsWithheldWindows: budget_spent_epsilon moves with
// every published window, whether its groups were released or withheld,
// and equals the ledger's spent of the last window (old code: only
// windows that wrote releases moved it, so a horizon where selection
// withheld everything showed 0).
func TestBudgetSpentCountsWithheldWindows(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Privacy.PublicGroups = nil
	c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
	c.Privacy.Horizon, c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = 100*c.Windows.Size, 0.5, 1e-6
	r := runObserved(t, c, neighbourMessages(false, "north"))
	if r.releases != 0 {
		t.Fatalf("%d releases: the scenario needs every group withheld", r.releases)
	}
	line := seriesLine(r.metrics, "dpstream_budget_spent_epsilon ")
	if line == "" || strings.HasSuffix(line, " 0") {
		t.Errorf("budget_spent_epsilon after withheld windows: %q, want > 0", line)
	}
}

// TestRunWarnings: windows that keep releasing nothing under private
// selection, and a mean whose interval is its whole range, each warn
// once (rate-limited), naming the setting; the warnings are the same for
// neighbouring inputs (they depend only on what was published).
func TestRunWarnings(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Privacy.PublicGroups = nil
	c.Privacy.Epsilon = 0.05
	var warns [2]string
	for i, lone := range []bool{false, true} {
		r := runObserved(t, c, append(neighbourMessages(lone, "west"), longTail()...))
		if r.releases != 0 {
			t.Fatalf("%d releases; the scenario needs none", r.releases)
		}
		warns[i] = warnLines(r.logs)
	}
	if n := strings.Count(warns[0], "windows keep releasing no group"); n != 1 {
		t.Errorf("%d no-release warnings, want 1 (rate-limited):\n%s", n, warns[0])
	}
	if !strings.Contains(warns[0], `"setting":"privacy.public_groups"`) {
		t.Errorf("the warning does not name privacy.public_groups: %s", warns[0])
	}
	if warns[0] != warns[1] {
		t.Errorf("warnings differ between neighbouring inputs:\n%s\n---\n%s", warns[0], warns[1])
	}

	c = testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Privacy.Epsilon = 0.05 // public groups: released, but the means say nothing
	r := runObserved(t, c, neighbourMessages(false, "north"))
	w := warnLines(r.logs)
	if n := strings.Count(w, "covers the whole possible range"); n != 1 {
		t.Errorf("%d whole-range warnings, want 1:\n%s", n, w)
	}
	if !strings.Contains(w, `"aggregate":"mean"`) || !strings.Contains(w, `"range":"[0, 10]"`) {
		t.Errorf("whole-range warning: %s", w)
	}
	c.Privacy.Epsilon = 50 // narrow intervals: no warning
	if w := warnLines(runObserved(t, c, neighbourMessages(false, "north")).logs); strings.Contains(w, "whole possible range") {
		t.Errorf("warning with narrow intervals: %s", w)
	}
}

// longTail returns a few late sentinel-like messages that close more
// empty windows after the stream (empty windows are published too).
func longTail() []kafka.Message { return nil }

// warnLines returns the WARN lines of a JSON log, without the time.
func warnLines(logs string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"level":"WARN"`) {
			if i := strings.Index(l, `"level"`); i > 0 {
				l = l[i:]
			}
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLogDurationsReadable: durations in the operator's logs are strings
// ("250ms"), not nanoseconds; "window published" gives latency_ms.
func TestLogDurationsReadable(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	l := NewLogger(ObservabilityConfig{LogLevel: "info", LogFormat: "json"}, f)
	l.Warn("retrying", "backoff", 250*time.Millisecond)
	f.Close()
	b, _ := os.ReadFile(f.Name())
	if !strings.Contains(string(b), `"backoff":"250ms"`) {
		t.Errorf("log line %s: want \"backoff\":\"250ms\"", b)
	}
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Observability.LogLevel = "info"
	r := runObserved(t, c, neighbourMessages(false, "north"))
	if !strings.Contains(r.logs, `"latency_ms":0`) || strings.Contains(r.logs, `"latency":0`) {
		t.Errorf("window published lines: want latency_ms:\n%s", r.logs)
	}
}

// TestPlanLogLinesNoDuplicateKeys: every start-up `plan:` line in the JSON
// log is a JSON object without a repeated key. The plan's confidence level
// was logged as "level", beside slog's own "level" ("INFO"): an object
// with two "level" keys, of which many log pipelines keep only one.
func TestPlanLogLinesNoDuplicateKeys(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Observability.LogLevel = "info"
	var buf bytes.Buffer
	op, err := New(c, WithKey(testKey()), WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	op.logSizing()
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if !strings.Contains(l, `"plan: `) {
			continue
		}
		n++
		if err := noDuplicateKeys(json.NewDecoder(strings.NewReader(l))); err != nil {
			t.Errorf("%v in log line %s", err, l)
		}
	}
	if n == 0 {
		t.Fatalf("no plan: line in the log:\n%s", buf.String())
	}
}

// noDuplicateKeys reads one JSON value from d and fails on an object
// (at any depth) with a repeated key, which encoding/json accepts silently.
func noDuplicateKeys(d *json.Decoder) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return fmt.Errorf("duplicate key %q", key)
			}
			seen[key] = true
			if err := noDuplicateKeys(d); err != nil {
				return err
			}
		}
		_, err = d.Token() // '}'
	case json.Delim('['):
		for d.More() {
			if err := noDuplicateKeys(d); err != nil {
				return err
			}
		}
		_, err = d.Token() // ']'
	}
	return err
}
