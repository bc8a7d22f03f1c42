package demo

// generate.go makes a synthetic stream. The stream is a deterministic
// function of its StreamConfig (the seed included): the same config gives
// the same messages, byte for byte, in the same order and on the same
// partitions. The methods below draw from one random source in a fixed
// order; reordering their calls changes every stream.

import (
	"math"
	"math/rand/v2"
	"slices"
)

// pending is a message before arrival ordering.
type pending struct {
	arrival int64
	seq     int
	msg     Message
}

// generator is the state of Generate.
type generator struct {
	cfg            StreamConfig
	r              *rand.Rand
	size, lateness int64 // ms
	// The meter population: each meter's home region and base load.
	nMeters  int
	regionOf []string
	base     []float64
	ps       []pending
	seq      int // the next message's sequence number (ties in arrival)
}

// streamSeedStream is the second word of the generator's PCG seed (the
// first is StreamConfig.Seed): an arbitrary constant, fixed so that a seed
// gives the same stream in every version.
const streamSeedStream = 0x5eed_de30

// Generate makes the stream of cfg.
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
func Generate(cfg StreamConfig) (*Stream, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &generator{cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, streamSeedStream)),
		size: cfg.Size.Milliseconds(), lateness: cfg.Lateness.Milliseconds()}
	g.population()
	for w := range cfg.Windows {
		order, used := g.readings(w)
		g.extras(w, order, used)
	}
	g.closing()
	return g.stream(), nil
}

// population draws the meters: every window's readings come from a
// changing subset, and at least 16 meters stay silent in each window to
// send its delayed, late and non-public readings (so those never push a
// reporting meter over a bound).
func (g *generator) population() {
	g.nMeters = g.cfg.EventsPerWindow + 16
	g.regionOf = make([]string, g.nMeters)
	g.base = make([]float64, g.nMeters)
	for i := range g.nMeters {
		g.regionOf[i] = Regions[Pick(g.r, synthRegionWeights)]
		g.base[i] = 20 + 130*g.r.Float64() // Wh per reading, made up
	}
}

// add queues m, arriving at arrival, on its key's partition.
func (g *generator) add(arrival int64, m Message) {
	m.Partition = PartitionOf(m.Key, g.cfg.Partitions)
	g.ps = append(g.ps, pending{arrival, g.seq, m})
	g.seq++
}

// addReading queues rd, arriving delay ms after its event time.
func (g *generator) addReading(rd Reading, delay int64, delayed bool) {
	v := encodeReading(rd, g.r.IntN(5) == 0) // 1 in 5 messages as JSON
	g.add(rd.Time+delay, Message{Key: []byte(rd.Meter), Value: v, Reading: &rd, Delayed: delayed})
}

// jitter is a reading's usual delay: 0–20 s.
func (g *generator) jitter() int64 { return g.r.Int64N(20_000) }

// readings queues window w's regular readings: meters in a random order
// (order) each send 1–3 until the window has EventsPerWindow; the first
// used meters of order sent some.
func (g *generator) readings(w int) (order []int, used int) {
	start := g.cfg.Base + int64(w)*g.size
	order = g.r.Perm(g.nMeters)
	n := 0
	for _, mi := range order {
		if n >= g.cfg.EventsPerWindow {
			break
		}
		used++
		k := min(1+g.r.IntN(3), g.cfg.EventsPerWindow-n)
		n += k
		var statuses []int
		for range k {
			st := Pick(g.r, synthStatusWeights)
			if !slices.Contains(statuses, st) && len(statuses) == synthBounds.MaxBuckets {
				st = statuses[0] // keep within max_buckets distinct statuses
			}
			if !slices.Contains(statuses, st) {
				statuses = append(statuses, st)
			}
			wh := math.Round(g.base[mi] * (0.6 + 0.8*g.r.Float64()))
			if g.r.IntN(50) == 0 {
				wh = float64(400 + g.r.IntN(501)) // EV charging spike
			}
			rd := Reading{Time: start + g.r.Int64N(g.size), Meter: meterID(mi), Region: g.regionOf[mi],
				Status: synthStatuses[st], Wh: wh}
			g.addReading(rd, g.jitter(), false)
		}
	}
	return order, used
}

