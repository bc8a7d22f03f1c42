package windows

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// farFuture is 9999-12-31T23:59:59.999Z in Unix milliseconds, the latest
// time the schema package accepts by default: the bogus timestamp of the
// review finding.
const farFuture = 253402300799999

// skewStep is one step of a MaxSkew scenario: exactly one of add, advance,
// emitFrom, assign or poll is set.
type skewStep struct {
	add      *Event
	want     Status    // with add
	advance  *[2]int64 // Advance(partition, wm)
	emitFrom *int64
	assign   []int32
	poll     bool    // Poll(0) and expect starts
	starts   []int64 // with poll (nil: expect none)
}

// sAdd adds an event at time ts on partition p that arrives at arr.
func sAdd(p int32, ts, arr int64, want Status) skewStep {
	return skewStep{add: &Event{Partition: p, Time: ts, Arrival: arr, Unit: "u", Bucket: -1}, want: want}
}
func sAdvance(p int32, wm int64) skewStep { return skewStep{advance: &[2]int64{int64(p), wm}} }
func sPoll(starts ...int64) skewStep      { return skewStep{poll: true, starts: starts} }

func TestMaxSkew(t *testing.T) {
	const s, min = 10_000, 60_000 // window size and MaxSkew in ms (countCfg: lateness 2 s)
	emit0 := int64(0)
	tests := []struct {
		name    string
		cfg     func(*Config) // applied after MaxSkew = 1 min
		steps   []skewStep
		wm      int64 // Watermark() at the end
		rejects int64 // Stats().Events[TooFarAhead] at the end
	}{
		{name: "a far-future event is rejected and changes nothing else", steps: []skewStep{
			sAdd(0, 0, 0, Accepted), sAdd(0, farFuture, 1_000, TooFarAhead), sPoll(),
			sAdd(0, 5_000, 5_000, Accepted), sAdd(0, s+2_000, s+2_000, Accepted), sPoll(0),
			sAdd(0, 2*s+2_000, 2*s+2_000, Accepted), sPoll(s),
		}, wm: 2*s + 2_000, rejects: 1},
		{name: "events up to MaxSkew ahead of their own arrival are accepted", steps: []skewStep{
			sAdd(0, min, 0, Accepted), sAdd(0, min+1, 0, TooFarAhead), sAdd(0, 2*min+5, min+5, Accepted),
		}, wm: min + 5, rejects: 1},
		{name: "a rejected event's arrival still moves the watermark", steps: []skewStep{
			sAdd(0, 0, 0, Accepted), sAdd(0, farFuture, s+2_000, TooFarAhead), sPoll(0),
		}, wm: s + 2_000, rejects: 1},
		{name: "without MaxSkew a far-future event opens its own window and moves nothing", cfg: func(c *Config) { c.MaxSkew = 0 }, steps: []skewStep{
			sAdd(0, 0, 0, Accepted), sAdd(0, farFuture, 1_000, Accepted), sAdd(0, 5_000, 5_000, Accepted),
		}, wm: 5_000},
		{name: "a first event on a fresh partition is measured against its own arrival", steps: []skewStep{
			{assign: []int32{0, 1}}, sAdd(1, farFuture, 0, TooFarAhead), sAdd(1, 5_000, 5_000, Accepted),
			sAdd(0, 5_000, 5_000, Accepted), sPoll(),
		}, wm: 5_000, rejects: 1},
		{name: "other events' times do not matter", steps: []skewStep{
			{assign: []int32{0, 1}}, sAdd(0, 0, 0, Accepted), sAdd(1, 50_000, 0, Accepted), sAdd(1, 50_001, 40_000, Accepted),
			sAdd(0, min, 0, Accepted), sAdd(0, min+1, 0, TooFarAhead),
		}, wm: 0, rejects: 1},
		{name: "an event much older than its arrival is late, not too far ahead", steps: []skewStep{
			sAdd(0, 0, 10*min, Late),
		}, wm: 10 * min},
		{name: "Advance is not checked", steps: []skewStep{
			sAdd(0, 0, 0, Accepted), sAdvance(0, 20*min), sAdd(0, 20*min+1, 20*min, Accepted),
		}, wm: 20 * min},
		{name: "a rejected event opens no window and the cap counts from the emission point", cfg: func(c *Config) { c.MaxOpenWindows = 2 }, steps: []skewStep{
			{emitFrom: &emit0}, sAdd(0, 0, 0, Accepted), sAdd(0, farFuture, 0, TooFarAhead), sAdd(0, s, s, Accepted),
			sAdd(0, 2*s, 2*s, TooManyWindows), sPoll(0), sAdd(0, 2*s+1, 2*s+1, Accepted),
		}, wm: 2*s + 1, rejects: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := countCfg()
			cfg.MaxSkew = time.Minute
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			tu := mustNew(t, cfg)
			for i, st := range tc.steps {
				switch {
				case st.add != nil:
					if got, _ := tu.Add(*st.add); got != st.want {
						t.Fatalf("step %d: Add(t=%d, p=%d) = %v, want %v", i, st.add.Time, st.add.Partition, got, st.want)
					}
				case st.advance != nil:
					if err := tu.Advance(int32(st.advance[0]), st.advance[1]); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				case st.emitFrom != nil:
					if err := tu.EmitFrom(*st.emitFrom); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				case st.assign != nil:
					tu.AssignPartitions(st.assign...)
				case st.poll:
					var got []int64
					for _, w := range tu.Poll(0) {
						got = append(got, w.Start)
					}
					if !reflect.DeepEqual(got, st.starts) {
						t.Fatalf("step %d: Poll = %v, want %v", i, got, st.starts)
					}
				}
			}
			// The effective watermark: the smallest arrival watermark.
			if wm, ok := tu.Watermark(); !ok || wm != tc.wm {
				t.Errorf("watermark %d (%v), want %d", wm, ok, tc.wm)
			}
			if got := tu.Stats().Events[TooFarAhead]; got != tc.rejects {
				t.Errorf("%d events counted too far ahead, want %d", got, tc.rejects)
			}
		})
	}
}

