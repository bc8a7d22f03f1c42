package schema

import (
	"strconv"
	"time"
)

// JSONRecordVersion is the version of the JSON release record that
// ReleaseRecords writes and DecodeReleaseRecord reads (independent of
// SchemaVersion, the msgpack message's). Additive changes (new fields,
// which readers skip) keep it; any other change increments it.
const JSONRecordVersion = 1

// GroupFieldPrefix prefixes the name of each group-by field in a JSON
// release record: the value of group field "country" is the record's
// "group_country". No fixed field of the record starts with it.
const GroupFieldPrefix = "group_"

// ConnectSchemaName is the name of the Kafka Connect struct schema of a
// JSON release record (the envelope's "schema").
const ConnectSchemaName = "dpstream.ReleaseValue"

// rfc3339Millis formats window bounds: RFC 3339 in UTC with exactly three
// fraction digits, so that every bound has one spelling.
const rfc3339Millis = "2006-01-02T15:04:05.000Z07:00"

// rfc3339 formats the unix-ms time ms with rfc3339Millis.
func rfc3339(ms int64) string { return time.UnixMilli(ms).UTC().Format(rfc3339Millis) }

// JSONOptions are the options of the JSON release records.
type JSONOptions struct {
	// ConnectSchema wraps each record in the Kafka Connect JSON envelope
	// {"schema": …, "payload": …} that Connect's JsonConverter reads with
	// schemas.enable=true (the JDBC sinks need the schema).
	ConnectSchema bool
}

// Record is one Kafka message of a release: its key and value.
type Record struct {
	Key   string
	Value []byte
}

// ValueKey returns the Kafka message key of the JSON record of value index
// of series in the release keyed releaseKey: the release key, the series
// name and the decimal index, joined by "|". Series names and indices hold
// no '|', so the release key is everything before the last two '|'.
func ValueKey(releaseKey, series string, index int) string {
	return releaseKey + "|" + series + "|" + strconv.Itoa(index)
}

// ReleaseRecords validates r and returns its JSON records: one flat JSON
// object per released value (each value of each series, in series order),
// keyed by ValueKey, with the fields documented in docs/formats.md in a
// fixed order. The encoding is deterministic (ints in decimal, floats in
// the shortest form that reads back exactly, strconv 'g' −1), so equal
// releases give equal records. Errors wrap ErrInvalidRelease.
func ReleaseRecords(r *Release, opt JSONOptions) ([]Record, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	rk := r.Key()
	var schemaJSON []byte
	if opt.ConnectSchema {
		schemaJSON = connectSchema(r)
	}
	var out []Record
	for si := range r.Series {
		s := &r.Series[si]
		for i := 0; i < s.Len(); i++ {
			key := ValueKey(rk, s.Name, i)
			var b []byte
			if opt.ConnectSchema {
				b = append(b, `{"schema":`...)
				b = append(b, schemaJSON...)
				b = append(b, `,"payload":`...)
			}
			b = appendRecord(b, r, rk, key, s, i)
			if opt.ConnectSchema {
				b = append(b, '}')
			}
			out = append(out, Record{Key: key, Value: b})
		}
	}
	return out, nil
}

// fieldType is the Kafka Connect type of a record field, as the
// JsonConverter names it in an envelope's schema (FLOAT64 is "double").
type fieldType string

const (
	ftString fieldType = "string"
	ftInt    fieldType = "int64"
	ftFloat  fieldType = "double"
	ftBool   fieldType = "boolean"
)

// recordField is one field of a JSON release record.
type recordField struct {
	name string
	typ  fieldType
}

// headFields come before the group fields, tailFields after them, in
// this order.
var (
	headFields = []recordField{
		{"schema_version", ftInt}, {"key", ftString}, {"release_key", ftString},
		{"release_id", ftString}, {"window_start", ftString}, {"window_end", ftString},
		{"window_start_ms", ftInt}, {"window_end_ms", ftInt},
		{"aggregate", ftString}, {"kind", ftString},
	}
	tailFields = []recordField{
		{"series", ftString}, {"label", ftString}, {"index", ftInt},
		{"value_type", ftString}, {"value", ftFloat},
		{"ci_level", ftFloat}, {"ci_lo", ftFloat}, {"ci_hi", ftFloat},
		{"mechanism", ftString}, {"scale", ftFloat},
		{"sensitivity_l0", ftInt}, {"sensitivity_l1", ftFloat},
		{"sensitivity_l2", ftFloat}, {"sensitivity_linf", ftFloat},
		{"windows", ftInt},
		{"epsilon", ftFloat}, {"delta", ftFloat},
		{"spent_epsilon", ftFloat}, {"spent_delta", ftFloat},
		{"horizon_start_ms", ftInt}, {"horizon_end_ms", ftInt},
		{"horizon_epsilon", ftFloat}, {"horizon_delta", ftFloat},
		{"privacy_unit", ftString}, {"event_level", ftBool},
		{"max_groups", ftInt}, {"max_buckets", ftInt},
		{"max_per_bucket", ftInt}, {"max_values", ftInt},
		{"lower", ftFloat}, {"upper", ftFloat},
		{"instance", ftString}, {"note", ftString},
	}
)

