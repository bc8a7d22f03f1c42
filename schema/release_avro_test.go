package schema

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// testAvroID is the schema id the golden Avro records are framed with.
const testAvroID = 0x01020304

// groupNames returns r's group field names, in order.
func groupNames(r *Release) []string {
	var gs []string
	for _, g := range r.Group {
		gs = append(gs, g.Name)
	}
	return gs
}

// comparable returns rec without the decoder's texts, which differ
// between two spellings of one number.
func comparable(rec ReleaseRecord) ReleaseRecord {
	rec.valueNumber, rec.windowStartText, rec.windowEndText = "", "", ""
	return rec
}

// TestReleaseAvroGolden: the framed Avro records of each golden release
// (the JSON goldens' releases) equal the checked-in testdata/avro_<name>.txt
// (key, tab, hex value; run with -update to rewrite), and so does the
// writer schema of the histogram's group fields
// (testdata/avro_release_schema.avsc); a second encoding is identical;
// every record decodes (DecodeReleaseAvro, with the schema) to what its
// JSON record decodes to, and its head (DecodeReleaseAvroHead) without
// the schema.
func TestReleaseAvroGolden(t *testing.T) {
	for name, r := range jsonGoldens() {
		t.Run(name, func(t *testing.T) {
			enc, err := NewAvroReleases(groupNames(r))
			if err != nil {
				t.Fatal(err)
			}
			recs, err := enc.Records(r, testAvroID)
			if err != nil {
				t.Fatal(err)
			}
			var text bytes.Buffer
			for _, rec := range recs {
				text.WriteString(rec.Key + "\t" + hex.EncodeToString(rec.Value) + "\n")
			}
			files := map[string][]byte{"avro_" + name + ".txt": text.Bytes()}
			if name == "histogram" {
				files["avro_release_schema.avsc"] = []byte(enc.Schema() + "\n")
			}
			for file, got := range files {
				path := filepath.Join("testdata", file)
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				golden, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create)", err)
				}
				if !bytes.Equal(got, golden) {
					t.Errorf("%s differs (run with -update if the change is intended)", path)
				}
			}
			again, _ := enc.Records(r, testAvroID)
			jsonRecs, err := ReleaseRecords(r, JSONOptions{})
			if err != nil || len(again) != len(recs) || len(jsonRecs) != len(recs) {
				t.Fatalf("%d, %d and %d records, %v", len(recs), len(again), len(jsonRecs), err)
			}
			for i, rec := range recs {
				if !bytes.Equal(again[i].Value, rec.Value) || rec.Key != jsonRecs[i].Key {
					t.Errorf("record %d: a second encoding differs, or its key from the JSON record's", i)
				}
				if id, ok := AvroSchemaID(rec.Value); !ok || id != testAvroID {
					t.Errorf("record %d: schema id %d %v", i, id, ok)
				}
				want, err := DecodeReleaseRecord(jsonRecs[i].Value)
				if err != nil {
					t.Fatal(err)
				}
				got, err := DecodeReleaseAvro(rec.Value, enc.Schema())
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if g, w := comparable(got), comparable(want); !reflect.DeepEqual(g, w) {
					t.Errorf("record %d: Avro decodes to\n%+v\nJSON to\n%+v", i, g, w)
				}
				head, err := DecodeReleaseAvroHead(rec.Value)
				if err != nil || head.Key != want.Key || head.ReleaseKey != want.ReleaseKey || head.ReleaseID != want.ReleaseID ||
					head.WindowStart != want.WindowStart || head.WindowEnd != want.WindowEnd {
					t.Errorf("record %d: head %+v %v", i, head, err)
				}
			}
		})
	}
}

// TestReleaseAvroGeneric: a generic Avro reader (hamba/avro into a map,
// as a consumer without dpstream code reads) finds the JSON record's
// values under the same names.
func TestReleaseAvroGeneric(t *testing.T) {
	r := jsonGoldens()["histogram"]
	enc, err := NewAvroReleases(groupNames(r))
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := enc.Records(r, 7)
	jsonRecs, _ := ReleaseRecords(r, JSONOptions{})
	s := avro.MustParse(enc.Schema())
	for i, rec := range recs {
		var m map[string]any
		if err := avro.Unmarshal(s, rec.Value[5:], &m); err != nil {
			t.Fatal(err)
		}
		want, _ := DecodeReleaseRecord(jsonRecs[i].Value)
		if m["key"] != want.Key || m["value"] != want.Value || m["ci_lo"] != want.Lo || m["group_country"] != want.Group[0].Value ||
			m["window_end_ms"] != want.WindowEnd || m["event_level"] != want.EventLevel {
			t.Errorf("record %d: %v, want the values of %+v", i, m, want)
		}
	}
}

// TestReleaseAvroErrors: group names that make no Avro name are config
// errors naming the field; a release with other group fields than the
// schema's, a damaged record and a foreign one do not decode.
func TestReleaseAvroErrors(t *testing.T) {
	for _, gs := range [][]string{{"user.id"}, {"a-b"}, {"ü"}, {"a", "a"}} {
		if _, err := NewAvroReleases(gs); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("groups %q: %v, want ErrInvalidConfig", gs, err)
		}
	}
	if _, err := NewAvroReleases([]string{"user_id", "_x9"}); err != nil {
		t.Errorf("valid names: %v", err)
	}
	r := jsonGoldens()["histogram"]
	other, _ := NewAvroReleases([]string{"country"})
	if _, err := other.Records(r, 1); !errors.Is(err, ErrInvalidRelease) {
		t.Errorf("release with other group fields: %v, want ErrInvalidRelease", err)
	}
	enc, _ := NewAvroReleases(groupNames(r))
	recs, _ := enc.Records(r, 1)
	v := recs[0].Value
	for name, b := range map[string][]byte{
		"truncated": v[:len(v)/2], "no magic": append([]byte{1}, v[1:]...), "short": v[:3],
		"json": []byte(`{"key": "x"}`),
	} {
		if _, err := DecodeReleaseAvro(b, enc.Schema()); err == nil {
			t.Errorf("%s: decodes", name)
		}
		if _, err := DecodeReleaseAvroHead(b); err == nil && name != "truncated" {
			t.Errorf("%s: head decodes", name)
		}
	}
	if _, err := DecodeReleaseAvro(v, `{"type": "record", "name": "X", "fields": []}`); err == nil || strings.Contains(err.Error(), r.Group[0].Value) {
		t.Errorf("wrong writer schema: %v", err)
	}
}
