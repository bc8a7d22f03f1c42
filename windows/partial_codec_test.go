package windows

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// The encoding depends on the state only: the same events in any order,
// with the arena compacted after every move or not, give the same bytes.
func TestPartialEncodingCanonical(t *testing.T) {
	for name, cfg := range partialVariants() {
		t.Run(name, func(t *testing.T) {
			events := floodEvents(1, true)[0]
			defer func(m, s int) { compactMin, compactShare = m, s }(compactMin, compactShare)
			normalMin, normalShare := compactMin, compactShare
			var ref []byte
			for k := range 6 {
				r := rand.New(rand.NewPCG(uint64(k), 3))
				es := slices.Clone(events)
				r.Shuffle(len(es), func(a, b int) { es[a], es[b] = es[b], es[a] })
				compactMin, compactShare = normalMin, normalShare
				if k%2 == 1 {
					compactMin, compactShare = 1, 1<<30 // compact after every move
				}
				tu := mustNew(t, cfg)
				tu.EmitFrom(0)
				tu.AssignPartitions(0)
				for _, e := range es {
					tu.Add(e)
				}
				tu.Advance(0, 100_000)
				ps := tu.PollPartials(1)
				if len(ps) != 1 {
					t.Fatalf("%d partials", len(ps))
				}
				b := encodePartial(t, ps[0])
				if k == 0 {
					ref = b
					if ps[0].Groups() == 0 || (!cfg.EventLevel && ps[0].Units() == 0) {
						t.Fatal("empty partial")
					}
					continue
				}
				if !bytes.Equal(b, ref) {
					t.Fatalf("order %d: encoding differs", k)
				}
			}
		})
	}
}

// Decoding rejects every truncation, trailing bytes and non-canonical
// input, and whatever it accepts encodes back to the same bytes (so an
// accepted partial has exactly one encoding).
func TestPartialDecodeRejects(t *testing.T) {
	for name, cfg := range partialVariants() {
		t.Run(name, func(t *testing.T) {
			seqs := genPartitions(rand.New(rand.NewPCG(3, 4)), 1, 60, 5)
			ps := perPartition(t, cfg, testSeed, seqs, []int{0}, lastTime(seqs...)+20_000, rand.New(rand.NewPCG(1, 1)))
			var b []byte
			for _, p := range ps {
				if p.Groups() > 0 {
					b = encodePartial(t, p)
					break
				}
			}
			if b == nil {
				t.Fatal("no non-empty partial")
			}
			var p Partial
			for n := 0; n < len(b); n++ {
				if err := p.UnmarshalBinary(b[:n]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("prefix of %d of %d bytes: error %v", n, len(b), err)
				}
			}
			if err := p.UnmarshalBinary(append(slices.Clone(b), 0)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailing byte: error %v", err)
			}
			// A non-minimal varint: the start, 0x80-padded.
			i := len(partialMagic) + 2 + 16
			bad := slices.Concat(b[:i], []byte{b[i] | 0x80, 0}, b[i+1:])
			if b[i] < 0x80 {
				if err := p.UnmarshalBinary(bad); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("non-minimal varint: error %v", err)
				}
			}
			for _, k := range []int{4, 5} { // version, flags
				bad := slices.Clone(b)
				bad[k] += 2
				if err := p.UnmarshalBinary(bad); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("byte %d changed: error %v", k, err)
				}
			}
			accepted := 0
			for i := range b {
				for bit := range 8 {
					bad := slices.Clone(b)
					bad[i] ^= 1 << bit
					if err := p.UnmarshalBinary(bad); err != nil {
						continue
					}
					accepted++
					if got := encodePartial(t, p); !bytes.Equal(got, bad) {
						t.Fatalf("flip %d.%d: accepted input encodes differently", i, bit)
					}
					// Must not panic; errors are fine.
					MergePartials(cfg, testSeed, []Partial{p})
				}
			}
			t.Logf("%d bytes, %d of %d single-bit flips decode", len(b), accepted, 8*len(b))
		})
	}
}

