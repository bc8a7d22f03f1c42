package schema

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// avroTestSchema is a writer schema with every Avro type: records nested
// two deep (one behind a nullable union), an enum, an array, a map, bytes,
// fixed, float, int and boolean around the configured fields.
const avroTestSchema = `{"type": "record", "name": "Reading", "namespace": "t", "fields": [
 {"name": "meta", "type": {"type": "record", "name": "Meta", "fields": [
   {"name": "source", "type": "string"},
   {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}},
 {"name": "user", "type": ["null", {"type": "record", "name": "User", "fields": [
   {"name": "id", "type": "string"},
   {"name": "tags", "type": {"type": "array", "items": "string"}}]}]},
 {"name": "country", "type": "string"},
 {"name": "device", "type": {"type": "record", "name": "Device", "fields": [
   {"name": "attrs", "type": {"type": "map", "values": "double"}},
   {"name": "os", "type": {"type": "enum", "name": "OS", "symbols": ["ios", "android"]}}]}},
 {"name": "page", "type": "string"},
 {"name": "amount", "type": ["null", "double"]},
 {"name": "blob", "type": "bytes"},
 {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 4}},
 {"name": "score", "type": "float"},
 {"name": "n", "type": "int"},
 {"name": "flag", "type": "boolean"}]}`

// avroTestConfig reads avroTestSchema's configured fields.
func avroTestConfig() Config {
	return Config{
		Format:     FormatAvro,
		AvroSchema: avroTestSchema,
		TimeField:  "meta.ts",
		TimeFormat: TimeUnixMillis,
		UnitField:  "user.id",
		GroupBy:    []string{"country", "device.os"},
		Histogram:  &Histogram{Field: "page", Categories: []string{"home", "search", "checkout"}},
		ValueField: "amount",
		Lower:      0,
		Upper:      100,
	}
}

// avroTestRecord is a typical record of avroTestSchema (hamba/avro's
// generic form); it decodes to nestedWant with the group ("DE", "ios").
func avroTestRecord() map[string]any {
	return map[string]any{
		"meta":    map[string]any{"source": "app", "ts": int64(1714564800123)},
		"user":    map[string]any{"t.User": map[string]any{"id": "u-1234567", "tags": []any{"a", "b"}}},
		"country": "DE",
		"device":  map[string]any{"attrs": map[string]any{"x": 1.5}, "os": "ios"},
		"page":    "checkout",
		"amount":  12.5,
		"blob":    []byte{1, 2, 3},
		"hash":    [4]byte{9, 9, 9, 9},
		"score":   float32(0.5),
		"n":       7,
		"flag":    true,
	}
}

