package operator

// shape.go is the input-shape check: from the decode stage, by configured
// field name only, it notices a configured field (time_field, unit_field,
// a group_by field, histogram.field, value_field) that fewer than 1% of
// a block of 1000 consecutive decoded records carry with a type its role
// accepts — a misspelt field name, which makes every event a skipped one
// while the public groups keep being published as pure noise. It then
// logs an ERROR naming the field and the field names most records do
// carry, and /readyz answers 503 with the same reason until a block in
// which at least 5% carry it. Never a value, never a count of anything in
// the data: what it reveals, and why that is acceptable, is in
// docs/operations.md ("Input shape").

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/dpstream/dpstream/schema"
)

// shapeBlock is the number of consecutive decoded records the check
// judges at a time: a fixed number, never a share of time, so that what
// it reports does not depend on the input rate, and large, so that a
// field is judged by many records (docs/operations.md, "Input shape").
const shapeBlock = 1000

// shapeFirePercent and shapeClearPercent are the shares of a block that
// decide: a field that fewer than 1% of a block's records carry (with a
// type its roles accept) is reported; a reported field is cleared by a
// block in which at least 5% carry it. A field an event carries now and
// then is never reported; a single record can change a block's verdict
// only when the block holds exactly shapeFireBelow−1 (or
// shapeClearFrom−1) other records with the field.
const (
	shapeFirePercent  = 1
	shapeClearPercent = 5
)

// shapeSample is the number of records whose top-level key names are
// counted: the last shapeSample records of a block in which a field may
// end below the reporting threshold. A name is listed only when at least
// half of them carry it (shapeSample/2 records), so that a name that
// only a few records carry is not.
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
// every decoded record by the generation loop, one goroutine at a time
// (generations run one after another), so it has no lock; what it
// reports goes to health's atomics.
type shapeCheck struct {
	health *health
	block  int // shapeBlock; tests lower it
	dec    *schema.Decoder
	fields []schema.FieldInfo

	pos      int   // records of the current block so far
	miss     []int // per field: records of the block without it (absent or wrong type)
	absent   []int // per field: of those, the records where it was absent
	sampling bool  // counting names: some field may end the block below the threshold
	tally    map[string]int
	firing   uint64   // fields reported now (bit i: fields[i])
	findings []string // per reported field: what was found
	seen     string   // the names listed when the last field was reported
}

// newShapeCheck returns the check of the fields of dec, a decoder of the
// input of its own (framed Avro or Protobuf: over the operator's schema
// cache, so that it lists the field names of the schemas the fetchers
// met).
func newShapeCheck(dec *schema.Decoder, h *health) *shapeCheck {
	f := dec.Fields()
	if len(f) > schema.ShapeFields {
		f = f[:schema.ShapeFields]
	}
	return &shapeCheck{health: h, block: shapeBlock, dec: dec, fields: f, miss: make([]int, len(f)),
		absent: make([]int, len(f)), findings: make([]string, len(f)), tally: map[string]int{}}
}

// fireBelow and clearFrom are the thresholds of a block of s.block
// records (shapeFirePercent, shapeClearPercent; at least 1).
func (s *shapeCheck) fireBelow() int { return max(1, s.block*shapeFirePercent/100) }
func (s *shapeCheck) clearFrom() int { return max(1, s.block*shapeClearPercent/100) }

// observe takes the shape of one decoded record (msg, and the masks
// schema.Decoder.Shape returned for it) and, at the end of a block,
// reports with log the fields that crossed a threshold.
func (s *shapeCheck) observe(log *slog.Logger, msg []byte, absent, wrong uint64) {
	if s == nil {
		return
	}
	s.pos++
	if bad := absent | wrong; bad != 0 {
		for i := range s.fields {
			if bad&(1<<i) != 0 {
				s.miss[i]++
				if absent&(1<<i) != 0 {
					s.absent[i]++
				}
			}
		}
	}
	if s.pos == s.block-shapeSample+1 || (s.pos == 1 && s.block <= shapeSample) {
		// Carriers only grow: a field carried by fireBelow records
		// already cannot end the block below it.
		s.sampling = slices.ContainsFunc(s.miss, func(m int) bool { return s.pos-m < s.fireBelow() })
	}
	if s.sampling {
		tallyNames(s.dec, s.tally, msg)
	}
	if s.pos == s.block {
		s.endBlock(log)
	}
}

