package windows

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// partialVariants are the configurations the partial tests run: bounds
// above 1 so that sampling across partitions matters, all bounds 1, mixed
// bounds, a unit cap, event level with and without a group cap.
func partialVariants() map[string]Config {
	mods := map[string]func(*Config){
		"units":         func(*Config) {},
		"bounds=1":      func(c *Config) { c.MaxGroups, c.MaxBuckets, c.MaxPerBucket, c.MaxValues = 1, 1, 1, 1 },
		"mixed":         func(c *Config) { c.MaxGroups, c.MaxBuckets, c.MaxPerBucket, c.MaxValues = 3, 1, 3, 2 },
		"units, capped": func(c *Config) { c.MaxUnits = 7 },
		// The total bound of issue 20, below the product bounds of both
		// the histogram (2·2·2) and the count (2·3).
		"total":         func(c *Config) { c.MaxContributions = 3 },
		"total, capped": func(c *Config) { c.MaxContributions = 3; c.MaxUnits = 7 },
		// The total bound on the values alone (no count, no histogram):
		// the selection runs for the sums, means and variances.
		"total, values only": func(c *Config) {
			c.Histogram, c.Count, c.Variance, c.MaxContributions = false, false, true, 3
		},
		"event level":         func(c *Config) { c.EventLevel = true },
		"event level, capped": func(c *Config) { c.EventLevel = true; c.MaxOpenGroups = 3 },
		// The aggregates of issue 11 (small trees, so that leaves collide).
		"units, variance, quantiles": func(c *Config) {
			c.Units, c.Variance, c.Quantiles, c.TreeBranching, c.TreeDepth = true, true, true, 4, 3
		},
		"quantiles only, capped": func(c *Config) {
			*c = Config{Size: c.Size, AllowedLateness: c.AllowedLateness, Quantiles: true, TreeBranching: 3, TreeDepth: 2,
				MaxGroups: 2, MaxValues: 2, Lower: -5, Upper: 5, MaxUnits: 7}
		},
		"units only": func(c *Config) {
			*c = Config{Size: c.Size, AllowedLateness: c.AllowedLateness, Units: true, MaxGroups: 2}
		},
		"event level, variance, quantiles": func(c *Config) {
			c.EventLevel, c.Variance, c.Quantiles, c.TreeBranching, c.TreeDepth = true, true, true, 16, 4
		},
	}
	out := map[string]Config{}
	for name, mod := range mods {
		cfg := propCfg()
		mod(&cfg)
		out[name] = cfg
	}
	return out
}

// perPartition runs one Tumbling over the partitions ps (EmitFrom(0)),
// feeding their sequences of seqs in an interleaving drawn from r,
// polling partials at random moments, then advances every partition to
// end and polls the rest. Each partial goes through its encoding.
func perPartition(t testing.TB, cfg Config, seed [32]byte, seqs [][]Event, ps []int, end int64, r *rand.Rand) []Partial {
	t.Helper()
	tu, err := New(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	if err := tu.EmitFrom(0); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		tu.AssignPartitions(int32(p))
	}
	var out []Partial
	if err := tu.PartialsErr(); err != nil {
		t.Fatal(err)
	}
	poll := func() {
		for _, p := range tu.PollPartials(0) {
			out = append(out, partialRoundTrip(t, p))
		}
	}
	pos := make([]int, len(seqs))
	for {
		var live []int
		for _, p := range ps {
			if pos[p] < len(seqs[p]) {
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			break
		}
		p := live[r.IntN(len(live))]
		for n := 1 + r.IntN(5); n > 0 && pos[p] < len(seqs[p]); n-- {
			if e := seqs[p][pos[p]]; e.Bucket == -2 {
				if err := tu.Advance(e.Partition, e.Time); err != nil {
					t.Fatal(err)
				}
			} else {
				tu.Add(e)
			}
			pos[p]++
		}
		if r.IntN(8) == 0 {
			poll()
		}
	}
	for _, p := range ps {
		tu.Advance(int32(p), end)
	}
	for {
		n := len(out)
		poll()
		if len(out) == n {
			return out
		}
	}
}

// partialRoundTrip encodes and decodes p and checks that the encoding is
// stable.
func partialRoundTrip(t testing.TB, p Partial) Partial {
	t.Helper()
	b := encodePartial(t, p)
	var q Partial
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatalf("decoding a partial: %v", err)
	}
	if !bytes.Equal(encodePartial(t, q), b) {
		t.Fatal("partial encoding not stable under a round trip")
	}
	return q
}

