package schema

import (
	"errors"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"
)

// The fuzz targets use testConfig, a numeric-histogram config and
// testConfig with several measures and histograms (an optional measure of
// its own field, one sharing the value field, a categorical histogram of a
// group-by field and a numeric one of the value field), with small length
// limits so that the fuzzer reaches the oversized paths.
func fuzzConfigs() []Config {
	a := fuzzLimits(testConfig())
	b := Config{
		TimeField: "t", TimeFormat: TimeRFC3339, GroupBy: []string{"g"}, ValueField: "v", Lower: -1, Upper: 1,
		ValueOptional: true, Histogram: &Histogram{Field: "v", Edges: []float64{-0.5, 0, 0.5}},
		MinTime: -1e12, MaxTime: 4e12, MaxKeyLen: 8, MaxStringLen: 40,
	}
	c := fuzzLimits(testConfig())
	c.Measures = []Measure{{Name: "qty", Field: "qty", Lower: 0, Upper: 10, Optional: true}, {Name: "amount2", Field: "amount", Lower: -5, Upper: 5}}
	c.Histograms = []NamedHistogram{
		{Name: "dev", Histogram: Histogram{Field: "device", Categories: []string{"phone", "desktop"}, Other: true}},
		{Name: "ab", Histogram: Histogram{Field: "amount", Edges: []float64{10, 50}}},
	}
	return []Config{a, b, c}
}

// fuzzLimits returns c with small length limits, so that the fuzzer
// reaches the oversized paths, and every time format accepted.
func fuzzLimits(c Config) Config {
	c.MaxKeyLen, c.MaxStringLen = 16, 24
	c.TimeFormat = TimeAuto
	return c
}

// checkResult asserts the decoder's contract for one message: an error is
// an *Error with a known reason and a configured (or empty) field name; an
// event satisfies every invariant of Event.
func checkResult(t *testing.T, d *Decoder, e *Event, err error) {
	t.Helper()
	cfg := d.Config()
	if err != nil {
		var se *Error
		if !errors.As(err, &se) || !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("error %v is not an *Error wrapping ErrInvalidEvent", err)
		}
		if se.Reason == ReasonNone || int(se.Reason) >= NumReasons {
			t.Fatalf("error %v has reason %d", err, se.Reason)
		}
		if se.Field != "" && fieldIndex(d, se.Field) < 0 {
			t.Fatalf("error %v names a field that is not configured", err)
		}
		return
	}
	if e.Time < cfg.MinTime || e.Time > cfg.MaxTime {
		t.Fatalf("time %d outside [%d, %d]", e.Time, cfg.MinTime, cfg.MaxTime)
	}
	if (cfg.UnitField != "") != (e.Unit != "") {
		t.Fatalf("unit %q with unit field %q", e.Unit, cfg.UnitField)
	}
	if len(e.Unit) > 20+cfg.MaxStringLen || !utf8.ValidString(e.Unit) { // 20: digits of an integer unit
		t.Fatalf("unit of length %d or invalid UTF-8", len(e.Unit))
	}
	vals, gerr := GroupValues(e.Group)
	if gerr != nil || len(vals) != len(cfg.GroupBy) || MakeGroup(vals...) != e.Group {
		t.Fatalf("group %q: values %q, %v", e.Group, vals, gerr)
	}
	for _, v := range vals {
		if len(v) > max(20, cfg.MaxStringLen) || !utf8.ValidString(v) {
			t.Fatalf("group value of length %d or invalid UTF-8", len(v))
		}
	}
	if n := d.NumBuckets(); (n == 0 && e.Bucket != -1) || (n > 0 && (e.Bucket < 0 || e.Bucket >= n)) {
		t.Fatalf("bucket %d with %d buckets", e.Bucket, n)
	}
	if e.HasValue && (math.IsNaN(e.Value) || math.IsInf(e.Value, 0)) {
		t.Fatalf("value %g", e.Value)
	}
	if e.HasValue != (cfg.ValueField != "") && !cfg.ValueOptional {
		t.Fatalf("HasValue %v with value field %q", e.HasValue, cfg.ValueField)
	}
	checkExtra(t, cfg, e)
}