// withStrays adds to every partition's sequence stray far-future events
// (150–400 s ahead of their arrival, 1 in 60 events, sometimes two in a
// row) and one genuine jump (every later event, and its arrival, 120 s
// later: a partition silent for two minutes), for MaxSkew = 30 s. Arrival
// times stay monotone on each partition. The stray events stay within a
// few hundred seconds so that runInterleaved's final watermark closes few
// extra windows.
func withStrays(r *rand.Rand, seqs [][]Event) {
	for p, seq := range seqs {
		jumpAt := len(seq)/3 + r.IntN(len(seq)/3)
		var out []Event
		for i, e := range seq {
			if i >= jumpAt {
				e.Time += 120_000
				e.Arrival += 120_000
			}
			out = append(out, e)
			if e.Bucket != -2 && r.IntN(60) == 0 {
				for n := 1 + r.IntN(2); n > 0; n-- {
					b := e
					b.Time += 150_000 + int64(r.IntN(250_000))
					b.Offset += 1 << 20 // a distinct identity
					out = append(out, b)
				}
			}
		}
		seqs[p] = out
	}
}

// With MaxSkew the same per-partition sequences still give byte-identical
// windows and statuses for every interleaving and polling schedule, with
// stray far-future events and genuine jumps in every partition.
func TestInterleavingWithMaxSkew(t *testing.T) {
	variants := map[string]func(*Config){
		"units":         func(*Config) {},
		"units, capped": func(c *Config) { c.MaxUnits = 7 },
		"event level":   func(c *Config) { c.EventLevel = true },
	}
	for name, mod := range variants {
		t.Run(name, func(t *testing.T) {
			cfg := propCfg()
			cfg.MaxSkew = 30 * time.Second
			mod(&cfg)
			rejected := 0
			for seed := uint64(1); seed <= 3; seed++ {
				seqs := genPartitions(rand.New(rand.NewPCG(seed, 99)), 3, 300, 25)
				withStrays(rand.New(rand.NewPCG(seed, 98)), seqs)
				refStatus := sameUnderInterleavings(t, cfg, seqs, seed, 8, nil)
				rejected += strings.Count(refStatus, TooFarAhead.String())
			}
			// The rule must have fired: about 1 in 60 of 2 700 events
			// spawns one or two strays.
			t.Logf("%d events rejected as too far ahead", rejected)
			if rejected < 20 {
				t.Errorf("only %d events rejected: the test does not exercise MaxSkew", rejected)
			}
		})
	}
}
