package main

// The throughput benchmark of dpstream run subprocesses on the real broker
// (single instance and scale-out), and the broker-side helpers it and the
// chaos test share.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/internal/demo"
	"github.com/dpstream/dpstream/operator/kafkatest"
)

// Throughput benchmark settings: enough input that the start (joining the
// groups, reading the state topic, a rebalance when the second instance
// joins) is a small share of a run.
const (
	benchPartitions      = 8
	benchWindows         = 40
	benchEventsPerWindow = 300_000 // 12M readings, plus bad, late and flooding extras
)

// BenchmarkKafkaThroughput measures events/s of dpstream run subprocesses,
// each with GOMAXPROCS=1, catching up on an input produced beforehand
// (12M readings over 8 partitions, keyed by event so that every meter's
// readings spread over partitions) in three modes: one instance without
// scale_out ("single"), one instance with kafka.scale_out ("scaleout1")
// and two ("scaleout2"). Every round (DPSTREAM_BENCH_ROUNDS, default 3)
// runs the three modes one after the other, so that the ratios compare
// runs a minute apart on the same broker and machine; the reported figures
// are medians over the rounds (and every round is logged). The rounds are
// not b.N: with -benchtime Nx the testing package runs a benchmark once
// and then N more times, each time generating and producing the input.
//
// events/s is the number of input messages divided by the time from
// starting the processes until the output topic holds every release of
// the last window; startup-s is the time until the last "generation
// started" log line of the run (the instances' final assignment); cpu-s
// is the CPU time of all its instances (user and system, until they
// exited after the run); busy is the share of the machine's cores in use
// (everything on it: dpstream, the broker, this test) and steal the share
// of its cores' time the hypervisor gave to others. Every mode must
// publish the same releases as "single".
//
// Generating the stream takes about 9 GB of memory for a moment. Run it
// alone (the machine's cores are the limit), once (about 6 minutes):
//
//	DPSTREAM_TEST_BROKERS=127.0.0.1:9092 go test -run '^$' -bench KafkaThroughput -benchtime 1x ./cmd/dpstream/
//
// DPSTREAM_BENCH_KEY=unit keeps the input keyed by unit (see below);
// DPSTREAM_BENCH_MODES=scaleout1,scaleout2 runs only those modes (to
// profile one).
func BenchmarkKafkaThroughput(b *testing.B) {
	brokers := kafkatest.Brokers(b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	c := newCrashTest(b, brokers, "dpstream-bench")
	c.env = []string{"GOMAXPROCS=1"}
	// Every run leaves about 3 GB of topics (input, partials, outputs,
	// state): delete them at the end.
	b.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		if err := deleteTopics(dctx, brokers, c.ns+"-"); err != nil {
			b.Logf("deleting the benchmark's topics: %v", err)
		}
	})
	size := demo.WindowSize.Milliseconds()
	c.first = (time.Now().UnixMilli()/size + 1) * size
	g, err := demo.Generate(demo.StreamConfig{Seed: 5, Windows: benchWindows, EventsPerWindow: benchEventsPerWindow,
		Partitions: benchPartitions, Base: c.first, Size: demo.WindowSize, Lateness: demo.Lateness})
	if err != nil {
		b.Fatal(err)
	}
	// DPSTREAM_BENCH_KEY=unit keeps the generator's keying by meter (each
	// unit on one partition, the layout the README recommends); the
	// default keys by event, spreading every unit over all partitions (the
	// merge stage's worst case).
	s := g
	if os.Getenv("DPSTREAM_BENCH_KEY") != "unit" {
		s = keyByEvent(g)
	}
	events := len(s.Msgs)
	if err := demo.CreateTopic(ctx, brokers, c.in, benchPartitions); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := demo.Produce(ctx, brokers, c.in, s); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "BenchmarkKafkaThroughput: input: %d messages over %d partitions, %d windows, produced in %v\n", events, benchPartitions, benchWindows,
		time.Since(t0).Round(time.Millisecond))
	// The operator's clock past every window's schedule (the benchmark
	// reads a backlog).
	c.setClock(c.clockAfter(benchWindows))
	g, s = nil, nil // the generated stream (about 9 GB at its peak) is not needed during the timed runs
	debug.FreeOSMemory()
	wantReleases := benchWindows * len(demo.Regions) * len(demo.AggregateOrder)

	type mode struct {
		name      string
		instances int
		scaleOut  bool
	}
	modes := []mode{{"single", 1, false}, {"scaleout1", 1, true}, {"scaleout2", 2, true}}
	if only := os.Getenv("DPSTREAM_BENCH_MODES"); only != "" {
		modes = slices.DeleteFunc(modes, func(m mode) bool { return !slices.Contains(strings.Split(only, ","), m.name) })
	}
	// run runs one mode once and returns its events/s, checking its
	// releases against ref (nil: returns them as the reference).
	var ref map[string][][]byte
	type figures struct{ rate, startup, cpu, busy, steal float64 }
	run := func(m mode, round int) figures {
		mc := *c
		name := fmt.Sprintf("%s-%d", m.name, round)
		group, out := c.ns+"-"+name, c.ns+"-"+name+"-out"
		var extra []string
		if m.scaleOut {
			extra = append(extra, "scale_out: true")
		}
		cfg := mc.writeConfig(name, group, out, extra...)
		brokerCPU0, machine0 := brokerCPU(), machineCPU()
		start := time.Now()
		var ps []*proc
		for range m.instances {
			ps = append(ps, mc.start(cfg))
		}
		mc.waitOutputCount(ctx, out, wantReleases, ps...)
		elapsed := time.Since(start)
		brokerCPU1, machine1 := brokerCPU(), machineCPU()
		var lastGen time.Time
		gens := 0
		for _, p := range ps {
			p.mu.Lock()
			for _, t := range p.gens {
				if t.Before(start.Add(elapsed)) && t.After(lastGen) {
					lastGen = t
				}
			}
			gens += len(p.gens)
			p.mu.Unlock()
		}
		var cpu []string
		var cpuSum time.Duration
		for _, p := range ps {
			mc.stop(p)
			d := p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
			cpu = append(cpu, d.Round(10*time.Millisecond).String())
			cpuSum += d
		}
		f := figures{rate: float64(events) / elapsed.Seconds(), startup: lastGen.Sub(start).Seconds(), cpu: cpuSum.Seconds()}
		var machineNote string
		if brokerCPU0 >= 0 && brokerCPU1 >= 0 {
			machineNote = fmt.Sprintf("; the broker used %v CPU", (brokerCPU1 - brokerCPU0).Round(10*time.Millisecond))
		}
		if d := machine1.total - machine0.total; machine0.total > 0 && d > 0 {
			f.busy = 1 - float64(machine1.idle-machine0.idle)/float64(d)
			f.steal = float64(machine1.steal-machine0.steal) / float64(d)
			machineNote += fmt.Sprintf("; the machine's cores were %.0f%% busy (everything on it), %.1f%% stolen", 100*f.busy, 100*f.steal)
		}
		// To stderr as it happens: the testing package keeps only the
		// first 10 lines of a benchmark's log.
		fmt.Fprintf(os.Stderr, "BenchmarkKafkaThroughput: round %d, %s: %d instance(s) started at %s, %d events in %v: %.0f events/s; last generation started at %v (%.0f%% of the run), "+
			"%d generations in all; CPU time per instance (to its exit) %s%s",
			round, m.name, m.instances, start.Format("15:04:05.000"), events, elapsed.Round(time.Millisecond), f.rate,
			time.Duration(f.startup*float64(time.Second)).Round(time.Millisecond), 100*f.startup/elapsed.Seconds(), gens, strings.Join(cpu, ", "), machineNote+"\n")
		got := mc.releases(ctx, out)
		if len(got) != wantReleases {
			b.Fatalf("%s published %d release keys, want %d", m.name, len(got), wantReleases)
		}
		if ref == nil {
			ref = got
			return f
		}
		for k, vs := range ref {
			if len(got[k]) != 1 || !bytes.Equal(got[k][0], vs[0]) {
				b.Errorf("release %q of %s differs from the %s instance's", k, m.name, modes[0].name)
			}
		}
		return f
	}

	rounds := 3
	if r := os.Getenv("DPSTREAM_BENCH_ROUNDS"); r != "" {
		if rounds, err = strconv.Atoi(r); err != nil || rounds < 1 {
			b.Fatalf("DPSTREAM_BENCH_ROUNDS=%q: want a positive number of rounds", r)
		}
	}
	b.ResetTimer()
	per := map[string][]figures{}
	var ratios, vsSingle []float64
	for round := range rounds * b.N {
		fs := map[string]figures{}
		for _, m := range modes {
			fs[m.name] = run(m, round)
			per[m.name] = append(per[m.name], fs[m.name])
		}
		if two, ok := fs["scaleout2"]; ok {
			if one, ok := fs["scaleout1"]; ok {
				ratios = append(ratios, two.rate/one.rate)
			}
			if one, ok := fs["single"]; ok {
				vsSingle = append(vsSingle, two.rate/one.rate)
			}
		}
	}
	b.StopTimer()
	median := func(xs []float64) float64 {
		xs = slices.Sorted(slices.Values(xs))
		if len(xs)%2 == 1 {
			return xs[len(xs)/2]
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	for _, m := range modes {
		pick := func(f func(figures) float64) float64 {
			var xs []float64
			for _, x := range per[m.name] {
				xs = append(xs, f(x))
			}
			return median(xs)
		}
		b.ReportMetric(pick(func(f figures) float64 { return f.rate }), m.name+"-events/s")
		b.ReportMetric(pick(func(f figures) float64 { return f.cpu }), m.name+"-cpu-s")
		b.ReportMetric(pick(func(f figures) float64 { return f.startup }), m.name+"-startup-s")
		b.ReportMetric(pick(func(f figures) float64 { return f.busy }), m.name+"-busy")
		b.ReportMetric(pick(func(f figures) float64 { return f.steal }), m.name+"-steal")
	}
	if len(ratios) > 0 {
		b.ReportMetric(median(ratios), "two/one-scaleout")
		b.Logf("two ÷ one scale-out instance, per round: %.2f", ratios)
	}
	if len(vsSingle) > 0 {
		b.ReportMetric(median(vsSingle), "two/single")
		b.Logf("two scale-out instances ÷ one without scale_out, per round: %.2f", vsSingle)
	}
}

// deleteTopics deletes every topic whose name starts with prefix.
func deleteTopics(ctx context.Context, brokers []string, prefix string) error {
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return err
	}
	var names []string
	for _, t := range md.Topics {
		if strings.HasPrefix(t.Name, prefix) {
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	res, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: names})
	if err != nil {
		return err
	}
	for t, err := range res.Errors {
		if err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

// clockTicks is the unit of /proc/<pid>/stat's utime and stime:
// USER_HZ, 100 on every Linux architecture dpstream builds for (see
// proc(5), "measured in clock ticks (divide by sysconf(_SC_CLK_TCK))").
const clockTicks = 100

// brokerCPU returns the CPU time (user + system) the test broker started by
// deploy/kafka/kafka.sh has used so far, or −1 if it cannot tell (another
// broker, not Linux).
func brokerCPU() time.Duration {
	pid, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kafka", "run", "kafka.pid"))
	if err != nil {
		return -1
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "stat"))
	if err != nil {
		return -1
	}
	// Fields after the command name (in parentheses, which may contain
	// spaces): state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(ut+st) * time.Second / clockTicks
}

// cpuTimes are the machine's total, idle and stolen CPU time (in clock
// ticks, summed over cores) from /proc/stat's "cpu" line; zero if
// unreadable. Steal is time a virtual machine's cores were runnable but
// the hypervisor ran another guest (proc(5)).
type cpuTimes struct{ total, idle, steal int64 }

func machineCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var c cpuTimes
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return cpuTimes{}
		}
		c.total += n
		switch i {
		case 3, 4: // idle, iowait
			c.idle += n
		case 7: // steal
			c.steal += n
		}
	}
	return c
}

// waitOutputCount waits until topic (one partition) holds n messages,
// reading only its end offset (cheap enough to poll every 50 ms while a
// run is timed), failing if any of ps exits first.
func (c *crashTest) waitOutputCount(ctx context.Context, topic string, n int, ps ...*proc) {
	c.t.Helper()
	for {
		conn, err := (&kafka.Dialer{Timeout: 10 * time.Second}).DialLeader(ctx, "tcp", c.brokers[0], topic, 0)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			first, last, err := conn.ReadOffsets()
			conn.Close()
			if err == nil && last-first >= int64(n) {
				return
			}
		}
		for i, p := range ps {
			select {
			case <-p.exited:
				c.t.Fatalf("dpstream run (process %d) exited early (%v)\n%s", i+1, p.cmd.ProcessState, p.logTail())
			default:
			}
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("%s did not get %d messages in time", topic, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