// endBlock judges every field by the block that ends and starts the
// next one.
func (s *shapeCheck) endBlock(log *slog.Logger) {
	var fired []int
	changed := false
	for i := range s.fields {
		bit, carriers := uint64(1)<<i, s.block-s.miss[i]
		switch {
		case carriers < s.fireBelow() && s.firing&bit == 0:
			s.firing |= bit
			s.findings[i] = s.finding(i)
			fired = append(fired, i)
		case carriers >= s.clearFrom() && s.firing&bit != 0:
			s.firing &^= bit
			changed = true
			log.Info("input shape: a configured field is in the input again", "field", s.fields[i].Name,
				"finding", fmt.Sprintf("carried by at least %d%% of the last %d decoded records", shapeClearPercent, s.block))
		}
	}
	if len(fired) > 0 {
		s.seen = nameList(s.tally, shapeSample/2)
		changed = true
	}
	for _, i := range fired {
		log.Error("input shape: a configured field is missing from the input (or of the wrong type); its events are skipped "+
			"(check the schema's field names against the producers', case-sensitive; a dot in a setting is a path into nested maps, fields_seen lists top-level keys)",
			"field", s.fields[i].Name, "config", strings.Join(s.fields[i].Roles, ","),
			"finding", s.findings[i], "fields_seen", s.seen)
	}
	if changed {
		s.health.shapeProblem(s.reason())
	}
	s.pos, s.sampling = 0, false
	clear(s.miss)
	clear(s.absent)
	clear(s.tally)
}

// tallyNames counts, in tally, the records of the sample that carry each
// top-level key name of msg (decoded by dec): a name once per record,
// however often the record repeats it (a JSON object may), so that a name
// is listed only when that many records carry it; at most shapeMaxTally
// keys of a record, and shapeMaxTally distinct names in all.
func tallyNames(dec *schema.Decoder, tally map[string]int, msg []byte) {
	seen := 0
	var mine map[string]bool // the names of msg counted so far
	dec.Keys(msg, func(k []byte) {
		seen++
		if seen > shapeMaxTally || mine[string(k)] {
			return
		}
		if n, ok := tally[string(k)]; ok {
			tally[string(k)] = n + 1
		} else if len(tally) < shapeMaxTally {
			tally[string(k)] = 1
		} else {
			return
		}
		if mine == nil {
			mine = map[string]bool{}
		}
		mine[string(k)] = true
	})
}

// finding says how field i was missing from the block that ends: absent
// when fewer than fireBelow records have it at all, of the wrong type
// when fewer than fireBelow lack it or have it with a type its roles
// accept, else both. Thresholds, as for the report itself, so that one
// record decides the wording only when its block holds exactly
// fireBelow−1 others of its kind (never the only record with the field
// present, or the only one without it).
func (s *shapeCheck) finding(i int) string {
	how := "absent from or of the wrong type in"
	switch wrong := s.miss[i] - s.absent[i]; {
	case s.block-s.absent[i] < s.fireBelow():
		how = "absent from"
	case s.block-wrong < s.fireBelow():
		how = "of the wrong type in"
	}
	return fmt.Sprintf("%s more than %d%% of the last %d decoded records", how, 100-shapeFirePercent, s.block)
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
			parts = append(parts, "input shape: field "+strconv.Quote(f.Name)+" ("+strings.Join(f.Roles, ",")+") "+s.findings[i])
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "; fields seen: " + s.seen
}
