package schema

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Event is one decoded input event: only the configured fields, already
// interpreted. It is a plain value; the windows package gets it field by
// field.
type Event struct {
	// Time is the event time in unix milliseconds, within the configured
	// [MinTime, MaxTime].
	Time int64
	// Unit is the privacy unit; empty exactly when no unit field is
	// configured (event-level privacy).
	Unit string
	// Group is the canonical encoding of the group-by values (MakeGroup);
	// "" when there are no group-by fields. Equal values give equal
	// strings; GroupValues recovers the values.
	Group string
	// Bucket is the histogram bucket in [0, NumBuckets), or −1 when no
	// histogram is configured.
	Bucket int
	// Value is the (unclamped, finite) value; meaningful when HasValue.
	Value float64
	// HasValue reports whether the event carries a value: always true with
	// a required value field, false without a value field.
	HasValue bool
	// Extra holds the extra measures and histograms (Config.Measures,
	// Config.Histograms); nil without them, so that an Event of a
	// configuration without them stays a comparable value and costs no
	// allocation. Decode reuses an Extra it finds in e.
	Extra *Extra
}

// Field roles, as bits: a field name may carry several.
const (
	roleTime uint8 = 1 << iota
	roleUnit
	roleGroup
	roleHist
	roleValue
	roleMeasure // an extra measure (numeric)
	roleHistNum // an extra numeric histogram
	roleHistCat // an extra categorical histogram (text)
)

// field is one distinct configured field path.
type field struct {
	name  string // the path as configured (ParsePath's spelling)
	roles uint8
	// required: a role of the field rejects an event without it (all but
	// an optional value field or optional measures).
	required bool
}

// linearCategories is the number of categories up to which Decode scans
// a list with signatures instead of looking up a map. BenchmarkCategory
// compares both: on the development machine the scan was faster at 4 and 8
// categories and about even at 16.
const linearCategories = 8

// internLimit bounds the number of distinct group strings a Decoder keeps
// to hand out without allocating; groups beyond it are allocated per event.
// 4096 covers typical group-by cardinalities at a few hundred KiB at most.
const internLimit = 4096

// Decoder decodes input messages according to a Config. It reads only the
// configured fields, straight from the bytes, and reuses its buffers: a
// successful Decode allocates only the Unit string and, for groups not yet
// seen, the Group string. A Decoder is not safe for concurrent use; make
// one per goroutine.
type Decoder struct {
	cfg    Config // with defaults applied
	fields []field
	// nodes are the maps on configured paths, nodes[0] the message
	// (pathtree.go); seen marks the nested ones met in this message.
	nodes []pathNode
	seen  []bool
	// index of each role's field in fields (−1 when not configured); for
	// group-by, one per GroupBy entry.
	timeIdx, unitIdx, valueIdx int
	groupIdx                   []int
	hist                       bucketer // the histogram (idx −1: none)
	// measureIdx and hists are the extra measures' fields and the extra
	// histograms (Config.Measures, Config.Histograms).
	measureIdx []int
	hists      []bucketer

	vals    []scalar // the value of each field in the current message
	scratch []byte   // unescaped JSON strings of the current message
	stack   []byte   // open JSON containers while skipping
	gbuf    []byte   // the group being built
	nbuf    [24]byte // integers written in decimal
	groups  map[string]string

	scanned bool             // the last Decode read the message as a map (Shape)
	keyHook func(key []byte) // called with every string key while set (Keys)
	avro    *avroPlan        // the plain Avro writer schema bound to the paths
	proto   *pbPlan          // the plain Protobuf message bound to the paths
	// avroRoot and protoMD are the plain writer record and message type
	// (Keys lists their field names).
	avroRoot *avroType
	protoMD  protoreflect.MessageDescriptor
	// schemas and byID serve framed Avro and Protobuf: the shared cache
	// and this decoder's view of it (ids whose entry is final); pbByKey
	// holds the Protobuf message types met, by id and message indexes.
	schemas *Schemas
	byID    map[uint32]schemaEntry
	pbByKey map[pbKey]pbBound
	pbLast  pbLast
}

// NewDecoder validates cfg and returns a Decoder for it. With framed Avro
// or Protobuf (a registry) it has no schemas and rejects every message as
// unknown_schema: decode those with NewFramedDecoder.
func NewDecoder(cfg Config) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := newDecoder(cfg.withDefaults())
	var err error
	switch {
	case d.cfg.framed():
	case d.cfg.Format == FormatAvro:
		d.avro, err = d.plainAvro()
	case d.cfg.Format == FormatProtobuf:
		d.proto, err = d.plainProto()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return d, nil
}

