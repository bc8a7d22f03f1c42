package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// TestKafkaWalkthrough follows the README's walkthrough on the real broker:
// build dpstream and the example producer, start `dpstream run` with
// deploy/dpstream.example.yaml, the broker and the listen address given
// only by DPSTREAM_KAFKA_BROKERS and DPSTREAM_OBSERVABILITY_LISTEN as the
// walkthrough sets them, produce the example's readings, probe it with
// `dpstream healthcheck` (no flags), and read the releases. The only deviations, so that it takes about a minute
// instead of several: 5 s windows (--set windows.size=5s, with the
// producer's --interval 1.25s the same 4 readings per meter and window as
// the walkthrough's 15 s in 1 m; lateness and idle timeout shortened to
// match) and fresh topic and group names. It asserts that every public
// region is released for a window the producer covered wholly, with each
// count within 3 half-widths of the 1000 readings the producer sent there,
// and that the start-up summary ("plan: ..." lines) is what
// `dpstream plan --json` prints for the same configuration.
//
// False-failure rate of the count check: the count noise is discrete
// Laplace, whose tail is geometric, so it exceeds 3× its 95% half-width
// with probability about 0.05³ ≈ 1.3e-4; a window fails with about 5e-4
// (4 regions), and the test fails only if every wholly covered window
// (about 3 of the producer's 22 s) fails: about 1e-10.
func TestKafkaWalkthrough(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	dir := t.TempDir()
	bin := buildDpstream(t, dir)
	prod := filepath.Join(dir, "producer")
	if out, err := exec.Command("go", "build", "-o", prod, "../../examples/producer").CombinedOutput(); err != nil {
		t.Fatalf("go build producer: %v\n%s", err, out)
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	id := "walk-" + hex.EncodeToString(rb[:])
	in, out := id+"-meter-readings", id+"-meter-readings.dp"
	example := filepath.Join("..", "..", "deploy", "dpstream.example.yaml")
	flags := []string{"--config", example, "--input-topics", in,
		"--output-topic", out, "--group-id", id,
		"--set", "windows.size=5s", "--set", "windows.allowed_lateness=1s", "--set", "windows.idle_timeout=2s"}
	var key [32]byte
	_, _ = rand.Read(key[:])
	// The walkthrough's variables, set once: the broker and the listen
	// address reach dpstream run, plan and healthcheck only through them
	// (the producer gets --brokers "$DPSTREAM_KAFKA_BROKERS").
	listen := freeAddr(t)
	env := append(os.Environ(), "DPSTREAM_KEY="+hex.EncodeToString(key[:]),
		"DPSTREAM_KAFKA_BROKERS="+strings.Join(brokers, ","), "DPSTREAM_OBSERVABILITY_LISTEN="+listen)

	// dpstream plan --json, for the comparison with the start-up log.
	planCmd := exec.Command(bin, append([]string{"plan", "--json"}, flags...)...)
	planCmd.Env = env
	planOut, err := planCmd.Output()
	if err != nil {
		t.Fatalf("dpstream plan: %v", err)
	}
	var plan operator.Sizing
	if err := json.Unmarshal(planOut, &plan); err != nil {
		t.Fatal(err)
	}

	// The producer must create the input topic first (LogAppendTime), as
	// in the walkthrough; dpstream waits for it otherwise.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var logs kafkatest.Buffer
	run := exec.CommandContext(ctx, bin, append([]string{"run"}, flags...)...)
	run.Env, run.Stderr = env, &logs
	producer := exec.CommandContext(ctx, prod, "--brokers", strings.Join(brokers, ","), "--topic", in,
		"--interval", "1.25s", "--duration", "22s")
	var plog kafkatest.Buffer
	producer.Stderr = &plog
	if err := producer.Start(); err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if run.ProcessState == nil {
			_ = run.Process.Kill()
			_ = run.Wait()
		}
	}()
	if err := producer.Wait(); err != nil {
		t.Fatalf("producer: %v\n%s", err, plog.String())
	}
	t.Logf("producer: %s", strings.TrimSpace(plog.String()))

	// Read the output until a window covered wholly has all four regions.
	var rels []schema.Release
	deadline := time.Now().Add(90 * time.Second)
	var good int64
	for time.Now().Before(deadline) && good == 0 {
		time.Sleep(2 * time.Second)
		msgs, err := snapshotTopic(ctx, brokers, out)
		if err != nil {
			continue // the output topic may not exist yet
		}
		rels = rels[:0]
		for _, m := range msgs {
			r, err := schema.DecodeRelease(m.Value)
			if err != nil {
				t.Fatalf("undecodable release: %v", err)
			}
			rels = append(rels, r)
		}
		good = fullWindow(rels)
	}
	if good == 0 {
		t.Fatalf("no window with all four regions' counts near 1000 among %d releases; dpstream log:\n%s", len(rels), logs.String())
	}
	t.Logf("%d releases; window %s released all regions with counts near the truth", len(rels), time.UnixMilli(good).UTC().Format(time.RFC3339))

	// `dpstream healthcheck` with no flags finds the running instance
	// through DPSTREAM_OBSERVABILITY_LISTEN, and it is ready.
	hc := exec.CommandContext(ctx, bin, "healthcheck")
	hc.Env = env
	if hcOut, err := hc.CombinedOutput(); err != nil {
		t.Errorf("dpstream healthcheck (listen %s): %v\n%s", listen, err, hcOut)
	}

	// Stop it as the walkthrough does (Ctrl-C / SIGTERM): a clean drain.
	_ = run.Process.Signal(syscall.SIGTERM)
	if err := run.Wait(); err != nil {
		t.Errorf("dpstream run did not exit cleanly on SIGTERM: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"drained"`) {
		t.Errorf("no drain in the log")
	}
	checkStartupSummary(t, logs.String(), &plan)
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago (another process may take it before dpstream does: unlikely, and it
// would fail the run's start, not pass wrongly).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// fullWindow returns the start of a window whose count releases of all
// four regions lie within 3 half-widths of 1000 (the producer's readings
// per region in a window it covered wholly), or 0.
func fullWindow(rels []schema.Release) int64 {
	ok := map[int64]int{}
	for _, r := range rels {
		if r.Aggregate != "count" {
			continue
		}
		s := r.Series[0]
		h := (s.Hi[0] - s.Lo[0]) / 2
		if math.Abs(s.Value(0)-1000) <= 3*h {
			ok[r.WindowStart]++
		}
	}
	for w, n := range ok {
		if n == 4 {
			return w
		}
	}
	return 0
}

// checkStartupSummary compares the "plan: ..." lines of the start-up log
// with `dpstream plan --json`: every released series with its mechanism,
// scale, half-width and level, and the budget.
func checkStartupSummary(t *testing.T, logs string, plan *operator.Sizing) {
	t.Helper()
	lines := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, "plan: ") {
			lines[msg] = m
		}
	}
	b := lines["plan: budget"]
	if b == nil || b["window_epsilon"] != plan.Budget.WindowEpsilon || b["window_delta"] != plan.Budget.WindowDelta || b["unit"] != plan.Budget.Unit {
		t.Errorf("start-up budget %v, plan %+v", b, plan.Budget)
	}
	n := 0
	for _, a := range plan.Aggregates {
		for _, r := range a.Series {
			l := lines["plan: "+a.Aggregate+"."+r.Series]
			if l == nil {
				t.Errorf("no start-up line for %s.%s", a.Aggregate, r.Series)
				continue
			}
			n++
			if l["mechanism"] != r.Mechanism || l["scale"] != r.Scale || l["half_width"] != *r.HalfWidth || l["confidence_level"] != r.Level {
				t.Errorf("%s.%s: start-up %v, plan %+v (half %g)", a.Aggregate, r.Series, l, r, *r.HalfWidth)
			}
		}
	}
	if n == 0 {
		t.Errorf("no series compared; plan:\n%s", fmt.Sprint(plan))
	}
}
