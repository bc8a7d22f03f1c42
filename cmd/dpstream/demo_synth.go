package main

// demo_synth.go generates the demo's synthetic input: smart-meter readings.
// The stream is a deterministic function of its synthConfig (the seed
// included): the same config gives the same messages, byte for byte, in
// the same order and on the same partitions. It also computes, from the
// generated events alone, the exact aggregates the operator must find after
// contribution bounding (truth), so the demo can print true values beside
// the private ones and the tests can check both.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dpstream/dpstream/schema"
)

// The synthetic stream's schema: field names, regions (the group-by field,
// released as public groups), statuses (the histogram categories) and the
// bounds of the numeric field.
const (
	synthTimeField   = "ts"
	synthUnitField   = "meter"
	synthRegionField = "region"
	synthStatusField = "status"
	synthValueField  = "wh"
	// synthLower and synthUpper bound one reading in watt-hours. A reading
	// covers about 5 minutes; 300 Wh in 5 minutes is a 3.6 kW draw, above
	// what a household uses without an electric-vehicle charger, so larger
	// readings (EV charging spikes) are clamped.
	synthLower = 0.0
	synthUpper = 300.0
	// synthUnknownRegion is a region outside the public list: its readings
	// are valid but skipped by the operator (privacy.public_groups).
	synthUnknownRegion = "atlantis"
)

var (
	// synthRegions are the public groups, with synthRegionWeights the share
	// of meters in each (made up, unequal so the groups differ in size).
	synthRegions       = []string{"north", "east", "south", "west"}
	synthRegionWeights = []float64{0.4, 0.3, 0.2, 0.1}
	// synthStatuses are the histogram categories, with the probability of
	// each per reading (made up: most readings are measured, some are
	// estimated by the head end, a few flag a fault).
	synthStatuses       = []string{"ok", "estimated", "fault"}
	synthStatusWeights  = []float64{0.88, 0.09, 0.03}
	synthWindowDuration = 15 * time.Minute
	// synthLateness is the operator's allowed lateness in the demo.
	synthLateness = time.Minute
	// synthBase is the start of the first window: 2024-05-01T00:00:00Z
	// (time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()).
	synthBase = int64(1714521600000)
)

// synthBounds are the demo's contribution bounds per meter and window. A
// normal meter sends 1–3 readings per window with at most 2 distinct
// statuses, so only the flooding meters and per-bucket repeats are cut.
var synthBounds = struct{ MaxGroups, MaxBuckets, MaxPerBucket, MaxValues int }{1, 2, 2, 3}

// synthConfig describes one synthetic stream.
type synthConfig struct {
	Seed            uint64
	Windows         int   // windows of readings
	EventsPerWindow int   // readings generated per window (before bad and late extras)
	Partitions      int   // input partitions the messages are spread over
	Base            int64 // first window start, unix ms
	Size            time.Duration
	Lateness        time.Duration
}

// Limits of synthConfig (typo guards: the demo must finish in seconds to
// minutes).
const (
	maxSynthWindows = 1000
	maxSynthEvents  = 1_000_000
	maxSynthParts   = 64
)

// errSynth wraps invalid generator settings.
var errSynth = errors.New("demo: invalid synthetic stream settings")

func (c synthConfig) validate() error {
	switch {
	case c.Windows < 1 || c.Windows > maxSynthWindows:
		return fmt.Errorf("%w: windows must be in [1, %d], got %d", errSynth, maxSynthWindows, c.Windows)
	case c.EventsPerWindow < 1 || c.EventsPerWindow > maxSynthEvents:
		return fmt.Errorf("%w: events per window must be in [1, %d], got %d", errSynth, maxSynthEvents, c.EventsPerWindow)
	case c.Windows*c.EventsPerWindow > 20*maxSynthEvents:
		return fmt.Errorf("%w: windows × events per window must be at most %d", errSynth, 20*maxSynthEvents)
	case c.Partitions < 1 || c.Partitions > maxSynthParts:
		return fmt.Errorf("%w: partitions must be in [1, %d], got %d", errSynth, maxSynthParts, c.Partitions)
	case c.Size < time.Minute || c.Size%time.Millisecond != 0:
		return fmt.Errorf("%w: window size must be a whole number of ms, at least 1m", errSynth)
	case c.Lateness < 0 || c.Lateness >= c.Size/2:
		return fmt.Errorf("%w: lateness must be in [0, size/2)", errSynth)
	}
	return nil
}

// reading is one valid smart-meter reading.
type reading struct {
	Time   int64 // event time, unix ms
	Meter  string
	Region string
	Status string
	Wh     float64
}

