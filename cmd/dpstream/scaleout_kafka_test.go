package main

// The scale-out chaos test: several dpstream run subprocesses with
// kafka.scale_out share one consumer group while the input is produced;
// they are killed with SIGKILL, restarted, restarted in turn, added and
// removed, and must in the end have published exactly the releases of a
// failure-free single instance.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpstream/dpstream/internal/demo"
	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// chaosPartitions is the chaos test's input partition count: more than
// the three or four instances, so that each holds one or two partitions
// and every rebalance moves some.
const chaosPartitions = 6

// keyByEvent returns s with every message keyed by its position in the
// stream instead of by its meter, so that one meter's readings spread over
// all partitions (the privacy unit is not the message key). The closing
// readings, one per partition, get a key of their own partition, so that
// every partition still closes the last window.
func keyByEvent(s *demo.Stream) *demo.Stream {
	out := &demo.Stream{Config: s.Config, Msgs: slices.Clone(s.Msgs)}
	for i := range out.Msgs {
		m := &out.Msgs[i]
		if !m.Closing {
			m.Key = []byte("ev-" + strconv.Itoa(i))
			m.Partition = demo.PartitionOf(m.Key, s.Config.Partitions)
			continue
		}
		for j := 0; ; j++ {
			k := []byte("close-" + strconv.Itoa(m.Partition) + "-" + strconv.Itoa(j))
			if demo.PartitionOf(k, s.Config.Partitions) == m.Partition {
				m.Key = k
				break
			}
		}
	}
	return out
}

// spreadUnits returns how many (window, meter) pairs have readings on more
// than one partition.
func spreadUnits(s *demo.Stream) int {
	type wm struct {
		w     int64 // window start
		meter string
	}
	parts := map[wm]map[int]bool{}
	for _, m := range s.Msgs {
		if m.Reading == nil {
			continue
		}
		k := wm{s.WindowOf(m.Reading.Time), m.Reading.Meter}
		if parts[k] == nil {
			parts[k] = map[int]bool{}
		}
		parts[k][m.Partition] = true
	}
	n := 0
	for _, ps := range parts {
		if len(ps) > 1 {
			n++
		}
	}
	return n
}

