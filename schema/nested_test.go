package schema

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// nestedConfig reads the fields of testConfig from nested maps: a path of
// two and of three keys, and a flat key that contains a dot (escaped).
func nestedConfig() Config {
	return Config{
		TimeField:  "meta.ts",
		TimeFormat: TimeUnixMillis,
		UnitField:  "user.id",
		GroupBy:    []string{`geo\.country`, "device.os"},
		Histogram:  &Histogram{Field: "event.page.name", Categories: []string{"home", "search", "checkout"}},
		ValueField: "event.amount",
		Lower:      0,
		Upper:      100,
	}
}

// nestedEvent is a typical event for nestedConfig, with unconfigured keys
// at every level; it decodes to nestedWant.
func nestedEvent() []kv {
	return []kv{
		{"meta", obj{{"source", "app"}, {"ts", int64(1714564800123)}}},
		{"user", obj{{"id", "u-1234567"}, {"plan", obj{{"tier", "gold"}}}}},
		{"geo.country", "DE"},
		{"device", obj{{"os", "ios"}, {"model", []any{"x", 1}}}},
		{"event", obj{{"page", obj{{"name", "checkout"}, {"ref", nil}}}, {"amount", 12.5}}},
	}
}

var nestedWant = Event{
	Time: 1714564800123, Unit: "u-1234567", Group: MakeGroup("DE", "ios"),
	Bucket: 2, Value: 12.5, HasValue: true,
}

// setPath returns kvs with the value at keys replaced by v (del removes
// it), creating the maps on the way as needed.
func setPath(kvs []kv, v any, keys ...string) []kv {
	if len(keys) == 1 {
		return with(kvs, keys[0], v)
	}
	var inner []kv
	for _, e := range kvs {
		if e.k == keys[0] {
			if o, ok := e.v.(obj); ok {
				inner = o
			}
		}
	}
	return with(kvs, keys[0], obj(setPath(inner, v, keys[1:]...)))
}

// nestedCase is one event for nestedConfig and its expected decoding: an
// event, or a reason and field.
type nestedCase struct {
	name   string
	kvs    []kv
	want   *Event
	reason Reason
	field  string
	only   string // "mp" or "js" when the case exists in one encoding
}

func nestedCases() []nestedCase {
	base := nestedEvent()
	mod := func(v any, keys ...string) []kv { return setPath(base, v, keys...) }
	wantWith := func(f func(e *Event)) *Event { e := nestedWant; f(&e); return &e }
	long := strings.Repeat("k", DefaultMaxKeyLen+1)
	deep := any(1)
	for range 1000 {
		deep = []any{map[string]any{"a": deep}}
	}
	return []nestedCase{
		{name: "typical", kvs: base, want: &nestedWant},
		{name: "flat key with a dot and nested map of the same name", kvs: append(mod("FR", "geo", "country"), kv{"user.id", "flat"}), want: &nestedWant},
		{name: "key order inside maps does not matter", kvs: mod(obj{{"amount", 12.5}, {"page", obj{{"name", "checkout"}}}}, "event"), want: &nestedWant},
		{name: "integer unit inside a map", kvs: mod(42, "user", "id"), want: wantWith(func(e *Event) { e.Unit = "42" })},
		{name: "unconfigured deep subtree is skipped", kvs: mod(deep, "user", "history"), want: &nestedWant},
		{name: "oversized key in a skipped subtree is not read", kvs: mod(obj{{long, 1}}, "user", "plan"), want: &nestedWant},
		{name: "unconfigured keys may repeat inside maps", kvs: mod(obj{{"x", 1}, {"id", "u-1234567"}, {"x", 2}}, "user"), want: &nestedWant},
		{name: "timestamp extension inside a map", kvs: mod(rawMP{0xd6, 0xff, 0x66, 0x32, 0x2e, 0x80}, "meta", "ts"), only: "mp",
			want: wantWith(func(e *Event) { e.Time = 1714564736000 })},
		{name: "non-string key inside a map is skipped", kvs: mod(rawMP{0x82, 0x01, 0x02, 0xa2, 'i', 'd', 0xa1, 'u'}, "user"), only: "mp",
			want: wantWith(func(e *Event) { e.Unit = "u" })},

		{name: "duplicate key inside a map", kvs: mod(obj{{"id", "a"}, {"id", "b"}}, "user"), reason: ReasonDuplicateField},
		{name: "duplicate map along the path", kvs: append(append([]kv(nil), base...), kv{"user", obj{{"name", "x"}}}), reason: ReasonDuplicateField},
		{name: "duplicate map along the path, null first", kvs: append([]kv{{"event", nil}}, base...), reason: ReasonDuplicateField},
		{name: "oversized key inside a configured map", kvs: mod(1, "user", long), reason: ReasonOversized},
		{name: "missing map", kvs: mod(del, "user"), reason: ReasonMissingField, field: "user.id"},
		{name: "null map", kvs: mod(nil, "user"), reason: ReasonMissingField, field: "user.id"},
		{name: "missing key inside a map", kvs: mod(del, "event", "page", "name"), reason: ReasonMissingField, field: "event.page.name"},
		{name: "string in the place of a map", kvs: mod("u-1", "user"), reason: ReasonWrongType, field: "user.id"},
		{name: "array in the place of a map", kvs: mod([]any{map[string]any{"id": "u-1"}}, "user"), reason: ReasonWrongType, field: "user.id"},
		{name: "string in the place of an inner map", kvs: mod("checkout", "event", "page"), reason: ReasonWrongType, field: "event.page.name"},
		{name: "map in the place of a value", kvs: mod(obj{{"v", 1}}, "event", "amount"), reason: ReasonWrongType, field: "event.amount"},
		{name: "null value inside a map", kvs: mod(nil, "event", "amount"), reason: ReasonMissingField, field: "event.amount"},
		{name: "unknown category inside a map", kvs: mod("admin", "event", "page", "name"), reason: ReasonUnknownCategory, field: "event.page.name"},
		{name: "nested map without the flat dotted key", kvs: mod(del, "geo.country"), reason: ReasonMissingField, field: `geo\.country`},
		{name: "first problem in fixed order: unit before value", kvs: setPath(mod(nil, "user"), "x", "event", "amount"), reason: ReasonMissingField, field: "user.id"},
	}
}

