package schema

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Format is the encoding of input messages.
type Format string

// The input formats.
const (
	// FormatAuto decides per message: a first byte below 0x80 (which in
	// msgpack could only start a bare integer, never a map) means JSON,
	// anything else msgpack. The empty Format means FormatAuto.
	FormatAuto Format = "auto"
	// FormatMsgpack: every message is one msgpack map.
	FormatMsgpack Format = "msgpack"
	// FormatJSON: every message is one JSON object (RFC 8259).
	FormatJSON Format = "json"
	// FormatAvro: every message is one Avro record in the binary encoding,
	// written with the schema Config.AvroSchema, or framed (magic byte and
	// schema id) with a schema of Config.Registry.
	FormatAvro Format = "avro"
	// FormatProtobuf: every message is one Protobuf message in the binary
	// wire format, of type Config.ProtobufMessage in Config.ProtobufSchema,
	// or framed (magic byte, schema id, message indexes) with a schema of
	// Config.Registry.
	FormatProtobuf Format = "protobuf"
)

// TimeFormat says how the event-time field is written.
type TimeFormat string

// The event-time formats. Whatever the format, a msgpack timestamp
// extension (type −1) is also accepted, since it is unambiguous.
const (
	// TimeAuto: integers and floats with magnitude below AutoMillisFrom
	// are unix seconds, larger ones unix milliseconds; strings are RFC 3339.
	// The empty TimeFormat means TimeAuto.
	TimeAuto TimeFormat = "auto"
	// TimeUnixSeconds: a number of seconds since 1970-01-01T00:00:00Z.
	TimeUnixSeconds TimeFormat = "unix_s"
	// TimeUnixMillis: a number of milliseconds since the epoch.
	TimeUnixMillis TimeFormat = "unix_ms"
	// TimeRFC3339: an RFC 3339 string, e.g. "2024-05-01T12:00:00.250Z".
	TimeRFC3339 TimeFormat = "rfc3339"
)

// AutoMillisFrom is the magnitude from which TimeAuto reads a number as
// milliseconds: 1e11 seconds is the year 5138, 1e11 milliseconds is
// 1973-03-03, so every timestamp between 1973-03-03 and 5138 is read right.
const AutoMillisFrom = 1e11

// Defaults applied to zero-valued Config fields.
const (
	// DefaultMaxKeyLen is the default longest accepted map key, in bytes.
	DefaultMaxKeyLen = 256
	// DefaultMaxStringLen is the default longest accepted string value of a
	// configured field (unit, group value, category, time), in bytes.
	DefaultMaxStringLen = 1024
	// DefaultMinTime is the default earliest event time: the epoch (ms).
	DefaultMinTime = 0
	// DefaultMaxTime is the default latest event time:
	// 9999-12-31T23:59:59.999Z in unix ms, the last instant RFC 3339 can
	// write (time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()).
	DefaultMaxTime = 253402300799999
	// minRepresentableTime is 0001-01-01T00:00:00Z in unix ms, the first
	// instant RFC 3339 can write.
	minRepresentableTime = -62135596800000
)

// Limits on the size of a Config.
const (
	// MaxGroupBy is the largest number of group-by fields.
	MaxGroupBy = 32
	// MaxBuckets is the largest number of histogram buckets (categories
	// plus "other", or edges plus one).
	MaxBuckets = 1 << 16
	// maxLenLimit caps MaxKeyLen and MaxStringLen (1 MiB): larger strings
	// are not event fields but payloads.
	maxLenLimit = 1 << 20
)