// newDecoder returns a Decoder for cfg, which is valid and has its
// defaults.
func newDecoder(cfg Config) *Decoder {
	cfg.GroupBy = append([]string(nil), cfg.GroupBy...)
	d := &Decoder{
		cfg: cfg, timeIdx: -1, unitIdx: -1, valueIdx: -1, hist: bucketer{idx: -1, other: -1},
		groups: make(map[string]string), nodes: []pathNode{{}},
	}
	d.timeIdx = d.addField(cfg.TimeField, roleTime, true)
	if cfg.UnitField != "" {
		d.unitIdx = d.addField(cfg.UnitField, roleUnit, true)
	}
	for _, g := range cfg.GroupBy {
		d.groupIdx = append(d.groupIdx, d.addField(g, roleGroup, true))
	}
	if h := cfg.Histogram; h != nil {
		hc := cloneHistogram(h)
		d.cfg.Histogram = &hc
		d.hist = newBucketer(&hc, d.addField(h.Field, roleHist, true))
	}
	if cfg.ValueField != "" {
		d.valueIdx = d.addField(cfg.ValueField, roleValue, !cfg.ValueOptional)
	}
	d.addExtras()
	d.vals = make([]scalar, len(d.fields))
	d.seen = make([]bool, len(d.nodes))
	return d
}

// Config returns a copy of the decoder's configuration, with defaults
// applied.
func (d *Decoder) Config() Config {
	c := d.cfg
	c.GroupBy = append([]string(nil), c.GroupBy...)
	if h := c.Histogram; h != nil {
		hc := cloneHistogram(h)
		c.Histogram = &hc
	}
	c.Measures = append([]Measure(nil), c.Measures...)
	c.Histograms = append([]NamedHistogram(nil), c.Histograms...)
	for i := range c.Histograms {
		c.Histograms[i].Histogram = cloneHistogram(&c.Histograms[i].Histogram)
	}
	return c
}

// NumBuckets returns the number of histogram buckets, 0 without a histogram.
func (d *Decoder) NumBuckets() int {
	if d.cfg.Histogram == nil {
		return 0
	}
	return d.cfg.Histogram.NumBuckets()
}

// Decode decodes one message into e (which must not be nil). It never
// panics on any message. On error e is unspecified and the
// error is an *Error carrying a Reason (ReasonOf) and at most a configured
// field name, never message content — or, for framed Avro whose schema
// the registry could not be asked for, an error wrapping
// ErrRegistryUnavailable: the message is not rejected, decode it again
// later.
//
// Problems of form (malformed, not a map, trailing data, an oversized key,
// a configured field twice, a map on a configured path twice) are reported
// first, in message order; then the fields are checked in a fixed order —
// time, unit, group-by fields in order, histogram, value — so the reason
// does not depend on key order or on the encoding. A null or absent map on
// a field's path makes the field missing, any other value there makes it
// of the wrong type. Keys that are not configured (at any level) are
// skipped unread (and may repeat); keys that are not strings (msgpack) are
// skipped too.
func (d *Decoder) Decode(msg []byte, e *Event) error {
	for i := range d.vals {
		d.vals[i].k, d.vals[i].badUTF8 = kAbsent, false
	}
	if len(d.seen) > 1 {
		clear(d.seen)
	}
	d.scratch = d.scratch[:0]
	var r Reason
	switch d.cfg.Format {
	case FormatMsgpack:
		r = d.scanMsgpack(msg)
	case FormatJSON:
		r = d.scanJSON(msg)
	case FormatAvro, FormatProtobuf:
		switch {
		case d.cfg.framed():
			r = d.scanFramed(msg)
		case d.proto != nil:
			r = d.scanProto(d.proto, msg)
		default:
			r = d.scanAvro(d.avro, msg, 0)
		}
	default:
		if len(msg) > 0 && msg[0] >= 0x80 {
			r = d.scanMsgpack(msg)
		} else {
			r = d.scanJSON(msg)
		}
	}
	d.scanned = r == ReasonNone
	switch r {
	case ReasonNone:
	case reasonUnavailable:
		return errUnavailable
	default:
		return &Error{Reason: r}
	}
	return d.build(e)
}

// sig is a cheap signature of a key (length, first and last byte), so
// that find compares whole keys only when signatures match.
func sig(key []byte) uint32 {
	if len(key) == 0 {
		return 0
	}
	return uint32(len(key)) | uint32(key[0])<<16 | uint32(key[len(key)-1])<<24
}

