package windows

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The windows a given seed and input produce are part of the package's
// contract: a replay after a restart, or an upgrade, must keep the same
// contributions. TestOutputPinned pins them for a range of configurations
// (every bound binding, unit caps, events without a unit, event level):
// the SHA-256 of every emitted window's encoding, every Add status, the
// stats and the tracked unit and group counts.
//
// The digests were computed with the first implementation of the package
// (linked per-unit records, commit 2a0bb58) and must never change; a
// representation change that alters them changes which contributions are
// kept. The test fails if any window, status or count differs.
func TestOutputPinned(t *testing.T) { checkPinned(t, false) }

// Compacting the unit arena after every blob move (instead of when a
// quarter of it is free) moves every blob many times and must change
// nothing.
func TestOutputPinnedCompacting(t *testing.T) {
	defer func(m, s int) { compactMin, compactShare = m, s }(compactMin, compactShare)
	compactMin, compactShare = 1, 1<<30
	checkPinned(t, true)
}

type pinnedCase struct {
	name          string
	mod           func(*Config)
	units, groups int
	want          string
}

func pinnedSeed() [32]byte {
	seed := [32]byte{}
	for i := range seed {
		seed[i] = byte(0xa5 ^ 7*i)
	}
	return seed
}

func pinnedBase() Config {
	return Config{
		Size: 10 * time.Second, AllowedLateness: 2 * time.Second,
		Histogram: true, NumBuckets: 12, Count: true, Sum: true, Mean: true,
		MaxGroups: 1, MaxBuckets: 1, MaxPerBucket: 1, MaxValues: 1,
		Lower: -5, Upper: 5,
	}
}

var pinnedCases = []pinnedCase{
	{"bounds=1", func(*Config) {}, 300, 10, "f76b294db384debc485e8e37ba2ad2fd1bc867c563f8d4ab28ed9f8d0cf4ba1f"},
	{"bounds=2", func(c *Config) { c.MaxGroups, c.MaxBuckets, c.MaxPerBucket, c.MaxValues = 2, 2, 2, 2 }, 200, 10, "112d3b17a879cc58eb6df02633bf602dc9475a9a6247df7c1ae0c92e0fb5277f"},
	{"bounds=4", func(c *Config) { c.MaxGroups, c.MaxBuckets, c.MaxPerBucket, c.MaxValues = 4, 4, 1, 4 }, 100, 10, "9c0a050867b45b66c0e5b959fb1ab0cc51a7c2b0a1a18a99dba6316d2ba0afaa"},
	{"mixed", func(c *Config) { c.MaxGroups, c.MaxBuckets, c.MaxPerBucket, c.MaxValues = 3, 5, 2, 7 }, 40, 25, "ee9492665ac88530cf1ab1c02747cedfccf119d1856a9baa5213c9365aa3cc75"},
	{"large", func(c *Config) { c.MaxGroups, c.MaxBuckets, c.MaxPerBucket, c.MaxValues = 9, 8, 3, 10 }, 12, 12, "c71a03753ac92671d78864ded8619b81cb1a5a508cb66fe89a1d84608833816f"},
	{"capped", func(c *Config) {
		c.MaxGroups, c.MaxBuckets, c.MaxPerBucket, c.MaxValues = 2, 3, 1, 2
		c.MaxUnits = 37
	}, 150, 10, "d66b2d5e7185bc64a82b1d96e60a8293b0b1fe848b9fa9ad34188d4d67daa85c"},
	{"capped-tight", func(c *Config) { c.MaxUnits = 3 }, 50, 6, "1df573403481908e6f5916801f497b4821dac646f58a288eb93ecf02d0f715de"},
	{"count-only", func(c *Config) {
		c.Histogram, c.Sum, c.Mean = false, false, false
		c.MaxGroups, c.MaxValues = 2, 3
	}, 100, 8, "173b2ab0b1982fd4b26dc70b491bd9e4b2a67f73ddaeb77004bc21443e283410"},
	{"histogram-only", func(c *Config) {
		c.Count, c.Sum, c.Mean = false, false, false
		c.MaxGroups, c.MaxBuckets, c.MaxPerBucket = 2, 3, 2
	}, 100, 8, "a579975cfbc10879bfafb22587f503b0ca1105e1c1cca8e01cb608b4dbd43186"},
	{"sum-only", func(c *Config) {
		c.Histogram, c.Count, c.Mean = false, false, false
		c.MaxGroups, c.MaxValues = 2, 3
	}, 100, 8, "57e5582e9d66072d04d8ad1a0f22d2d5a9dacf770cc6c4578ad1181941227022"},
	{"event-level", func(c *Config) { c.EventLevel = true }, 100, 30, "8b2d2f09b0b6cc608947b9a30472e633894cfaa953dda52367f3bd195c5cffc0"},
	{"event-level-capped", func(c *Config) {
		c.EventLevel = true
		c.MaxOpenGroups = 7
	}, 100, 30, "4fc82b3451220560d0c28fb9e0db8f72d81b7838335380c69d778b196a15eb68"},
}

