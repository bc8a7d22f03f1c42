package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/operator"
)

var exampleConfig = filepath.Join("..", "..", "deploy", "dpstream.example.yaml")

// TestPlanCommand: `dpstream plan` on the example prints every series with
// its mechanism, scale and interval, the budget, and with sizes the
// relative errors; --json is the same summary; --set changes it; --target
// lists the changes that reach it.
func TestPlanCommand(t *testing.T) {
	// At ε = 1 (the example's budget before it was sized for ±10%, which
	// takes 2; TestShippedConfigsPlan checks that plan).
	out, err := runCLI(t, "plan", "--config", exampleConfig, "--units-per-group", "250", "--events-per-unit", "4", "--set", "privacy.epsilon=1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"privacy unit: meter", "budget per window: ε = 1, δ = 1e-06",
		"count      count   discrete-laplace  20", "±60 (95%)", "1000", "6%", "mean       mean    derived"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	js, err := runCLI(t, "plan", "--config", exampleConfig, "--units-per-group", "250", "--events-per-unit", "4", "--json", "--set", "privacy.epsilon=2")
	if err != nil {
		t.Fatal(err)
	}
	var s operator.Sizing
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if s.Budget.WindowEpsilon != 2 || s.Aggregates[0].Aggregate != "count" || math.Abs(s.Aggregates[0].Series[0].Scale-10) > 1e-3 {
		t.Errorf("--json with ε = 2: %+v", s)
	}
	out, err = runCLI(t, "plan", "--config", exampleConfig, "--set", "privacy.public_groups=", "--units-per-group", "50", "--events-per-unit", "4", "--target", "0.1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"group selection: a group is released in a window only if its units + noise ≥",
		"a group of 50 units is released with probability", "target: relative half-width ≤ 10%",
		"groups of at least", "windows.size", "privacy.epsilon", "list privacy.public_groups"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan --target output lacks %q:\n%s", want, out)
		}
	}
	if _, err := runCLI(t, "plan", "--config", exampleConfig, "--target", "0.1"); err == nil || !strings.Contains(err.Error(), "--units-per-group") {
		t.Errorf("--target without sizes: %v", err)
	}
}

// TestCheckConfigEveryProblem: --check-config reports type errors (key,
// value, example), unknown keys (nearest key), bad listen addresses and
// the key file's problem together, one per line. Old code: it stopped at
// the decoder's first error, in mapstructure's words.
func TestCheckConfigEveryProblem(t *testing.T) {
	t.Setenv("DPSTREAM_KEY", "")
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte(strings.Repeat("ab", 32)), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "c.yaml")
	yaml := "kafka:\n  input_topics: [events]\n  brokres: [a:1]\nwindows:\n  size: \"60\"\nobservability:\n  listen: \"localhost:http-alt\"\nprivacy:\n  key_file: " + key + "\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "run", "--config", file, "--check-config")
	if err == nil {
		t.Fatalf("no error:\n%s", out)
	}
	for _, want := range []string{
		`windows.size: "60" is not a duration; use e.g. 60s or 1m`,
		`kafka.brokres: unknown key; did you mean kafka.brokers?`,
		`observability.listen: "localhost:http-alt": port "http-alt" is not a number`,
		`privacy.key_file: "` + key + `" has the wrong mode 0644`,
	} {
		if !strings.Contains(out, want+"") {
			t.Errorf("check-config output lacks %q:\n%s", want, out)
		}
	}
}

// TestCalibrateDeltaOptional: calibrate needs no --delta for pure-ε
// mechanisms (old code: required flag "delta" not set), and says how to
// give one when the mechanism needs it; an unknown name lists the valid
// ones.
func TestCalibrateDeltaOptional(t *testing.T) {
	out, err := runCLI(t, "calibrate", "--mechanism", "laplace", "--epsilon", "1", "--json")
	if err != nil || !strings.Contains(out, `"scale": 1`) {
		t.Errorf("laplace without --delta: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "calibrate", "--mechanism", "gaussian", "--epsilon", "1"); err == nil || !strings.Contains(err.Error(), "--delta") {
		t.Errorf("gaussian without --delta: %v", err)
	}
	if _, err := runCLI(t, "calibrate", "--mechanism", "lapalce", "--epsilon", "1"); err == nil || !strings.Contains(err.Error(), "valid names: laplace, logistic") {
		t.Errorf("unknown mechanism: %v", err)
	}
}

// TestCompletionValues: shell completion offers the mechanism names, log
// levels and config keys (old code: no value completions).
func TestCompletionValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "calibrate", "--mechanism", ""}, "discrete-gaussian"},
		{[]string{"__complete", "run", "--mechanism", "lap"}, "laplace"},
		{[]string{"__complete", "run", "--log-level", ""}, "warn"},
		{[]string{"__complete", "plan", "--set", "privacy.pub"}, "privacy.public_groups="},
	} {
		out, err := runCLI(t, c.args...)
		if err != nil || !strings.Contains(out, c.want+"\n") {
			t.Errorf("%v: %v\n%s", c.args, err, out)
		}
	}
}

// TestComparePlotSaysWhere: --plot says on stderr where the file went.
func TestComparePlotSaysWhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.png")
	out, err := runCLI(t, "compare", "--epsilon", "1", "--delta", "1e-6", "--plot", path)
	if err != nil || !strings.Contains(out, "compare: plot written to "+path) {
		t.Errorf("%v\n%s", err, out)
	}
}

