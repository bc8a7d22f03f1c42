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

// TestPartialAssignmentReport: an instance without kafka.scale_out that
// keeps getting part of the input partitions logs an ERROR naming
// kafka.scale_out and windows.start the first time and then every 10th
// time only, and waits longer each time (5 s doubling to 1 min) before it
// rejoins. The code before logged the same ERROR, naming neither key,
// every 5 s (its rejoin forced a rebalance of both instances each time):
// this test does not compile against it (no reportPartialAssignment), and
// its message lacks both keys.
func TestPartialAssignmentReport(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Kafka.RetryBackoffMax = 30 * time.Second
	var logs bytes.Buffer
	op, err := New(c, WithKey(testKey()), WithRegistry(prometheus.NewRegistry()),
		WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))))
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	for n := 1; n <= 21; n++ {
		waits = append(waits, op.reportPartialAssignment(n, 2, 4, int32(n)))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute}
	for i, w := range want {
		if waits[i] != w {
			t.Errorf("wait %d = %v, want %v", i+1, waits[i], w)
		}
	}
	for i := len(want); i < len(waits); i++ {
		if waits[i] != time.Minute {
			t.Errorf("wait %d = %v, want 1m0s", i+1, waits[i])
		}
	}
	var errs []map[string]any
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		errs = append(errs, m)
	}
	if len(errs) != 3 { // the 1st, 10th and 20th
		t.Fatalf("%d ERROR lines for 21 partial assignments, want 3:\n%s", len(errs), logs.String())
	}
	for i, n := range []float64{1, 10, 20} {
		msg, _ := errs[i]["msg"].(string)
		if errs[i]["times_in_a_row"] != n || !strings.Contains(msg, "kafka.scale_out") || !strings.Contains(msg, "windows.start") {
			t.Errorf("ERROR %d: %v", i+1, errs[i])
		}
	}
	// A short retry_backoff_max (tests) shortens the first pause.
	op.cfg.Kafka.RetryBackoffMax = time.Second
	if w := op.reportPartialAssignment(1, 2, 4, 1); w != time.Second {
		t.Errorf("first wait with retry_backoff_max 1s = %v", w)
	}
}
