package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestRunCheckConfigExample: the shipped example config is valid once a key
// is available.
func TestRunCheckConfigExample(t *testing.T) {
	t.Setenv("DPSTREAM_KEY", strings.Repeat("ab", 32))
	out, err := runCLI(t, "run", "--config", filepath.Join("..", "..", "deploy", "dpstream.example.yaml"), "--check-config")
	first, rest, _ := strings.Cut(out, "\n")
	if err != nil || first != "config ok" || !strings.HasPrefix(rest, "calibration: ") {
		t.Fatalf("check-config on the example: %v\n%s", err, out)
	}
}

// TestRunCheckConfigShowsSensitivities: --check-config prints what the
// plan derived for every part, the new aggregates' sensitivities included
// (derived from the bounds, never configured).
func TestRunCheckConfigShowsSensitivities(t *testing.T) {
	t.Setenv("DPSTREAM_KEY", strings.Repeat("ab", 32))
	out, err := runCLI(t, "run", "--config", filepath.Join("..", "..", "deploy", "dpstream.example.yaml"),
		"--set", "windows.aggregates=count,units,variance,quantiles", "--check-config")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"units.units: ", "variance.count: ", "variance.sum: ", "variance.sum_sq: ", "quantiles.tree: ", "(L0=", "L∞=", "quantiles 0.5, 0.9, 0.99 from one tree"} {
		if !strings.Contains(out, want) {
			t.Errorf("--check-config output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "[0.5 0.9 0.99]") {
		t.Errorf("a list printed in Go syntax:\n%s", out)
	}
}

// TestRunCheckConfigProblems: every problem is printed on its own line,
// flags and --set override the file, and the command fails.
func TestRunCheckConfigProblems(t *testing.T) {
	t.Setenv("DPSTREAM_KEY", "")
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	yaml := "kafka:\n  input_topics: [events]\nwindows:\n  size: 0s\nprivacy:\n  epsilon: -1\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "run", "--config", file, "--check-config", "--output-topic", "events", "--set", "bounds.max_groups=0")
	if err == nil {
		t.Fatalf("bad config accepted:\n%s", out)
	}
	for _, want := range []string{"kafka.output_topic:", "windows.size:", "privacy.epsilon:", "bounds.max_groups:"} {
		if !strings.Contains(out, "\n"+want) && !strings.HasPrefix(out, want) {
			t.Errorf("no line starting with %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "config ok") {
		t.Errorf("said config ok:\n%s", out)
	}
}

// TestRunCheckConfigMissingKey: a valid config without a key is reported.
func TestRunCheckConfigMissingKey(t *testing.T) {
	t.Setenv("DPSTREAM_KEY", "")
	out, err := runCLI(t, "run", "--check-config", "--input-topics", "events", "--epsilon", "1")
	if err == nil || !strings.Contains(out, "privacy.key_env: the environment variable DPSTREAM_KEY is not set") {
		t.Fatalf("missing key not reported: %v\n%s", err, out)
	}
}
