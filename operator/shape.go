package operator

// shape.go is the input-shape check: from the decode stage, by configured
// field name only, it notices a configured field (time_field, unit_field,
// a group_by field, histogram.field, value_field) that is absent from, or
// of the wrong type in, every one of shapeRun consecutive decoded records
// — a misspelt field name, which makes every event a skipped one while
// the public groups keep being published as pure noise. It then logs an
// ERROR naming the field and the field names the records do carry, and
// /readyz answers 503 with the same reason until a record carries the
// field again. Never a value, never a count of anything in the data: what
// it reveals, and why that is safe, is in docs/operations.md ("Input
// shape").

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dpstream/dpstream/schema"
)

// shapeRun is the number of consecutive decoded records that must all
// lack a configured field (absent, null, or of a type its role does not
// accept) before the check reports it. A fixed number, not a share of the
// data: a field that a normal share of events carries resets the run long
// before, and a field missing from 1000 records in a row is missing from
// at least 99.9% of the input.
const shapeRun = 1000

// shapeSample is the number of records whose top-level key names are
// counted (the last shapeSample records of a run, before it is
// reported); a name is listed only when at least half of them carry it
// (shapeSample/2), so that a name one unit's few records carry is not.
const shapeSample = 100

// shapeMaxNames and shapeMaxNameLen bound the names listed: at most 20
// names, each cut to 40 bytes, quoted (key names are the producers'
// schema, but a producer could put anything in a key).
const (
	shapeMaxNames   = 20
	shapeMaxNameLen = 40
	// shapeMaxTally bounds the distinct names counted over a sample (a
	// record may carry any number of keys): names beyond it are not
	// counted.
	shapeMaxTally = 256
)

// shapeCheck is the operator's input-shape check. observe is called for
// every decoded record, from the generation loop.
type shapeCheck struct {
	health *health
	run    int // shapeRun; tests lower it
	dec    *schema.Decoder
	fields []schema.FieldInfo
	active atomic.Bool // a run is under way or a field is reported: observe must look

	mu      sync.Mutex
	runs    []int  // consecutive records without field i (capped at run)
	absent  []int  // of those, the records where it was absent (the others: wrong type)
	firing  uint64 // fields reported now (bit i: fields[i])
	tally   map[string]int
	tallied int // records counted in tally
}

// newShapeCheck returns the check of the fields of cfg.
func newShapeCheck(cfg schema.Config, h *health) (*shapeCheck, error) {
	dec, err := schema.NewDecoder(cfg)
	if err != nil {
		return nil, err
	}
	f := dec.Fields()
	if len(f) > schema.ShapeFields {
		f = f[:schema.ShapeFields]
	}
	return &shapeCheck{health: h, run: shapeRun, dec: dec, fields: f,
		runs: make([]int, len(f)), absent: make([]int, len(f)), tally: map[string]int{}}, nil
}

// observe takes the shape of one decoded record (msg, and the masks
// schema.Decoder.Shape returned for it) and logs with log when a field is
// reported or seen again.
func (s *shapeCheck) observe(log *slog.Logger, msg []byte, absent, wrong uint64) {
	bad := absent | wrong
	if s == nil || (bad == 0 && !s.active.Load()) {
		return // the common case: every field there, nothing under way
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var fired []int
	changed, maxRun := false, 0
	for i := range s.fields {
		bit := uint64(1) << i
		if bad&bit == 0 {
			s.runs[i], s.absent[i] = 0, 0
			if s.firing&bit != 0 {
				s.firing &^= bit
				changed = true
				log.Info("input shape: a configured field is in the input again", "field", s.fields[i].Name)
			}
			continue
		}
		if s.runs[i] < s.run {
			s.runs[i]++
			if absent&bit != 0 {
				s.absent[i]++
			}
		}
		maxRun = max(maxRun, s.runs[i])
		if s.runs[i] == s.run && s.firing&bit == 0 {
			s.firing |= bit
			fired = append(fired, i)
		}
	}
	switch {
	case maxRun == 0:
		clear(s.tally)
		s.tallied = 0
	case maxRun > s.run-shapeSample && s.tallied < shapeSample:
		s.countNames(msg)
	}
	for _, i := range fired {
		log.Error("input shape: a configured field is missing from the input (or of the wrong type); its events are skipped "+
			"(check the schema's field names against the producers', case-sensitive and top-level)",
			"field", s.fields[i].Name, "config", strings.Join(s.fields[i].Roles, ","),
			"finding", s.finding(i), "fields_seen", s.names())
	}
	if changed || len(fired) > 0 {
		s.health.shapeProblem(s.reason())
	}
	s.active.Store(maxRun > 0 || s.firing != 0)
}

// countNames counts the top-level key names of msg in the tally.
func (s *shapeCheck) countNames(msg []byte) {
	s.tallied++
	tallyNames(s.dec, s.tally, msg)
}

// tallyNames counts, in tally, the top-level key names of msg (decoded by
// dec): at most shapeMaxTally keys of a record, and shapeMaxTally
// distinct names in all.
func tallyNames(dec *schema.Decoder, tally map[string]int, msg []byte) {
	seen := 0
	dec.Keys(msg, func(k []byte) {
		seen++
		if seen > shapeMaxTally {
			return
		}
		if n, ok := tally[string(k)]; ok {
			tally[string(k)] = n + 1
		} else if len(tally) < shapeMaxTally {
			tally[string(k)] = 1
		}
	})
}

// finding says how field i was missing.
func (s *shapeCheck) finding(i int) string {
	n := strconv.Itoa(s.run)
	switch s.absent[i] {
	case s.runs[i]:
		return "absent from each of the last " + n + " decoded records"
	case 0:
		return "of the wrong type in each of the last " + n + " decoded records"
	}
	return "absent or of the wrong type in each of the last " + n + " decoded records"
}

// names returns the key names that at least half of the sampled records
// carry (nameList).
func (s *shapeCheck) names() string {
	return nameList(s.tally, max(s.tallied, shapeSample)/2)
}

// nameList returns the names of tally counted at least need (≥ 1) times,
// sorted, at most shapeMaxNames, each cut to shapeMaxNameLen bytes and
// quoted; "(none)" when there are none (e.g. records that are not maps).
func nameList(tally map[string]int, need int) string {
	var out []string
	for k, n := range tally {
		if n >= max(need, 1) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return "(none)"
	}
	slices.Sort(out)
	more := len(out) > shapeMaxNames
	out = out[:min(len(out), shapeMaxNames)]
	for i, k := range out {
		if len(k) > shapeMaxNameLen {
			k = strings.ToValidUTF8(k[:shapeMaxNameLen], "") + "…"
		}
		out[i] = strconv.Quote(k)
	}
	if more {
		out = append(out, "…")
	}
	return strings.Join(out, ", ")
}

// reason is the /readyz text of the fields reported now ("" for none).
func (s *shapeCheck) reason() string {
	var parts []string
	for i, f := range s.fields {
		if s.firing&(1<<i) != 0 {
			parts = append(parts, "input shape: field "+strconv.Quote(f.Name)+" ("+strings.Join(f.Roles, ",")+") "+s.finding(i))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "; fields seen: " + s.names()
}
