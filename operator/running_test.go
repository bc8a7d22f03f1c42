package operator

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// runningTestWindows is the number of windows per horizon in these tests.
const runningTestWindows = 30

// runningConfig is testConfig with count and sum, running totals and a
// horizon of runningTestWindows windows.
func runningConfig(mech string) Config {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Windows.Aggregates = []string{AggCount, AggSum}
	c.Windows.Running = true
	c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
	c.Privacy.Horizon = runningTestWindows * testSize
	c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = 20, 1e-6
	c.Privacy.Mechanism = mech
	return c
}

// runningKeyN is the n-th noise key of these tests.
func runningKeyN(n int) rng.Key {
	k := testKey()
	k[0], k[1] = byte(n), byte(n>>8)
	return k
}

// truthWindows returns nw windows from the horizon start hs, each with
// every group of groups holding a random count and sum (rng), and the
// groups' cumulative truths are what the caller sums.
func truthWindows(rng *rand.Rand, hs, size int64, nw int, groups []string) []windows.Window {
	ws := make([]windows.Window, nw)
	for i := range ws {
		w := windows.Window{Start: hs + int64(i)*size, End: hs + int64(i+1)*size}
		for _, g := range groups {
			n := rng.Int64N(40)
			sum := 0.0
			for range n {
				sum += math.Round(rng.Float64()*testUpper*100) / 100
			}
			w.Groups = append(w.Groups, windows.Group{Key: g, Units: n, Count: n, Values: n, Sum: sum})
		}
		ws[i] = w
	}
	return ws
}