// checkExtra asserts the invariants of e.Extra: present exactly with
// extra measures or histograms, one value per measure (finite, present
// unless optional) and one bucket in range per histogram.
func checkExtra(t *testing.T, cfg Config, e *Event) {
	t.Helper()
	if (len(cfg.Measures)+len(cfg.Histograms) > 0) != (e.Extra != nil) {
		t.Fatalf("extra %+v with %d measures and %d histograms", e.Extra, len(cfg.Measures), len(cfg.Histograms))
	}
	if e.Extra == nil {
		return
	}
	if len(e.Extra.Measures) != len(cfg.Measures) || len(e.Extra.Buckets) != len(cfg.Histograms) {
		t.Fatalf("extra %+v: want %d measures, %d buckets", e.Extra, len(cfg.Measures), len(cfg.Histograms))
	}
	for i, m := range e.Extra.Measures {
		if (!m.Has && !cfg.Measures[i].Optional) || (m.Has && (math.IsNaN(m.Value) || math.IsInf(m.Value, 0))) {
			t.Fatalf("measure %d: %+v", i, m)
		}
	}
	for i, b := range e.Extra.Buckets {
		if b < 0 || b >= cfg.Histograms[i].NumBuckets() {
			t.Fatalf("histogram %d: bucket %d of %d", i, b, cfg.Histograms[i].NumBuckets())
		}
	}
}

// phase1 reports whether a reason comes from the first (syntax) phase,
// whose order may differ between implementations on malformed input.
func phase1(r Reason) bool {
	return r == ReasonMalformed || r == ReasonOversized || r == ReasonDuplicateField
}

// compareRef decodes data with d and with the reference first phase plus
// d's own second phase, and requires the same outcome. The reference has
// filled d.vals; they are kept aside while Decode runs.
func compareRef(t *testing.T, d *Decoder, data []byte, refReason Reason) {
	t.Helper()
	refVals := slices.Clone(d.vals)
	var got Event
	err := d.Decode(data, &got)
	checkResult(t, d, &got, err)
	copy(d.vals, refVals)
	var want Event
	var werr error
	if refReason != ReasonNone {
		werr = &Error{Reason: refReason}
	} else {
		werr = d.build(&want)
	}
	gr, wr := ReasonOf(err), ReasonOf(werr)
	switch {
	case (gr == ReasonMalformed || wr == ReasonMalformed) && phase1(gr) && phase1(wr):
		// Both saw bad syntax, perhaps after different first problems.
	case err == nil && werr == nil:
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode = %+v, reference %+v", got, want)
		}
	case err == nil || werr == nil || err.Error() != werr.Error():
		t.Fatalf("Decode error %v, reference %v", err, werr)
	}
}

func fuzzSeeds(f *testing.F, enc func(testing.TB, ...kv) []byte) {
	base := testEvent()
	f.Add(enc(f, base...))
	f.Add(enc(f, with(base, "amount", del)...))
	f.Add(enc(f, with(base, "user_id", 42)...))
	f.Add(enc(f, with(with(base, "ts", "2024-05-01T12:00:00.5+01:00"), "x", []any{map[string]any{"a": nil}, 1.5, true})...))
	f.Add(enc(f, kv{"t", "2024-05-01T12:00:00Z"}, kv{"g", "x"}, kv{"v", 0.25}))
	f.Add(enc(f, kv{"t", "1969-12-31T23:59:59.999Z"}, kv{"g", 7}, kv{"v", nil}))
}

// FuzzDecodeMsgpack: Decode never panics, returns a valid event or an
// error with a known reason, and agrees with a reference first phase built
// on msgpack/v5's decoder.
func FuzzDecodeMsgpack(f *testing.F) {
	fuzzSeeds(f, encMP)
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x81, 0xa2, 't', 's', 0xd7, 0xff, 0, 0, 0, 0, 0x66, 0x32, 0x2e, 0x80})
	fuzzRef(f, fuzzConfigs(), FormatMsgpack)
}

// fuzzRef runs the fuzz function of the decoder targets: under every
// config of cfgs, in format, Decode agrees with the reference first phase
// of that format (reference_test.go).
func fuzzRef(f *testing.F, cfgs []Config, format Format) {
	var decs []*Decoder
	for _, cfg := range cfgs {
		cfg.Format = format
		decs = append(decs, mustDecoder(f, cfg))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range decs {
			if format == FormatMsgpack {
				compareRef(t, d, data, refScanMsgpack(d, data))
				continue
			}
			ref, uncertain := refScanJSON(d, data)
			if uncertain {
				var e Event
				err := d.Decode(data, &e)
				checkResult(t, d, &e, err)
				continue
			}
			compareRef(t, d, data, ref)
		}
	})
}

// FuzzDecodeJSON: as FuzzDecodeMsgpack, with encoding/json as reference.
func FuzzDecodeJSON(f *testing.F) {
	fuzzSeeds(f, encJS)
	for _, s := range []string{`{"ts":1e400}`, `{"country":"\ud800\udc00"}`, `[{"a":[1,{}]}]`, ` {"ts" : -0 } `, `{"ts":1}{}`} {
		f.Add([]byte(s))
	}
	fuzzRef(f, fuzzConfigs(), FormatJSON)
}