func encodePartial(t testing.TB, p Partial) []byte {
	t.Helper()
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// permutations returns every ordering of 0 … n−1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := slices.Insert(slices.Clone(p), i, n-1)
			out = append(out, q)
		}
	}
	return out
}

// setPartitions returns every partition of {0 … n−1} into blocks.
func setPartitions(n int) [][][]int {
	if n == 0 {
		return [][][]int{{}}
	}
	var out [][][]int
	for _, sp := range setPartitions(n - 1) {
		for i := range sp { // n−1 joins block i
			q := make([][]int, len(sp))
			for j := range sp {
				q[j] = slices.Clone(sp[j])
			}
			q[i] = append(q[i], n-1)
			out = append(out, q)
		}
		q := make([][]int, len(sp), len(sp)+1) // n−1 alone
		for j := range sp {
			q[j] = slices.Clone(sp[j])
		}
		out = append(out, append(q, []int{n - 1}))
	}
	return out
}

func TestSetPartitionsAndPermutations(t *testing.T) {
	if n := len(permutations(4)); n != 24 {
		t.Fatalf("%d permutations of 4, want 24", n)
	}
	if n := len(setPartitions(4)); n != 15 { // the Bell number B4
		t.Fatalf("%d set partitions of 4, want 15", n)
	}
}

