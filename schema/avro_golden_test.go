package schema

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// avroCase is one golden Avro event: a record of avroTestSchema (mod
// changes avroTestRecord) or raw bytes.
type avroCase struct {
	name string
	mod  func(map[string]any)
	raw  func(valid []byte) []byte // bytes made from the typical event's
}

// avroCases are the golden events of testdata/avro_events.txt.
func avroCases() []avroCase {
	set := func(k string, v any) func(map[string]any) { return func(r map[string]any) { r[k] = v } }
	user := func(id string) map[string]any {
		return map[string]any{"t.User": map[string]any{"id": id, "tags": []any{}}}
	}
	return []avroCase{
		{name: "typical"},
		{name: "second enum symbol", mod: set("device", map[string]any{"attrs": map[string]any{}, "os": "android"})},
		// One map entry: hamba/avro writes a Go map in Go's random order.
		{name: "array items skipped", mod: func(r map[string]any) {
			r["user"] = map[string]any{"t.User": map[string]any{"id": "u-1", "tags": []any{"x", "y", "z"}}}
		}},
		{name: "empty collections", mod: func(r map[string]any) {
			r["device"] = map[string]any{"attrs": map[string]any{}, "os": "ios"}
			r["blob"] = []byte{}
		}},
		{name: "category home", mod: set("page", "home")},
		{name: "unicode unit", mod: set("user", user("ü-ñ-日本"))},
		{name: "negative value", mod: set("amount", -3.25)},
		{name: "null record on the unit path", mod: set("user", nil)},
		{name: "empty unit", mod: set("user", user(""))},
		{name: "null value", mod: set("amount", nil)},
		{name: "unknown category", mod: set("page", "cart")},
		{name: "invalid UTF-8 group value", mod: set("country", "D\xffE")},
		{name: "oversized group value", mod: set("country", strings.Repeat("x", DefaultMaxStringLen+1))},
		{name: "time before min_time", mod: set("meta", map[string]any{"source": "", "ts": int64(-1)})},
		{name: "empty message", raw: func([]byte) []byte { return nil }},
		{name: "truncated", raw: func(v []byte) []byte { return v[:len(v)/2] }},
		{name: "trailing byte", raw: func(v []byte) []byte { return append(v, 0) }},
		{name: "union index out of range", raw: func(v []byte) []byte { return avroReplaceUnion(v, 0x04) }},
		{name: "negative union index", raw: func(v []byte) []byte { return avroReplaceUnion(v, 0x01) }},
		{name: "string length beyond the message", raw: func([]byte) []byte { return []byte{0x7e, 'a'} }},
		{name: "varint longer than 10 bytes", raw: func([]byte) []byte { return []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01") }},
	}
}

// avroReplaceUnion returns v with the index of the user union (the first
// byte after the meta record, whose source is "app") set to b.
func avroReplaceUnion(v []byte, b byte) []byte {
	out := append([]byte(nil), v...)
	i := strings.Index(string(out), "app") + 3 + 6 // "app", then the 6-byte varint of ts
	out[i] = b
	return out
}

// TestAvroGolden pins the Avro cases: testdata/avro_events.txt holds the
// writer schema, each event (Avro binary in hex) and its decoding under
// avroTestConfig (rewritten with -update). The test decodes the events
// read back from the file, so the file stays meaningful by itself; the
// same bytes framed (magic byte, schema id) decode alike.
func TestAvroGolden(t *testing.T) {
	d := mustDecoder(t, avroTestConfig())
	valid := encAvro(t, avroTestSchema, avroTestRecord())
	var out strings.Builder
	c := avroTestConfig()
	fmt.Fprintf(&out, "# Avro events of the schema below and their decoding: time_field %s, unit_field %s, group_by %s, histogram.field %s %q, value_field %s\n# schema: %s\n",
		c.TimeField, c.UnitField, c.GroupBy, c.Histogram.Field, c.Histogram.Categories, c.ValueField, strings.Join(strings.Fields(avroTestSchema), " "))
	for _, ac := range avroCases() {
		var msg []byte
		if ac.raw != nil {
			msg = ac.raw(valid)
		} else {
			r := avroTestRecord()
			if ac.mod != nil {
				ac.mod(r)
			}
			msg = encAvro(t, avroTestSchema, r)
		}
		var e Event
		fmt.Fprintf(&out, "\n## %s\n%s\n=> %s\n", ac.name, hex.EncodeToString(msg), renderDecoded(&e, d.Decode(msg, &e)))
	}
	golden := compareGolden(t, filepath.Join("testdata", "avro_events.txt"), out.String())
	reg := newFakeRegistry(map[uint32]string{1: avroTestSchema})
	fd := framedDecoder(t, framedConfig(), reg)
	checkFramedGolden(t, golden, len(avroCases()), d, fd, func(msg []byte) []byte { return frame(1, msg) })
}

// checkFramedGolden decodes each event of a golden file of events (blocks
// "## name", the message in hex, "=> decoding") with d, and framed by
// frame with fd, and compares with the file's decoding; n is the number
// of events the file must hold.
func checkFramedGolden(t *testing.T, golden string, n int, d, fd *Decoder, frame func([]byte) []byte) {
	t.Helper()
	blocks := strings.Split(golden, "\n## ")[1:]
	if len(blocks) != n {
		t.Fatalf("%d events in the golden, want %d", len(blocks), n)
	}
	for _, b := range blocks {
		lines := strings.Split(b, "\n")
		msg, err := hex.DecodeString(lines[1])
		if err != nil {
			t.Fatal(err)
		}
		var e Event
		if got := "=> " + renderDecoded(&e, d.Decode(msg, &e)); got != lines[2] {
			t.Errorf("%s: %s, golden %s", lines[0], got, lines[2])
		}
		if got := "=> " + renderDecoded(&e, fd.Decode(frame(msg), &e)); got != lines[2] {
			t.Errorf("%s framed: %s, golden %s", lines[0], got, lines[2])
		}
	}
}

// compareGolden writes got to the golden file path with -update, then
// fails t unless the file holds got; it returns the file's content.
func compareGolden(t *testing.T, path, got string) string {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if string(golden) != got {
		t.Errorf("%s differs (run with -update if the change is intended)", path)
	}
	return string(golden)
}

// avroFuzzSeeds adds the golden cases' bytes.
func avroFuzzSeeds(f *testing.F) [][]byte {
	valid := encAvro(f, avroTestSchema, avroTestRecord())
	var seeds [][]byte
	for _, ac := range avroCases() {
		if ac.raw != nil {
			seeds = append(seeds, ac.raw(valid))
			continue
		}
		r := avroTestRecord()
		if ac.mod != nil {
			ac.mod(r)
		}
		seeds = append(seeds, encAvro(f, avroTestSchema, r))
	}
	return seeds
}

// FuzzDecodeAvro: plain Avro never panics, returns a valid event or an
// error with a known reason (checkResult), and an event it accepts is
// what hamba/avro's generic decoder (an independent reader) reads, when
// that reads the bytes (it refuses some valid data, e.g. huge
// collections, that this decoder skips).
func FuzzDecodeAvro(f *testing.F) {
	for _, s := range avroFuzzSeeds(f) {
		f.Add(s)
	}
	sch, err := avro.ParseWithCache(avroTestSchema, "", &avro.SchemaCache{})
	if err != nil {
		f.Fatal(err)
	}
	cfg := fuzzLimits(avroTestConfig())
	cfg.TimeFormat = TimeUnixMillis
	d := mustDecoder(f, cfg) // the inputs of one process run one at a time
	f.Fuzz(func(t *testing.T, msg []byte) {
		var e Event
		err := d.Decode(msg, &e)
		checkResult(t, d, &e, err)
		var ref map[string]any
		if err != nil || avro.Unmarshal(sch, msg, &ref) != nil {
			return
		}
		un, _ := ref["user"].(map[string]any)
		u, _ := un["t.User"].(map[string]any)
		meta, _ := ref["meta"].(map[string]any)
		dev, _ := ref["device"].(map[string]any)
		country, _ := ref["country"].(string)
		os, _ := dev["os"].(string)
		if u == nil || meta == nil || u["id"] != e.Unit || ref["amount"] != e.Value || MakeGroup(country, os) != e.Group {
			t.Fatalf("decoded %+v, hamba/avro %v", e, ref)
		}
		if ts, ok := meta["ts"].(interface{ UnixMilli() int64 }); !ok || ts.UnixMilli() != e.Time {
			t.Fatalf("time %d, hamba/avro %v", e.Time, meta["ts"])
		}
	})
}

// FuzzDecodeFramedAvro: framed Avro (ids 1, the test schema, and 2, a
// schema without the unit; every other id unknown) never panics and
// returns a valid event or an error with a known reason.
func FuzzDecodeFramedAvro(f *testing.F) {
	for _, s := range avroFuzzSeeds(f) {
		f.Add(frame(1, s))
		f.Add(frame(2, s))
	}
	f.Add([]byte{1, 0, 0, 0, 1})
	cfg := framedConfig()
	cfg.MaxKeyLen, cfg.MaxStringLen = 16, 24
	reg := newFakeRegistry(map[uint32]string{1: avroTestSchema, 2: avroNoUnitSchema})
	d := framedDecoder(f, cfg, reg) // the inputs of one process run one at a time
	f.Fuzz(func(t *testing.T, msg []byte) {
		var e Event
		err := d.Decode(msg, &e)
		checkResult(t, d, &e, err)
		if len(msg) >= framedHeader && msg[0] == 0 && msg[1]|msg[2]|msg[3] == 0 && msg[4] == 2 && ReasonOf(err) != ReasonSchemaMismatch {
			t.Fatalf("schema 2: %v, want schema_mismatch", err)
		}
	})
}
