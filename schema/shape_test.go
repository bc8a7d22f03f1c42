package schema

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestShapeFields: the distinct configured names in bit order, each with
// the configuration keys naming it (a name serving two roles once).
func TestShapeFields(t *testing.T) {
	cfg := testConfig()
	cfg.GroupBy = []string{"country", "page"} // page is also the histogram field
	got := mustDecoder(t, cfg).Fields()
	want := []FieldInfo{
		{"ts", []string{"time_field"}}, {"user_id", []string{"unit_field"}},
		{"country", []string{"group_by"}}, {"page", []string{"group_by", "histogram.field"}},
		{"amount", []string{"value_field"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Fields() = %v, want %v", got, want)
	}
}

// TestShape: after each Decode, Shape names the absent (or null) and the
// wrongly typed configured fields, in JSON and msgpack alike; values that
// are only out of range are not shape problems; a message that is not a
// map lacks every field; a successful Decode reports nothing.
func TestShape(t *testing.T) {
	// Bits in Fields order: ts 0, user_id 1, country 2, device 3, page 4, amount 5.
	cases := []shapeCase{
		{"good", testEvent(), 0, 0},
		{"misspelt group field", with(with(testEvent(), "device", del), "devise", "mobile"), 1 << 3, 0},
		{"null unit", with(testEvent(), "user_id", nil), 1 << 1, 0},
		{"several", with(with(testEvent(), "ts", del), "country", del), 1<<0 | 1<<2, 0},
		{"string value", with(testEvent(), "amount", "12.5"), 0, 1 << 5},
		{"map group value", with(testEvent(), "country", map[string]any{"a": 1}), 0, 1 << 2},
		{"time as string in unix_ms", with(testEvent(), "ts", "2024-05-01T12:00:00Z"), 0, 1 << 0},
		{"numeric category", with(testEvent(), "page", 3), 0, 0}, // an integer is text for a category: a value question
		{"bool category", with(testEvent(), "page", true), 0, 1 << 4},
		{"unknown category is a value", with(testEvent(), "page", "nowhere"), 0, 0},
		{"time out of range is a value", with(testEvent(), "ts", int64(-5)), 0, 0},
		{"absent and wrong", with(with(testEvent(), "user_id", del), "amount", true), 1 << 1, 1 << 5},
	}
	d := mustDecoder(t, testConfig())
	checkShapes(t, d, cases, nil)
	var e Event
	for _, msg := range []string{`[1,2]`, `{"ts":`, `17`} {
		_ = d.Decode([]byte(msg), &e)
		if a, w := d.Shape(); a != 1<<6-1 || w != 0 {
			t.Errorf("%q: Shape() = %06b, %06b; want every field absent", msg, a, w)
		}
	}
	// An optional value field may be absent.
	cfg := testConfig()
	cfg.ValueOptional = true
	d = mustDecoder(t, cfg)
	_ = d.Decode(encJS(t, with(testEvent(), "amount", del)...), &e)
	if a, w := d.Shape(); a != 0 || w != 0 {
		t.Errorf("optional value absent: Shape() = %06b, %06b; want nothing", a, w)
	}
}

// TestShapeKeys: Keys lists every top-level key in message order, nested
// keys not, in both encodings; Shape still reports afterwards.
func TestShapeKeys(t *testing.T) {
	kvs := with(testEvent(), "extra", map[string]any{"nested": 1})
	d := mustDecoder(t, testConfig())
	for enc, msg := range map[string][]byte{"json": encJS(t, kvs...), "msgpack": encMP(t, kvs...)} {
		var got []string
		d.Keys(msg, func(k []byte) { got = append(got, string(k)) })
		if s := strings.Join(got, ","); s != "ts,user_id,country,device,page,amount,extra" {
			t.Errorf("%s: Keys = %s", enc, s)
		}
	}
	var n int
	d.Keys([]byte(`{"a":1,"b":`), func([]byte) { n++ })
	if n != 2 {
		t.Errorf("malformed message: %d keys reported before the error, want 2", n)
	}
}

// TestShapeNested: with a nested group-by path, Shape reports the path
// absent when its parent map or its leaf is missing, and of the wrong
// type when the leaf is a map; Keys lists only the top-level keys.
func TestShapeNested(t *testing.T) {
	cfg := testConfig()
	cfg.GroupBy = []string{"country", "device.os"} // bit 3
	d := mustDecoder(t, cfg)
	nested := func(v any) []kv { return with(with(testEvent(), "device", del), "device", v) }
	cases := []shapeCase{
		{"good", nested(map[string]any{"os": "ios"}), 0, 0},
		{"parent missing", with(testEvent(), "device", del), 1 << 3, 0},
		{"leaf missing", nested(map[string]any{"o_s": "ios"}), 1 << 3, 0},
		{"leaf a map", nested(map[string]any{"os": map[string]any{"name": "ios"}}), 0, 1 << 3},
	}
	checkShapes(t, d, cases, func(c shapeCase, enc string, msg []byte) {
		var keys []string
		d.Keys(msg, func(k []byte) { keys = append(keys, string(k)) })
		if slices.Contains(keys, "os") || slices.Contains(keys, "o_s") || !slices.Contains(keys, "ts") {
			t.Errorf("%s (%s): Keys = %v, want the top-level keys only", c.name, enc, keys)
		}
	})
}

// shapeCase is a message and the masks Shape must return after decoding it.
type shapeCase struct {
	name          string
	kvs           []kv
	absent, wrong uint64
}

// checkShapes decodes each case in JSON and msgpack with d and checks
// Shape; then (when not nil) calls more with the message.
func checkShapes(t *testing.T, d *Decoder, cases []shapeCase, more func(c shapeCase, enc string, msg []byte)) {
	t.Helper()
	for _, c := range cases {
		for enc, msg := range map[string][]byte{"json": encJS(t, c.kvs...), "msgpack": encMP(t, c.kvs...)} {
			var e Event
			_ = d.Decode(msg, &e)
			if a, w := d.Shape(); a != c.absent || w != c.wrong {
				t.Errorf("%s (%s): Shape() = %06b, %06b; want %06b, %06b", c.name, enc, a, w, c.absent, c.wrong)
			}
			if more != nil {
				more(c, enc, msg)
			}
		}
	}
}