// The acceptance property of partials: for random streams over 4
// partitions whose units are spread over every partition, merging the
// per-partition partials gives, for every window, the bytes a single
// Tumbling over all partitions emits — for every order of the partials
// and every grouping of them into intermediate combinations. A Tumbling
// over two partitions emits the combination of their partials. Without
// re-bounding (Window.Merge of per-partition windows) some windows differ,
// which shows that the streams exercise bounding across partitions.
func TestMergePartialsEqualsSingleInstance(t *testing.T) {
	const P = 4
	perms, groupings := permutations(P), setPartitions(P)
	for name, cfg := range partialVariants() {
		t.Run(name, func(t *testing.T) {
			naiveDiffers := 0
			for seed := uint64(1); seed <= 3; seed++ {
				seqs := genPartitions(rand.New(rand.NewPCG(seed, 77)), P, 300, 10)
				end := lastTime(seqs...) + 20_000
				from := int64(0)
				single, _ := runInterleaved(t, cfg, seqs, rand.New(rand.NewPCG(seed, 1)), &from)
				if len(single) < 5 {
					t.Fatalf("only %d windows", len(single))
				}
				r := rand.New(rand.NewPCG(seed, 2))
				parts := make([][]Partial, P)
				for p := range parts {
					parts[p] = perPartition(t, cfg, testSeed, seqs, []int{p}, end, r)
					if len(parts[p]) != len(single) {
						t.Fatalf("partition %d: %d partials, want %d windows", p, len(parts[p]), len(single))
					}
				}
				pairs := [][]Partial{
					perPartition(t, cfg, testSeed, seqs, []int{0, 1}, end, r),
					perPartition(t, cfg, testSeed, seqs, []int{2, 3}, end, r),
				}
				naive := naiveMerge(t, cfg, seqs, end)
				for i, want := range single {
					of := make([]Partial, P)
					for p := range of {
						of[p] = parts[p][i]
						if !slices.Equal(of[p].Partitions, []int32{int32(p)}) {
							t.Fatalf("partial of partition %d covers %v", p, of[p].Partitions)
						}
					}
					for _, perm := range perms {
						in := make([]Partial, P)
						for k, p := range perm {
							in[k] = of[p]
						}
						got, covered := mergeOK(t, cfg, in)
						if !slices.Equal(covered, []int32{0, 1, 2, 3}) {
							t.Fatalf("covered %v", covered)
						}
						if !bytes.Equal(encode(t, got), want) {
							t.Fatalf("seed %d window %d order %v: merged partials differ from the single instance", seed, i, perm)
						}
					}
					for _, g := range groupings {
						blocks := make([]Partial, 0, len(g))
						for _, block := range g {
							in := make([]Partial, 0, len(block))
							for _, k := range r.Perm(len(block)) {
								in = append(in, of[block[k]])
							}
							c, err := CombinePartials(cfg, testSeed, in)
							if err != nil {
								t.Fatal(err)
							}
							blocks = append(blocks, partialRoundTrip(t, c))
						}
						r.Shuffle(len(blocks), func(a, b int) { blocks[a], blocks[b] = blocks[b], blocks[a] })
						got, _ := mergeOK(t, cfg, blocks)
						if !bytes.Equal(encode(t, got), want) {
							t.Fatalf("seed %d window %d grouping %v: merged partials differ from the single instance", seed, i, g)
						}
					}
					// A Tumbling over {0, 1} emits Combine(0, 1).
					for k, pair := range pairs {
						c, err := CombinePartials(cfg, testSeed, []Partial{of[2*k+1], of[2*k]})
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(encodePartial(t, c), encodePartial(t, pair[i])) {
							t.Fatalf("seed %d window %d: the partial of a Tumbling over partitions %v differs from the combination of theirs", seed, i, pair[i].Partitions)
						}
					}
					if !bytes.Equal(encode(t, naive[i]), want) {
						naiveDiffers++
					}
				}
			}
			t.Logf("naive merge of per-partition windows differs in %d windows", naiveDiffers)
			if !cfg.EventLevel && naiveDiffers == 0 {
				t.Error("no window needed bounding across partitions; the test is not exercising it")
			}
		})
	}
}

// mergeOK merges parts and returns the window and the partitions covered.
func mergeOK(t *testing.T, cfg Config, parts []Partial) (Window, []int32) {
	t.Helper()
	w, err := MergePartials(cfg, testSeed, parts)
	if err != nil {
		t.Fatal(err)
	}
	covered, err := Coverage(parts)
	if err != nil {
		t.Fatal(err)
	}
	return w, covered
}