// TestPlanNestedPaths: plan prints a nested unit path as configured, and
// reports a path that does not parse by its setting. Old code: the path
// was a flat key and "meter..id" was accepted.
func TestPlanNestedPaths(t *testing.T) {
	out, err := runCLI(t, "plan", "--config", exampleConfig, "--set", "schema.unit_field=meter.id", "--set", "schema.group_by=site.region")
	if err != nil || !strings.Contains(out, "privacy unit: meter.id;") {
		t.Errorf("plan with unit_field meter.id: %v\n%s", err, out)
	}
	out, err = runCLI(t, "plan", "--config", exampleConfig, "--set", "schema.unit_field=meter..id")
	if err == nil || !strings.Contains(err.Error()+out, `schema.unit_field "meter..id" has an empty key`) {
		t.Errorf("plan with unit_field meter..id: %v\n%s", err, out)
	}
}

// `dpstream plan` lists the bounds and, per noised series, the bound that
// binds its L1 and L2 (text and JSON).
func TestPlanShowsBindingBounds(t *testing.T) {
	args := []string{"plan", "--config", exampleConfig, "--set", "bounds.max_buckets=3", "--set", "bounds.max_per_bucket=5", "--set", "bounds.max_contributions=5"}
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"max_per_bucket 5, max_values 4, max_contributions 5",
		"histogram  counts  3   5   5 (bounds.max_contributions)", "count      count   1   4   4 (bounds.max_groups × bounds.max_values)"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	s := planJSON(t, args...)
	for _, a := range s.Aggregates {
		if e := a.Series[0].Sensitivity; a.Aggregate == "histogram" && (e == nil || e.L1 != 5 || e.L1Bound != "bounds.max_contributions") {
			t.Errorf("--json: histogram sensitivity %+v", e)
		}
	}
	if s.Bounds.MaxContributions != 5 {
		t.Errorf("--json: bounds %+v", s.Bounds)
	}
}

// TestPlanLanes: `dpstream plan` on the example with a second measure
// (voltage) and a second histogram (appliance) shows every series of every
// measure and histogram, with its sensitivity, and the one joint
// calibration of all 9 parts (text and --json). Old code: the keys were
// unknown and the configuration refused.
func TestPlanLanes(t *testing.T) {
	b, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), "  measures: []", "  measures: [{name: voltage, field: voltage, lower: 200, upper: 260}]", 1)
	y = strings.Replace(y, "  histograms: []", "  histograms: [{name: appliance, field: appliance, categories: [oven, heater, other]}]", 1)
	file := filepath.Join(t.TempDir(), "lanes.yaml")
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "plan", "--config", file)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"one joint calibration of all 9 noised parts: the first measure and histogram and measure voltage, histogram appliance",
		"\nsum:voltage ", "\nmean:voltage ", "\nhistogram:appliance ",
		"sum:voltage          sum     1   1040", // L∞ = max_values 4 × upper 260
		"mean:voltage         sum     1   120",  // L∞ = 4 × (260 − 200)/2
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	js, err := runCLI(t, "plan", "--config", file, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var s operator.Sizing
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	var names []string
	for _, a := range s.Aggregates {
		names = append(names, a.Aggregate)
	}
	if got := strings.Join(names, ","); got != "count,histogram,sum,mean,sum:voltage,mean:voltage,histogram:appliance" || s.Budget.Parts != 9 || len(s.Budget.Lanes) != 2 {
		t.Errorf("--json: aggregates %s, parts %d, lanes %v", got, s.Budget.Parts, s.Budget.Lanes)
	}
}

// TestPlanJoint: `dpstream plan` with windows.quantile_mechanism joint
// shows the mechanism, one selection of all ranks per group at its ε, the
// rank-error bound, and the selections' sensitivity (G = max_groups, not
// ranks × max_groups) in text and --json; with the exponential mechanism
// the summary is absent. Fails on the code before (joint refused).
func TestPlanJoint(t *testing.T) {
	args := []string{"plan", "--config", exampleConfig, "--set", "windows.aggregates=count,quantiles", "--set", "windows.quantile_mechanism=joint"}
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"quantiles  joint_selection  joint", "quantiles: joint exponential mechanism, 1 selection of all ranks (0.5, 0.9, 0.99) per group and window at ε = ",
		"every released edge's rank is within ", "quantiles  joint_selection  1   1   1 (bounds.max_groups (one joint selection per group))"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	s := planJSON(t, args...)
	q := s.Aggregates[1].Series[0]
	if q.Mechanism != "joint" || q.Quantiles == nil || q.Quantiles.Selections != 1 || !(q.Quantiles.RankError > 0) || q.Sensitivity == nil || q.Sensitivity.L0 != 1 {
		t.Errorf("--json: quantiles %+v (%+v)", q, q.Quantiles)
	}
	out, err = runCLI(t, "plan", "--config", exampleConfig, "--set", "windows.aggregates=count,quantiles", "--set", "windows.quantile_mechanism=exponential")
	if err != nil || strings.Contains(out, "joint") {
		t.Errorf("exponential plan (%v) names the joint mechanism:\n%s", err, out)
	}
}

// planJSON runs `dpstream` with args and --json and returns the plan it
// prints.
func planJSON(t *testing.T, args ...string) operator.Sizing {
	t.Helper()
	js, err := runCLI(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var s operator.Sizing
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	return s
}
