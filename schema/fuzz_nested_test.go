package schema

import "testing"

// nestedFuzzConfigs are the configurations of the nested fuzz targets:
// nestedConfig with small length limits (so that the fuzzer reaches the
// oversized paths), and one with one-letter keys (so that it finds them)
// where paths share maps at two levels, a flat key with a dot sits beside
// the nested path it spells, and the value is optional.
func nestedFuzzConfigs() []Config {
	a := fuzzLimits(nestedConfig())
	b := Config{
		TimeField: "t", TimeFormat: TimeAuto, UnitField: "v.u", GroupBy: []string{"g.h", `g\.h`},
		ValueField: "v.w.x", Lower: -1, Upper: 1, ValueOptional: true,
		Histogram: &Histogram{Field: "v.w.y", Categories: []string{"a", "b"}, Other: true},
		MinTime:   -1e12, MaxTime: 4e12, MaxKeyLen: 8, MaxStringLen: 40,
	}
	return []Config{a, b}
}

// nestedFuzzSeeds adds the nested cases and a few events of the second
// configuration, encoded with enc.
func nestedFuzzSeeds(f *testing.F, format string) {
	for _, c := range nestedCases() {
		if c.only == "" || c.only == format {
			f.Add(encode(f, format, c.kvs))
		}
	}
	for _, kvs := range [][]kv{
		{{"t", 1714564800}, {"g", obj{{"h", "x"}}}, {"g.h", 7}, {"v", obj{{"u", 1}, {"w", obj{{"x", 0.5}, {"y", "a"}}}}}},
		{{"v", obj{{"w", nil}, {"u", "u"}}}, {"t", "2024-05-01T12:00:00Z"}, {"g.h", true}, {"g", obj{{"h", nil}}}},
		{{"v", obj{{"w", obj{{"y", "c"}}}, {"u", "u"}, {"w", 1}}}, {"t", 0}, {"g", []any{obj{{"h", 1}}}}},
	} {
		f.Add(encode(f, format, kvs))
	}
}

// FuzzDecodeNestedMsgpack: with nested paths, Decode never panics, returns
// a valid event or an error with a known reason, and agrees with the
// reference first phase (reference_test.go) built on msgpack/v5.
func FuzzDecodeNestedMsgpack(f *testing.F) {
	nestedFuzzSeeds(f, "mp")
	fuzzRef(f, nestedFuzzConfigs(), FormatMsgpack)
}

// FuzzDecodeNestedJSON: as FuzzDecodeNestedMsgpack, with encoding/json as
// reference.
func FuzzDecodeNestedJSON(f *testing.F) {
	nestedFuzzSeeds(f, "js")
	fuzzRef(f, nestedFuzzConfigs(), FormatJSON)
}
