package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// noiseCLI runs dpstream with stdin and returns stdout and stderr apart.
func noiseCLI(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"noise"}, args...))
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func writeKeyFile(t *testing.T, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.hex")
	if err := os.WriteFile(path, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNoiseReproducible(t *testing.T) {
	key := writeKeyFile(t, 0o600)
	in := "1\n2.5\n-3\n"
	for _, mech := range []string{"laplace", "gaussian", "discrete-gaussian", "subbotin:3", "sas:1.5"} {
		args := []string{"--mechanism", mech, "--scale", "2", "--key-file", key, "--release-id", "window-7", "--repeat", "3"}
		if mech == "discrete-gaussian" {
			in = "1\n2\n-3\n"
		}
		a, _, err := noiseCLI(t, in, args...)
		if err != nil {
			t.Fatalf("%s: %v", mech, err)
		}
		b, _, _ := noiseCLI(t, in, args...)
		if a != b {
			t.Errorf("%s: same key and release id gave different output:\n%s\n%s", mech, a, b)
		}
		if lines := strings.Split(strings.TrimSpace(a), "\n"); len(lines) != 9 {
			t.Errorf("%s: %d output lines, want 9 (3 inputs × --repeat 3)", mech, len(lines))
		}
		args[len(args)-3] = "window-8"
		c, _, _ := noiseCLI(t, in, args...)
		if c == a {
			t.Errorf("%s: different release ids gave the same output", mech)
		}
		// Without a key file every run is fresh. With 3 values only, two
		// fresh runs of discrete-gaussian (σ = 2: one value repeats with
		// probability Σ p(k)² ≈ 0.14) agreed about once in 360 runs; with
		// --repeat 20 (60 values) they agree with probability ≈ 0.14⁶⁰
		// < 1e-50, the false-failure rate of this check.
		d, _, _ := noiseCLI(t, in, "--mechanism", mech, "--scale", "2", "--repeat", "20")
		e, _, _ := noiseCLI(t, in, "--mechanism", mech, "--scale", "2", "--repeat", "20")
		if d == e {
			t.Errorf("%s: two runs without a key file agree", mech)
		}
	}
}

func TestNoiseErrors(t *testing.T) {
	key := writeKeyFile(t, 0o644)
	secret := "31337.25"
	cases := []struct {
		name, in string
		args     []string
		want     string
	}{
		{"bad line", "1\n" + secret + "x\n", []string{"--mechanism", "laplace", "--scale", "1"}, "line 2: not a number"},
		{"empty line", "1\n\n3\n", []string{"--mechanism", "laplace", "--scale", "1"}, "line 2: empty"},
		{"nan", "NaN\n", []string{"--mechanism", "laplace", "--scale", "1"}, "line 1: not a finite"},
		{"integer mechanism", "4\n" + secret + "\n", []string{"--mechanism", "discrete-laplace", "--epsilon", "1"}, "line 2: discrete-laplace needs an integer"},
		{"both scale and budget", "1\n", []string{"--mechanism", "laplace", "--scale", "1", "--epsilon", "1"}, "either --scale or a budget"},
		{"neither", "1\n", []string{"--mechanism", "laplace"}, "give --scale or --epsilon"},
		{"bad scale", "1\n", []string{"--mechanism", "laplace", "--scale", "-1"}, "--scale must be"},
		{"key without id", "1\n", []string{"--mechanism", "laplace", "--scale", "1", "--key-file", key}, "go together"},
		{"open key file", "1\n", []string{"--mechanism", "laplace", "--scale", "1", "--key-file", key, "--release-id", "r"}, "chmod 600"},
		{"one bound", "1\n", []string{"--mechanism", "laplace", "--epsilon", "1", "--lower", "0"}, "both --lower and --upper"},
		{"bounds need budget", "1\n", []string{"--mechanism", "laplace", "--scale", "1", "--lower", "0", "--upper", "1"}, "need a budget"},
		{"unknown mechanism", "1\n", []string{"--mechanism", "nope", "--scale", "1"}, "unknown mechanism"},
		{"infeasible", "1\n", []string{"--mechanism", "gaussian", "--epsilon", "1"}, "δ"},
		{"repeat", "1\n", []string{"--mechanism", "laplace", "--scale", "1", "--repeat", "0"}, "--repeat"},
	}
	for _, c := range cases {
		_, _, err := noiseCLI(t, c.in, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "31337") {
			t.Errorf("%s: error echoes the input: %v", c.name, err)
		}
	}
}

// TestNoiseSnapped: with bounds and a budget every output is clamped and on
// the power-of-two grid; integer mechanisms print integers.
func TestNoiseSnapped(t *testing.T) {
	out, info, err := noiseCLI(t, "3.14159\n-7\n1e9\n", "--mechanism", "laplace", "--epsilon", "1", "--lower", "0", "--upper", "100", "--repeat", "50")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "snapped to multiples of") {
		t.Errorf("no snapping note on stderr: %q", info)
	}
	step := math.Ldexp(1, -20) // Δ = 1: the grid step is 2^-20
	for _, l := range strings.Fields(out) {
		v, err := strconv.ParseFloat(l, 64)
		if err != nil {
			t.Fatal(err)
		}
		if q := v / step; q != math.Trunc(q) {
			t.Errorf("output %v is not a multiple of 2^-20", v)
		}
	}
	out, _, err = noiseCLI(t, "5\n-12\n", "--mechanism", "discrete-gaussian", "--epsilon", "1", "--delta", "1e-6", "--repeat", "20")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Fields(out) {
		if _, err := strconv.ParseInt(l, 10, 64); err != nil {
			t.Errorf("integer mechanism printed %q", l)
		}
	}
}

// TestNoiseSamplesThroughCLI: the command is a sampler front end. 20 000
// Laplace draws at scale 2 around 10 have mean 10 and E|Y − 10| = 2; the
// bounds (5 standard errors: sd 2√2/√n = 0.02 and 2/√n = 0.014) fail with
// probability below 1e-6.
func TestNoiseSamplesThroughCLI(t *testing.T) {
	key := writeKeyFile(t, 0o600)
	const n = 20000
	out, _, err := noiseCLI(t, "10\n", "--mechanism", "laplace", "--scale", "2", "--repeat", strconv.Itoa(n),
		"--key-file", key, "--release-id", "stat")
	if err != nil {
		t.Fatal(err)
	}
	var sum, abs float64
	f := strings.Fields(out)
	if len(f) != n {
		t.Fatalf("%d lines, want %d", len(f), n)
	}
	for _, l := range f {
		v, _ := strconv.ParseFloat(l, 64)
		sum += v
		abs += math.Abs(v - 10)
	}
	if mean := sum / n; math.Abs(mean-10) > 5*2*math.Sqrt2/math.Sqrt(n) {
		t.Errorf("mean %v, want 10", mean)
	}
	if mae := abs / n; math.Abs(mae-2) > 5*2/math.Sqrt(n) {
		t.Errorf("mean absolute deviation %v, want 2", mae)
	}
}
