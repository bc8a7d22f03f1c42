package schema

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// pbTestSchema is a proto3 schema with most Protobuf types: messages
// nested two deep, an enum, a repeated field, a map, bytes, fixed32,
// float, sint32, bool, a oneof and an `optional` field around the
// configured ones; Other is a second top-level message (framed tests
// name it by message index).
const pbTestSchema = `syntax = "proto3";
package t.v1;

message Reading {
  message Meta {
    string source = 1;
    int64 ts = 2;
  }
  message User {
    string id = 1;
    repeated string tags = 2;
  }
  enum OS {
    ios = 0;
    android = 1;
  }
  message Device {
    map<string, double> attrs = 1;
    OS os = 2;
  }
  Meta meta = 1;
  User user = 2;
  string country = 3;
  Device device = 4;
  string page = 5;
  optional double amount = 6;
  bytes blob = 7;
  fixed32 hash = 8;
  float score = 9;
  sint32 n = 10;
  bool flag = 11;
  repeated int64 packed = 12;
  oneof choice {
    string a = 13;
    int32 b = 14;
  }
}

message Other {
  message Inner {
    int64 ts = 1;
  }
  string name = 1;
}
`

// pbTestConfig reads pbTestSchema's Reading as avroTestConfig reads the
// Avro test schema.
func pbTestConfig() Config {
	c := avroTestConfig()
	c.Format, c.AvroSchema = FormatProtobuf, ""
	c.ProtobufSchema, c.ProtobufMessage = pbTestSchema, "t.v1.Reading"
	return c
}

// pbTestJSON is a typical Reading in the Protobuf JSON mapping; it
// decodes as avroTestRecord does.
const pbTestJSON = `{"meta": {"source": "app", "ts": "1714564800123"},
 "user": {"id": "u-1234567", "tags": ["a", "b"]}, "country": "DE",
 "device": {"attrs": {"x": 1.5}, "os": "ios"}, "page": "checkout",
 "amount": 12.5, "blob": "AQID", "hash": 151587081, "score": 0.5, "n": -7,
 "flag": true, "packed": ["1", "2"], "a": "x"}`

