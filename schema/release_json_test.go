package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// jsonGoldens are the releases whose JSON records are checked in as
// testdata/json_<name>.txt (and, with the Connect envelope,
// json_connect_<name>.txt): a histogram (labelled ints), a mean (floats,
// a derived series, no group) and a count with a running series.
func jsonGoldens() map[string]*Release {
	g := goldenReleases()
	return map[string]*Release{
		"histogram":     g["release_histogram"],
		"mean":          g["release_mean"],
		"count_running": runningRelease(),
	}
}

// renderRecords is the golden file text of recs: one line per record,
// the key, a tab and the value (keys hold no tab: ReleaseKey escapes
// control bytes).
func renderRecords(recs []Record) []byte {
	var b bytes.Buffer
	for _, r := range recs {
		b.WriteString(r.Key)
		b.WriteByte('\t')
		b.Write(r.Value)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestReleaseJSONGolden: the JSON records of each golden release equal
// the checked-in files (run with -update to rewrite), with and without
// the Connect envelope; every record is valid JSON that encoding/json
// reads to the same field values, and decodes back to its release's value.
func TestReleaseJSONGolden(t *testing.T) {
	for name, r := range jsonGoldens() {
		for _, opt := range []JSONOptions{{}, {ConnectSchema: true}} {
			file := "json_" + name + ".txt"
			if opt.ConnectSchema {
				file = "json_connect_" + name + ".txt"
			}
			t.Run(file, func(t *testing.T) {
				recs, err := ReleaseRecords(r, opt)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join("testdata", file)
				if *update {
					if err := os.WriteFile(path, renderRecords(recs), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				golden, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create)", err)
				}
				if !bytes.Equal(renderRecords(recs), golden) {
					t.Errorf("records differ from %s (run with -update if the change is intended)", path)
				}
				again, _ := ReleaseRecords(r, opt)
				if !bytes.Equal(renderRecords(again), golden) {
					t.Errorf("a second encoding differs")
				}
				checkRecords(t, r, recs, opt)
			})
		}
	}
}

// checkRecords checks that recs are r's values, one each, in series order,
// readable by encoding/json and by DecodeReleaseRecord.
func checkRecords(t *testing.T, r *Release, recs []Record, opt JSONOptions) {
	t.Helper()
	n := 0
	for si := range r.Series {
		s := &r.Series[si]
		for i := 0; i < s.Len(); i++ {
			if n >= len(recs) {
				t.Fatalf("%d records, fewer than the values", len(recs))
			}
			rec := recs[n]
			n++
			if want := ValueKey(r.Key(), s.Name, i); rec.Key != want {
				t.Errorf("key %q, want %q", rec.Key, want)
			}
			var doc map[string]any
			if err := json.Unmarshal(rec.Value, &doc); err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			if opt.ConnectSchema {
				checkEnvelope(t, doc)
				doc, _ = doc["payload"].(map[string]any)
			}
			if doc["value"] != s.Value(i) || doc["ci_lo"] != s.Lo[i] || doc["key"] != rec.Key || doc["series"] != s.Name {
				t.Errorf("encoding/json reads value %v lo %v key %v series %v", doc["value"], doc["ci_lo"], doc["key"], doc["series"])
			}
			for _, g := range r.Group {
				if doc[GroupFieldPrefix+g.Name] != g.Value {
					t.Errorf("group field %s = %v, want %q", g.Name, doc[GroupFieldPrefix+g.Name], g.Value)
				}
			}
			d, err := DecodeReleaseRecord(rec.Value)
			if err != nil {
				t.Fatalf("DecodeReleaseRecord: %v", err)
			}
			if d.Value != s.Value(i) || d.Lo != s.Lo[i] || d.Hi != s.Hi[i] || d.WindowEnd != r.WindowEnd ||
				d.ReleaseKey != r.Key() || d.Scale != s.Scale || d.Windows != s.Windows || d.Spent != r.Spent || len(d.Group) != len(r.Group) {
				t.Errorf("DecodeReleaseRecord = %+v", d)
			}
		}
	}
	if n != len(recs) {
		t.Errorf("%d records for %d values", len(recs), n)
	}
}

// checkEnvelope checks that doc is a Connect envelope whose struct schema
// names exactly the payload's fields, in the payload's order is checked by
// the golden file.
func checkEnvelope(t *testing.T, doc map[string]any) {
	t.Helper()
	sch, _ := doc["schema"].(map[string]any)
	payload, _ := doc["payload"].(map[string]any)
	if len(doc) != 2 || sch == nil || payload == nil || sch["type"] != "struct" {
		t.Fatalf("not a Connect envelope: %v", doc)
	}
	fields, _ := sch["fields"].([]any)
	if len(fields) != len(payload) {
		t.Errorf("schema has %d fields, payload %d", len(fields), len(payload))
	}
	for _, f := range fields {
		m, _ := f.(map[string]any)
		v, ok := payload[m["field"].(string)]
		if !ok {
			t.Errorf("schema field %v not in the payload", m["field"])
			continue
		}
		switch m["type"] {
		case "string":
			_, ok = v.(string)
		case "int64", "double": // JsonConverter's names of Connect's INT64 and FLOAT64
			_, ok = v.(float64)
		case "boolean":
			_, ok = v.(bool)
		default:
			ok = false
		}
		if !ok {
			t.Errorf("field %v: value %v does not have type %v", m["field"], v, m["type"])
		}
	}
}

// TestJSONFloatFormat: floats are written in the shortest form that reads
// back exactly (strconv 'g' −1) and are valid JSON numbers. Fixed cases,
// then 10000 random float64 bit patterns (fixed seed; non-finite skipped):
// the property is exact, so the test has no false failures.
func TestJSONFloatFormat(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0", 2: "2", 2.5: "2.5", 0.1: "0.1", -1250.75: "-1250.75", 1e21: "1e+21", 1e-7: "1e-07",
		math.Sqrt2: "1.4142135623730951", math.MaxFloat64: "1.7976931348623157e+308", 5e-324: "5e-324",
	} {
		if got := string(appendJSONFloat(nil, f)); got != want {
			t.Errorf("appendJSONFloat(%v) = %s, want %s", f, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(22, 1))
	for range 10000 {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		b := appendJSONFloat(nil, f)
		var back float64
		if err := json.Unmarshal(b, &back); err != nil || back != f {
			t.Fatalf("%s: encoding/json reads %v (%v), want %v", b, back, err, f)
		}
	}
}

// TestJSONStrings: group values, labels and notes with quotes,
// backslashes, control bytes and non-ASCII text come back unchanged
// through encoding/json and DecodeReleaseRecord.
func TestJSONStrings(t *testing.T) {
	r := *jsonGoldens()["histogram"]
	odd := "a\"b\\c\x00\x1f\t\n|%é€𝄞</>&"
	r.Group = []GroupValue{{"country", odd}, {"dev\"ice", "x"}}
	r.Note = odd
	r.Series = []Series{r.Series[0]}
	r.Series[0].Labels = []string{odd, "b", "c", "d"}
	recs, err := ReleaseRecords(&r, JSONOptions{ConnectSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Payload map[string]any `json:"payload"`
	}
	if err := json.Unmarshal(recs[0].Value, &doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Payload
	if p["group_country"] != odd || p["group_dev\"ice"] != "x" || p["label"] != odd || p["note"] != odd {
		t.Errorf("encoding/json reads %q %q %q %q", p["group_country"], p["group_dev\"ice"], p["label"], p["note"])
	}
	d, err := DecodeReleaseRecord(recs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if d.Group[0] != r.Group[0] || d.Group[1] != r.Group[1] || d.Label != odd || d.Note != odd {
		t.Errorf("DecodeReleaseRecord = %+v", d)
	}
}

// TestDecodeReleaseRecordStrict: a changed, missing, repeated or
// mistyped field, a key that does not match, trailing data and another
// version are rejected (ErrInvalidRelease, ErrVersion); an unknown field
// is skipped.
func TestDecodeReleaseRecordStrict(t *testing.T) {
	recs, err := ReleaseRecords(jsonGoldens()["histogram"], JSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := string(recs[1].Value)
	if _, err := DecodeReleaseRecord([]byte(good)); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeReleaseRecord([]byte(strings.Replace(good, `{`, `{"later":[1,{"x":2}],`, 1))); err != nil {
		t.Errorf("unknown field: %v", err)
	}
	for name, c := range map[string]struct{ old, new string }{
		"missing":         {`"instance":"dpstream-0",`, ``},
		"twice":           {`"index":1,`, `"index":1,"index":1,`},
		"mistyped":        {`"index":1`, `"index":"1"`},
		"index":           {`"index":1`, `"index":2`},
		"group value":     {`"group_country":"DE"`, `"group_country":"FR"`},
		"window text":     {`"window_end":"2024-05-01T13:00:00.000Z"`, `"window_end":"2024-05-01T13:00:00Z"`},
		"float int value": {`"value":311`, `"value":311.5`},
		"value type":      {`"value_type":"int"`, `"value_type":"real"`},
		"trailing":        {`"note":`, `"note":"x"}{"note":`},
		"not an object":   {good, `[1]`},
	} {
		bad := strings.Replace(good, c.old, c.new, 1)
		if bad == good {
			t.Fatalf("%s: %q not in the record", name, c.old)
		}
		if _, err := DecodeReleaseRecord([]byte(bad)); !errors.Is(err, ErrInvalidRelease) {
			t.Errorf("%s: err = %v, want ErrInvalidRelease", name, err)
		}
	}
	v2 := strings.Replace(good, `"schema_version":1`, `"schema_version":`+strconv.Itoa(JSONRecordVersion+1), 1)
	if _, err := DecodeReleaseRecord([]byte(v2)); !errors.Is(err, ErrVersion) {
		t.Errorf("version: err = %v, want ErrVersion", err)
	}
}

// FuzzDecodeReleaseRecord: DecodeReleaseRecord never panics, every error
// wraps ErrInvalidRelease or ErrVersion, and a record it accepts has keys
// consistent with its fields.
func FuzzDecodeReleaseRecord(f *testing.F) {
	for _, r := range jsonGoldens() {
		for _, opt := range []JSONOptions{{}, {ConnectSchema: true}} {
			recs, _ := ReleaseRecords(r, opt)
			f.Add(recs[len(recs)-1].Value)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReleaseRecord(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidRelease) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		vals := make([]string, len(r.Group))
		for i, g := range r.Group {
			vals[i] = g.Value
		}
		if r.ReleaseKey != ReleaseKey(r.ReleaseID, r.Aggregate, vals...) || r.Key != ValueKey(r.ReleaseKey, r.Series, int(r.Index)) {
			t.Fatalf("accepted a record with inconsistent keys: %+v", r)
		}
	})
}