// Config says which fields of an input message matter and how to read them.
// Field names are paths (ParsePath): a key of the top-level map, matched
// exactly (case-sensitive), or keys of nested maps joined by dots,
// "user.id"; a dot or backslash inside a key is escaped with a backslash,
// `user\.id` being the top-level key "user.id".
// The same field may serve several roles (e.g. a numeric histogram of the
// value field); a field that occurs twice in one message is rejected.
//
// The zero values of Format, TimeFormat, MaxKeyLen, MaxStringLen, MinTime
// and MaxTime select the defaults.
type Config struct {
	// Format is the input encoding: "msgpack", "json", "avro",
	// "protobuf" or "auto" (default).
	Format Format `mapstructure:"format"`
	// AvroSchema is the writer schema of plain Avro input, as JSON (the
	// operator's config loader reads a file path given there). Required
	// with format avro without a registry; every configured field must be
	// a field of it (paths follow record fields, through unions). Omitted
	// from JSON when empty, so that release digests (operator) of other
	// formats are as before.
	AvroSchema string `mapstructure:"avro_schema" json:"AvroSchema,omitempty"`
	// ProtobufSchema is the .proto file (its text; the operator's config
	// loader reads a file path given there) of plain Protobuf input, and
	// ProtobufMessage the fully-qualified name of the message type of
	// every input message in it (say "meter.v1.Reading"). Both required
	// with format protobuf without a registry; every configured field
	// must be a field of that message (paths follow message fields).
	// Omitted from JSON when empty, as AvroSchema.
	ProtobufSchema  string `mapstructure:"protobuf_schema" json:"ProtobufSchema,omitempty"`
	ProtobufMessage string `mapstructure:"protobuf_message" json:"ProtobufMessage,omitempty"`
	// Registry, with a URL, makes format avro or protobuf read the
	// Confluent wire format (magic byte, schema id, [message indexes,]
	// record), the writer schemas fetched from the registry by id. Not in
	// JSON: it does not shape a release.
	Registry RegistryConfig `mapstructure:"registry" json:"-"`

	// TimeField names the event-time field (required).
	TimeField string `mapstructure:"time_field"`
	// TimeFormat is "unix_s", "unix_ms", "rfc3339" or "auto" (default).
	// Fractions of a millisecond are rounded to the nearest millisecond for
	// numbers and truncated (towards the past) for RFC 3339 strings.
	TimeFormat TimeFormat `mapstructure:"time_format"`
	// MinTime and MaxTime bound the accepted event time, in unix ms,
	// inclusive (defaults DefaultMinTime and DefaultMaxTime).
	MinTime int64 `mapstructure:"min_time"`
	MaxTime int64 `mapstructure:"max_time"`

	// UnitField names the privacy-unit field (a string or an integer).
	// Empty means event-level privacy: every event is its own unit. With a
	// unit field, an absent, null or empty unit rejects the event.
	UnitField string `mapstructure:"unit_field"`

	// GroupBy names the group-by fields, in output order (at most
	// MaxGroupBy). Values may be strings, integers (written in decimal) or
	// booleans ("true"/"false"); the string "1" and the integer 1 are the
	// same group.
	GroupBy []string `mapstructure:"group_by"`

	// Histogram, if not nil, makes every event fall in one bucket.
	Histogram *Histogram `mapstructure:"histogram"`

	// ValueField names the numeric field summed or averaged. Lower and
	// Upper are its contribution bounds (clamping is done by the windows
	// package), finite with Lower < Upper; they must be zero without a
	// value field.
	ValueField string  `mapstructure:"value_field"`
	Lower      float64 `mapstructure:"lower"`
	Upper      float64 `mapstructure:"upper"`
	// ValueOptional accepts events without the value field (HasValue is
	// then false) instead of rejecting them.
	ValueOptional bool `mapstructure:"value_optional"`

	// MaxKeyLen is the longest accepted map key in bytes (any key of a map
	// the decoder reads — the message and the nested maps on configured
	// paths —, not only configured ones; and every key of a configured
	// path); default DefaultMaxKeyLen.
	MaxKeyLen int `mapstructure:"max_key_len"`
	// MaxStringLen is the longest accepted string value of a configured
	// field, in bytes; default DefaultMaxStringLen.
	MaxStringLen int `mapstructure:"max_string_len"`
}

// Histogram configures the histogram field. Exactly one of Categories and
// Edges is set.
//
// Categorical: bucket i is Categories[i]; with Other, values not in the
// list fall in one more bucket, len(Categories), labelled OtherLabel;
// without it they reject the event (ReasonUnknownCategory). Values may be
// strings or integers (matched in decimal).
//
// Numeric: for strictly increasing Edges e[0] < … < e[n−1], bucket 0 is the
// underflow (−∞, e[0]), bucket i is [e[i−1], e[i]) and bucket n is the
// overflow [e[n−1], +∞): n+1 buckets. NaN and ±Inf reject the event.
type Histogram struct {
	// Field names the histogram field (required).
	Field string `mapstructure:"field"`
	// Categories lists the distinct categories of a categorical histogram.
	Categories []string `mapstructure:"categories"`
	// Other adds the "other" bucket to a categorical histogram.
	Other bool `mapstructure:"other"`
	// OtherLabel is the label of the "other" bucket (default "other"); it
	// must differ from every category.
	OtherLabel string `mapstructure:"other_label"`
	// Edges are the bin edges of a numeric histogram.
	Edges []float64 `mapstructure:"edges"`
}

// DefaultOtherLabel is the label of the "other" bucket when OtherLabel is
// empty.
const DefaultOtherLabel = "other"

// Numeric reports whether h is a numeric (binned) histogram.
func (h *Histogram) Numeric() bool { return len(h.Edges) > 0 }

// NumBuckets returns the number of buckets: len(Edges)+1 for a numeric
// histogram, len(Categories) (+1 with Other) for a categorical one.
func (h *Histogram) NumBuckets() int {
	if h.Numeric() {
		return len(h.Edges) + 1
	}
	n := len(h.Categories)
	if h.Other {
		n++
	}
	return n
}