func checkPinned(t *testing.T, compacting bool) {
	for _, c := range pinnedCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := pinnedBase()
			c.mod(&cfg)
			tu, err := New(cfg, pinnedSeed())
			if err != nil {
				t.Fatal(err)
			}
			got, compactions := pinnedRun(t, tu, c.units, c.groups)
			t.Logf("digest %s, %d compactions", got, compactions)
			if got != c.want {
				t.Errorf("digest %s, want %s: the windows differ from the pinned ones", got, c.want)
			}
			if compacting && !cfg.EventLevel && compactions == 0 {
				t.Errorf("no compaction happened")
			}
		})
	}
}

// pinnedRun feeds 12 000 events on 3 partitions with jittered times
// (out of order within lateness, some late), each arriving at the largest
// event time seen on its partition so far (its own included: monotone
// arrivals under which the arrival-time rules make exactly the decisions
// the first implementation's event-time watermarks made, so the digests
// pinned with it still apply), units drawn from a skewed
// distribution (a few heavy units hit every bound), 1 event in 12 without
// a unit, buckets including −1, values partly outside [Lower, Upper],
// polling every 500 events, and returns the digest of everything observable
// and the number of arena compactions seen in the open windows.
func pinnedRun(t *testing.T, tu *Tumbling, units, groups int) (string, int) {
	compactions := 0
	t.Helper()
	r := rand.New(rand.NewPCG(2024, 11))
	h := sha256.New()
	var buf [8]byte
	num := func(x int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(x))
		h.Write(buf[:])
	}
	poll := func() int {
		ws := tu.Poll(0)
		for _, w := range ws {
			b, err := w.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			num(int64(len(b)))
			h.Write(b)
		}
		return len(ws)
	}
	var ts, arrival [3]int64
	offsets := [3]int64{}
	for i := 0; i < 12_000; i++ {
		p := r.IntN(3)
		ts[p] += int64(r.IntN(30))
		e := Event{
			Partition: int32(p), Offset: offsets[p], Time: ts[p] + int64(r.IntN(3_000)) - 1_500,
			Group:  fmt.Sprint("g", r.IntN(groups)),
			Bucket: r.IntN(13) - 1,
		}
		offsets[p]++
		if r.IntN(100) == 0 {
			e.Time -= 15_000 // late
		}
		arrival[p] = max(arrival[p], e.Time)
		e.Arrival = arrival[p]
		// Skewed units: u = ⌊units · x³⌋ makes the first units heavy.
		x := r.Float64()
		e.Unit = fmt.Sprint("unit-", int(float64(units)*x*x*x))
		if r.IntN(12) == 0 {
			e.Unit = ""
		}
		if r.IntN(5) != 0 {
			e.Value, e.HasValue = r.NormFloat64()*4, true
			if r.IntN(7) == 0 {
				e.Value = float64(r.IntN(5)) // repeated values: ties in value order
			}
		}
		s, start := tu.Add(e)
		num(int64(s))
		num(start)
		if i%500 == 499 {
			m := tu.Memory()
			for _, w := range tu.open {
				compactions += w.ar.compactions
			}
			num(m.Windows)
			num(m.Units)
			num(m.Groups)
			poll()
		}
	}
	for p := range ts {
		if err := tu.Advance(int32(p), ts[p]+100_000); err != nil {
			t.Fatal(err)
		}
	}
	for poll() > 0 {
	}
	st := tu.Stats()
	for s, n := range st.Events {
		// Statuses added after the digests were pinned (from TooFarAhead
		// on) are hashed only when non-zero, so the pinned digests stay
		// valid while any such event still changes them.
		if Status(s) < TooFarAhead || n != 0 {
			num(n)
		}
	}
	num(st.Windows)
	return hex.EncodeToString(h.Sum(nil)), compactions
}
