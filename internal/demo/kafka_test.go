package demo

// Tests against the project's real Apache Kafka broker (deploy/kafka/kafka.sh;
// deploy/test.sh starts it and sets DPSTREAM_TEST_BROKERS). They skip with a
// message saying how to run them when the broker is not there.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// pythonWithPackages returns a Python interpreter that has the example's
// requirements (kafka-python, msgpack), or skips: $DPSTREAM_PYTHON, else
// python3 on PATH.
func pythonWithPackages(t *testing.T) string {
	t.Helper()
	py := os.Getenv("DPSTREAM_PYTHON")
	if py == "" {
		var err error
		if py, err = exec.LookPath("python3"); err != nil {
			t.Skip("python3 is not on PATH (or set DPSTREAM_PYTHON): the Python consumer example cannot run")
		}
	}
	if out, err := exec.Command(py, "-c", "import kafka, msgpack").CombinedOutput(); err != nil {
		t.Skipf("%s lacks the example's packages (%v: %s): pip install -r examples/python/requirements.txt, "+
			"or let deploy/test.sh make its venv and set DPSTREAM_PYTHON", py, err, bytes.TrimSpace(out))
	}
	return py
}

// pyRelease is one line of consume_releases.py --json.
type pyRelease struct {
	Key         string            `json:"key"`
	ReleaseID   string            `json:"release_id"`
	WindowStart int64             `json:"window_start"`
	WindowEnd   int64             `json:"window_end"`
	Aggregate   string            `json:"aggregate"`
	Kind        string            `json:"kind"`
	Epsilon     float64           `json:"epsilon"`
	Delta       float64           `json:"delta"`
	PrivacyUnit string            `json:"privacy_unit"`
	Group       map[string]string `json:"group"`
	Series      []struct {
		Name      string    `json:"name"`
		Mechanism string    `json:"mechanism"`
		Scale     float64   `json:"scale"`
		Labels    []string  `json:"labels"`
		Values    []float64 `json:"values"`
		Level     float64   `json:"ci_level"`
		Lo        []float64 `json:"ci_lo"`
		Hi        []float64 `json:"ci_hi"`
	} `json:"series"`
}

// TestKafkaPythonConsumer: the demo publishes releases to the real broker;
// the Python example (examples/python) reads the output topic with
// kafka-python and msgpack, validates every release, and reports exactly
// the releases, values and intervals that the Go decoder read, bit for bit.
// Its key escaping matches schema.ReleaseKey on awkward group values.
func TestKafkaPythonConsumer(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	py := pythonWithPackages(t)
	script, err := filepath.Abs("../../examples/python/consume_releases.py")
	if err != nil {
		t.Fatal(err)
	}
	o := smallDemo()
	o.Brokers, o.Windows, o.EventsPerWindow = brokers, 2, 600
	var errs bytes.Buffer
	res, err := Run(context.Background(), o, &bytes.Buffer{}, &errs)
	if err != nil {
		t.Fatalf("demo on %v: %v\n%s", brokers, err, errs.String())
	}
	checkDemoResult(t, o, res) // the demo itself, end to end on the real broker
	want := map[string]schema.Release{}
	for _, w := range res.Windows {
		for _, r := range w.Releases {
			want[r.Key()] = r
		}
	}
	if len(want) != o.Windows*len(Regions)*len(AggregateOrder) {
		t.Fatalf("the demo published %d releases", len(want))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, script, "--brokers", strings.Join(brokers, ","), "--topic", res.OutputTopic,
		"--expect", strconv.Itoa(len(want)), "--timeout", "60", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("consume_releases.py: %v\nstderr:\n%s", err, stderr.String())
	}
	got := map[string]bool{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var pr pyRelease
		if err := json.Unmarshal(sc.Bytes(), &pr); err != nil {
			t.Fatalf("Python output line: %v\n%s", err, sc.Text())
		}
		got[pr.Key] = true
		r, ok := want[pr.Key]
		if !ok {
			t.Errorf("Python read release %q, which the demo did not publish", pr.Key)
			continue
		}
		if pr.ReleaseID != r.ReleaseID || pr.WindowStart != r.WindowStart || pr.WindowEnd != r.WindowEnd ||
			pr.Aggregate != r.Aggregate || pr.Kind != string(r.Kind) || pr.Epsilon != r.Budget.Epsilon ||
			pr.Delta != r.Budget.Delta || pr.PrivacyUnit != r.Unit || pr.Group["region"] != groupValue(&r) ||
			len(pr.Series) != len(r.Series) {
			t.Errorf("%s: Python read %+v, Go %+v", pr.Key, pr, r)
			continue
		}
		for i, ps := range pr.Series {
			s := r.Series[i]
			vals := make([]float64, s.Len())
			for j := range vals {
				vals[j] = s.Value(j)
			}
			if ps.Name != s.Name || ps.Mechanism != s.Mechanism || ps.Scale != s.Scale || ps.Level != s.Level ||
				!slices.Equal(ps.Values, vals) || !slices.Equal(ps.Lo, s.Lo) || !slices.Equal(ps.Hi, s.Hi) ||
				!slices.Equal(ps.Labels, s.Labels) && len(ps.Labels)+len(s.Labels) > 0 {
				t.Errorf("%s series %s: Python %+v, Go %+v", pr.Key, s.Name, ps, s)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("Python read %d releases, the demo published %d\nstderr:\n%s", len(got), len(want), stderr.String())
	}

	// The table mode runs too and exits 0 (every release valid).
	cmd = exec.CommandContext(ctx, py, script, "--brokers", strings.Join(brokers, ","), "--topic", res.OutputTopic,
		"--expect", strconv.Itoa(len(want)), "--timeout", "60")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(strconv.Itoa(len(want))+" releases read, 0 invalid")) {
		t.Errorf("table mode: %v\n%s", err, out)
	}

	// Key escaping: the Python example against schema.ReleaseKey.
	parts := [][]string{{"ns/2024-05-01T00:00:00.000Z", "count", "north"}, {"a|b", "sum", "x%y", "é\x01\x7f"}, {"id", "mean", ""}}
	in, _ := json.Marshal(parts)
	code := "import json, sys; sys.path.insert(0, sys.argv[1]); import consume_releases as c; " +
		"print(json.dumps([c.release_key(p[0], p[1], p[2:]) for p in json.loads(sys.argv[2])]))"
	out, err = exec.CommandContext(ctx, py, "-c", code, filepath.Dir(script), string(in)).Output()
	if err != nil {
		t.Fatalf("release_key: %v", err)
	}
	var keys []string
	if err := json.Unmarshal(out, &keys); err != nil || len(keys) != len(parts) {
		t.Fatalf("release_key output %q: %v", out, err)
	}
	for i, p := range parts {
		if w := schema.ReleaseKey(p[0], p[1], p[2:]...); keys[i] != w {
			t.Errorf("release_key%q = %q, schema.ReleaseKey gives %q", p, keys[i], w)
		}
	}
}
