package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/privacy"
)

// runCmd runs the dpstream root command with args and returns its output.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestCalibrateJSON(t *testing.T) {
	out, err := runCmd(t, "calibrate", "--mechanism", "gaussian", "--epsilon", "1", "--delta", "1e-5", "--sensitivity", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	want := []string{"mechanism", "epsilon", "delta", "sensitivity", "scale", "variance", "stddev", "mean_abs_error", "method"}
	if len(obj) != len(want) {
		t.Errorf("keys %v, want exactly %v", obj, want)
	}
	for _, k := range want {
		if _, ok := obj[k]; !ok {
			t.Errorf("missing key %q", k)
		}
	}
	lib, _ := privacy.Gaussian{}.Calibrate(1, 1e-5, 2)
	if obj["mechanism"] != "gaussian" || obj["scale"] != lib.Scale || obj["method"] != string(lib.Method) ||
		obj["sensitivity"] != 2.0 || obj["variance"] != lib.Scale*lib.Scale {
		t.Errorf("JSON %v does not match the library's %+v", obj, lib)
	}
	// Infinite variance is null (SαS), infinite mean error too (Cauchy).
	out, err = runCmd(t, "calibrate", "--mechanism", "cauchy", "--epsilon", "1", "--delta", "0", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatal(err)
	}
	if obj["variance"] != nil || obj["stddev"] != nil {
		t.Errorf("cauchy: variance/stddev %v/%v, want null", obj["variance"], obj["stddev"])
	}
}

func TestCalibrateText(t *testing.T) {
	out, err := runCmd(t, "calibrate", "--mechanism", "laplace", "--epsilon", "0.5", "--delta", "0")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"mechanism", "laplace", "scale", "2", "variance", "8", "stddev", "mean_abs_error", "closed-form"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	out, err = runCmd(t, "calibrate", "--mechanism", "sas:1.5", "--epsilon", "1", "--delta", "0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "infinite") {
		t.Errorf("sas variance should print as infinite:\n%s", out)
	}
}

// Impossible or invalid requests are errors (the root prints them on one
// line and exits 1).
func TestCalibrateErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want error
	}{
		{[]string{"--mechanism", "gaussian", "--epsilon", "1", "--delta", "0"}, privacy.ErrInfeasible},
		{[]string{"--mechanism", "gaussian-classic", "--epsilon", "2", "--delta", "1e-6"}, privacy.ErrInfeasible},
		{[]string{"--mechanism", "laplace", "--epsilon", "-1", "--delta", "0"}, privacy.ErrInvalidParameter},
		{[]string{"--mechanism", "laplace", "--epsilon", "1", "--delta", "1"}, privacy.ErrInvalidParameter},
		{[]string{"--mechanism", "laplace", "--epsilon", "1", "--delta", "0", "--sensitivity", "0"}, privacy.ErrInvalidParameter},
		{[]string{"--mechanism", "subbotin:0.5", "--epsilon", "1", "--delta", "1e-6"}, privacy.ErrInvalidParameter},
		{[]string{"--mechanism", "nope", "--epsilon", "1", "--delta", "1e-6"}, privacy.ErrUnknownMechanism},
		{[]string{"--mechanism", "all", "--epsilon", "NaN", "--delta", "0"}, privacy.ErrInvalidParameter},
	} {
		_, err := runCmd(t, append([]string{"calibrate"}, c.args...)...)
		if !errors.Is(err, c.want) {
			t.Errorf("%v: err = %v, want %v", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error spans lines: %q", c.args, err)
		}
	}
	// --delta is optional (0: pure ε, issue 12); --epsilon is not.
	if _, err := runCmd(t, "calibrate", "--mechanism", "laplace", "--delta", "0"); err == nil {
		t.Error("missing --epsilon: no error")
	}
}

// --mechanism all lists the feasible mechanisms sorted by variance, then
// mean absolute error, and leaves out the infeasible ones.
func TestCalibrateAll(t *testing.T) {
	out, err := runCmd(t, "calibrate", "--mechanism", "all", "--epsilon", "1", "--delta", "0", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out)
	}
	key := func(r map[string]any, k string) float64 {
		if v, ok := r[k].(float64); ok {
			return v
		}
		return math.Inf(1)
	}
	seen := map[string]bool{}
	for i, r := range rows {
		name := r["mechanism"].(string)
		seen[name] = true
		if strings.HasPrefix(name, "gaussian") || strings.HasPrefix(name, "subbotin:") {
			t.Errorf("δ = 0: %s cannot be pure but is listed", name)
		}
		if i > 0 {
			p := rows[i-1]
			if key(p, "variance") > key(r, "variance") ||
				(key(p, "variance") == key(r, "variance") && key(p, "mean_abs_error") > key(r, "mean_abs_error")) {
				t.Errorf("not sorted by error: %v before %v", p["mechanism"], name)
			}
		}
	}
	for _, name := range []string{"laplace", "logistic", "cauchy"} {
		if !seen[name] {
			t.Errorf("%s missing from %v", name, seen)
		}
	}
	out, err = runCmd(t, "calibrate", "--mechanism", "all", "--epsilon", "0.5", "--delta", "1e-6")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"gaussian", "subbotin:3", "gaussian-classic (loose)", "sorted by variance"} {
		if !strings.Contains(out, s) {
			t.Errorf("text output lacks %q:\n%s", s, out)
		}
	}
}