// pbMessage returns the descriptor of message name in schema, compiled
// by protocompile.
func pbDescriptor(t testing.TB, schema, name string) protoreflect.MessageDescriptor {
	t.Helper()
	fd, err := compileProto(schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().ByName(protoreflect.Name(name[strings.LastIndex(name, ".")+1:]))
	if md == nil {
		t.Fatalf("no message %s", name)
	}
	return md
}

// encPB encodes the message of JSON js (the Protobuf JSON mapping) with
// google.golang.org/protobuf (dynamicpb: an independent encoder),
// deterministically.
func encPB(t testing.TB, md protoreflect.MessageDescriptor, js string) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pbReading encodes a Reading of pbTestSchema given in JSON.
func pbReading(t testing.TB, js string) []byte {
	t.Helper()
	return encPB(t, pbDescriptor(t, pbTestSchema, "t.v1.Reading"), js)
}

// TestProtobufDecodesLikeAvro: the typical Reading decodes to the event
// of the same values in Avro (and so in JSON: TestAvroDecodesLikeJSON).
func TestProtobufDecodesLikeAvro(t *testing.T) {
	var got, want Event
	if err := mustDecoder(t, pbTestConfig()).Decode(pbReading(t, pbTestJSON), &got); err != nil {
		t.Fatal(err)
	}
	if err := mustDecoder(t, avroTestConfig()).Decode(encAvro(t, avroTestSchema, avroTestRecord()), &want); err != nil {
		t.Fatal(err)
	}
	if got != want || got.Unit != "u-1234567" || got.Group != MakeGroup("DE", "ios") {
		t.Fatalf("protobuf %+v, avro %+v", got, want)
	}
}

// pbField returns the encoding of one field: tag and value bytes.
func pbField(num protowire.Number, typ protowire.Type, val []byte) []byte {
	return append(protowire.AppendTag(nil, num, typ), val...)
}

func TestProtobufReasons(t *testing.T) {
	d := mustDecoder(t, pbTestConfig())
	valid := pbReading(t, pbTestJSON)
	str := func(s string) []byte { return protowire.AppendString(nil, s) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name  string
		msg   []byte
		want  Reason
		field string
	}{
		{"explicit presence absent (optional)", pbReadingWithout("amount"), ReasonMissingField, "amount"},
		{"message on the unit's path absent", pbReadingWithout("user"), ReasonMissingField, "user.id"},
		{"implicit presence absent unit: the empty string", pbReading(t, `{"meta": {"ts": "1"}, "user": {}, "page": "home", "amount": 1}`), ReasonMissingField, "user.id"},
		{"unknown category", pbReading(t, strings.Replace(pbTestJSON, `"checkout"`, `"cart"`, 1)), ReasonUnknownCategory, "page"},
		{"duplicate configured field (last would win in Protobuf)", append(valid[:len(valid):len(valid)], pbField(5, protowire.BytesType, str("home"))...), ReasonDuplicateField, ""},
		{"duplicate message on a path (Protobuf would merge)", append(valid[:len(valid):len(valid)], pbField(2, protowire.BytesType, protowire.AppendBytes(nil, nil))...), ReasonDuplicateField, ""},
		{"wire type other than the schema's", cat(pbField(5, protowire.VarintType, []byte{1}), valid), ReasonMalformed, ""},
		{"enum number the schema does not declare", pbReading(t, strings.Replace(pbTestJSON, `"os": "ios"`, `"os": 7`, 1)), ReasonWrongType, "device.os"},
		{"truncated", valid[:len(valid)-1], ReasonMalformed, ""},
		{"field number 0", append([]byte{0x00}, valid...), ReasonMalformed, ""},
		{"end group without a start", cat(pbField(99, protowire.EndGroupType, nil), valid), ReasonMalformed, ""},
		{"time out of range", pbReading(t, strings.Replace(pbTestJSON, `"1714564800123"`, `"-5"`, 1)), ReasonTimeOutOfRange, "meta.ts"},
	}
	for _, c := range cases {
		var e Event
		err := d.Decode(c.msg, &e)
		var se *Error
		if !errors.As(err, &se) || se.Reason != c.want || se.Field != c.field {
			t.Errorf("%s: %v, want %s (field %q)", c.name, err, c.want, c.field)
		}
	}
	// Accepted: unknown fields of every wire type (a group included) are
	// skipped, an absent implicit-presence field is its zero value (here
	// the group value "" and the time 0, which min_time 0 accepts), an
	// absent message off the configured paths is nothing.
	unknown := cat(valid, pbField(99, protowire.VarintType, []byte{0x96, 0x01}), pbField(98, protowire.Fixed32Type, []byte{1, 2, 3, 4}),
		pbField(97, protowire.StartGroupType, nil), pbField(1, protowire.BytesType, str("in a group")), pbField(97, protowire.EndGroupType, nil))
	for name, c := range map[string]struct {
		msg  []byte
		want string
	}{
		"unknown fields": {unknown, "time=1714564800123 unit=\"u-1234567\" group=[\"DE\" \"ios\"] bucket=2 value=12.5 has_value=true"},
		"zero values":    {pbReading(t, `{"meta": {}, "user": {"id": "u"}, "device": {}, "page": "home", "amount": 0}`), "time=0 unit=\"u\" group=[\"\" \"ios\"] bucket=0 value=0 has_value=true"},
		"no device":      {pbReading(t, `{"meta": {"ts": "5"}, "user": {"id": "u"}, "page": "home", "amount": 0}`), "skip missing_field field \"device.os\""},
		"second enum":    {pbReading(t, strings.Replace(pbTestJSON, `"os": "ios"`, `"os": "android"`, 1)), "time=1714564800123 unit=\"u-1234567\" group=[\"DE\" \"android\"] bucket=2 value=12.5 has_value=true"},
		"invalid UTF-8":  {cat(pbReadingWithout("country"), pbField(3, protowire.BytesType, str("D\xffE"))), "skip invalid_utf8 field \"country\""},
	} {
		var e Event
		if got := renderDecoded(&e, d.Decode(c.msg, &e)); got != c.want {
			t.Errorf("%s: %s, want %s", name, got, c.want)
		}
	}
}

// TestProtobufScalars: each scalar type is read as the Protobuf
// specification casts it, as google.golang.org/protobuf reads it.
func TestProtobufScalars(t *testing.T) {
	const schema = `syntax = "proto2";
message S {
  optional int32 i32 = 1; optional int64 i64 = 2; optional uint32 u32 = 3; optional uint64 u64 = 4;
  optional sint32 s32 = 5; optional sint64 s64 = 6; optional fixed32 f32 = 7; optional fixed64 f64 = 8;
  optional sfixed32 sf32 = 9; optional sfixed64 sf64 = 10; optional float fl = 11; optional double db = 12;
  optional bool b = 13; optional int64 ts = 14;
}`
	md := pbDescriptor(t, schema, "S")
	for _, c := range []struct {
		field, js, want string
	}{
		{"i32", `-5`, "[\"-5\"]"}, {"i64", `"-9000000000"`, "[\"-9000000000\"]"},
		{"u32", `4294967295`, "[\"4294967295\"]"}, {"u64", `"18446744073709551615"`, "[\"18446744073709551615\"]"},
		{"s32", `-2147483648`, "[\"-2147483648\"]"}, {"s64", `"-3"`, "[\"-3\"]"},
		{"f32", `4000000000`, "[\"4000000000\"]"}, {"f64", `"9223372036854775808"`, "[\"9223372036854775808\"]"},
		{"sf32", `-1`, "[\"-1\"]"}, {"sf64", `"-2"`, "[\"-2\"]"}, {"b", `true`, "[\"true\"]"},
	} {
		cfg := Config{Format: FormatProtobuf, ProtobufSchema: schema, ProtobufMessage: "S", TimeField: "ts", GroupBy: []string{c.field}}
		var e Event
		msg := encPB(t, md, `{"ts": "1000", "`+c.field+`": `+c.js+`}`)
		if got := renderDecoded(&e, mustDecoder(t, cfg).Decode(msg, &e)); !strings.Contains(got, "group="+c.want) {
			t.Errorf("%s = %s: %s, want group %s", c.field, c.js, got, c.want)
		}
	}
	for _, c := range []struct {
		field, js string
		want      float64
	}{{"fl", `0.25`, 0.25}, {"db", `-1e300`, -1e300}, {"u64", `"18446744073709551615"`, 18446744073709551615}} {
		cfg := Config{Format: FormatProtobuf, ProtobufSchema: schema, ProtobufMessage: "S", TimeField: "ts", ValueField: c.field, Lower: -1, Upper: 1}
		var e Event
		if err := mustDecoder(t, cfg).Decode(encPB(t, md, `{"ts": "1000", "`+c.field+`": `+c.js+`}`), &e); err != nil || e.Value != c.want {
			t.Errorf("value %s = %s: %v %v, want %g", c.field, c.js, e.Value, err, c.want)
		}
	}
	// An int32 written as a 64-bit varint keeps its low 32 bits, as the
	// specification says a C++ cast would.
	cfg := Config{Format: FormatProtobuf, ProtobufSchema: schema, ProtobufMessage: "S", TimeField: "ts", GroupBy: []string{"i32"}}
	msg := append(encPB(t, md, `{"ts": "1000"}`), pbField(1, protowire.VarintType, protowire.AppendVarint(nil, 1<<32+5))...)
	var e Event
	ref := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(msg, ref); err != nil {
		t.Fatal(err)
	}
	if got := renderDecoded(&e, mustDecoder(t, cfg).Decode(msg, &e)); !strings.Contains(got, `group=["5"]`) || ref.Get(md.Fields().ByName("i32")).Int() != 5 {
		t.Errorf("int32 from 2^32+5: %s, google.golang.org/protobuf %v", got, ref.Get(md.Fields().ByName("i32")))
	}
}

// TestProtobufConfig: configuration errors name the setting and the field
// (a field the message lacks, one of a type its role cannot read, a path
// through a scalar), for every field at once.
func TestProtobufConfig(t *testing.T) {
	base := pbTestConfig
	cases := []struct {
		name string
		mod  func(*Config)
		want []string
	}{
		{"missing fields", func(c *Config) { c.UnitField, c.GroupBy = "user.name", []string{"region"} }, []string{`no field "user.name", "region"`}},
		{"value of type string", func(c *Config) { c.ValueField = "country" }, []string{`field "country" is string, not a number (value_field)`}},
		{"bytes", func(c *Config) { c.GroupBy = []string{"blob"} }, []string{`field "blob" is bytes, not a scalar`}},
		{"repeated", func(c *Config) { c.UnitField = "user.tags" }, []string{`field "user.tags" is repeated`}},
		{"map", func(c *Config) { c.GroupBy = []string{"device.attrs"} }, []string{`field "device.attrs" is a map`}},
		{"message", func(c *Config) { c.UnitField, c.GroupBy = "", []string{"user"} }, []string{`field "user" is message, not a scalar`}},
		{"path through a scalar", func(c *Config) {
			c.GroupBy = []string{"page.x"}
			c.Histogram.Field = "score"
			c.Histogram.Categories = nil
			c.Histogram.Edges = []float64{0}
		}, []string{`field "page.x": t.v1.Reading.page is not a message`}},
		{"float unit", func(c *Config) { c.UnitField = "score" }, []string{`field "score" is float, not a string, enum or integer (unit_field)`}},
		{"bool time", func(c *Config) { c.TimeField = "flag" }, []string{`field "flag" is bool, not a number or string (time_field)`}},
		{"int64 time as rfc3339", func(c *Config) { c.TimeFormat = TimeRFC3339 }, []string{`field "meta.ts" is int64, not a string (time_field with time_format rfc3339)`}},
		{"string time as unix_ms", func(c *Config) { c.TimeField = "meta.source" }, []string{`field "meta.source" is string, not a number (time_field with time_format unix_ms)`}},
		{"no such message", func(c *Config) { c.ProtobufMessage = "t.v1.Nope" }, []string{`protobuf_message: the schema defines no message "t.v1.Nope"`}},
		{"syntax error", func(c *Config) { c.ProtobufSchema = "message {" }, []string{"protobuf_schema:", "syntax error"}},
		{"no message", func(c *Config) { c.ProtobufMessage = "" }, []string{"format protobuf needs protobuf_schema and protobuf_message"}},
		{"other format", func(c *Config) { c.Format = FormatJSON }, []string{"protobuf_schema or protobuf_message is set but format is not protobuf"}},
		{"with a registry", func(c *Config) { c.Registry.URL = "http://127.0.0.1:1" }, []string{"not both"}},
	}
	for _, c := range cases {
		cfg := base()
		c.mod(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", c.name, err, w)
			}
		}
	}
	if err := pbTestConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := pbTestConfig()
	c.ProtobufMessage = ".t.v1.Reading" // a leading dot: fully qualified
	if err := c.Validate(); err != nil {
		t.Errorf("leading dot: %v", err)
	}
}

