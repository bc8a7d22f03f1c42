package main

// The crash test: dpstream run as a subprocess, killed with SIGKILL at random
// points while the input is being produced, restarted each time, must in
// the end have published exactly the releases of a failure-free run with
// the same key: same release keys, identical bytes.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dpstream/dpstream/internal/demo"
	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// crashConfigYAML is the dpstream run configuration of the crash test: the
// demo's schema, windows, bounds and budget (see demo.OperatorConfig), with the key
// in a file and a shorter idle timeout than the demo's (4 s: the operator
// polls for closed windows every idle_timeout/10, so windows are published
// within 0.4 s and kills land around publications). %[1]s brokers, %[2]s
// input topic, %[3]s group, %[4]s output topic, %[5]s release namespace,
// %[6]s key file, %[7]s windows.start (the stream's first window).
const crashConfigYAML = `kafka:
  brokers: [%[1]s]
  input_topics: [%[2]s]
  group_id: %[3]s
  output_topic: %[4]s
  release_namespace: %[5]s
  instance: crash-test
  client_id: dpstream-crash-test
  create_topics: true
  start_offset: earliest
  commit_interval: 200ms
  batch_timeout: 2ms
  session_timeout: 6s
  retry_backoff: 100ms
  retry_backoff_max: 2s
schema:
  format: auto
  time_field: ts
  time_format: unix_ms
  unit_field: meter
  group_by: [region]
  histogram:
    field: status
    categories: [ok, estimated, fault]
  value_field: wh
  lower: 0
  upper: 300
windows:
  size: 15m
  allowed_lateness: 1m
  idle_timeout: 4s
  start: %[7]s
  aggregates: [count, histogram, sum, mean, units, variance, quantiles]
  quantiles: [0.5, 0.9, 0.99]
  quantile_branching: 16
  quantile_depth: 2
bounds:
  max_groups: 1
  max_buckets: 2
  max_per_bucket: 2
  max_values: 3
privacy:
  epsilon: 1
  delta: 1e-6
  mechanism: laplace
  public_groups: [[north], [east], [south], [west]]
  confidence: 0.95
  key_file: %[6]s
  key_env: ""
observability:
  listen: ""
  log_level: info
  log_format: json
`

// crashTest holds what the subprocess runs share.
type crashTest struct {
	t       testing.TB
	bin     string
	brokers []string
	dir     string
	keyFile string
	ns      string
	in      string
	first   int64    // the stream's first window, unix ms
	env     []string // added to the subprocesses' environment
	clock   string   // the operator's clock file once setClock was called
}

// setClock sets the subprocesses' operator clock (testclock_on.go) to ms,
// Unix ms of the stream's simulated time. The tests advance it to the
// latest arrival time produced so far: a partition read to its end then
// moves to at most that minus idle_timeout, so the windows close by the
// records' arrival times, and each is published once the clock passes its
// schedule (end + allowed_lateness + idle_timeout), as a live deployment's
// would be. Written to a new file and renamed, so a reader never sees half
// of it. The first call must come before the first subprocess starts.
func (c *crashTest) setClock(ms int64) {
	c.t.Helper()
	if c.clock == "" {
		c.clock = filepath.Join(c.dir, "clock")
	}
	tmp := c.clock + ".new"
	err := os.WriteFile(tmp, []byte(strconv.FormatInt(ms, 10)), 0o600)
	if err == nil {
		err = os.Rename(tmp, c.clock)
	}
	if err != nil {
		c.t.Errorf("setting the test clock: %v", err) // Errorf: callable from the producer's goroutine
	}
}

// clockAfter is a clock time (Unix ms) past the schedule of the stream's
// last window, the n-th: its end + allowed_lateness (demo.Lateness) +
// idle_timeout (4 s in crashConfigYAML) + 1 s (more than a tick, 0.4 s),
// and before the next (empty) window's.
func (c *crashTest) clockAfter(n int) int64 {
	end := c.first + int64(n)*demo.WindowSize.Milliseconds()
	return end + demo.Lateness.Milliseconds() + 5_000
}

// lastArrival is the largest arrival time of msgs (Unix ms).
func lastArrival(msgs []demo.Message) int64 {
	last := int64(math.MinInt64)
	for i := range msgs {
		last = max(last, msgs[i].Arrival)
	}
	return last
}