// releaseRunning releases ws in order through releaseWindow and
// addRunning, threading the running record from run, and returns every
// message and the record after the last window.
func releaseRunning(t *testing.T, o *Operator, ws []windows.Window, run *runningRecord) ([]outMsg, *runningRecord) {
	t.Helper()
	var all []outMsg
	for i := range ws {
		out, _, _, err := o.plan.releaseWindow(&ws[i], o.key, o.cfg.Kafka.namespace(), o.instance, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out, run, err = o.plan.addRunning(out, run, &ws[i]); err != nil {
			t.Fatal(err)
		}
		all = append(all, out...)
	}
	return all, run
}

// TestRunningCoverage compares the hidden cumulative truth with the
// released running totals over runningSeeds noise keys, for discrete
// Laplace (laplace) and discrete Gaussian (gaussian) noise, counts and
// sums, three public groups, a horizon of 30 windows:
//
//   - every running value is exactly the sum of the group's released
//     window values so far (post-processing: nothing else enters it) and
//     its windows field counts them;
//   - the stated intervals cover the truth at least at the stated level:
//     per (mechanism, aggregate), the coverage of the intervals at the
//     horizon's last window (3 groups × runningSeeds keys: independent
//     noise, so independent trials) must be ≥ level −
//     3·√(level(1−level)/n); the bound is valid, so the true coverage is
//     ≥ level and this fails with probability ≤ 0.0015 per check (normal
//     approximation of the binomial tail at 3σ), 4 checks: ≤ 0.006;
//   - the intervals are not vacuous: the coverage over all windows is
//     below 0.9999 or the mean half-width is at most 2× the normal
//     approximation z·√(summed variance) (the Chernoff bound is about
//     2.72/1.96 = 1.39× it for Gaussian sums).
func TestRunningCoverage(t *testing.T) {
	t.Parallel() // computes alone; no shared state (docs/development.md)
	const runningSeeds = 200
	for _, mech := range []string{"laplace", "gaussian"} {
		c := runningConfig(mech)
		var groups []string
		for _, g := range c.Privacy.PublicGroups {
			groups = append(groups, schema.MakeGroup(g...))
		}
		type stat struct{ n, covered int }
		last := map[string]*stat{AggCount: {}, AggSum: {}}
		var widthRatio float64
		var widthN int
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatal(err)
		}
		for seed := range runningSeeds {
			o.key = runningKeyN(seed) // only the noise changes
			hs, _ := o.plan.horizonOf(testBase)
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			ws := truthWindows(rng, hs, o.plan.size, runningTestWindows, groups)
			msgs, _ := releaseRunning(t, o, ws, nil)
			truth := map[string]float64{}
			released := map[string]float64{}
			windowsSeen := map[string]int64{}
			for _, m := range msgs {
				r, err := schema.DecodeRelease(m.value)
				if err != nil {
					t.Fatal(err)
				}
				g := schema.MakeGroup(r.Group[0].Value)
				w := ws[(r.WindowStart-hs)/o.plan.size]
				var tv float64
				for _, wg := range w.Groups {
					if wg.Key == g {
						tv = float64(wg.Count)
						if r.Aggregate == AggSum {
							tv = wg.Sum
						}
					}
				}
				k := r.Aggregate + "/" + g
				truth[k] += tv
				released[k] += r.Series[0].Value(0)
				windowsSeen[k]++
				if len(r.Series) != 2 || r.Series[1].Name != schema.SeriesRunning {
					t.Fatalf("%s release has series %v", r.Aggregate, r.Series)
				}
				rs := r.Series[1]
				if rs.Value(0) != released[k] || rs.Windows != windowsSeen[k] {
					t.Fatalf("%s %s: running %v over %d windows, the released values sum to %v over %d", mech, k, rs.Value(0), rs.Windows, released[k], windowsSeen[k])
				}
				if r.Aggregate == AggCount && rs.Ints == nil {
					t.Fatalf("running count is not integer-valued")
				}
				if rs.Level != c.Privacy.Confidence {
					t.Fatalf("running level %v, confidence %v", rs.Level, c.Privacy.Confidence)
				}
				in := rs.Lo[0] <= truth[k] && truth[k] <= rs.Hi[0]
				if r.WindowEnd == ws[len(ws)-1].End {
					s := last[r.Aggregate]
					s.n++
					if in {
						s.covered++
					}
				}
				// Half-width against the normal approximation z·√V.
				ap := o.plan.aggPlan(r.Aggregate)
				tm := ap.noises[0].noiseTerm()
				z := 1.959963984540054 // Φ⁻¹(0.975)
				widthRatio += (rs.Hi[0] - rs.Lo[0]) / 2 / (z * math.Sqrt(tm.Variance*float64(rs.Windows)))
				widthN++
			}
		}
		level := c.Privacy.Confidence
		for agg, s := range last {
			lo := level - 3*math.Sqrt(level*(1-level)/float64(s.n))
			cov := float64(s.covered) / float64(s.n)
			t.Logf("%s %s: coverage %.4f at the horizon's end (%d trials), stated %.2f", mech, agg, cov, s.n, level)
			if cov < lo {
				t.Errorf("%s %s: coverage %.4f < %.4f", mech, agg, cov, lo)
			}
		}
		if r := widthRatio / float64(widthN); r > 2 {
			t.Errorf("%s: mean half-width %.2f× the normal approximation", mech, r)
		} else {
			t.Logf("%s: mean half-width %.3f× the normal approximation", mech, r)
		}
	}
}

// TestRunningReplayIdentical: a run interrupted after any window and
// resumed from the running record as the state topic carries it (JSON
// through decodeState) publishes the same bytes as an uninterrupted run,
// and releasing a window again from the same record gives the same bytes —
// for sums of window releases and for event-level totals by the
// factorization (whose earlier noises are drawn again from their streams,
// never stored).
func TestRunningReplayIdentical(t *testing.T) {
	for _, c := range []Config{runningConfig("gaussian"), factConfig(16, "gaussian")} {
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatal(err)
		}
		hs, _ := o.plan.horizonOf(testBase)
		ws := truthWindows(rand.New(rand.NewPCG(1, 2)), hs, o.plan.size, 12, []string{schema.MakeGroup("east"), schema.MakeGroup("north"), schema.MakeGroup("south")})
		checkReplay(t, o, ws)
	}
}