// synthMsg is one input message in arrival order.
type synthMsg struct {
	Key, Value []byte
	Partition  int
	// Arrival is when the message reaches the broker (unix ms, simulated
	// time): the demo's producer stamps the record with it, standing in
	// for the broker's LogAppendTime of a live stream. It never decreases
	// along a partition.
	Arrival int64
	// Reading is the decoded content of a valid message; nil for bad input.
	Reading *reading
	// Bad is the schema reason the operator must skip a bad message with
	// ("" for a valid one).
	Bad string
	// NotPublic marks a valid reading of a region outside the public list.
	NotPublic bool
	// Late marks a valid reading the operator must drop as late: it
	// arrives at or after its window's end plus the lateness.
	Late bool
	// Delayed marks a reading that arrives after its window's end but
	// within the lateness, and is counted.
	Delayed bool
	// Closing marks the readings of the window after the last one, one per
	// partition, arriving at the last window's end plus the lateness: they
	// close the last window by arrival time.
	Closing bool
}

// synthStream is a generated stream.
type synthStream struct {
	cfg  synthConfig
	Msgs []synthMsg // in arrival order
}

// windowStart returns the start of window i.
func (s *synthStream) windowStart(i int) int64 {
	return s.cfg.Base + int64(i)*s.cfg.Size.Milliseconds()
}

// partitionOf is the input partition of a message key: FNV-1a (32 bit) of
// the key modulo the partition count. The demo's writer uses the same
// function (demoBalancer), so the generator knows each partition's order.
func partitionOf(key []byte, partitions int) int {
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(partitions))
}

// meterID names meter i.
func meterID(i int) string { return fmt.Sprintf("m-%05d", i) }

// pick returns an index drawn with the given weights (summing to 1).
func pick(r *rand.Rand, weights []float64) int {
	u := r.Float64()
	for i, w := range weights {
		if u < w {
			return i
		}
		u -= w
	}
	return len(weights) - 1
}

// pending is a message before arrival ordering.
type pending struct {
	arrival int64
	seq     int
	msg     synthMsg
}