// scanMsgpack reads the map in msg, storing the configured fields.
func (d *Decoder) scanMsgpack(msg []byte) Reason {
	n, p, isMap, ok := mpMapLen(msg, 0)
	switch {
	case !ok:
		return ReasonMalformed
	case !isMap:
		return ReasonNotAMap
	case n > (len(msg)-p)/2: // every entry takes at least two bytes
		return ReasonMalformed
	}
	p, r := d.mpMap(msg, p, n, 0)
	if r != ReasonNone {
		return r
	}
	if p != len(msg) {
		return ReasonTrailingData
	}
	return ReasonNone
}

// mpMap reads the n entries from p of a msgpack map, the node ni of the
// configured paths, storing the configured fields.
func (d *Decoder) mpMap(msg []byte, p, n, ni int) (int, Reason) {
	keys := d.nodes[ni].keys
	for ; n > 0; n-- {
		key, next, isStr, ok := mpStr(msg, p)
		if !ok {
			return p, ReasonMalformed
		}
		p = next
		ref := unconfigured
		if isStr {
			if len(key) > d.cfg.MaxKeyLen {
				return p, ReasonOversized
			}
			if ni == 0 && d.keyHook != nil {
				d.keyHook(key) // a top-level key (Keys)
			}
			ref = find(keys, key)
		}
		if ref == unconfigured {
			if p, ok = mpSkip(msg, p); !ok {
				return p, ReasonMalformed
			}
			continue
		}
		if ref < 0 {
			var r Reason
			if p, r = d.mpNested(msg, p, ^ref); r != ReasonNone {
				return p, r
			}
			continue
		}
		v := &d.vals[ref]
		if v.k != kAbsent {
			return p, ReasonDuplicateField
		}
		if p, ok = mpScalar(msg, p, v); !ok {
			return p, ReasonMalformed
		}
	}
	return p, ReasonNone
}

// fail returns the error for reason r about the field with index i.
func (d *Decoder) fail(r Reason, i int) error {
	return &Error{Reason: r, Field: d.fields[i].name}
}

// str checks a string value of field i: length, UTF-8.
func (d *Decoder) str(v *scalar, i int) error {
	switch {
	case len(v.s) > d.cfg.MaxStringLen:
		return d.fail(ReasonOversized, i)
	case v.badUTF8 || !validUTF8(v.s):
		return d.fail(ReasonInvalidUTF8, i)
	}
	return nil
}

// validUTF8 is utf8.Valid with an inlined fast path for short ASCII.
func validUTF8(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return utf8.Valid(b)
		}
	}
	return true
}

// text returns the textual form of a string, integer or (if allowBool)
// boolean value of field i; the result is valid until the next call.
func (d *Decoder) text(v *scalar, i int, allowBool bool) ([]byte, error) {
	switch v.k {
	case kStr:
		if err := d.str(v, i); err != nil {
			return nil, err
		}
		return v.s, nil
	case kInt:
		return strconv.AppendInt(d.nbuf[:0], v.i, 10), nil
	case kUint:
		return strconv.AppendUint(d.nbuf[:0], v.u, 10), nil
	case kBool:
		if allowBool {
			return strconv.AppendBool(d.nbuf[:0], v.b), nil
		}
	case kAbsent, kNil:
		return nil, d.fail(ReasonMissingField, i)
	}
	return nil, d.fail(ReasonWrongType, i)
}

// number returns a numeric value of field i as a finite float64.
func (d *Decoder) number(v *scalar, i int) (float64, error) {
	var f float64
	switch v.k {
	case kInt:
		f = float64(v.i)
	case kUint:
		f = float64(v.u)
	case kFloat:
		f = v.f
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, d.fail(ReasonNaNOrInf, i)
		}
	case kAbsent, kNil:
		return 0, d.fail(ReasonMissingField, i)
	default:
		return 0, d.fail(ReasonWrongType, i)
	}
	return f, nil
}

