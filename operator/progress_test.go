package operator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// progressLines runs op.progress every 20 s of the operator's clock for
// 140 s (lines at 60 s and 120 s), calling between(i) before the i-th
// call, and returns the progress lines logged as JSON objects.
func progressLines(t *testing.T, c Config, between func(op *Operator, i int)) []map[string]any {
	t.Helper()
	var logs bytes.Buffer
	now := time.UnixMilli(testBase)
	op, err := New(c, WithKey(testKey()), WithRegistry(prometheus.NewRegistry()), WithClock(func() time.Time { return now }),
		WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	co, err := newCore(c, op.plan, op.key, testBase)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 { // 0 s (start), 20 s, …, 140 s
		between(op, i)
		op.progress(co)
		now = now.Add(20 * time.Second)
	}
	var out []map[string]any
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] == "progress" {
			out = append(out, m)
		}
	}
	return out
}

// TestProgressLine: the progress line comes at most every progressEvery
// (2 lines in 140 s); by default it carries only what was published, with
// sensitive metrics also events/s, lag and open windows.
func TestProgressLine(t *testing.T) {
	for _, sensitive := range []bool{false, true} {
		c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
		c.Observability.SensitiveMetrics = sensitive
		lines := progressLines(t, c, func(*Operator, int) {})
		if len(lines) != 2 {
			t.Errorf("sensitive=%v: %d progress lines in 140 s, want 2: %v", sensitive, len(lines), lines)
		}
		for _, l := range lines {
			for _, k := range []string{"events_per_second", "lag", "open_windows"} {
				if _, got := l[k]; got != sensitive {
					t.Errorf("sensitive=%v: progress line has %s = %v", sensitive, k, got)
				}
			}
			if _, ok := l["windows_published"]; !ok {
				t.Errorf("progress line without windows_published: %v", l)
			}
		}
	}
}

// TestProgressLineTotals: the progress line gives what was published since
// the last line (windows_published, releases_published, over interval)
// and since the start (the _total keys), as docs/operations.md says. The
// totals fail on the code before them (the line had only the per-minute
// counts, which the docs called "so far").
func TestProgressLineTotals(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	lines := progressLines(t, c, func(op *Operator, i int) {
		if i == 1 || i == 4 { // one window of 3 releases before each line
			op.m.windowPublished(3, 0, 0, time.Millisecond)
			op.m.lastEnd.Store(testBase + int64(i)*testSize.Milliseconds())
		}
	})
	if len(lines) != 2 {
		t.Fatalf("%d progress lines, want 2: %v", len(lines), lines)
	}
	for i, want := range []map[string]any{
		{"windows_published": 1.0, "releases_published": 3.0, "windows_published_total": 1.0, "releases_published_total": 3.0, "interval": "1m0s"},
		{"windows_published": 1.0, "releases_published": 3.0, "windows_published_total": 2.0, "releases_published_total": 6.0, "interval": "1m0s"},
	} {
		for k, v := range want {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v (%v)", i+1, k, lines[i][k], v, lines[i])
			}
		}
		if _, ok := lines[i]["merge"]; ok {
			t.Errorf("line %d without scale-out has a merge key: %v", i+1, lines[i])
		}
	}
}

// TestProgressLineStandby: with kafka.scale_out, an instance that does not
// merge says it is a standby instead of "nothing yet" forever; the merger
// says it merges. Fails on the code before (published_through was
// "nothing yet (…)" on a standby, and there was no merge key).
func TestProgressLineStandby(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Kafka.ScaleOut = true
	lines := progressLines(t, c, func(op *Operator, i int) {
		op.m.merger.Store(i >= 4) // a standby until 80 s, then the merger
	})
	if len(lines) != 2 {
		t.Fatalf("%d progress lines, want 2: %v", len(lines), lines)
	}
	pt, _ := lines[0]["published_through"].(string)
	if strings.Contains(pt, "nothing yet") || !strings.Contains(pt, "standby") || lines[0]["merge"] != progressStandbyStage {
		t.Errorf("standby's line: %v", lines[0])
	}
	if lines[1]["merge"] != progressMerging || lines[1]["published_through"] != progressNothingYet {
		t.Errorf("merger's line: %v", lines[1])
	}
}
