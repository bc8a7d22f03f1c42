package schema

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDecode runs each case through both encodings (where the case can be
// written in both) and checks the event or the reason and field.
func TestDecode(t *testing.T) {
	base := testEvent()
	nanMP := rawMP{0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1}              // float64 NaN
	infMP := rawMP{0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0}              // float64 +Inf
	badUTF8 := rawMP{0xa2, 0xff, 0xfe}                              // fixstr of 2 invalid bytes
	tsExt := rawMP{0xd6, 0xff, 0x66, 0x32, 0x2e, 0x80}              // timestamp32: 1714564736 s
	tsExt8 := rawMP{0xd7, 0xff, 0, 0, 0, 0, 0x66, 0x32, 0x2e, 0x80} // timestamp64, 0 ns
	badNsec := rawMP{0xd7, 0xff, 0xff, 0xff, 0xff, 0xfc, 0x66, 0x32, 0x2e, 0x80}
	mod := func(k string, v any) []kv { return with(base, k, v) }
	wantWith := func(f func(e *Event)) *Event { e := testWant; f(&e); return &e }
	long := strings.Repeat("x", DefaultMaxStringLen+1)

	cases := []struct {
		name   string
		kvs    []kv
		want   *Event // nil when an error is expected
		reason Reason
		field  string
		only   string // "mp" or "js" when the case exists in one encoding
	}{
		{name: "typical", kvs: base, want: &testWant},
		{name: "key order does not matter", kvs: append(append([]kv(nil), base[3:]...), base[:3]...), want: &testWant},
		{name: "unknown fields are skipped", kvs: append(append([]kv{
			{"nested", map[string]any{"a": []any{1, "x", map[string]any{"ts": "no"}}}},
			{"list", []any{nil, true, 1.5}},
		}, base...), kv{"zzz", "tail"}), want: &testWant},
		{name: "unknown keys may repeat", kvs: append(append([]kv{{"x", 1}}, base...), kv{"x", 2}), want: &testWant},
		{name: "integer unit", kvs: mod("user_id", 987654321), want: wantWith(func(e *Event) { e.Unit = "987654321" })},
		{name: "negative integer unit", kvs: mod("user_id", -5), want: wantWith(func(e *Event) { e.Unit = "-5" })},
		{name: "uint64 unit", kvs: mod("user_id", uint64(math.MaxUint64)), want: wantWith(func(e *Event) { e.Unit = "18446744073709551615" })},
		{name: "bool and int group values", kvs: mod("device", true), want: wantWith(func(e *Event) { e.Group = MakeGroup("DE", "true") })},
		{name: "int group value", kvs: mod("country", 49), want: wantWith(func(e *Event) { e.Group = MakeGroup("49", "mobile") })},
		{name: "empty group value", kvs: mod("country", ""), want: wantWith(func(e *Event) { e.Group = MakeGroup("", "mobile") })},
		{name: "integer value", kvs: mod("amount", 7), want: wantWith(func(e *Event) { e.Value = 7 })},
		{name: "value outside bounds is kept (clamping is windows' job)", kvs: mod("amount", -1e6), want: wantWith(func(e *Event) { e.Value = -1e6 })},
		{name: "float32 value", kvs: mod("amount", float32(0.25)), want: wantWith(func(e *Event) { e.Value = 0.25 }), only: "mp"},
		{name: "timestamp ext 32", kvs: mod("ts", tsExt), want: wantWith(func(e *Event) { e.Time = 1714564736000 }), only: "mp"},
		{name: "timestamp ext 64", kvs: mod("ts", tsExt8), want: wantWith(func(e *Event) { e.Time = 1714564736000 }), only: "mp"},
		{name: "time.Time via msgpack/v5", kvs: mod("ts", time.UnixMilli(1714564800123).UTC()), want: &testWant, only: "mp"},
		{name: "escaped JSON strings", kvs: with(mod("country", rawJS(`"D\u0045"`)), "device", rawJS(`"mob\u00efle\ud83d\ude00\/\"\\\t"`)), only: "js",
			want: wantWith(func(e *Event) { e.Group = MakeGroup("DE", "mob\u00efle\U0001F600/\"\\\t") })},

		{name: "missing time", kvs: mod("ts", del), reason: ReasonMissingField, field: "ts"},
		{name: "null time", kvs: mod("ts", nil), reason: ReasonMissingField, field: "ts"},
		{name: "string time in unix_ms", kvs: mod("ts", "2024-05-01T12:00:00Z"), reason: ReasonWrongType, field: "ts"},
		{name: "bool time", kvs: mod("ts", true), reason: ReasonWrongType, field: "ts"},
		{name: "negative time", kvs: mod("ts", -1), reason: ReasonTimeOutOfRange, field: "ts"},
		{name: "time after 9999", kvs: mod("ts", int64(DefaultMaxTime+1)), reason: ReasonTimeOutOfRange, field: "ts"},
		{name: "uint64 time", kvs: mod("ts", uint64(math.MaxUint64)), reason: ReasonTimeOutOfRange, field: "ts"},
		{name: "NaN time", kvs: mod("ts", nanMP), reason: ReasonNaNOrInf, field: "ts", only: "mp"},
		{name: "bad timestamp ext", kvs: mod("ts", badNsec), reason: ReasonBadTime, field: "ts", only: "mp"},
		{name: "missing unit", kvs: mod("user_id", del), reason: ReasonMissingField, field: "user_id"},
		{name: "empty unit", kvs: mod("user_id", ""), reason: ReasonMissingField, field: "user_id"},
		{name: "float unit", kvs: mod("user_id", 1.5), reason: ReasonWrongType, field: "user_id"},
		{name: "map unit", kvs: mod("user_id", map[string]int{"a": 1}), reason: ReasonWrongType, field: "user_id"},
		{name: "bool unit", kvs: mod("user_id", false), reason: ReasonWrongType, field: "user_id"},
		{name: "bin unit", kvs: mod("user_id", []byte("u-1")), reason: ReasonWrongType, field: "user_id", only: "mp"},
		{name: "oversized unit", kvs: mod("user_id", long), reason: ReasonOversized, field: "user_id"},
		{name: "missing group field", kvs: mod("device", del), reason: ReasonMissingField, field: "device"},
		{name: "null group field", kvs: mod("device", nil), reason: ReasonMissingField, field: "device"},
		{name: "float group value", kvs: mod("country", 1.5), reason: ReasonWrongType, field: "country"},
		{name: "array group value", kvs: mod("country", []int{1}), reason: ReasonWrongType, field: "country"},
		{name: "invalid UTF-8 group value", kvs: mod("country", badUTF8), reason: ReasonInvalidUTF8, field: "country", only: "mp"},
		{name: "lone surrogate group value", kvs: mod("country", rawJS(`"\ud800x"`)), reason: ReasonInvalidUTF8, field: "country", only: "js"},
		{name: "oversized group value", kvs: mod("device", long), reason: ReasonOversized, field: "device"},
		{name: "unknown category", kvs: mod("page", "admin"), reason: ReasonUnknownCategory, field: "page"},
		{name: "numeric category not declared", kvs: mod("page", 3), reason: ReasonUnknownCategory, field: "page"},
		{name: "missing category", kvs: mod("page", del), reason: ReasonMissingField, field: "page"},
		{name: "float category", kvs: mod("page", 2.5), reason: ReasonWrongType, field: "page"},
		{name: "missing value", kvs: mod("amount", del), reason: ReasonMissingField, field: "amount"},
		{name: "string value", kvs: mod("amount", "12.5"), reason: ReasonWrongType, field: "amount"},
		{name: "NaN value", kvs: mod("amount", nanMP), reason: ReasonNaNOrInf, field: "amount", only: "mp"},
		{name: "Inf value", kvs: mod("amount", infMP), reason: ReasonNaNOrInf, field: "amount", only: "mp"},
		{name: "JSON value beyond float64", kvs: mod("amount", rawJS("1e400")), reason: ReasonNaNOrInf, field: "amount", only: "js"},
		{name: "duplicate configured field", kvs: append(append([]kv(nil), base...), kv{"amount", 1}), reason: ReasonDuplicateField},
		{name: "oversized key", kvs: append(append([]kv(nil), base...), kv{strings.Repeat("k", DefaultMaxKeyLen+1), 1}), reason: ReasonOversized},
		{name: "first problem in fixed order: time before unit", kvs: with(mod("user_id", 1.5), "ts", "x"), reason: ReasonWrongType, field: "ts"},
	}
	for _, c := range cases {
		for _, format := range []string{"mp", "js"} {
			if c.only != "" && c.only != format {
				continue
			}
			t.Run(c.name+"/"+format, func(t *testing.T) {
				var msg []byte
				if format == "mp" {
					msg = encMP(t, c.kvs...)
				} else {
					msg = encJS(t, c.kvs...)
				}
				writeCorpus(t, format, c.name, msg)
				d := mustDecoder(t, testConfig())
				var e Event
				err := d.Decode(msg, &e)
				if c.want != nil {
					if err != nil {
						t.Fatalf("Decode: %v", err)
					}
					if e != *c.want {
						t.Fatalf("Decode = %+v, want %+v", e, *c.want)
					}
					return
				}
				var se *Error
				if !errors.As(err, &se) || !errors.Is(err, ErrInvalidEvent) {
					t.Fatalf("Decode error = %v, want an *Error wrapping ErrInvalidEvent", err)
				}
				if se.Reason != c.reason || se.Field != c.field || ReasonOf(err) != c.reason {
					t.Fatalf("Decode error = %v (reason %v, field %q), want reason %v, field %q", err, se.Reason, se.Field, c.reason, c.field)
				}
			})
		}
	}
}

// writeCorpus writes msg to the seed corpus of FuzzDecodeMsgpack ("mp") or
// FuzzDecodeJSON ("js") when the tests run with -update.
func writeCorpus(t *testing.T, format, name string, msg []byte) {
	if !*update {
		return
	}
	target := map[string]string{"mp": "FuzzDecodeMsgpack", "js": "FuzzDecodeJSON"}[format]
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := "case-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", msg)
	if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeRawMessages covers problems of form, byte by byte.
func TestDecodeRawMessages(t *testing.T) {
	good := encMP(t, testEvent()...)
	cases := []struct {
		name   string
		msg    string
		reason Reason
	}{
		{"empty", "", ReasonMalformed},
		{"only whitespace", " \n", ReasonMalformed},
		{"msgpack array", "\x92\x01\x02", ReasonNotAMap},
		{"msgpack nil", "\xc0", ReasonNotAMap},
		{"msgpack reserved byte", "\xc1", ReasonMalformed},
		{"msgpack truncated map", string(good[:len(good)-1]), ReasonMalformed},
		{"msgpack trailing byte", string(good) + "\x00", ReasonTrailingData},
		{"msgpack two maps", string(good) + string(good), ReasonTrailingData},
		{"msgpack map32 claiming 2^32-1 entries", "\xdf\xff\xff\xff\xff\xa1a\x01", ReasonMalformed},
		{"msgpack str32 claiming 4 GiB key", "\x81\xdb\xff\xff\xff\xff", ReasonMalformed},
		{"msgpack deep nesting", "\x81\xa1x" + strings.Repeat("\x91", 100000) + "\xc0", ReasonMissingField},
		{"JSON array", "[1,2]", ReasonNotAMap},
		{"JSON string", `"ts"`, ReasonNotAMap},
		{"JSON number", "1714564800123", ReasonNotAMap},
		{"JSON truncated", `{"ts":1`, ReasonMalformed},
		{"JSON trailing comma", `{"ts":1,}`, ReasonMalformed},
		{"JSON single quotes", `{'ts':1}`, ReasonMalformed},
		{"JSON leading zero", `{"ts":01}`, ReasonMalformed},
		{"JSON bad escape", `{"x":"\q","ts":1}`, ReasonMalformed},
		{"JSON control char in string", "{\"x\":\"a\tb\"}", ReasonMalformed},
		{"JSON trailing garbage", `{"ts":1} x`, ReasonTrailingData},
		{"JSON two objects", `{}{}`, ReasonTrailingData},
		{"JSON trailing whitespace is fine", "{}\n", ReasonMissingField},
		{"JSON unclosed nested", `{"x":[{"a":1}`, ReasonMalformed},
		{"JSON mismatched brackets", `{"x":[1}`, ReasonMalformed},
		{"JSON deep nesting", `{"x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`, ReasonMissingField},
		{"JSON deep nesting unbalanced", `{"x":` + strings.Repeat("[", 100000) + `}`, ReasonMalformed},
	}
	d := mustDecoder(t, testConfig())
	for _, c := range cases {
		if len(c.msg) < 1000 {
			format := "js"
			if len(c.msg) > 0 && c.msg[0] >= 0x80 {
				format = "mp"
			}
			writeCorpus(t, format, c.name, []byte(c.msg))
		}
		var e Event
		err := d.Decode([]byte(c.msg), &e)
		if got := ReasonOf(err); got != c.reason {
			t.Errorf("%s: reason %v (%v), want %v", c.name, got, err, c.reason)
		}
	}
}

// TestDecodeTimeFormats checks each time format on each representation.
func TestDecodeTimeFormats(t *testing.T) {
	const ms = int64(1714564800123) // 2024-05-01T12:00:00.123Z
	cases := []struct {
		format TimeFormat
		v      any
		want   int64 // −1: expect reason
		reason Reason
	}{
		{TimeUnixMillis, ms, ms, 0},
		{TimeUnixMillis, float64(ms) + 0.4, ms, 0},
		{TimeUnixMillis, float64(ms) + 0.6, ms + 1, 0},
		{TimeUnixSeconds, int64(1714564800), 1714564800000, 0},
		{TimeUnixSeconds, 1714564800.123, ms, 0},
		{TimeUnixSeconds, 1714564800.1236, ms + 1, 0}, // nearest millisecond
		{TimeUnixSeconds, int64(math.MaxInt64 / 100), -1, ReasonTimeOutOfRange},
		{TimeUnixSeconds, 1e300, -1, ReasonTimeOutOfRange},
		{TimeUnixSeconds, "1714564800", -1, ReasonWrongType},
		{TimeRFC3339, "2024-05-01T12:00:00.123Z", ms, 0},
		{TimeRFC3339, "2024-05-01T14:00:00.1239+02:00", ms, 0}, // truncated
		{TimeRFC3339, "2024-05-01t12:00:00.123z", ms, 0},
		{TimeRFC3339, "2024-05-01 12:00:00Z", -1, ReasonBadTime},
		{TimeRFC3339, "2024-02-30T12:00:00Z", -1, ReasonBadTime},
		{TimeRFC3339, ms, -1, ReasonWrongType},
		{TimeAuto, ms, ms, 0},
		{TimeAuto, int64(1714564800), 1714564800000, 0},
		{TimeAuto, 1714564800.123, ms, 0},
		{TimeAuto, int64(AutoMillisFrom - 1), (AutoMillisFrom - 1) * 1000, 0},
		{TimeAuto, int64(AutoMillisFrom), AutoMillisFrom, 0},
		{TimeAuto, "2024-05-01T12:00:00.123Z", ms, 0},
		{TimeAuto, "yesterday", -1, ReasonBadTime},
	}
	for _, c := range cases {
		cfg := Config{TimeField: "t", TimeFormat: c.format}
		d := mustDecoder(t, cfg)
		for _, msg := range [][]byte{encMP(t, kv{"t", c.v}), encJS(t, kv{"t", c.v})} {
			var e Event
			err := d.Decode(msg, &e)
			switch {
			case c.want >= 0 && (err != nil || e.Time != c.want):
				t.Errorf("%s %v (%q): got %d, %v; want %d", c.format, c.v, msg, e.Time, err, c.want)
			case c.want < 0 && ReasonOf(err) != c.reason:
				t.Errorf("%s %v (%q): got %v, want %v", c.format, c.v, msg, err, c.reason)
			}
		}
	}
}

func TestDecodeTimeRange(t *testing.T) {
	cfg := Config{TimeField: "t", TimeFormat: TimeUnixMillis, MinTime: 1000, MaxTime: 2000}
	d := mustDecoder(t, cfg)
	for v, ok := range map[int64]bool{999: false, 1000: true, 2000: true, 2001: false} {
		var e Event
		err := d.Decode(encMP(t, kv{"t", rawMP(mpAppendInt(nil, v))}), &e)
		if (err == nil) != ok || (!ok && ReasonOf(err) != ReasonTimeOutOfRange) {
			t.Errorf("time %d: %v, want ok=%v", v, err, ok)
		}
	}
}

func TestDecodeNumericHistogram(t *testing.T) {
	cfg := Config{TimeField: "t", ValueField: "x", Lower: -10, Upper: 10,
		Histogram: &Histogram{Field: "x", Edges: []float64{0, 1, 10}}}
	d := mustDecoder(t, cfg)
	if n := d.NumBuckets(); n != 4 {
		t.Fatalf("NumBuckets = %d, want 4", n)
	}
	want := []string{"(-inf,0)", "[0,1)", "[1,10)", "[10,+inf)"}
	if got := cfg.Histogram.Labels(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Labels = %q, want %q", got, want)
	}
	for x, bucket := range map[float64]int{-1e300: 0, -0.5: 0, 0: 1, 0.999: 1, 1: 2, 9.99: 2, 10: 3, 1e300: 3} {
		var e Event
		if err := d.Decode(encMP(t, kv{"t", 1}, kv{"x", x}), &e); err != nil || e.Bucket != bucket || e.Value != x || !e.HasValue {
			t.Errorf("x=%g: %+v, %v; want bucket %d", x, e, err, bucket)
		}
	}
	var e Event
	if err := d.Decode(encMP(t, kv{"t", 1}, kv{"x", math.Inf(-1)}), &e); ReasonOf(err) != ReasonNaNOrInf {
		t.Errorf("x=-Inf: %v, want nan_or_inf", err)
	}
}

func TestDecodeOtherBucket(t *testing.T) {
	cfg := Config{TimeField: "t", Histogram: &Histogram{Field: "c", Categories: []string{"a", "7"}, Other: true}}
	d := mustDecoder(t, cfg)
	for v, bucket := range map[any]int{"a": 0, "7": 1, 7: 1, "b": 2, 8: 2} {
		var e Event
		if err := d.Decode(encJS(t, kv{"t", 1}, kv{"c", v}), &e); err != nil || e.Bucket != bucket {
			t.Errorf("c=%v: %+v, %v; want bucket %d", v, e, err, bucket)
		}
	}
	if got := cfg.Histogram.Labels(); strings.Join(got, ",") != "a,7,other" {
		t.Errorf("Labels = %q", got)
	}
}

func TestDecodeOptionalValueAndNoUnit(t *testing.T) {
	cfg := Config{TimeField: "t", TimeFormat: TimeUnixMillis, ValueField: "v", Lower: 0, Upper: 1, ValueOptional: true}
	d := mustDecoder(t, cfg)
	for _, c := range []struct {
		kvs  []kv
		want Event
	}{
		{[]kv{{"t", 5}}, Event{Time: 5, Bucket: -1}},
		{[]kv{{"t", 5}, {"v", nil}}, Event{Time: 5, Bucket: -1}},
		{[]kv{{"t", 5}, {"v", 0.5}}, Event{Time: 5, Bucket: -1, Value: 0.5, HasValue: true}},
	} {
		var e Event
		if err := d.Decode(encMP(t, c.kvs...), &e); err != nil || e != c.want {
			t.Errorf("%v: %+v, %v; want %+v", c.kvs, e, err, c.want)
		}
	}
}

func TestDecodeFormatPinned(t *testing.T) {
	cfg := Config{TimeField: "t", Format: FormatMsgpack}
	d := mustDecoder(t, cfg)
	var e Event
	if err := d.Decode([]byte(`{"t":5}`), &e); ReasonOf(err) != ReasonNotAMap {
		t.Errorf("JSON into msgpack decoder: %v, want not_a_map", err)
	}
	cfg.Format = FormatJSON
	d = mustDecoder(t, cfg)
	if err := d.Decode(encMP(t, kv{"t", 5}), &e); ReasonOf(err) != ReasonMalformed {
		t.Errorf("msgpack into JSON decoder: %v, want malformed", err)
	}
}

// TestDecodeSharedField: one field in two roles (numeric histogram of the
// value), and a field in a role plus a group-by.
func TestDecodeSharedField(t *testing.T) {
	cfg := Config{TimeField: "t", TimeFormat: TimeUnixMillis, UnitField: "u", GroupBy: []string{"u"}, ValueField: "v", Lower: 0, Upper: 1,
		Histogram: &Histogram{Field: "v", Edges: []float64{0.5}}}
	d := mustDecoder(t, cfg)
	var e Event
	if err := d.Decode(encMP(t, kv{"u", "x"}, kv{"t", 1}, kv{"v", 0.75}), &e); err != nil {
		t.Fatal(err)
	}
	if want := (Event{Time: 1, Unit: "x", Group: MakeGroup("x"), Bucket: 1, Value: 0.75, HasValue: true}); e != want {
		t.Errorf("got %+v, want %+v", e, want)
	}
}

// TestErrorHasNoContent checks that errors carry the configured field name
// but no part of the message.
func TestErrorHasNoContent(t *testing.T) {
	d := mustDecoder(t, testConfig())
	secret := "SECRET-4711"
	for _, kvs := range [][]kv{
		with(testEvent(), "page", secret),
		with(testEvent(), "user_id", strings.Repeat(secret, 200)),
		with(testEvent(), secret+strings.Repeat("k", 300), 1),
		with(testEvent(), "amount", secret),
	} {
		var e Event
		err := d.Decode(encMP(t, kvs...), &e)
		if err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error %q: want an error without message content", err)
		}
	}
}