// TestDecodeNested runs each nested case through both encodings.
func TestDecodeNested(t *testing.T) {
	d := mustDecoder(t, nestedConfig())
	for _, c := range nestedCases() {
		for _, format := range []string{"mp", "js"} {
			if c.only != "" && c.only != format {
				continue
			}
			t.Run(c.name+"/"+format, func(t *testing.T) {
				msg := encode(t, format, c.kvs)
				var e Event
				err := d.Decode(msg, &e)
				if c.want != nil {
					if err != nil || e != *c.want {
						t.Fatalf("Decode = %+v, %v; want %+v", e, err, *c.want)
					}
					return
				}
				var se *Error
				if !errors.As(err, &se) || se.Reason != c.reason || se.Field != c.field {
					t.Fatalf("Decode error = %v, want reason %v, field %q", err, c.reason, c.field)
				}
			})
		}
	}
}

// encode writes kvs in format "mp" or "js".
func encode(t testing.TB, format string, kvs []kv) []byte {
	if format == "mp" {
		return encMP(t, kvs...)
	}
	return encJS(t, kvs...)
}

// TestNestedGolden pins the nested cases: testdata/nested_events_json.txt
// and nested_events_msgpack.txt hold each event (JSON text, msgpack in
// hex) and its decoding under nestedConfig (rewritten with -update). The
// test decodes the events read back from the files, so the files stay
// meaningful by themselves.
func TestNestedGolden(t *testing.T) {
	d := mustDecoder(t, nestedConfig())
	for _, format := range []string{"mp", "js"} {
		var out strings.Builder
		c := nestedConfig()
		fmt.Fprintf(&out, "# nested events and their decoding: time_field %s (%s), unit_field %s, group_by %s, histogram.field %s %q, value_field %s\n",
			c.TimeField, c.TimeFormat, c.UnitField, c.GroupBy, c.Histogram.Field, c.Histogram.Categories, c.ValueField)
		for _, c := range nestedCases() {
			if c.only != "" && c.only != format {
				continue
			}
			msg := encode(t, format, c.kvs)
			text := string(msg)
			if format == "mp" {
				text = hex.EncodeToString(msg)
			}
			fmt.Fprintf(&out, "\n## %s\n%s\n", c.name, text)
			var e Event
			fmt.Fprintf(&out, "=> %s\n", renderDecoded(&e, d.Decode(msg, &e)))
		}
		name := map[string]string{"mp": "nested_events_msgpack.txt", "js": "nested_events_json.txt"}[format]
		golden := compareGolden(t, filepath.Join("testdata", name), out.String())
		checkGoldenEvents(t, d, format, golden)
	}
}