// naiveMerge runs one Tumbling per partition with Poll and merges their
// finished windows with Window.Merge (Partials reset to 1 to compare
// with a single instance's): bounds applied per partition only.
func naiveMerge(t *testing.T, cfg Config, seqs [][]Event, end int64) []Window {
	t.Helper()
	var out []Window
	for p, seq := range seqs {
		tu := mustNew(t, cfg)
		tu.EmitFrom(0)
		tu.AssignPartitions(int32(p))
		for _, e := range seq {
			if e.Bucket == -2 {
				tu.Advance(e.Partition, e.Time)
			} else {
				tu.Add(e)
			}
		}
		tu.Advance(int32(p), end)
		var ws []Window
		for got := tu.Poll(0); len(got) > 0; got = tu.Poll(0) {
			ws = append(ws, got...)
		}
		if p == 0 {
			out = ws
			continue
		}
		for i := range ws {
			if err := out[i].Merge(&ws[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range out {
		out[i].Partials = 1
	}
	return out
}

// floodCfg: one window, tight bounds, every aggregate.
func floodCfg() Config {
	return Config{
		Size:      10 * time.Second,
		Histogram: true, NumBuckets: 8, Count: true, Sum: true, Mean: true,
		MaxGroups: 2, MaxBuckets: 2, MaxPerBucket: 3, MaxValues: 2,
		Lower: 0, Upper: 10,
	}
}

// floodEvents returns one window of events on P partitions: background
// units with a few events each, and, with flood, unit "flood" sending 400
// events to every partition, over 20 groups and every bucket, with values
// far above Upper. The background events are the same with and without
// the flood (same offsets, which identify values), so the two are
// neighbouring datasets; the order within a partition is shuffled (all
// arrive at 0, so the order changes nothing but the work done).
func floodEvents(P int, flood bool) [][]Event {
	r := rand.New(rand.NewPCG(5, 6))
	seqs := make([][]Event, P)
	add := func(p int, offset int64, unit string, group int, bucket int, v float64) {
		seqs[p] = append(seqs[p], Event{
			Partition: int32(p), Offset: offset, Time: int64(r.IntN(10_000)), Arrival: 0,
			Unit: unit, Group: fmt.Sprint("g", group), Bucket: bucket, Value: v, HasValue: true,
		})
	}
	for i := 0; i < 400; i++ {
		add(r.IntN(P), int64(i), fmt.Sprint("u", r.IntN(30)), r.IntN(20), r.IntN(8), r.Float64()*10)
	}
	fr := rand.New(rand.NewPCG(7, 8))
	for p := range P {
		for i := 0; i < 400 && flood; i++ {
			add(p, int64(1000+i), "flood", fr.IntN(20), fr.IntN(8), 1e6)
		}
		fr.Shuffle(len(seqs[p]), func(a, b int) { seqs[p][a], seqs[p][b] = seqs[p][b], seqs[p][a] })
	}
	return seqs
}

// floodWindows returns the window of the events merged from
// per-partition partials, and merged naively from per-partition windows.
func floodWindows(t *testing.T, cfg Config, seqs [][]Event) (merged, naive Window) {
	t.Helper()
	end := cfg.Size.Milliseconds() // closes the first window only
	var parts []Partial
	for p := range seqs {
		ps := perPartition(t, cfg, testSeed, seqs, []int{p}, end, rand.New(rand.NewPCG(1, uint64(p))))
		if len(ps) != 1 {
			t.Fatalf("%d partials, want 1", len(ps))
		}
		parts = append(parts, ps[0])
	}
	merged, _ = mergeOK(t, cfg, parts)
	naive = naiveMerge(t, cfg, seqs, end)[0]
	return merged, naive
}

// A unit that floods every partition contributes to the merged window no
// more than its bounds, per unit across the whole input: checked directly
// on a window of its events alone (at most MaxGroups groups, MaxBuckets
// cells of at most MaxPerBucket per group, MaxValues counted events and
// values per group, sums within MaxValues·Upper), and as the change
// between the window with and without it among other units (within the
// derived sensitivities). Merging per-partition windows instead
// (Window.Merge, correct only for input keyed by unit) lets the same unit
// add P = 4 times its bounds to a cell, a count and the unit counts: the
// test checks that too, to document why partials exist.
func TestPartialsBoundFloodingUnit(t *testing.T) {
	const P = 4
	cfg := floodCfg()
	sens, err := cfg.Sensitivities()
	if err != nil {
		t.Fatal(err)
	}
	// The flooding unit alone.
	alone := make([][]Event, P)
	for p, seq := range floodEvents(P, true) {
		for _, e := range seq {
			if e.Unit == "flood" {
				alone[p] = append(alone[p], e)
			}
		}
	}
	merged, naive := floodWindows(t, cfg, alone)
	if want := encode(t, oneWindowAll(t, cfg, alone)); !bytes.Equal(encode(t, merged), want) {
		t.Fatal("merged window differs from the single instance's")
	}
	check := func(w Window, factor int64) (maxCell, maxCount, maxValues, maxUnits int64, cells int) {
		for _, g := range w.Groups {
			for _, n := range g.Histogram {
				if n > 0 {
					cells++
				}
				maxCell = max(maxCell, n)
			}
			maxCount, maxValues, maxUnits = max(maxCount, g.Count), max(maxValues, g.Values), max(maxUnits, g.Units)
			if g.Sum > float64(factor)*float64(cfg.MaxValues)*cfg.Upper {
				t.Errorf("group sum %v", g.Sum)
			}
		}
		if len(w.Groups) > cfg.MaxGroups {
			t.Errorf("%d groups, bound %d", len(w.Groups), cfg.MaxGroups)
		}
		return
	}
	c, n, v, u, cells := check(merged, 1)
	if c != int64(cfg.MaxPerBucket) || n != int64(cfg.MaxValues) || v != int64(cfg.MaxValues) || u != 1 || cells != cfg.MaxGroups*cfg.MaxBuckets {
		t.Errorf("merged: largest cell %d, count %d, values %d, units %d, %d cells; want exactly the bounds %d, %d, %d, 1, %d",
			c, n, v, u, cells, cfg.MaxPerBucket, cfg.MaxValues, cfg.MaxValues, cfg.MaxGroups*cfg.MaxBuckets)
	}
	// Bounded per partition only: each partition lets the unit add its
	// bounds again (the same groups, whose priorities do not depend on the
	// partition, but up to P·MaxPerBucket per cell, P·MaxValues per count,
	// and a cell set per partition).
	c, n, v, u, cells = check(naive, P)
	t.Logf("naive merge: largest cell %d, count %d, values %d, units %d, %d cells", c, n, v, u, cells)
	if c <= int64(cfg.MaxPerBucket) || n != P*int64(cfg.MaxValues) || v != P*int64(cfg.MaxValues) || u != P {
		t.Errorf("naive: largest cell %d, count %d, values %d, units %d; want above the bounds (P times for counts, values, units)", c, n, v, u)
	}

	// Among other units: the change the flooding unit makes.
	with, naiveWith := floodWindows(t, cfg, floodEvents(P, true))
	without, naiveWithout := floodWindows(t, cfg, floodEvents(P, false))
	if want := encode(t, oneWindowAll(t, cfg, floodEvents(P, true))); !bytes.Equal(encode(t, with), want) {
		t.Fatal("merged window differs from the single instance's")
	}
	bound := map[string]Sensitivity{
		"histogram": sens.Histogram, "count": sens.Count, "sum": sens.Sum,
		"mean_sum": sens.MeanSum, "values": sens.Values, "units": sens.Units,
	}
	exceeded := map[string]bool{}
	for agg, d := range diffVectors(with, without, cfg.NumBuckets) {
		b := bound[agg]
		t.Logf("%-9s change %+v, sensitivity %+v", agg, d, b)
		if d.L0 > b.L0 || d.L1 > b.L1 || d.L2 > b.L2 || d.Linf > b.Linf {
			t.Errorf("%s: change %+v exceeds the sensitivity %+v", agg, d, b)
		}
	}
	for agg, d := range diffVectors(naiveWith, naiveWithout, cfg.NumBuckets) {
		if b := bound[agg]; d.Linf > b.Linf {
			exceeded[agg] = true
		}
	}
	for _, agg := range []string{"histogram", "count", "values", "units", "sum"} {
		if !exceeded[agg] {
			t.Errorf("naive merge: %s within its sensitivity; expected the flooding unit to exceed it", agg)
		}
	}
}

// oneWindowAll runs a single Tumbling over all partitions of seqs (one
// window) and returns its window.
func oneWindowAll(t *testing.T, cfg Config, seqs [][]Event) Window {
	t.Helper()
	tu := mustNew(t, cfg)
	tu.EmitFrom(0)
	for p := range seqs {
		tu.AssignPartitions(int32(p))
	}
	for _, seq := range seqs {
		for _, e := range seq {
			if s, _ := tu.Add(e); s != Accepted {
				t.Fatalf("status %v", s)
			}
		}
	}
	for p := range seqs {
		tu.Advance(int32(p), 100_000)
	}
	ws := tu.Poll(1)
	if len(ws) != 1 {
		t.Fatalf("%d windows", len(ws))
	}
	return ws[0]
}