// connectSchema returns the Kafka Connect struct schema of r's records:
// every field required, the group fields strings.
func connectSchema(r *Release) []byte {
	b := []byte(`{"type":"struct","name":`)
	b = appendJSONString(b, ConnectSchemaName)
	b = append(b, `,"optional":false,"fields":[`...)
	field := func(name string, t fieldType) {
		if b[len(b)-1] != '[' {
			b = append(b, ',')
		}
		b = append(b, `{"field":`...)
		b = appendJSONString(b, name)
		b = append(b, `,"type":"`...)
		b = append(b, t...)
		b = append(b, `","optional":false}`...)
	}
	for _, f := range headFields {
		field(f.name, f.typ)
	}
	for _, g := range r.Group {
		field(GroupFieldPrefix+g.Name, ftString)
	}
	for _, f := range tailFields {
		field(f.name, f.typ)
	}
	return append(b, "]}"...)
}

// jsonWriter appends the fields of one flat JSON object, in call order.
type jsonWriter struct{ b []byte }

func (w *jsonWriter) name(n string) {
	if w.b[len(w.b)-1] != '{' {
		w.b = append(w.b, ',')
	}
	w.b = appendJSONString(w.b, n)
	w.b = append(w.b, ':')
}

func (w *jsonWriter) str(n, v string) { w.name(n); w.b = appendJSONString(w.b, v) }
func (w *jsonWriter) int(n string, v int64) {
	w.name(n)
	w.b = strconv.AppendInt(w.b, v, 10)
}
func (w *jsonWriter) float(n string, v float64) { w.name(n); w.b = appendJSONFloat(w.b, v) }
func (w *jsonWriter) bool(n string, v bool)     { w.name(n); w.b = strconv.AppendBool(w.b, v) }

// appendRecord appends the record of value i of series s of r (release
// key rk, record key key): the fields of headFields, the group fields and
// tailFields, in that order.
func appendRecord(dst []byte, r *Release, rk, key string, s *Series, i int) []byte {
	w := &jsonWriter{b: append(dst, '{')}
	w.int("schema_version", JSONRecordVersion)
	w.str("key", key)
	w.str("release_key", rk)
	w.str("release_id", r.ReleaseID)
	w.str("window_start", rfc3339(r.WindowStart))
	w.str("window_end", rfc3339(r.WindowEnd))
	w.int("window_start_ms", r.WindowStart)
	w.int("window_end_ms", r.WindowEnd)
	w.str("aggregate", r.Aggregate)
	w.str("kind", string(r.Kind))
	for _, g := range r.Group {
		w.str(GroupFieldPrefix+g.Name, g.Value)
	}
	w.str("series", s.Name)
	label := ""
	if len(s.Labels) > 0 {
		label = s.Labels[i]
	}
	w.str("label", label)
	w.int("index", int64(i))
	if s.Ints != nil {
		w.str("value_type", valueTypeInt)
		w.int("value", s.Ints[i])
	} else {
		w.str("value_type", valueTypeFloat)
		w.float("value", s.Floats[i])
	}
	w.float("ci_level", s.Level)
	w.float("ci_lo", s.Lo[i])
	w.float("ci_hi", s.Hi[i])
	w.str("mechanism", s.Mechanism)
	w.float("scale", s.Scale)
	w.int("sensitivity_l0", s.Sensitivity.L0)
	w.float("sensitivity_l1", s.Sensitivity.L1)
	w.float("sensitivity_l2", s.Sensitivity.L2)
	w.float("sensitivity_linf", s.Sensitivity.LInf)
	w.int("windows", s.Windows)
	w.float("epsilon", r.Budget.Epsilon)
	w.float("delta", r.Budget.Delta)
	w.float("spent_epsilon", r.Spent.Epsilon)
	w.float("spent_delta", r.Spent.Delta)
	w.int("horizon_start_ms", r.Horizon.Start)
	w.int("horizon_end_ms", r.Horizon.End)
	w.float("horizon_epsilon", r.Horizon.Budget.Epsilon)
	w.float("horizon_delta", r.Horizon.Budget.Delta)
	unit := r.Unit
	if unit == "" {
		unit = EventLevel
	}
	w.str("privacy_unit", unit)
	w.bool("event_level", r.Unit == "")
	w.int("max_groups", r.Bounds.MaxGroups)
	w.int("max_buckets", r.Bounds.MaxBuckets)
	w.int("max_per_bucket", r.Bounds.MaxPerBucket)
	w.int("max_values", r.Bounds.MaxValues)
	w.float("lower", r.Bounds.Lower)
	w.float("upper", r.Bounds.Upper)
	w.str("instance", r.Instance)
	w.str("note", r.Note)
	return append(w.b, '}')
}

// appendJSONFloat appends f (finite: Validate checked) in the shortest
// decimal form that reads back as f (strconv 'g', precision −1), which is
// valid JSON: e.g. 2.5, 1e-05, 1e+21, 3 (an integral float has no point).
func appendJSONFloat(b []byte, f float64) []byte {
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendJSONString appends s as a JSON string: '"' and '\' escaped with a
// backslash, control bytes below 0x20 as \u00XX, everything else (valid
// UTF-8: Validate checked) as is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