// checkGoldenEvents decodes every event of a golden file and compares the
// result with the line after it.
func checkGoldenEvents(t *testing.T, d *Decoder, format, golden string) {
	t.Helper()
	blocks := strings.Split(golden, "\n## ")[1:]
	if len(blocks) < 20 {
		t.Fatalf("%d events in the %s golden", len(blocks), format)
	}
	for _, b := range blocks {
		lines := strings.Split(b, "\n")
		msg := []byte(lines[1])
		if format == "mp" {
			var err error
			if msg, err = hex.DecodeString(lines[1]); err != nil {
				t.Fatal(err)
			}
		}
		var e Event
		if got := "=> " + renderDecoded(&e, d.Decode(msg, &e)); got != lines[2] {
			t.Errorf("%s/%s: %s, golden %s", format, lines[0], got, lines[2])
		}
	}
}

// renderDecoded writes a decoded event or the skip reason.
func renderDecoded(e *Event, err error) string {
	if err != nil {
		var se *Error
		errors.As(err, &se)
		return fmt.Sprintf("skip %s field %q", se.Reason, se.Field)
	}
	g, _ := GroupValues(e.Group)
	return fmt.Sprintf("time=%d unit=%q group=%q bucket=%d value=%g has_value=%v", e.Time, e.Unit, g, e.Bucket, e.Value, e.HasValue)
}

// TestDecodeNestedDeep: nesting far deeper than any path (100000 levels,
// where a value, a nested map or nothing is configured) never recurses:
// it is a counted reason or skipped, never a crash, and the decoder's
// recursion stays at the path's depth.
func TestDecodeNestedDeep(t *testing.T) {
	const depth = 100000
	d := mustDecoder(t, nestedConfig())
	base := encJS(t, nestedEvent()...)
	deepJS := func(open, close string) string { return strings.Repeat(open, depth) + strings.Repeat(close, depth) }
	deepMP := string(bytes.Repeat([]byte{0x91}, depth)) + "\xc0" // arrays of one element, then nil
	deepMPMap := strings.Repeat("\x81\xa2id", depth) + "\xa1u"   // {"id": {"id": … "u"}}
	cases := []struct {
		name   string
		msg    string
		reason Reason
		field  string
	}{
		{"JSON arrays in the place of a value", strings.Replace(string(base), `"u-1234567"`, deepJS("[", "]"), 1), ReasonWrongType, "user.id"},
		{"JSON objects in the place of a value", strings.Replace(string(base), `"u-1234567"`, deepJS(`{"id":`, "}")[:depth*6]+"1"+strings.Repeat("}", depth), 1), ReasonWrongType, "user.id"},
		{"JSON arrays in the place of a map", strings.Replace(string(base), `{"id":"u-1234567","plan":{"tier":"gold"}}`, deepJS("[", "]"), 1), ReasonWrongType, "user.id"},
		{"JSON unbalanced", strings.Replace(string(base), `"u-1234567"`, strings.Repeat("[", depth), 1), ReasonMalformed, ""},
		{"msgpack arrays in the place of a value", "\x82\xa4meta\x81\xa2ts\x01\xa4user\x81\xa2id" + deepMP, ReasonWrongType, "user.id"},
		{"msgpack maps in the place of a value", "\x82\xa4meta\x81\xa2ts\x01\xa4user\x81\xa2id" + deepMPMap, ReasonWrongType, "user.id"},
	}
	for _, c := range cases {
		var e Event
		err := d.Decode([]byte(c.msg), &e)
		var se *Error
		if !errors.As(err, &se) || se.Reason != c.reason || se.Field != c.field {
			t.Errorf("%s: %v, want %v (field %q)", c.name, err, c.reason, c.field)
		}
	}
}

// TestDecodeNestedAllocs: a nested decode of a seen group allocates only
// the unit, as a flat one; skipped subtrees (a deep one included) and
// nested maps on the path allocate nothing.
func TestDecodeNestedAllocs(t *testing.T) {
	d := mustDecoder(t, nestedConfig())
	var deep any = "x"
	for range 50 {
		deep = map[string]any{"k": []any{deep}}
	}
	extra := setPath(nestedEvent(), deep, "user", "history")
	for name, msg := range map[string][]byte{
		"msgpack": encMP(t, nestedEvent()...), "json": encJS(t, nestedEvent()...),
		"msgpack+deep": encMP(t, extra...), "json+deep": encJS(t, extra...),
	} {
		var e Event
		allocs := testing.AllocsPerRun(100, func() {
			if err := d.Decode(msg, &e); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("%s: %.1f allocations per Decode, want ≤ 1 (the unit string)", name, allocs)
		}
	}
}