// generate makes the stream of cfg.
//
// Per window: meters, in a random order, each send 1–3 readings at random
// times in the window (at most 2 distinct statuses per meter) until the
// window has EventsPerWindow readings. Each meter has a home region and a
// base load; a reading is the base load ×(0.6…1.4), or with probability
// 0.02 an EV-charging spike of 400–900 Wh (clamped by the operator to 300).
// About 1 in 400 meters per window floods: 8–12 identical "fault"
// readings, which contribution bounding cuts to 3 values (2 per status).
// Readings arrive 0–20 s after their event time; about 1 in 500 arrives
// after its window's end plus the lateness, within the next window
// (dropped as late), and as many arrive 10–40 s after their window's end
// (within the lateness, counted). No message arrives after the last
// window's end plus the size, so the window after the last never closes by
// arrival time. About 1 in 200 messages per
// window is bad input of one of five kinds, and about 1 in 1000 is a
// reading of a region outside the public list.
func generate(cfg synthConfig) (*synthStream, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5eed_de30))
	size := cfg.Size.Milliseconds()
	lateness := cfg.Lateness.Milliseconds()
	// The meter population: every window's readings come from a changing
	// subset, and at least 16 meters stay silent in each window to send
	// its delayed, late and non-public readings (so those never push a
	// reporting meter over a bound).
	nMeters := cfg.EventsPerWindow + 16
	regionOf := make([]string, nMeters)
	base := make([]float64, nMeters)
	for i := range nMeters {
		regionOf[i] = synthRegions[pick(r, synthRegionWeights)]
		base[i] = 20 + 130*r.Float64() // Wh per reading, made up
	}
	var ps []pending
	seq := 0
	add := func(arrival int64, m synthMsg) {
		m.Partition = partitionOf(m.Key, cfg.Partitions)
		ps = append(ps, pending{arrival, seq, m})
		seq++
	}
	addReading := func(rd reading, delay int64, delayed bool) {
		v := encodeReading(rd, r.IntN(5) == 0) // 1 in 5 messages as JSON
		add(rd.Time+delay, synthMsg{Key: []byte(rd.Meter), Value: v, Reading: &rd, Delayed: delayed})
	}
	jitter := func() int64 { return r.Int64N(20_000) } // 0–20 s
	nBad := cfg.EventsPerWindow / 200
	nLate := cfg.EventsPerWindow / 500
	nFlood := cfg.EventsPerWindow / 1000
	nForeign := cfg.EventsPerWindow / 1000
	for w := range cfg.Windows {
		start := cfg.Base + int64(w)*size
		end := start + size
		order := r.Perm(nMeters)
		n, used := 0, 0
		for _, mi := range order {
			if n >= cfg.EventsPerWindow {
				break
			}
			used++
			k := min(1+r.IntN(3), cfg.EventsPerWindow-n)
			n += k
			var statuses []int
			for range k {
				st := pick(r, synthStatusWeights)
				if !slices.Contains(statuses, st) && len(statuses) == synthBounds.MaxBuckets {
					st = statuses[0] // keep within max_buckets distinct statuses
				}
				if !slices.Contains(statuses, st) {
					statuses = append(statuses, st)
				}
				wh := math.Round(base[mi] * (0.6 + 0.8*r.Float64()))
				if r.IntN(50) == 0 {
					wh = float64(400 + r.IntN(501)) // EV charging spike
				}
				rd := reading{Time: start + r.Int64N(size), Meter: meterID(mi), Region: regionOf[mi],
					Status: synthStatuses[st], Wh: wh}
				addReading(rd, jitter(), false)
			}
		}
		// Silent meters of this window, for the extra readings below.
		silent := order[used:]
		nextSilent := func() int {
			mi := silent[0]
			silent = silent[1:]
			if len(silent) == 0 {
				silent = order[used:]
			}
			return mi
		}
		// Flooding meters: meters outside the population, repeating one
		// fault reading.
		for f := range nFlood {
			id := nMeters + w*nFlood + f
			rd := reading{Time: start + r.Int64N(size/2), Meter: meterID(id),
				Region: synthRegions[r.IntN(len(synthRegions))], Status: "fault", Wh: 0}
			for c := range 8 + r.IntN(5) {
				rd2 := rd
				rd2.Time += int64(c) * 1000
				addReading(rd2, jitter(), false)
			}
		}
		// Delayed readings: near the window's end, arriving 10–40 s after
		// it (within the lateness when it is at least 40 s).
		for range nLate {
			mi := nextSilent()
			rd := reading{Time: end - 1 - r.Int64N(5_000), Meter: meterID(mi), Region: regionOf[mi], Status: "ok",
				Wh: math.Round(base[mi])}
			arrive := end + 10_000 + r.Int64N(30_000)
			addReading(rd, arrive-rd.Time, arrive-end < lateness)
		}
		// Late readings: for this window, arriving after its end plus the
		// lateness, before the next window's end.
		for range nLate {
			mi := nextSilent()
			rd := reading{Time: start + r.Int64N(size), Meter: meterID(mi), Region: regionOf[mi], Status: "estimated",
				Wh: math.Round(base[mi])}
			addReading(rd, end+lateness+r.Int64N(size-lateness)-rd.Time, false)
		}
		// Readings of a region outside the public list.
		for range nForeign {
			mi := nextSilent()
			rd := reading{Time: start + r.Int64N(size), Meter: meterID(mi), Region: synthUnknownRegion, Status: "ok", Wh: 100}
			v := encodeReading(rd, false)
			add(rd.Time+jitter(), synthMsg{Key: []byte(rd.Meter), Value: v, Reading: &rd, NotPublic: true})
		}
		// Bad input, spread over the window.
		for b := range nBad {
			mi := r.IntN(nMeters)
			t := start + r.Int64N(size)
			key, val, reason := badReading(b+w, t, meterID(mi), regionOf[mi])
			add(t+jitter(), synthMsg{Key: key, Value: val, Bad: reason})
		}
	}
	// Closing readings: one per partition at the end of the last window
	// plus the lateness, arriving then, from the first meter of that
	// partition (the population is extended if a partition has none).
	closeAt := cfg.Base + int64(cfg.Windows)*size + lateness
	for p := range cfg.Partitions {
		for i := 0; ; i++ {
			id := meterID(i)
			if partitionOf([]byte(id), cfg.Partitions) != p {
				continue
			}
			region, b := synthRegions[0], 100.0
			if i < nMeters {
				region, b = regionOf[i], math.Round(base[i])
			}
			rd := reading{Time: closeAt, Meter: id, Region: region, Status: "ok", Wh: b}
			m := synthMsg{Key: []byte(id), Value: encodeReading(rd, false), Reading: &rd, Closing: true}
			m.Partition = p
			ps = append(ps, pending{closeAt, seq, m})
			seq++
			break
		}
	}
	slices.SortStableFunc(ps, func(a, b pending) int {
		if a.arrival != b.arrival {
			if a.arrival < b.arrival {
				return -1
			}
			return 1
		}
		return a.seq - b.seq
	})
	s := &synthStream{cfg: cfg, Msgs: make([]synthMsg, len(ps))}
	for i := range ps {
		s.Msgs[i] = ps[i].msg
		s.Msgs[i].Arrival = ps[i].arrival
	}
	s.markLate()
	return s, nil
}