// TestProtobufTimestamp: a google.protobuf.Timestamp time field is read
// as a time (nanos truncated to the millisecond before them, as
// google.golang.org/protobuf's protojson writes them), its bad values
// are counted reasons, and no other role reads it.
func TestProtobufTimestamp(t *testing.T) {
	const schema = `syntax = "proto3";
import "google/protobuf/timestamp.proto";
message T { google.protobuf.Timestamp at = 1; string u = 2; }`
	md := pbDescriptor(t, schema, "T")
	cfg := Config{Format: FormatProtobuf, ProtobufSchema: schema, ProtobufMessage: "T", TimeField: "at", UnitField: "u", MinTime: -1e12}
	d := mustDecoder(t, cfg)
	ts := func(secs, nanos uint64) []byte {
		m := append(pbField(1, protowire.VarintType, protowire.AppendVarint(nil, secs)), pbField(2, protowire.VarintType, protowire.AppendVarint(nil, nanos))...)
		return append(pbField(1, protowire.BytesType, protowire.AppendBytes(nil, m)), pbField(2, protowire.BytesType, protowire.AppendString(nil, "u"))...)
	}
	neg := func(x int64) uint64 { return uint64(x) }
	for _, c := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"RFC 3339 in JSON", encPB(t, md, `{"at": "2024-05-01T12:00:00.123999Z", "u": "u"}`), "time=1714564800123 "},
		{"before the epoch", encPB(t, md, `{"at": "1969-12-31T23:59:59.500Z", "u": "u"}`), "time=-500 "},
		{"the epoch: seconds and nanos absent", encPB(t, md, `{"at": "1970-01-01T00:00:00Z", "u": "u"}`), "time=0 "},
		{"no timestamp", encPB(t, md, `{"u": "u"}`), `skip missing_field field "at"`},
		{"negative nanos", ts(5, neg(-1)), `skip bad_time field "at"`},
		{"nanos of a second", ts(5, 1e9), `skip bad_time field "at"`},
		{"seconds beyond year 9999", ts(253402300800, 0), `skip time_out_of_range field "at"`},
		{"seconds far before year 1", ts(neg(-1<<62), 0), `skip time_out_of_range field "at"`},
		{"seconds twice", append(pbField(1, protowire.BytesType, protowire.AppendBytes(nil, append(pbField(1, protowire.VarintType, []byte{1}), pbField(1, protowire.VarintType, []byte{2})...))), pbField(2, protowire.BytesType, protowire.AppendString(nil, "u"))...), `skip duplicate_field field ""`},
		{"seconds as fixed64", append(pbField(1, protowire.BytesType, protowire.AppendBytes(nil, pbField(1, protowire.Fixed64Type, make([]byte, 8)))), pbField(2, protowire.BytesType, protowire.AppendString(nil, "u"))...), `skip malformed field ""`},
	} {
		var e Event
		if got := renderDecoded(&e, d.Decode(c.msg, &e)); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %s, want %s…", c.name, got, c.want)
		}
	}
	cfg.GroupBy = []string{"at"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `field "at" is google.protobuf.Timestamp, which only time_field reads`) {
		t.Errorf("a Timestamp group: %v", err)
	}
}