// time interprets the event-time value, in unix ms.
func (d *Decoder) time(v *scalar, i int) (int64, error) {
	tf := d.cfg.TimeFormat
	var t int64
	switch v.k {
	case kAbsent, kNil:
		return 0, d.fail(ReasonMissingField, i)
	case kTime:
		t = v.i
	case kBadTime:
		return 0, d.fail(ReasonBadTime, i)
	case kStr:
		if tf != TimeRFC3339 && tf != TimeAuto {
			return 0, d.fail(ReasonWrongType, i)
		}
		if len(v.s) > d.cfg.MaxStringLen {
			return 0, d.fail(ReasonOversized, i)
		}
		var ok bool
		if t, ok = parseRFC3339(v.s); !ok {
			return 0, d.fail(ReasonBadTime, i)
		}
	case kInt, kUint, kFloat:
		if tf == TimeRFC3339 {
			return 0, d.fail(ReasonWrongType, i)
		}
		f, err := d.number(v, i)
		if err != nil {
			return 0, err
		}
		seconds := tf == TimeUnixSeconds || (tf == TimeAuto && math.Abs(f) < AutoMillisFrom)
		var ok bool
		switch {
		case v.k == kUint:
			ok = false // above 2^63: no valid time in any unit
		case v.k == kInt && !seconds:
			t, ok = v.i, true
		case v.k == kInt:
			t, ok = v.i*1000, v.i <= math.MaxInt64/1000 && v.i >= math.MinInt64/1000
		case seconds:
			t, ok = floatMillis(f * 1000)
		default:
			t, ok = floatMillis(f)
		}
		if !ok {
			return 0, d.fail(ReasonTimeOutOfRange, i)
		}
	default:
		return 0, d.fail(ReasonWrongType, i)
	}
	if t < d.cfg.MinTime || t > d.cfg.MaxTime {
		return 0, d.fail(ReasonTimeOutOfRange, i)
	}
	return t, nil
}

// build checks the stored fields in a fixed order and fills e.
func (d *Decoder) build(e *Event) error {
	x := e.Extra
	*e = Event{Bucket: -1}
	var err error
	if e.Time, err = d.time(&d.vals[d.timeIdx], d.timeIdx); err != nil {
		return err
	}
	if i := d.unitIdx; i >= 0 {
		u, err := d.text(&d.vals[i], i, false)
		if err != nil {
			return err
		}
		if len(u) == 0 {
			return d.fail(ReasonMissingField, i)
		}
		e.Unit = string(u)
	}
	if len(d.groupIdx) > 0 {
		d.gbuf = d.gbuf[:0]
		for _, i := range d.groupIdx {
			g, err := d.text(&d.vals[i], i, true)
			if err != nil {
				return err
			}
			d.gbuf = appendGroupValue(d.gbuf, g)
		}
		g, ok := d.groups[string(d.gbuf)]
		if !ok {
			g = string(d.gbuf)
			if len(d.groups) < internLimit {
				d.groups[g] = g
			}
		}
		e.Group = g
	}
	if d.hist.idx >= 0 {
		if e.Bucket, err = d.bucket(&d.hist); err != nil {
			return err
		}
	}
	if i := d.valueIdx; i >= 0 {
		v := &d.vals[i]
		if !d.cfg.ValueOptional || (v.k != kAbsent && v.k != kNil) {
			if e.Value, err = d.number(v, i); err != nil {
				return err
			}
			e.HasValue = true
		}
	}
	if len(d.measureIdx) > 0 || len(d.hists) > 0 {
		return d.buildExtras(e, x)
	}
	return nil
}

// bucketOf returns the number of edges ≤ x: the numeric histogram bucket.
func bucketOf(edges []float64, x float64) int {
	lo, hi := 0, len(edges)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if edges[m] > x {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// appendGroupValue appends one value of the group encoding: its length as
// a uvarint, then its bytes.
func appendGroupValue(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// MakeGroup returns the canonical group string of values, as Decode puts
// in Event.Group: each value as its byte length (unsigned varint) followed
// by its bytes. The encoding is unambiguous: MakeGroup() is "" and differs
// from MakeGroup("").
func MakeGroup(values ...string) string {
	var b []byte
	for _, v := range values {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return string(b)
}

// GroupValues returns the values encoded in group (the inverse of
// MakeGroup), or an error wrapping ErrInvalidGroup.
func GroupValues(group string) ([]string, error) {
	var vals []string
	for len(group) > 0 {
		n, k := uvarint(group)
		if k <= 0 || n > uint64(len(group)-k) {
			return nil, fmt.Errorf("%w: truncated after %d values", ErrInvalidGroup, len(vals))
		}
		vals = append(vals, group[k:k+int(n)])
		group = group[k+int(n):]
	}
	return vals, nil
}

// uvarint is binary.Uvarint for a string.
func uvarint(s string) (uint64, int) {
	var x uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -1
			}
			return x | uint64(c)<<(7*i), i + 1
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	return 0, 0
}