// markLate applies the windows package's lateness rule to each reading: a
// reading is late if it arrives at or after its window's end plus the
// lateness. The rule depends on the reading alone, and arrival times do
// not decrease along a partition, so it is exactly the operator's decision
// (see windows.Tumbling) whatever the interleaving of partitions.
func (s *synthStream) markLate() {
	size := s.cfg.Size.Milliseconds()
	lateness := s.cfg.Lateness.Milliseconds()
	for i := range s.Msgs {
		m := &s.Msgs[i]
		if m.Reading == nil || m.NotPublic {
			continue
		}
		start := s.cfg.Base + floorDiv(m.Reading.Time-s.cfg.Base, size)*size
		m.Late = start+size+lateness <= m.Arrival
		if m.Late {
			m.Delayed = false
		}
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// encodeReading encodes a reading as msgpack (sorted keys, so the bytes
// are deterministic) or JSON.
func encodeReading(rd reading, asJSON bool) []byte {
	m := map[string]any{
		synthTimeField: rd.Time, synthUnitField: rd.Meter, synthRegionField: rd.Region,
		synthStatusField: rd.Status, synthValueField: rd.Wh, "firmware": "3.1.4",
	}
	return encodeMap(m, asJSON)
}

func encodeMap(m map[string]any, asJSON bool) []byte {
	if asJSON {
		b, err := json.Marshal(m) // sorted keys
		if err != nil {
			panic("demo: encoding a synthetic reading: " + err.Error()) // only NaN, never passed here
		}
		return b
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(m); err != nil {
		panic("demo: encoding a synthetic reading: " + err.Error()) // in-memory writer: cannot fail
	}
	return buf.Bytes()
}

// badReading returns bad input number i: one of five kinds, with the schema
// reason the operator must count it under.
func badReading(i int, t int64, meter, region string) (key, value []byte, reason string) {
	key = []byte(meter)
	ts := strconv.FormatInt(t, 10)
	switch i % 5 {
	case 0: // a truncated JSON message
		return key, []byte(`{"ts":` + ts + `,"meter":"` + meter + `","region":"` + region + `","wh":1`), schema.ReasonMalformed.String()
	case 1: // a status outside the categories
		return key, encodeMap(map[string]any{synthTimeField: t, synthUnitField: meter, synthRegionField: region,
			synthStatusField: "tampered", synthValueField: 10.0}, false), schema.ReasonUnknownCategory.String()
	case 2: // a NaN reading
		return key, encodeMap(map[string]any{synthTimeField: t, synthUnitField: meter, synthRegionField: region,
			synthStatusField: "ok", synthValueField: math.NaN()}, false), schema.ReasonNaNOrInf.String()
	case 3: // no meter id
		return key, encodeMap(map[string]any{synthTimeField: t, synthRegionField: region,
			synthStatusField: "ok", synthValueField: 10.0}, true), schema.ReasonMissingField.String()
	default: // the reading as a string
		return key, encodeMap(map[string]any{synthTimeField: t, synthUnitField: meter, synthRegionField: region,
			synthStatusField: "ok", synthValueField: "10.0"}, true), schema.ReasonWrongType.String()
	}
}

// groupTruth is the exact, bounded aggregate of one region in one window,
// computed by the demo from the generated readings.
type groupTruth struct {
	Count      int64
	Hist       []int64 // per status
	Values     int64
	Sum        float64 // of clamped kept values
	CentredSum float64 // Σ (clamped value − midpoint)
	// Units counts the meters with kept readings in the region.
	Units int64
	// CentredSqSum is Σ (clamped value − midpoint)².
	CentredSqSum float64
	// Kept are the kept clamped values, sorted (for the quantiles).
	Kept []float64
	// Exact is false when a meter exceeded a bound in a way whose outcome
	// depends on the operator's keyed random sampling (never for the
	// generated stream; kept for streams that do).
	Exact bool
}

// Mean returns the exact mean of the kept clamped values (NaN without values).
func (g *groupTruth) Mean() float64 {
	if g.Values == 0 {
		return math.NaN()
	}
	return g.Sum / float64(g.Values)
}

// Variance returns the exact variance of the kept clamped values (NaN
// without values), from the centred sums as the operator forms it.
func (g *groupTruth) Variance() float64 {
	if g.Values == 0 {
		return math.NaN()
	}
	n := float64(g.Values)
	m := g.CentredSum / n
	return g.CentredSqSum/n - m*m
}

// Quantile returns the exact r-quantile of the kept clamped values: the
// ⌈rN⌉-th smallest (at least the first); NaN without values.
func (g *groupTruth) Quantile(r float64) float64 {
	if len(g.Kept) == 0 {
		return math.NaN()
	}
	k := max(1, int(math.Ceil(r*float64(len(g.Kept)))))
	return g.Kept[k-1]
}

// truth returns, per published window start and region, the exact
// aggregates after contribution bounding: per meter and window at most
// MaxGroups regions, per region at most MaxValues counted events and
// values (clamped to [synthLower, synthUpper]) and at most MaxBuckets
// statuses with at most MaxPerBucket readings each. Late, bad, non-public
// and closing messages are left out. Where bounding keeps a random subset
// whose choice matters (values that differ, too many statuses or
// regions), the result is marked inexact.
func (s *synthStream) truth() map[int64]map[string]*groupTruth {
	size := s.cfg.Size.Milliseconds()
	type meterKey struct {
		start int64
		meter string
	}
	per := map[meterKey][]*reading{}
	var keys []meterKey
	for i := range s.Msgs {
		m := &s.Msgs[i]
		if m.Reading == nil || m.NotPublic || m.Late || m.Closing {
			continue
		}
		start := s.cfg.Base + floorDiv(m.Reading.Time-s.cfg.Base, size)*size
		k := meterKey{start, m.Reading.Meter}
		if _, ok := per[k]; !ok {
			keys = append(keys, k)
		}
		per[k] = append(per[k], m.Reading)
	}
	out := map[int64]map[string]*groupTruth{}
	for w := range s.cfg.Windows {
		gs := map[string]*groupTruth{}
		for _, reg := range synthRegions {
			gs[reg] = &groupTruth{Hist: make([]int64, len(synthStatuses)), Exact: true}
		}
		out[s.windowStart(w)] = gs
	}
	mid := synthLower/2 + synthUpper/2
	clamp := func(v float64) float64 { return math.Min(synthUpper, math.Max(synthLower, v)) }
	b := synthBounds
	for _, k := range keys {
		gs := out[k.start]
		if gs == nil {
			continue
		}
		byRegion := map[string][]*reading{}
		var regions []string
		for _, rd := range per[k] {
			if _, ok := byRegion[rd.Region]; !ok {
				regions = append(regions, rd.Region)
			}
			byRegion[rd.Region] = append(byRegion[rd.Region], rd)
		}
		exact := len(regions) <= b.MaxGroups
		for _, reg := range regions {
			g := gs[reg]
			rds := byRegion[reg]
			g.Exact = g.Exact && exact
			n := len(rds)
			kept := min(n, b.MaxValues)
			g.Count += int64(kept)
			g.Values += int64(kept)
			allSame := true
			for _, rd := range rds {
				allSame = allSame && clamp(rd.Wh) == clamp(rds[0].Wh)
			}
			if n > b.MaxValues && !allSame {
				g.Exact = false
			}
			g.Units++
			for _, rd := range rds[:kept] { // any kept subset when exact
				v := clamp(rd.Wh)
				g.Sum += v
				g.CentredSum += v - mid
				g.CentredSqSum += (v - mid) * (v - mid)
				i, _ := slices.BinarySearch(g.Kept, v)
				g.Kept = slices.Insert(g.Kept, i, v)
			}
			perStatus := make([]int, len(synthStatuses))
			distinct := 0
			for _, rd := range rds {
				si := slices.Index(synthStatuses, rd.Status)
				if perStatus[si] == 0 {
					distinct++
				}
				perStatus[si]++
			}
			if distinct > b.MaxBuckets {
				g.Exact = false
			}
			for si, c := range perStatus {
				g.Hist[si] += int64(min(c, b.MaxPerBucket))
			}
		}
	}
	return out
}

// counts summarises the stream: valid readings in published windows, bad
// messages by reason, late, delayed and non-public readings.
type synthCounts struct {
	Messages, Readings, Late, Delayed, NotPublic, Closing int
	Bad                                                   map[string]int
}

func (s *synthStream) counts() synthCounts {
	c := synthCounts{Messages: len(s.Msgs), Bad: map[string]int{}}
	for i := range s.Msgs {
		m := &s.Msgs[i]
		switch {
		case m.Bad != "":
			c.Bad[m.Bad]++
		case m.Closing:
			c.Closing++
		case m.NotPublic:
			c.NotPublic++
		case m.Late:
			c.Late++
		default:
			c.Readings++
			if m.Delayed {
				c.Delayed++
			}
		}
	}
	return c
}