// Labels returns one label per bucket, for release messages: the
// categories (and OtherLabel), or intervals such as "(-inf,0)", "[0,10)",
// "[10,+inf)" with edges in Go's shortest round-trip decimal form.
func (h *Histogram) Labels() []string {
	if !h.Numeric() {
		labels := append([]string(nil), h.Categories...)
		if h.Other {
			labels = append(labels, h.otherLabel())
		}
		return labels
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	n := len(h.Edges)
	labels := make([]string, 0, n+1)
	labels = append(labels, "(-inf,"+f(h.Edges[0])+")")
	for i := 1; i < n; i++ {
		labels = append(labels, "["+f(h.Edges[i-1])+","+f(h.Edges[i])+")")
	}
	return append(labels, "["+f(h.Edges[n-1])+",+inf)")
}

func (h *Histogram) otherLabel() string {
	if h.OtherLabel == "" {
		return DefaultOtherLabel
	}
	return h.OtherLabel
}

// withDefaults returns c with the zero-valued optional fields set to their
// defaults.
func (c Config) withDefaults() Config {
	if c.Format == "" {
		c.Format = FormatAuto
	}
	if c.TimeFormat == "" {
		c.TimeFormat = TimeAuto
	}
	if c.MaxKeyLen == 0 {
		c.MaxKeyLen = DefaultMaxKeyLen
	}
	if c.MaxStringLen == 0 {
		c.MaxStringLen = DefaultMaxStringLen
	}
	if c.MaxTime == 0 {
		c.MaxTime = DefaultMaxTime
	}
	return c
}

// Validate checks c and returns every problem at once (errors.Join), each
// wrapping ErrInvalidConfig, or nil.
func (c Config) Validate() error {
	p := &problems{sentinel: ErrInvalidConfig}
	d := c.withDefaults()
	c.validateLimits(p, d)
	c.validateFields(p, d)
	c.validateHistogram(p, d)
	c.validateValue(p, d)
	c.validatePaths(p)
	c.validateRegistry(p, d)
	if len(p.errs) == 0 && !d.framed() {
		var err error
		switch d.Format {
		case FormatAvro:
			_, err = newDecoder(d).plainAvro()
		case FormatProtobuf:
			_, err = newDecoder(d).plainProto()
		}
		if err != nil {
			p.bad("%v", err)
		}
	}
	return p.err()
}

// validateLimits checks the formats and limits; d is c with its defaults.
func (c Config) validateLimits(p *problems, d Config) {
	switch d.Format {
	case FormatAuto, FormatMsgpack, FormatJSON, FormatAvro, FormatProtobuf:
	default:
		p.bad("format %q is not one of msgpack, json, avro, protobuf, auto", c.Format)
	}
	if d.Format != FormatAvro && c.AvroSchema != "" {
		p.bad("avro_schema is set but format is not avro")
	}
	if d.Format != FormatProtobuf && (c.ProtobufSchema != "" || c.ProtobufMessage != "") {
		p.bad("protobuf_schema or protobuf_message is set but format is not protobuf")
	}
	switch d.TimeFormat {
	case TimeAuto, TimeUnixSeconds, TimeUnixMillis, TimeRFC3339:
	default:
		p.bad("time_format %q is not one of unix_s, unix_ms, rfc3339, auto", c.TimeFormat)
	}
	if d.MaxKeyLen < 1 || d.MaxKeyLen > maxLenLimit {
		p.bad("max_key_len %d is not in [1, %d]", c.MaxKeyLen, maxLenLimit)
	}
	if d.MaxStringLen < 1 || d.MaxStringLen > maxLenLimit {
		p.bad("max_string_len %d is not in [1, %d]", c.MaxStringLen, maxLenLimit)
	}
	if d.MinTime < minRepresentableTime || d.MaxTime > DefaultMaxTime || d.MinTime >= d.MaxTime {
		p.bad("time range [%d, %d] ms is empty or outside [%d, %d]", d.MinTime, d.MaxTime, int64(minRepresentableTime), int64(DefaultMaxTime))
	}
}

// field checks the path of a field in role (time_field, group_by[0], …)
// against the defaulted configuration d: its syntax (ParsePath) and the
// length of each of its keys.
func (p *problems) field(d Config, role, name string, required bool) {
	if name == "" {
		if required {
			p.bad("%s is required", role)
		}
		return
	}
	if !utf8.ValidString(name) {
		p.bad("%s %q is not valid UTF-8", role, name)
		return
	}
	keys, problem := parsePath(name)
	if problem != "" {
		p.bad("%s %q %s", role, name, problem)
		return
	}
	for _, k := range keys {
		if len(k) > d.MaxKeyLen && d.MaxKeyLen > 0 {
			if len(keys) == 1 {
				p.bad("%s %q is longer than max_key_len %d", role, name, d.MaxKeyLen)
			} else {
				p.bad("%s %q has a key longer than max_key_len %d", role, name, d.MaxKeyLen)
			}
			return
		}
	}
}

// validatePaths rejects a field path that lies inside another (say
// "user" and "user.id"): no event can have a value at both, since the
// first must be a map for the second to exist.
func (c Config) validatePaths(p *problems) {
	type named struct {
		role string
		keys []string
	}
	var all []named
	add := func(role, name string) {
		if keys, problem := parsePath(name); name != "" && problem == "" {
			all = append(all, named{role, keys})
		}
	}
	add("time_field", c.TimeField)
	add("unit_field", c.UnitField)
	for i, g := range c.GroupBy {
		add(fmt.Sprintf("group_by[%d]", i), g)
	}
	if c.Histogram != nil {
		add("histogram.field", c.Histogram.Field)
	}
	add("value_field", c.ValueField)
	for _, a := range all {
		for _, b := range all {
			if isPrefix(a.keys, b.keys) {
				p.bad("%s %q lies inside %s %q (a value cannot be a map too)", b.role, JoinPath(b.keys...), a.role, JoinPath(a.keys...))
			}
		}
	}
}

// validateFields checks the time, unit and group_by fields.
func (c Config) validateFields(p *problems, d Config) {
	p.field(d, "time_field", c.TimeField, true)
	p.field(d, "unit_field", c.UnitField, false)

	if len(c.GroupBy) > MaxGroupBy {
		p.bad("group_by has %d fields, more than %d", len(c.GroupBy), MaxGroupBy)
	}
	seen := make(map[string]int, len(c.GroupBy))
	for i, g := range c.GroupBy {
		p.field(d, fmt.Sprintf("group_by[%d]", i), g, true)
		if seen[g]++; seen[g] == 2 && g != "" {
			p.bad("group_by field %q is listed twice", g)
		}
	}
}

// validateHistogram checks the histogram, if any.
func (c Config) validateHistogram(p *problems, d Config) {
	h := c.Histogram
	if h == nil {
		return
	}
	p.field(d, "histogram.field", h.Field, true)
	switch {
	case len(h.Categories) > 0 && len(h.Edges) > 0:
		p.bad("histogram has both categories and edges; set one")
	case len(h.Categories) == 0 && len(h.Edges) == 0:
		p.bad("histogram needs categories or edges")
	case h.NumBuckets() > MaxBuckets:
		p.bad("histogram has %d buckets, more than %d", h.NumBuckets(), MaxBuckets)
	}
	cats := make(map[string]int, len(h.Categories))
	for i, cat := range h.Categories {
		cats[cat]++
		switch {
		case len(cat) > d.MaxStringLen:
			p.bad("histogram.categories[%d] is longer than max_string_len %d", i, d.MaxStringLen)
		case !utf8.ValidString(cat):
			p.bad("histogram.categories[%d] is not valid UTF-8", i)
		case cats[cat] == 2:
			p.bad("histogram category %q is listed twice", cat)
		}
	}
	if h.Numeric() && (h.Other || h.OtherLabel != "") {
		p.bad("histogram.other and histogram.other_label apply to categories only")
	}
	if h.Other && cats[h.otherLabel()] > 0 {
		p.bad("histogram other_label %q equals a category", h.otherLabel())
	}
	if !utf8.ValidString(h.OtherLabel) {
		p.bad("histogram.other_label is not valid UTF-8")
	}
	for i, e := range h.Edges {
		if math.IsNaN(e) || math.IsInf(e, 0) {
			p.bad("histogram.edges[%d] is not finite", i)
		} else if i > 0 && !(h.Edges[i-1] < e) {
			p.bad("histogram.edges must be strictly increasing (edges[%d] ≤ edges[%d])", i, i-1)
		}
	}
}

// validateValue checks the value field and its bounds.
func (c Config) validateValue(p *problems, d Config) {
	if c.ValueField != "" {
		p.field(d, "value_field", c.ValueField, true)
		switch {
		case math.IsNaN(c.Lower) || math.IsInf(c.Lower, 0) || math.IsNaN(c.Upper) || math.IsInf(c.Upper, 0):
			p.bad("lower and upper (the value bounds) must be finite")
		case !(c.Lower < c.Upper):
			p.bad("lower %g must be below upper %g (the value bounds)", c.Lower, c.Upper)
		}
	} else {
		if c.Lower != 0 || c.Upper != 0 {
			p.bad("lower/upper are set but value_field is not")
		}
		if c.ValueOptional {
			p.bad("value_optional is set but value_field is not")
		}
	}
}