// TestKafkaScaleOutChaos: a failure-free single instance (no scale_out)
// and three instances with kafka.scale_out and the same configuration
// (key, release namespace, windows.start, instance name) consume the same
// input — 6 partitions, keyed by event so that every meter's readings
// spread over partitions, with delayed, late, bad and flooding readings —
// while it is produced. Meanwhile (fixed seed): 10 times a random instance
// is killed with SIGKILL, half of the time 0–150 ms after a window
// publication by the instance that published it (the merging one), and
// restarted; then a rolling restart (SIGTERM, restart, one instance after
// the other); then a fourth instance is added and a random one removed
// (SIGTERM). The production of the input is paced by these steps, so that
// all of them happen under load. In the end the scale-out output topic
// must equal the reference's as a set of (key, bytes), with every key
// exactly once.
func TestKafkaScaleOutChaos(t *testing.T) {
	t.Parallel() // waits on the broker mostly; own topics and groups (docs/development.md)
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := newCrashTest(t, brokers, "dpstream-chaos")
	const nWindows = 12
	// The stream's simulated time starts at the next window boundary after
	// now, and the operator's clock follows the production, as in
	// TestKafkaCrashRecovery: the windows close by arrival times and are
	// published on their simulated schedule.
	size := demo.WindowSize.Milliseconds()
	c.first = (time.Now().UnixMilli()/size + 1) * size
	c.setClock(c.first)
	g, err := demo.Generate(demo.StreamConfig{Seed: 23, Windows: nWindows, EventsPerWindow: 2000, Partitions: chaosPartitions,
		Base: c.first, Size: demo.WindowSize, Lateness: demo.Lateness})
	if err != nil {
		t.Fatal(err)
	}
	s := keyByEvent(g)
	if n := spreadUnits(s); n < 100 {
		t.Fatalf("only %d (window, meter) pairs have readings on several partitions", n)
	}
	wantReleases := nWindows * len(demo.Regions) * len(demo.AggregateOrder)
	if err := demo.CreateTopic(ctx, brokers, c.in, chaosPartitions); err != nil {
		t.Fatal(err)
	}

	// The chaos schedule's steps: kills, the rolling restart's three
	// restarts, one instance added, one removed.
	const kills = 10
	const steps = kills + 3 + 1 + 1
	var progress atomic.Int64 // steps done
	var waiting atomic.Int64  // 1 while a step waits for a window publication

	// The producer: the stream in 4 chunks per window of event time, the
	// i-th once the schedule has done i·(steps+lead)/chunks − lead steps
	// (and at least 400 ms after the previous chunk), so that the input
	// keeps coming through every step, runs up to lead steps ahead, and the
	// last window closes near the end. While a step waits for a window
	// publication, the producer may run lead more steps ahead, so that
	// windows close meanwhile.
	produced := make(chan error, 1)
	go func() {
		const chunks, lead = 4 * nWindows, 2
		n := len(s.Msgs)
		for i := range chunks {
			for progress.Load()+lead*waiting.Load() < int64(i*(steps+lead)/chunks-lead) {
				select {
				case <-ctx.Done():
					produced <- ctx.Err()
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
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
			case <-time.After(400 * time.Millisecond):
			}
		}
		produced <- nil
	}()

	// The failure-free reference: one instance without scale_out, same
	// key, namespace, windows.start and instance name, its own group and
	// output topic, consuming alongside.
	refOut := c.ns + "-ref-out"
	rp := c.start(c.writeConfig("ref", c.ns+"-ref", refOut))

	group, out := c.ns, c.ns+"-out"
	cfg := c.writeConfig("scale", group, out, "scale_out: true")
	t0 := time.Now()
	var slots []*proc
	for range 3 {
		slots = append(slots, c.start(cfg))
	}
	for i, p := range slots {
		c.waitStarted(ctx, p, fmt.Sprintf("instance %d", i))
	}
	logf := func(format string, a ...any) {
		n := 0
		if rels, err := snapshotTopic(ctx, brokers, out); err == nil {
			n = len(rels)
		}
		t.Logf("%5.1fs: %s; %d release messages so far", time.Since(t0).Seconds(), fmt.Sprintf(format, a...), n)
	}
	// nextPublication waits (up to 10 s) for the next window publication
	// of any instance and returns that instance's slot (-1: none).
	nextPublication := func() int {
		for _, p := range slots {
			for len(p.published) > 0 {
				<-p.published
			}
		}
		timeout := time.After(10 * time.Second)
		for {
			for i, p := range slots {
				select {
				case <-p.published:
					return i
				default:
				}
			}
			select {
			case <-timeout:
				return -1
			case <-time.After(5 * time.Millisecond):
			}
		}
	}

	rng := rand.New(rand.NewPCG(20261124, 9))
	for k := range kills {
		i := rng.IntN(len(slots))
		how := ""
		if rng.IntN(2) == 0 {
			d := time.Duration(rng.Int64N(int64(2 * time.Second)))
			time.Sleep(d)
			how = fmt.Sprintf("%v after the last restart", d.Round(time.Millisecond))
		} else {
			d := time.Duration(rng.Int64N(int64(150 * time.Millisecond)))
			waiting.Store(1)
			j := nextPublication()
			waiting.Store(0)
			if j >= 0 {
				i = j
				how = fmt.Sprintf("%v after its window publication", d.Round(time.Millisecond))
			} else {
				how = "(no publication within 10 s)"
			}
			time.Sleep(d)
		}
		if err := slots[i].cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-slots[i].done
		slots[i] = c.start(cfg)
		c.waitStarted(ctx, slots[i], fmt.Sprintf("instance %d after kill %d", i, k+1))
		progress.Add(1)
		logf("kill %d: SIGKILL instance %d %s, restarted", k+1, i, how)
	}
	for i := range slots {
		c.stop(slots[i])
		slots[i] = c.start(cfg)
		c.waitStarted(ctx, slots[i], fmt.Sprintf("instance %d after its rolling restart", i))
		progress.Add(1)
		logf("rolling restart: instance %d", i)
	}
	slots = append(slots, c.start(cfg))
	c.waitStarted(ctx, slots[3], "the added instance")
	progress.Add(1)
	logf("added instance 3")
	i := rng.IntN(len(slots))
	c.stop(slots[i])
	slots = slices.Delete(slots, i, i+1)
	progress.Add(1)
	logf("removed instance %d (SIGTERM)", i)

	if err := <-produced; err != nil {
		t.Fatalf("producing: %v", err)
	}
	c.waitReleases(ctx, out, wantReleases, slots...)
	logf("every window published")
	for _, p := range slots {
		c.stop(p)
	}
	c.waitReleases(ctx, refOut, wantReleases, rp)
	c.stop(rp)

	got, ref := c.releases(ctx, out), c.releases(ctx, refOut)
	if len(ref) != wantReleases {
		t.Fatalf("the reference run published %d release keys, want %d", len(ref), wantReleases)
	}
	for _, k := range slices.Sorted(maps.Keys(ref)) {
		if len(ref[k]) != 1 {
			t.Errorf("the reference run published %q %d times", k, len(ref[k]))
		}
		vs, ok := got[k]
		switch {
		case !ok:
			t.Errorf("release %q is missing from the scale-out run", k)
		case len(vs) != 1:
			t.Errorf("release %q was published %d times by the scale-out run", k, len(vs))
		}
		for _, v := range vs {
			if !bytes.Equal(v, ref[k][0]) {
				t.Errorf("release %q differs from the failure-free single instance's", k)
			}
		}
	}
	for k := range got {
		if _, ok := ref[k]; !ok {
			t.Errorf("release %q was published only by the scale-out run", k)
		}
	}
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
	if !t.Failed() {
		t.Logf("%d releases, identical to the failure-free single instance's, each once; chaos run %v",
			len(ref), time.Since(t0).Round(time.Second))
	}
}