// checkReplay is TestRunningReplayIdentical for one operator.
func checkReplay(t *testing.T, o *Operator, ws []windows.Window) {
	t.Helper()
	want, _ := releaseRunning(t, o, ws, nil)
	for cut := 1; cut < len(ws); cut++ {
		got, run := releaseRunning(t, o, ws[:cut], nil)
		b, err := json.Marshal(stateRecord{Version: stateVersion, ClosedThrough: ws[cut-1].End, Running: run})
		if err != nil {
			t.Fatal(err)
		}
		st, err := decodeState(b)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := releaseRunning(t, o, ws[cut-1:cut], mustPrev(t, o, ws[:cut-1]))
		rest, _ := releaseRunning(t, o, ws[cut:], st.Running)
		got = append(got, rest...)
		if len(got) != len(want) {
			t.Fatalf("cut %d: %d messages, want %d", cut, len(got), len(want))
		}
		for i := range got {
			if got[i].key != want[i].key || !bytes.Equal(got[i].value, want[i].value) {
				t.Fatalf("cut %d: message %d (%s) differs after the restart", cut, i, got[i].key)
			}
		}
		for i := range again {
			j := (cut-1)*len(again) + i
			if !bytes.Equal(again[i].value, want[j].value) {
				t.Fatalf("cut %d: window released again differs (%s)", cut, again[i].key)
			}
		}
	}
}

// mustPrev returns the running record after ws (nil for none).
func mustPrev(t *testing.T, o *Operator, ws []windows.Window) *runningRecord {
	t.Helper()
	if len(ws) == 0 {
		return nil
	}
	_, run := releaseRunning(t, o, ws, nil)
	return run
}

// TestRunningRestartsWithTheHorizon: the first window of the next horizon
// sums one window; a record from an earlier horizon is not continued; a
// record that already holds the window is refused (never counted twice).
func TestRunningRestartsWithTheHorizon(t *testing.T) {
	c := runningConfig("laplace")
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	hs, he := o.plan.horizonOf(testBase)
	ws := truthWindows(rand.New(rand.NewPCG(3, 4)), hs, o.plan.size, runningTestWindows+2, []string{schema.MakeGroup("east")})
	msgs, run := releaseRunning(t, o, ws, nil)
	if run.Start != he || run.Through != ws[len(ws)-1].End {
		t.Errorf("record [%d, %d), want start %d through %d", run.Start, run.Through, he, ws[len(ws)-1].End)
	}
	for _, m := range msgs {
		r, err := schema.DecodeRelease(m.value)
		if err != nil {
			t.Fatal(err)
		}
		want := (r.WindowStart-hs)/o.plan.size + 1
		if r.WindowStart >= he {
			want = (r.WindowStart-he)/o.plan.size + 1
		}
		if got := r.Series[1].Windows; got != want {
			t.Errorf("window %s: running over %d windows, want %d", tsString(r.WindowStart), got, want)
		}
	}
	if _, _, err := o.plan.addRunning(nil, run, &ws[len(ws)-1]); err == nil {
		t.Error("a window already in the running record was accepted again")
	}
}

// TestRunningWithheldGroups: with private group selection, a window that
// withholds a group adds nothing to its running total, and the windows
// field counts the windows that released it.
func TestRunningWithheldGroups(t *testing.T) {
	c := runningConfig("gaussian")
	c.Privacy.PublicGroups = nil
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	if o.plan.sel == nil {
		t.Fatal("no group selection")
	}
	hs, _ := o.plan.horizonOf(testBase)
	g := schema.MakeGroup("east")
	var ws []windows.Window
	for i := range 10 {
		w := windows.Window{Start: hs + int64(i)*o.plan.size, End: hs + int64(i+1)*o.plan.size}
		if i%3 != 1 { // every third window: the group is far below the threshold (withheld)
			w.Groups = []windows.Group{{Key: g, Units: 1000, Count: 1000, Values: 1000, Sum: 5000}}
		}
		ws = append(ws, w)
	}
	msgs, _ := releaseRunning(t, o, ws, nil)
	var n int64
	for _, m := range msgs {
		r, err := schema.DecodeRelease(m.value)
		if err != nil {
			t.Fatal(err)
		}
		if r.Aggregate != AggCount {
			continue
		}
		n++
		if i := (r.WindowStart - hs) / o.plan.size; i%3 == 1 {
			t.Fatalf("window %d released an empty group", i)
		}
		if got := r.Series[1].Windows; got != n {
			t.Errorf("running over %d windows, want %d", got, n)
		}
	}
	if n != 7 {
		t.Errorf("%d count releases, want 7", n)
	}
}