// FuzzDecodeEquivalent: the msgpack and JSON encodings of the same fields,
// in the same order, decode to the same event or the same error.
func FuzzDecodeEquivalent(f *testing.F) {
	f.Add(int64(1714564800123), "u-1", int64(0), "DE", "mobile", "checkout", 12.5, uint8(0))
	f.Add(int64(1714564800), "", int64(-7), "", "x", "home", math.Copysign(0, -1), uint8(0xff))
	f.Add(int64(-1), "u", int64(1), "DE", "é", "other", 1e308, uint8(0x55))
	d := mustDecoder(f, fuzzConfigs()[0])
	f.Fuzz(func(t *testing.T, ts int64, unit string, unitInt int64, country, device, page string, amount float64, mask uint8) {
		if math.IsNaN(amount) || math.IsInf(amount, 0) {
			return // JSON cannot write these
		}
		for _, s := range []string{unit, country, device, page} {
			if !utf8.ValidString(s) {
				return // encoding/json would rewrite the string
			}
		}
		kvs := []kv{{"ts", ts}, {"user_id", unit}, {"country", country}, {"device", device}, {"page", page}, {"amount", amount}}
		if mask&1 != 0 {
			kvs[1].v = unitInt
		}
		if mask&2 != 0 {
			kvs[3].v = unitInt
		}
		if mask&4 != 0 {
			kvs[2], kvs[5] = kvs[5], kvs[2]
		}
		if mask&8 != 0 {
			kvs = append(kvs, kv{"extra", []any{country, map[string]any{device: page}}})
		}
		for bit, k := range []string{"ts", "user_id", "page", "amount"} {
			if mask&(16<<bit) != 0 {
				kvs = with(kvs, k, nil)
			}
		}
		var em, ej Event
		errM := d.Decode(encMP(t, kvs...), &em)
		errJ := d.Decode(encJS(t, kvs...), &ej)
		checkResult(t, d, &em, errM)
		if (errM == nil) != (errJ == nil) || (errM != nil && errM.Error() != errJ.Error()) || em != ej {
			t.Fatalf("msgpack: %+v, %v; JSON: %+v, %v", em, errM, ej, errJ)
		}
	})
}

// FuzzRFC3339 compares parseRFC3339 with time.Parse: whatever we accept,
// time.Parse accepts (after upper-casing 'T' and 'Z', which RFC 3339
// allows in lower case) with the same instant; whatever time.Parse accepts
// we accept too if it has RFC 3339's shape, except offsets ≥ 24h or with
// minutes ≥ 60 (time.Parse extensions).
func FuzzRFC3339(f *testing.F) {
	for _, s := range []string{"2024-05-01T12:00:00Z", "2024-02-29t23:59:59.999999999-07:30", "0000-01-01T00:00:00+23:59",
		"9999-12-31T23:59:59.9999999999Z", "1969-12-31T23:59:59.9991Z", "2023-02-29T00:00:00Z", "2024-05-01T12:00:00,5Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseRFC3339([]byte(s))
		canon := []byte(s)
		if len(canon) > 10 && canon[10] == 't' {
			canon[10] = 'T'
		}
		if n := len(canon); n > 0 && canon[n-1] == 'z' {
			canon[n-1] = 'Z'
		}
		tm, err := time.Parse(time.RFC3339Nano, string(canon))
		if ok {
			if err != nil || tm.UnixMilli() != got {
				t.Fatalf("%q: ours %d; time.Parse %d, %v", s, got, tm.UnixMilli(), err)
			}
			return
		}
		if err == nil && rfc3339Shape.MatchString(s) && !goOffsetExtension(s) {
			t.Fatalf("%q: we reject, time.Parse gives %v", s, tm)
		}
	})
}

// rfc3339Shape is RFC 3339's date-time grammar (§5.6) without the range
// checks: time.Parse also accepts one-digit hours and ',' fractions.
var rfc3339Shape = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$`)

// goOffsetExtension reports an offset that time.Parse accepts but RFC 3339
// does not (hours above 23 or minutes above 59).
func goOffsetExtension(s string) bool {
	if len(s) < 6 || (s[len(s)-6] != '+' && s[len(s)-6] != '-') {
		return false
	}
	h, _ := strconv.Atoi(s[len(s)-5 : len(s)-3])
	m, _ := strconv.Atoi(s[len(s)-2:])
	return h > 23 || m > 59
}