// Partials of other seeds, configurations or windows refuse to merge, as
// do two partials of the same partition and partials that break the
// merge configuration's bounds.
func TestMergePartialsMismatch(t *testing.T) {
	cfg := propCfg()
	seqs := genPartitions(rand.New(rand.NewPCG(9, 9)), 2, 200, 10)
	end := lastTime(seqs...) + 20_000
	r := rand.New(rand.NewPCG(1, 2))
	a := perPartition(t, cfg, testSeed, seqs, []int{0}, end, r)
	b := perPartition(t, cfg, testSeed, seqs, []int{1}, end, r)
	otherSeed := testSeed
	otherSeed[0] ^= 1
	c := perPartition(t, cfg, otherSeed, seqs, []int{1}, end, r)
	other := cfg
	other.MaxGroups = 3
	d := perPartition(t, other, testSeed, seqs, []int{1}, end, r)
	ev := cfg
	ev.EventLevel = true
	e := perPartition(t, ev, testSeed, seqs, []int{1}, end, r)

	i := 0 // a window with data in both partitions, and a next one
	for i < len(a)-2 && (a[i].Groups() == 0 || b[i].Groups() == 0) {
		i++
	}
	if a[i].Groups() == 0 || b[i].Groups() == 0 {
		t.Fatal("no window with data in both partitions")
	}
	if _, err := MergePartials(cfg, testSeed, []Partial{a[i], b[i]}); err != nil {
		t.Fatal(err)
	}
	bigger := d[i] // bounds of `other`, relabelled as `cfg`'s
	bigger.fp = a[i].fp
	for _, c := range []struct {
		name  string
		cfg   Config
		seed  [32]byte
		parts []Partial
		want  error
	}{
		{"no partials", cfg, testSeed, nil, ErrMismatch},
		{"zero partial", cfg, testSeed, []Partial{{Start: a[i].Start, End: a[i].End}}, ErrMismatch},
		{"other seed", cfg, testSeed, []Partial{a[i], c[i]}, ErrMismatch},
		{"merged under another seed", cfg, otherSeed, []Partial{a[i], b[i]}, ErrMismatch},
		{"other config", cfg, testSeed, []Partial{a[i], d[i]}, ErrMismatch},
		{"merged under another config", other, testSeed, []Partial{a[i], b[i]}, ErrMismatch},
		{"event level", cfg, testSeed, []Partial{a[i], e[i]}, ErrMismatch},
		{"other window", cfg, testSeed, []Partial{a[i], b[i+1]}, ErrMismatch},
		{"unaligned window", cfg, testSeed, []Partial{{Start: a[i].Start + 1, End: a[i].End + 1}}, ErrMismatch},
		{"same partition twice", cfg, testSeed, []Partial{a[i], a[i]}, ErrOverlap},
		{"beyond the bounds", cfg, testSeed, []Partial{a[i], bigger}, ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := MergePartials(c.cfg, c.seed, c.parts)
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			if _, err := CombinePartials(c.cfg, c.seed, c.parts); !errors.Is(err, c.want) {
				t.Fatalf("combine: error %v, want %v", err, c.want)
			}
		})
	}
	if bigger.Groups() == 0 || d[i].Groups() == 0 {
		t.Fatal("the bounds case has no data")
	}
}

// Every Config field changes the fingerprint (so a field added to Config
// later must be added to fingerprint), and so does the seed.
func TestFingerprintCoversConfig(t *testing.T) {
	base := propCfg()
	tu := mustNew(t, base)
	fp := fingerprint(&base, tu.k0, tu.k1)
	if fp != tu.fp {
		t.Fatal("Tumbling fingerprint differs")
	}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		c := base
		f := reflect.ValueOf(&c).Elem().Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Float64:
			f.SetFloat(f.Float() + 1)
		default:
			t.Fatalf("field %s: kind %v not handled", v.Type().Field(i).Name, f.Kind())
		}
		if fingerprint(&c, tu.k0, tu.k1) == fp {
			t.Errorf("field %s does not change the fingerprint", v.Type().Field(i).Name)
		}
	}
	other := testSeed
	other[31] ^= 1
	if mustNewSeed(t, base, other).fp == fp {
		t.Error("the seed does not change the fingerprint")
	}
}