// TestRunningConfig: windows.running needs count or sum; without a
// horizon budget the totals never restart;
// the accounting note (--check-config, every release) says what it is;
// the release digest changes with it (and not for configurations without
// it).
func TestRunningConfig(t *testing.T) {
	c := runningConfig("laplace")
	if ps := c.Problems(); len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
	pw := c
	pw.Privacy.Horizon, pw.Privacy.HorizonEpsilon, pw.Privacy.HorizonDelta = 0, 0, 0
	pw.Privacy.Epsilon, pw.Privacy.Delta = 1, 1e-6
	if ps := pw.Problems(); len(ps) != 0 {
		t.Errorf("per-window budget: %v", ps)
	}
	op, err := New(pw, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(op.Note(), "since the first window released with them") {
		t.Errorf("note %q", op.Note())
	}
	ws := truthWindows(rand.New(rand.NewPCG(5, 6)), testBase, op.plan.size, 2*runningTestWindows, []string{schema.MakeGroup("east")})
	if _, run := releaseRunning(t, op, ws, nil); run.Start != testBase || run.Totals[runningKey(AggCount, schema.MakeGroup("east"))].Windows != int64(len(ws)) {
		t.Errorf("per-window budget: record from %d, want %d, all %d windows", run.Start, testBase, len(ws))
	}
	bad := c
	bad.Windows.Aggregates = []string{AggHistogram}
	if ps := strings.Join(bad.Problems(), "\n"); !strings.Contains(ps, "windows.running: needs count or sum") {
		t.Errorf("no count or sum: %q", ps)
	}
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(o.Note(), "running totals of count and sum") || !strings.Contains(o.Note(), "no budget") {
		t.Errorf("note %q", o.Note())
	}
	off := c
	off.Windows.Running = false
	d1, _ := ReleaseDigest(c)
	d2, _ := ReleaseDigest(off)
	if d1 == d2 {
		t.Error("the digest does not depend on windows.running")
	}
	s := releaseShape{Running: false}
	if b, _ := json.Marshal(s); strings.Contains(string(b), "running") {
		t.Error("a configuration without running totals changed its digest")
	}
}

// TestRunningCap: beyond runningMaxTotals totals, newly released groups
// carry no running series (the state record stays bounded), the others
// keep theirs.
func TestRunningCap(t *testing.T) {
	defer func(n int) { runningMaxTotals = n }(runningMaxTotals)
	runningMaxTotals = 4 // count and sum of two groups
	c := runningConfig("laplace")
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := o.plan.horizonOf(testBase)
	ws := truthWindows(rand.New(rand.NewPCG(7, 8)), hs, o.plan.size, 3, []string{schema.MakeGroup("east"), schema.MakeGroup("north"), schema.MakeGroup("south")})
	msgs, run := releaseRunning(t, o, ws, nil)
	if len(run.Totals) != 4 {
		t.Errorf("%d totals, want 4", len(run.Totals))
	}
	for _, m := range msgs {
		r, err := schema.DecodeRelease(m.value)
		if err != nil {
			t.Fatal(err)
		}
		// The first four (aggregate, group) pairs in release order
		// (aggregate, then group) have room: the counts of all three and
		// the sum of east.
		room := r.Aggregate == AggCount || r.Group[0].Value == "east"
		if has := len(r.Series) == 2; has != room {
			t.Errorf("%s: %d series", m.key, len(r.Series))
		}
	}
}