// extras queues window w's flooding meters, delayed, late and non-public
// readings and bad input; the meters of order after the first used (silent
// in w) send the delayed, late and non-public ones.
func (g *generator) extras(w int, order []int, used int) {
	cfg, r, size, lateness := g.cfg, g.r, g.size, g.lateness
	start := cfg.Base + int64(w)*size
	end := start + size
	nBad := cfg.EventsPerWindow / 200
	nLate := cfg.EventsPerWindow / 500
	nFlood := cfg.EventsPerWindow / 1000
	nForeign := cfg.EventsPerWindow / 1000
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
		id := g.nMeters + w*nFlood + f
		rd := Reading{Time: start + r.Int64N(size/2), Meter: meterID(id),
			Region: Regions[r.IntN(len(Regions))], Status: "fault", Wh: 0}
		for c := range 8 + r.IntN(5) {
			rd2 := rd
			rd2.Time += int64(c) * 1000
			g.addReading(rd2, g.jitter(), false)
		}
	}
	// Delayed readings: near the window's end, arriving 10–40 s after
	// it (within the lateness when it is at least 40 s).
	for range nLate {
		mi := nextSilent()
		rd := Reading{Time: end - 1 - r.Int64N(5_000), Meter: meterID(mi), Region: g.regionOf[mi], Status: "ok",
			Wh: math.Round(g.base[mi])}
		arrive := end + 10_000 + r.Int64N(30_000)
		g.addReading(rd, arrive-rd.Time, arrive-end < lateness)
	}
	// Late readings: for this window, arriving after its end plus the
	// lateness, before the next window's end.
	for range nLate {
		mi := nextSilent()
		rd := Reading{Time: start + r.Int64N(size), Meter: meterID(mi), Region: g.regionOf[mi], Status: "estimated",
			Wh: math.Round(g.base[mi])}
		g.addReading(rd, end+lateness+r.Int64N(size-lateness)-rd.Time, false)
	}
	// Readings of a region outside the public list.
	for range nForeign {
		mi := nextSilent()
		rd := Reading{Time: start + r.Int64N(size), Meter: meterID(mi), Region: synthUnknownRegion, Status: "ok", Wh: 100}
		v := encodeReading(rd, false)
		g.add(rd.Time+g.jitter(), Message{Key: []byte(rd.Meter), Value: v, Reading: &rd, NotPublic: true})
	}
	// Bad input, spread over the window.
	for b := range nBad {
		mi := r.IntN(g.nMeters)
		t := start + r.Int64N(size)
		key, val, reason := badReading(b+w, t, meterID(mi), g.regionOf[mi])
		g.add(t+g.jitter(), Message{Key: key, Value: val, Bad: reason})
	}
}

// closing queues the closing readings: one per partition at the end of
// the last window plus the lateness, arriving then, from the first meter
// of that partition (the population is extended if a partition has none).
func (g *generator) closing() {
	closeAt := g.cfg.Base + int64(g.cfg.Windows)*g.size + g.lateness
	for p := range g.cfg.Partitions {
		for i := 0; ; i++ {
			id := meterID(i)
			if PartitionOf([]byte(id), g.cfg.Partitions) != p {
				continue
			}
			region, b := Regions[0], 100.0
			if i < g.nMeters {
				region, b = g.regionOf[i], math.Round(g.base[i])
			}
			rd := Reading{Time: closeAt, Meter: id, Region: region, Status: "ok", Wh: b}
			m := Message{Key: []byte(id), Value: encodeReading(rd, false), Reading: &rd, Closing: true}
			m.Partition = p
			g.ps = append(g.ps, pending{closeAt, g.seq, m})
			g.seq++
			break
		}
	}
}

// stream orders the queued messages by arrival (ties in queueing order)
// and marks the late readings.
func (g *generator) stream() *Stream {
	slices.SortStableFunc(g.ps, func(a, b pending) int {
		if a.arrival != b.arrival {
			if a.arrival < b.arrival {
				return -1
			}
			return 1
		}
		return a.seq - b.seq
	})
	s := &Stream{Config: g.cfg, Msgs: make([]Message, len(g.ps))}
	for i := range g.ps {
		s.Msgs[i] = g.ps[i].msg
		s.Msgs[i].Arrival = g.ps[i].arrival
	}
	s.markLate()
	return s
}