// encAvro encodes rec with hamba/avro (an independent encoder).
func encAvro(t testing.TB, schemaJSON string, rec map[string]any) []byte {
	t.Helper()
	s, err := avro.ParseWithCache(schemaJSON, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := avro.Marshal(s, rec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAvroDecodesLikeJSON(t *testing.T) {
	d := mustDecoder(t, avroTestConfig())
	jc := avroTestConfig()
	jc.Format, jc.AvroSchema = FormatJSON, ""
	jd := mustDecoder(t, jc)
	msg := encAvro(t, avroTestSchema, avroTestRecord())
	var got, want Event
	if err := d.Decode(msg, &got); err != nil {
		t.Fatal(err)
	}
	js := encJS(t,
		kv{"meta", obj{{"ts", int64(1714564800123)}}},
		kv{"user", obj{{"id", "u-1234567"}}},
		kv{"country", "DE"},
		kv{"device", obj{{"os", "ios"}}},
		kv{"page", "checkout"},
		kv{"amount", 12.5})
	if err := jd.Decode(js, &want); err != nil {
		t.Fatal(err)
	}
	if got != want || got.Unit != "u-1234567" || got.Bucket != 2 || got.Value != 12.5 || got.Time != 1714564800123 {
		t.Fatalf("avro %+v, json %+v", got, want)
	}
}

func TestAvroReasons(t *testing.T) {
	d := mustDecoder(t, avroTestConfig())
	set := func(k string, v any) map[string]any { r := avroTestRecord(); r[k] = v; return r }
	cases := []struct {
		name  string
		msg   []byte
		want  Reason
		field string
	}{
		{"null record on the unit's path", encAvro(t, avroTestSchema, set("user", nil)), ReasonMissingField, "user.id"},
		{"null value", encAvro(t, avroTestSchema, set("amount", nil)), ReasonMissingField, "amount"},
		{"empty unit", encAvro(t, avroTestSchema, set("user", map[string]any{"t.User": map[string]any{"id": "", "tags": []any{}}})), ReasonMissingField, "user.id"},
		{"unknown category", encAvro(t, avroTestSchema, set("page", "nope")), ReasonUnknownCategory, "page"},
		{"invalid UTF-8", encAvro(t, avroTestSchema, set("country", "\xff")), ReasonInvalidUTF8, "country"},
		{"oversized", encAvro(t, avroTestSchema, set("country", strings.Repeat("x", DefaultMaxStringLen+1))), ReasonOversized, "country"},
		{"NaN", encAvro(t, avroTestSchema, set("amount", nanValue())), ReasonNaNOrInf, "amount"},
		{"trailing byte", append(encAvro(t, avroTestSchema, avroTestRecord()), 0), ReasonTrailingData, ""},
		{"empty message", nil, ReasonMalformed, ""},
	}
	for _, c := range cases {
		var e Event
		err := d.Decode(c.msg, &e)
		var de *Error
		if !errors.As(err, &de) || de.Reason != c.want || de.Field != c.field {
			t.Errorf("%s: got %v, want %v (field %q)", c.name, err, c.want, c.field)
		}
	}
}

// nanValue returns a NaN without a constant expression.
func nanValue() float64 { z := 0.0; return z / z }

func TestAvroTruncatedIsMalformed(t *testing.T) {
	d := mustDecoder(t, avroTestConfig())
	msg := encAvro(t, avroTestSchema, avroTestRecord())
	for n := range len(msg) {
		var e Event
		if r := ReasonOf(d.Decode(msg[:n], &e)); r != ReasonMalformed {
			t.Fatalf("prefix of %d of %d bytes: %v, want malformed", n, len(msg), r)
		}
	}
}

func TestAvroWrongTypes(t *testing.T) {
	const s = `{"type": "record", "name": "R", "fields": [
	 {"name": "ts", "type": "long"}, {"name": "u", "type": "double"},
	 {"name": "v", "type": "string"}, {"name": "b", "type": "bytes"},
	 {"name": "i", "type": "int"}]}`
	rec := map[string]any{"ts": int64(1714564800), "u": 1.5, "v": "x", "b": []byte("y"), "i": 3}
	msg := encAvro(t, s, rec)
	cases := []struct {
		cfg   Config
		field string
	}{
		{Config{UnitField: "u"}, "u"},
		{Config{ValueField: "v", Upper: 1}, "v"},
		{Config{UnitField: "b"}, "b"},
		{Config{GroupBy: []string{"b"}}, "b"},
	}
	for _, c := range cases {
		cfg := c.cfg
		cfg.Format, cfg.AvroSchema, cfg.TimeField, cfg.TimeFormat = FormatAvro, s, "ts", TimeUnixSeconds
		var e Event
		err := mustDecoder(t, cfg).Decode(msg, &e)
		var de *Error
		if !errors.As(err, &de) || de.Reason != ReasonWrongType || de.Field != c.field {
			t.Errorf("%+v: got %v, want wrong_type of %q", c.cfg, err, c.field)
		}
	}
	// An int field is a group value; an int out of int32 range is malformed.
	cfg := Config{Format: FormatAvro, AvroSchema: s, TimeField: "ts", TimeFormat: TimeUnixSeconds, GroupBy: []string{"i"}}
	d := mustDecoder(t, cfg)
	var e Event
	if err := d.Decode(msg, &e); err != nil || e.Group != MakeGroup("3") || e.Time != 1714564800000 {
		t.Fatalf("int group: %v %+v", err, e)
	}
	bad := append(msg[:len(msg)-1:len(msg)-1], 0x80, 0x80, 0x80, 0x80, 0x20) // zig-zag 2^32: beyond int32
	if r := ReasonOf(d.Decode(bad, &e)); r != ReasonMalformed {
		t.Fatalf("int beyond int32: %v, want malformed", r)
	}
}

func TestAvroConfigMissingField(t *testing.T) {
	cfg := avroTestConfig()
	cfg.UnitField = "user.name"
	cfg.GroupBy = []string{"country", "device.model"}
	err := cfg.Validate()
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `"user.name"`) || !strings.Contains(err.Error(), `"device.model"`) {
		t.Fatalf("got %v, want a config error naming user.name and device.model", err)
	}
	if _, err := NewDecoder(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewDecoder: %v", err)
	}
	for _, bad := range []Config{
		{Format: FormatAvro, TimeField: "ts"},                                         // no schema
		{Format: FormatAvro, TimeField: "ts", AvroSchema: `"long"`},                   // not a record
		{Format: FormatAvro, TimeField: "ts", AvroSchema: `{"type": "record"}`},       // invalid schema
		{Format: FormatJSON, TimeField: "ts", AvroSchema: avroTestSchema},             // schema without avro
		{Format: FormatAvro, TimeField: "ts", AvroSchema: "/nonexistent/schema.avsc"}, // not JSON (a path is the loader's)
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want a config error", bad, err)
		}
	}
}

// TestAvroDeepRecursion: a recursive schema lets data nest without bound;
// past maxAvroDepth the message is oversized, with no deep recursion.
func TestAvroDeepRecursion(t *testing.T) {
	const s = `{"type": "record", "name": "R", "fields": [{"name": "ts", "type": "long"},
	 {"name": "list", "type": {"type": "record", "name": "Node", "fields": [
	   {"name": "next", "type": ["null", "Node"]}]}}]}`
	d := mustDecoder(t, Config{Format: FormatAvro, AvroSchema: s, TimeField: "ts"})
	msg := []byte{0x02} // ts = 1
	for _, n := range []int{10, 100000} {
		b := append(append([]byte(nil), msg...), []byte(strings.Repeat("\x02", n))...)
		b = append(b, 0) // the null at the end
		var e Event
		err := d.Decode(b, &e)
		switch {
		case n < maxAvroDepth && err != nil:
			t.Fatalf("depth %d: %v", n, err)
		case n > maxAvroDepth && ReasonOf(err) != ReasonOversized:
			t.Fatalf("depth %d: %v, want oversized", n, err)
		}
	}
}

// TestAvroHugeCounts: array and map counts are checked against the bytes
// left (items of varying size) or skipped in one step (items of constant
// size), so a huge count costs nothing.
func TestAvroHugeCounts(t *testing.T) {
	const s = `{"type": "record", "name": "R", "fields": [{"name": "ts", "type": "long"},
	 {"name": "longs", "type": {"type": "array", "items": "long"}},
	 {"name": "nulls", "type": {"type": "array", "items": "null"}},
	 {"name": "m", "type": {"type": "map", "values": "null"}}]}`
	d := mustDecoder(t, Config{Format: FormatAvro, AvroSchema: s, TimeField: "ts"})
	huge := binary.AppendVarint(nil, 1<<61) // zig-zag, as Avro writes longs
	var e Event
	ok := append(append([]byte{0x02, 0}, huge...), 0, 0) // 2^61 nulls, then an empty map
	if err := d.Decode(ok, &e); err != nil {
		t.Fatalf("2^61 nulls: %v", err)
	}
	for name, b := range map[string][]byte{
		"longs": append([]byte{0x02}, huge...),
		"map":   append(append([]byte{0x02, 0, 0}, huge...), 0),
		"min":   append([]byte{0x02}, binary.AppendVarint(nil, -1<<63)...),
	} {
		if r := ReasonOf(d.Decode(b, &e)); r != ReasonMalformed {
			t.Errorf("%s: %v, want malformed", name, r)
		}
	}
}