// newCrashTest builds the dpstream binary into a temporary directory and
// writes a fixed test key (bytes 0x00, 0x07, 0x0e, …), hex in a 0600 file;
// the release namespace and the input topic are prefix-<random id>.
func newCrashTest(t testing.TB, brokers []string, prefix string) *crashTest {
	t.Helper()
	dir := t.TempDir()
	id := demo.RandomID()
	c := &crashTest{t: t, bin: buildDpstream(t, dir), brokers: brokers, dir: dir,
		keyFile: filepath.Join(dir, "key"), ns: prefix + "-" + id, in: prefix + "-" + id + "-in"}
	var key [32]byte
	for i := range key {
		key[i] = byte(7 * i)
	}
	if err := os.WriteFile(c.keyFile, []byte(hex.EncodeToString(key[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// buildDpstream builds the dpstream binary once into dir.
func buildDpstream(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "dpstream")
	// The dpstream_testclock tag lets a test drive the operator's clock
	// (testclock_on.go, crashTest.setClock).
	cmd := exec.Command("go", "build", "-tags", "dpstream_testclock", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// writeConfig writes a run configuration for group and output topic and
// checks that it loads to the demo's settings. kafkaLines ("name: value")
// are added to the kafka section.
func (c *crashTest) writeConfig(name, group, output string, kafkaLines ...string) string {
	c.t.Helper()
	path := filepath.Join(c.dir, name+".yaml")
	y := fmt.Sprintf(crashConfigYAML, strings.Join(c.brokers, ", "), c.in, group, output, c.ns, c.keyFile,
		time.UnixMilli(c.first).UTC().Format(time.RFC3339))
	for _, l := range kafkaLines {
		y = strings.Replace(y, "kafka:\n", "kafka:\n  "+l+"\n", 1)
	}
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		c.t.Fatal(err)
	}
	cfg, err := operator.Load(path, nil)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		c.t.Fatalf("crash test config: %v", err)
	}
	want := demo.OperatorConfig(demo.DefaultOptions(), c.brokers, c.in, output, group)
	if cfg.Windows.Size != want.Windows.Size || cfg.Bounds != want.Bounds || cfg.Schema.Upper != want.Schema.Upper ||
		!slices.Equal(cfg.Windows.Aggregates, want.Windows.Aggregates) || cfg.Privacy.Epsilon != want.Privacy.Epsilon {
		c.t.Fatalf("crash test config differs from the demo's: %+v", cfg)
	}
	return path
}

// proc is one running dpstream run subprocess.
type proc struct {
	cmd       *exec.Cmd
	started   chan struct{} // closed at the first "generation started" log line
	published chan struct{} // receives a value at each "window published" log line
	done      chan error    // receives Wait's result
	exited    chan struct{} // closed when the process has exited
	mu        sync.Mutex
	tail      []string    // last log lines, for failure messages
	gens      []time.Time // when each "generation started" line was read
}

// start runs dpstream run --config cfg. Its environment has no DPSTREAM_*
// variables, so the configuration file alone decides (the key included),
// and has c.env.
func (c *crashTest) start(cfg string) *proc {
	c.t.Helper()
	p := &proc{started: make(chan struct{}), published: make(chan struct{}, 1024), done: make(chan error, 1),
		exited: make(chan struct{})}
	p.cmd = exec.Command(c.bin, "run", "--config", cfg)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "DPSTREAM_") {
			p.cmd.Env = append(p.cmd.Env, e)
		}
	}
	p.cmd.Env = append(p.cmd.Env, c.env...)
	if c.clock != "" {
		p.cmd.Env = append(p.cmd.Env, "DPSTREAM_TEST_CLOCK_FILE="+c.clock)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	// DPSTREAM_TEST_LOGS=<dir> keeps every process's whole log there, each
	// line prefixed with the time the test read it (to study a run: the
	// tail in failure messages is only the last lines).
	var logFile *os.File
	if dir := os.Getenv("DPSTREAM_TEST_LOGS"); dir != "" {
		f, err := os.CreateTemp(dir, strings.TrimSuffix(filepath.Base(cfg), ".yaml")+"-*.log")
		if err != nil {
			c.t.Fatal(err)
		}
		logFile = f
	}
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if logFile != nil {
				fmt.Fprintf(logFile, "%s %s\n", time.Now().Format("15:04:05.000"), line)
			}
			gen := strings.Contains(line, `"generation started"`)
			p.mu.Lock()
			p.tail = append(p.tail, line)
			if len(p.tail) > 30 {
				p.tail = p.tail[1:]
			}
			if gen {
				p.gens = append(p.gens, time.Now())
			}
			p.mu.Unlock()
			switch {
			case gen:
				once.Do(func() { close(p.started) })
			case strings.Contains(line, `"window published"`):
				select {
				case p.published <- struct{}{}:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		if logFile != nil {
			logFile.Close()
		}
		err := p.cmd.Wait()
		close(p.exited)
		p.done <- err
	}()
	return p
}

func (p *proc) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// releases reads topic and returns, per release key, every value written
// under it, failing on anything that is not a valid release.
func (c *crashTest) releases(ctx context.Context, topic string) map[string][][]byte {
	c.t.Helper()
	msgs, err := snapshotTopic(ctx, c.brokers, topic)
	if err != nil {
		c.t.Fatalf("reading %s: %v", topic, err)
	}
	out := map[string][][]byte{}
	for _, m := range msgs {
		r, err := schema.DecodeRelease(m.Value)
		if err != nil || r.Key() != string(m.Key) {
			c.t.Fatalf("%s offset %d: not a valid release (%v)", topic, m.Offset, err)
		}
		out[string(m.Key)] = append(out[string(m.Key)], m.Value)
	}
	return out
}

// waitStarted waits until p has started consuming (its first consumer
// group generation), failing if it exits first.
func (c *crashTest) waitStarted(ctx context.Context, p *proc, what string) {
	c.t.Helper()
	select {
	case <-p.started:
	case <-p.exited:
		c.t.Fatalf("%s exited before consuming; last log lines:\n%s", what, p.logTail())
	case <-ctx.Done():
		c.t.Fatalf("%s did not start consuming; last log lines:\n%s", what, p.logTail())
	}
}

// waitReleases waits until topic holds n distinct release keys, failing
// if any of ps exits first.
func (c *crashTest) waitReleases(ctx context.Context, topic string, n int, ps ...*proc) {
	c.t.Helper()
	tails := func() string {
		var b strings.Builder
		for i, p := range ps {
			fmt.Fprintf(&b, "--- process %d of %d, last log lines:\n%s\n", i+1, len(ps), p.logTail())
		}
		return b.String()
	}
	for {
		if _, err := demo.TopicPartitions(ctx, c.brokers, topic); err == nil {
			if msgs, err := snapshotTopic(ctx, c.brokers, topic); err == nil {
				keys := map[string]bool{}
				for _, m := range msgs {
					keys[string(m.Key)] = true
				}
				if len(keys) >= n {
					return
				}
			}
		}
		for i, p := range ps {
			select {
			case <-p.exited:
				c.t.Fatalf("dpstream run (process %d) exited early (%v)\n%s", i+1, p.cmd.ProcessState, tails())
			default:
			}
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("%s did not get %d releases in time\n%s", topic, n, tails())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for a clean exit (drain and commit).
func (c *crashTest) stop(p *proc) {
	c.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			c.t.Errorf("dpstream run did not exit cleanly on SIGTERM: %v\n%s", err, p.logTail())
		}
	case <-time.After(45 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		c.t.Errorf("dpstream run did not exit within 45s of SIGTERM\n%s", p.logTail())
	}
}

// TestKafkaCrashRecovery: while the input is produced in chunks, dpstream
// run (a subprocess) is killed with SIGKILL at random points (fixed seed)
// several times and restarted; then it runs until every window is
// published. A failure-free run with the same key on the same input
// publishes to another topic. Both topics must hold the same release keys
// with identical bytes: nothing missing, nothing divergent (a release
// written twice across a crash is allowed only with identical bytes).
func TestKafkaCrashRecovery(t *testing.T) {
	t.Parallel() // waits on the broker mostly; own topics and groups (docs/development.md)
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := newCrashTest(t, brokers, "dpstream-crash")
	const nWindows = 8
	// A partition dpstream has read to its end is advanced to its clock
	// minus idle_timeout, and a window is published once that clock passes
	// end + allowed_lateness + idle_timeout. The stream's simulated time
	// (8 windows of 15 minutes produced in 32 s) starts at the next window
	// boundary after now, and the operator's clock (setClock) follows the
	// production: after each chunk, the chunk's latest arrival time. So the
	// windows close by the records' arrival times and are published on
	// their simulated schedule, as with a live stream. The records are
	// stamped up to about 2.5 hours ahead (CreateTime), which the broker
	// must accept (message.timestamp.after.max.ms; the project's broker
	// accepts any).
	size := demo.WindowSize.Milliseconds()
	c.first = (time.Now().UnixMilli()/size + 1) * size
	c.setClock(c.first)
	s, err := demo.Generate(demo.StreamConfig{Seed: 11, Windows: nWindows, EventsPerWindow: 3000, Partitions: demo.Partitions,
		Base: c.first, Size: demo.WindowSize, Lateness: demo.Lateness})
	if err != nil {
		t.Fatal(err)
	}
	wantReleases := nWindows * len(demo.Regions) * len(demo.AggregateOrder)
	if err := demo.CreateTopic(ctx, brokers, c.in, demo.Partitions); err != nil {
		t.Fatal(err)
	}

	// The producer: the stream in 32 chunks, one a second (4 per window of
	// event time), so that windows close and are published all through the
	// kills and restarts (a restart waits about 6 s, the session timeout,
	// for the killed member to leave the group).
	produced := make(chan error, 1)
	go func() {
		const chunks = 4 * nWindows
		n := len(s.Msgs)
		for i := range chunks {
			part := &demo.Stream{Config: s.Config, Msgs: s.Msgs[i*n/chunks : (i+1)*n/chunks]}
			if err := demo.Produce(ctx, brokers, c.in, part); err != nil {
				produced <- err
				return
			}
			if i == chunks-1 {
				// Every window's schedule has passed.
				c.setClock(c.clockAfter(nWindows))
			} else if len(part.Msgs) > 0 {
				c.setClock(lastArrival(part.Msgs))
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		produced <- nil
	}()

	group, out := c.ns, c.ns+"-out"
	cfg := c.writeConfig("crash", group, out)
	// Kill points (fixed seed): half of the kills at a random time 0–2 s
	// into consumption, half 0–150 ms after the k-th window publication of
	// the run (k = 1 or 2): between the release and state writes, the
	// state write and the offset commit (every 200 ms), or later.
	rng := rand.New(rand.NewPCG(20240501, 9))
	const kills = 5
	for i := range kills {
		p := c.start(cfg)
		c.waitStarted(ctx, p, fmt.Sprintf("run %d", i))
		how := ""
		if rng.IntN(2) == 0 {
			d := time.Duration(rng.Int64N(int64(2 * time.Second)))
			time.Sleep(d)
			how = fmt.Sprintf("%v into consumption", d.Round(time.Millisecond))
		} else {
			k, d := 1+rng.IntN(2), time.Duration(rng.Int64N(int64(150*time.Millisecond)))
			seen := 0
			timeout := time.After(15 * time.Second)
		wait:
			for seen < k {
				select {
				case <-p.published:
					seen++
				case <-timeout:
					break wait
				}
			}
			time.Sleep(d)
			how = fmt.Sprintf("%v after window publication %d of this run (%d seen)", d.Round(time.Millisecond), k, seen)
		}
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-p.done
		n := 0
		if rels, err := snapshotTopic(ctx, brokers, out); err == nil {
			n = len(rels)
		}
		t.Logf("kill %d: SIGKILL %s; %d release messages in the output so far", i+1, how, n)
	}
	if err := <-produced; err != nil {
		t.Fatalf("producing: %v", err)
	}
	p := c.start(cfg)
	c.waitReleases(ctx, out, wantReleases, p)
	c.stop(p)

	// The failure-free reference run: same input, key and namespace.
	refGroup, refOut := c.ns+"-ref", c.ns+"-ref-out"
	rp := c.start(c.writeConfig("ref", refGroup, refOut))
	c.waitReleases(ctx, refOut, wantReleases, rp)
	c.stop(rp)

	got, ref := c.releases(ctx, out), c.releases(ctx, refOut)
	if len(ref) != wantReleases {
		t.Fatalf("the reference run published %d release keys, want %d", len(ref), wantReleases)
	}
	dups := 0
	for _, k := range slices.Sorted(maps.Keys(ref)) {
		if len(ref[k]) != 1 {
			t.Errorf("the reference run published %q %d times", k, len(ref[k]))
		}
		vs, ok := got[k]
		if !ok {
			t.Errorf("release %q is missing after the crashes", k)
			continue
		}
		dups += len(vs) - 1
		for _, v := range vs {
			if !bytes.Equal(v, ref[k][0]) {
				t.Errorf("release %q diverges from the failure-free run", k)
			}
		}
	}
	for k := range got {
		if _, ok := ref[k]; !ok {
			t.Errorf("release %q was published only by the crashed runs", k)
		}
	}
	t.Logf("%d releases, identical to the failure-free run; %d written twice across a crash (identical bytes)", len(ref), dups)
	// The windows are the demo's: the reference's values decode and their
	// windows are the expected ones.
	starts := map[int64]bool{}
	for _, vs := range ref {
		r, _ := schema.DecodeRelease(vs[0])
		starts[r.WindowStart] = true
	}
	for w := range nWindows {
		if !starts[s.WindowStart(w)] {
			t.Errorf("window %d missing from the reference run", w)
		}
	}
}