func TestGroupValues(t *testing.T) {
	for _, vals := range [][]string{nil, {""}, {"", ""}, {"a", "b|c"}, {strings.Repeat("z", 300), "é"}} {
		g := MakeGroup(vals...)
		got, err := GroupValues(g)
		if err != nil || strings.Join(got, "\x00") != strings.Join(vals, "\x00") || len(got) != len(vals) {
			t.Errorf("GroupValues(MakeGroup(%q)) = %q, %v", vals, got, err)
		}
	}
	if MakeGroup() == MakeGroup("") {
		t.Error("MakeGroup() == MakeGroup(\"\")")
	}
	for _, bad := range []string{"\x05ab", "\x80", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"} {
		if _, err := GroupValues(bad); !errors.Is(err, ErrInvalidGroup) {
			t.Errorf("GroupValues(%q) error = %v, want ErrInvalidGroup", bad, err)
		}
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := Reason(0); int(r) < NumReasons; r++ {
		s := r.String()
		if s == "" || seen[s] || strings.ToLower(s) != s || strings.ContainsAny(s, " -") {
			t.Errorf("reason %d has name %q: want unique snake_case", r, s)
		}
		seen[s] = true
	}
	if got := Reason(NumReasons).String(); got != "reason(15)" {
		t.Errorf("out-of-range reason: %q", got)
	}
	if ReasonOf(nil) != ReasonNone || ReasonOf(errors.New("x")) != ReasonNone {
		t.Error("ReasonOf of a foreign error should be ReasonNone")
	}
}

// TestDecodeAllocs: a decode of a seen group allocates only the unit.
func TestDecodeAllocs(t *testing.T) {
	d := mustDecoder(t, testConfig())
	extra := append(testEvent(), kv{"x", []any{map[string]any{"a": []any{1.5, "s", nil}}, "t\u00e9xt"}})
	for name, msg := range map[string][]byte{
		"msgpack": encMP(t, testEvent()...), "json": encJS(t, testEvent()...),
		"msgpack+unknown": encMP(t, extra...), "json+unknown": encJS(t, extra...),
		"json escapes": encJS(t, with(testEvent(), "country", rawJS(`"D\u0045"`))...),
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

// TestRFC3339AgainstTimePackage compares parseRFC3339 with time.Parse on
// 20000 pseudo-random date-times (fixed seed) spread over years 0–9999,
// every offset form and 0–12 fraction digits. Deterministic: no false
// failures.
func TestRFC3339AgainstTimePackage(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	lo, hi := int64(minRepresentableTime/1000), int64(DefaultMaxTime/1000)
	for i := 0; i < 20000; i++ {
		sec := lo + rng.Int64N(hi-lo)
		offset := (rng.IntN(2*1439+1) - 1439) * 60 // −23:59 … +23:59
		tm := time.Unix(sec, rng.Int64N(1e9)).In(time.FixedZone("", offset))
		if tm.Year() < 0 || tm.Year() > 9999 {
			continue
		}
		digits := rng.IntN(13)
		layout := "2006-01-02T15:04:05"
		s := tm.Format(layout)
		if digits > 0 {
			s += "." + fmt.Sprintf("%09d", tm.Nanosecond()) + strings.Repeat("7", max(0, digits-9))
			s = s[:len(layout)+1+digits]
		}
		s += tm.Format("Z07:00")
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("time.Parse(%q): %v", s, err)
		}
		got, ok := parseRFC3339([]byte(s))
		if !ok || got != want.UnixMilli() {
			t.Fatalf("parseRFC3339(%q) = %d, %v; time.Parse gives %d", s, got, ok, want.UnixMilli())
		}
	}
}