func mustNewSeed(t *testing.T, cfg Config, seed [32]byte) *Tumbling {
	t.Helper()
	tu, err := New(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return tu
}

// PollPartials needs EmitFrom, refuses after a partition was revoked with
// data in play, emits empty windows listing their partitions, and shares
// the emission point with Poll.
func TestPollPartialsRules(t *testing.T) {
	cfg := countCfg()
	tu := mustNew(t, cfg)
	tu.AssignPartitions(0)
	tu.Add(Event{Partition: 0, Time: 5_000, Arrival: 5_000, Unit: "a", Bucket: -1})
	tu.Advance(0, 40_000)
	if ps, err := tu.PollPartials(0), tu.PartialsErr(); len(ps) != 0 || !errors.Is(err, ErrNoEmitFrom) {
		t.Fatalf("without EmitFrom: %d partials, error %v", len(ps), err)
	}

	tu = mustNew(t, cfg)
	tu.EmitFrom(0)
	tu.AssignPartitions(2, 0, 1)
	tu.RevokePartitions(1) // before anything was added: harmless
	tu.Add(Event{Partition: 0, Time: 25_000, Arrival: 25_000, Unit: "a", Bucket: -1})
	tu.Advance(2, 40_000)
	ps := tu.PollPartials(0)
	// Watermark 25 s: windows [0, 10) closes (10 + 2 ≤ 25), [10, 20) too.
	if len(ps) != 2 || ps[0].Start != 0 || ps[1].Start != 10_000 {
		t.Fatalf("partials %+v", ps)
	}
	for _, p := range ps {
		if !slices.Equal(p.Partitions, []int32{0, 2}) || p.Groups() != 0 {
			t.Fatalf("partial %+v", p)
		}
		w, err := MergePartials(cfg, testSeed, []Partial{p})
		if err != nil {
			t.Fatal(err)
		}
		if want := tu.emptyWindow(p.Start); !bytes.Equal(encode(t, w), encode(t, want)) {
			t.Fatal("an empty partial does not merge to the empty window")
		}
	}
	tu.Advance(0, 40_000)
	ws := tu.Poll(1) // [20, 30) by Poll: not again as a partial
	if len(ws) != 1 || ws[0].Start != 20_000 || ws[0].Units != 1 {
		t.Fatalf("windows %+v", ws)
	}
	if ps := tu.PollPartials(0); len(ps) != 0 {
		t.Fatalf("partials %v", ps)
	}
	tu.Add(Event{Partition: 0, Time: 35_000, Arrival: 40_000, Unit: "a", Bucket: -1})
	tu.RevokePartitions(2)
	tu.Advance(0, 60_000)
	if ps, err := tu.PollPartials(0), tu.PartialsErr(); len(ps) != 0 || !errors.Is(err, ErrRevoked) {
		t.Fatalf("after a revocation: %d partials, error %v", len(ps), err)
	}
}

// fuzzCfg and fuzzEventCfg are the configurations of the fuzz seeds, so
// that mutated seeds keep a fingerprint the merge accepts.
func fuzzCfg(eventLevel bool) Config {
	cfg := propCfg()
	cfg.EventLevel = eventLevel
	return cfg
}

func FuzzPartialDecode(f *testing.F) {
	for _, ev := range []bool{false, true} {
		seqs := genPartitions(rand.New(rand.NewPCG(5, 5)), 1, 40, 4)
		ps := perPartition(f, fuzzCfg(ev), testSeed, seqs, []int{0}, lastTime(seqs...)+20_000, rand.New(rand.NewPCG(1, 1)))
		for _, p := range ps[:min(3, len(ps))] {
			b, _ := p.MarshalBinary()
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Partial
		if err := p.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, data) {
			t.Fatal("accepted input encodes differently")
		}
		cfg := fuzzCfg(p.EventLevel())
		w, err := MergePartials(cfg, testSeed, []Partial{p})
		if err != nil {
			return
		}
		wb, err := w.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back Window
		if err := back.UnmarshalBinary(wb); err != nil {
			t.Fatalf("merged window does not decode: %v", err)
		}
	})
}

// Per-unit counters saturate at 2^32 − 1 in a Tumbling; the merge adds
// them saturating too, so that two partitions whose counts add up past
// 2^32 − 1 give what a single Tumbling gives (the saturated count), not
// a wrapped-around one. The partials are made by a Tumbling and their
// counters raised in place to 2^32 − 2 (no Tumbling can be fed 2^32
// events in a test).
func TestMergeSaturatesCounters(t *testing.T) {
	cfg := floodCfg()
	const big = math.MaxUint32 - 1
	var parts []Partial
	for p := range 2 {
		tu := mustNew(t, cfg)
		tu.EmitFrom(0)
		tu.AssignPartitions(int32(p))
		tu.Add(Event{Partition: int32(p), Unit: "u", Group: "g", Bucket: 1, Value: 4, HasValue: true})
		tu.Advance(int32(p), 10_000)
		ps := tu.PollPartials(0)
		if len(ps) != 1 || ps[0].Units() != 1 {
			t.Fatalf("partials %v", ps)
		}
		w := ps[0].words // one unit, one group, one cell, one value
		w[pEvents] = big
		g := w[pHdr:]
		g[gEvents], g[gHist], g[gWords+1] = big, big, big
		parts = append(parts, partialRoundTrip(t, ps[0]))
	}
	w, _ := mergeOK(t, cfg, parts)
	g := w.Groups[0]
	const sat = math.MaxUint32
	if g.Count != int64(cfg.MaxValues) || g.Histogram[1] != int64(cfg.MaxPerBucket) ||
		w.Drops.Count != sat-int64(cfg.MaxValues) || w.Drops.PerBucket != sat-int64(cfg.MaxPerBucket) ||
		w.Drops.Groups != 0 || w.Drops.Buckets != 0 {
		t.Fatalf("group %+v, drops %+v: want counters saturated at 2^32 − 1", g, w.Drops)
	}
}
