package operator

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// shapeTest is a shapeCheck of testConfig's schema (ts, user, region, cat,
// v) with its own decoder, health and log.
type shapeTest struct {
	t   *testing.T
	s   *shapeCheck
	h   *health
	dec *schema.Decoder
	buf *kafkatest.Buffer
	log *slog.Logger
}

func newShapeTest(t *testing.T) *shapeTest {
	t.Helper()
	cfg := testConfig(nil, "in", "out", "g").Schema
	h := &health{}
	h.set(true, "")
	sdec, err := schema.NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := newShapeCheck(sdec, h)
	dec, err := schema.NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	buf := &kafkatest.Buffer{}
	return &shapeTest{t: t, s: s, h: h, dec: dec, buf: buf, log: slog.New(slog.NewTextHandler(buf, nil))}
}

// feed decodes msg as the fetcher does and shows it to the check.
func (st *shapeTest) feed(msg string) {
	it := item{}
	it.m.Value = []byte(msg)
	decode(st.dec, &it)
	st.s.observe(st.log, it.m.Value, it.absent, it.wrong)
}

// readyz returns /readyz's status and body.
func (st *shapeTest) readyz() (int, string) {
	rec := httptest.NewRecorder()
	st.h.handler(prometheus.NewRegistry()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// event is a record of testConfig's schema with the group field named
// regionKey, and extra keys.
func event(i int, regionKey string, extra ...string) string {
	s := fmt.Sprintf(`{"ts":%d,"user":"user-%d","%s":"north","cat":"a","v":1.5`, testBase+int64(i), i%50, regionKey)
	for _, e := range extra {
		s += `,"` + e + `":1`
	}
	return s + "}"
}

// TestShapeMisspeltField: a group-by field absent from every record is
// reported at the end of the first block of shapeBlock records (not one
// record before), with an ERROR naming it and the names most records
// carry (not a name a tenth of them carry, and no value); /readyz answers
// 503 with the reason; a block in which 49 records carry the field does
// not clear it, one in which 50 (5%) do clears it (INFO, /readyz 200).
func TestShapeMisspeltField(t *testing.T) {
	st := newShapeTest(t)
	for i := range shapeBlock - 1 {
		var extra []string
		if i%10 == 0 {
			extra = []string{"rare_key"} // 10% of the records: never listed
		}
		st.feed(event(i, "regoin", extra...))
	}
	if code, body := st.readyz(); code != http.StatusOK || strings.Contains(st.buf.String(), "ERROR") {
		t.Fatalf("after %d records: /readyz %d %q, log %q; want nothing reported yet", shapeBlock-1, code, body, st.buf.String())
	}
	st.feed(event(shapeBlock, "regoin"))
	log := st.buf.String()
	for _, w := range []string{"level=ERROR", `field=region`, "config=group_by",
		fmt.Sprintf("absent from more than 99%% of the last %d decoded records", shapeBlock),
		`fields_seen="\"cat\", \"regoin\", \"ts\", \"user\", \"v\""`} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
	for _, w := range []string{"rare_key", "north", "user-"} {
		if strings.Contains(log, w) {
			t.Errorf("log holds %q:\n%s", w, log)
		}
	}
	code, body := st.readyz()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `input shape: field "region" (group_by) absent from more than 99%`) ||
		!strings.Contains(body, `fields seen: "cat", "regoin"`) {
		t.Errorf("/readyz = %d %q; want 503 naming the field and the fields seen", code, body)
	}
	feedBlock(st, 49)
	if code, _ := st.readyz(); code != http.StatusServiceUnavailable {
		t.Errorf("a block with 49 records carrying the field cleared it")
	}
	feedBlock(st, 50)
	if code, body := st.readyz(); code != http.StatusOK {
		t.Errorf("after a block with 50 records carrying the field: /readyz = %d %q, want 200", code, body)
	}
	if !strings.Contains(st.buf.String(), "field is in the input again") {
		t.Errorf("no INFO line when the field came back:\n%s", st.buf.String())
	}
}

// feedBlock feeds one block of shapeBlock records of which carriers
// (spread evenly) carry the configured field region, the others regoin.
func feedBlock(st *shapeTest, carriers int) {
	for i := range shapeBlock {
		key := "regoin"
		if carriers > 0 && i%(shapeBlock/carriers) == 0 && i/(shapeBlock/carriers) < carriers {
			key = "region"
		}
		st.feed(event(i, key))
	}
}

// TestShapeSometimesAbsent: a field that 10 records of every block carry
// (1%, the least that is not reported), wherever they are in the block,
// or that half the records lack, is never reported; 9 in a block are.
func TestShapeSometimesAbsent(t *testing.T) {
	st := newShapeTest(t)
	for b := range 5 {
		for i := range shapeBlock {
			key := "regoin"
			if (i+b*37)%(shapeBlock/10) == 0 {
				key = "region"
			}
			st.feed(event(i, key))
		}
	}
	for i := range 3 * shapeBlock {
		key := "regoin"
		if i%2 == 0 {
			key = "region"
		}
		st.feed(event(i, key))
	}
	if code, body := st.readyz(); code != http.StatusOK || strings.Contains(st.buf.String(), "ERROR") {
		t.Errorf("/readyz %d %q, log %q; want nothing reported", code, body, st.buf.String())
	}
	for i := range shapeBlock {
		key := "regoin"
		if i%(shapeBlock/9) == 0 && i/(shapeBlock/9) < 9 {
			key = "region"
		}
		st.feed(event(i, key))
	}
	if code, _ := st.readyz(); code != http.StatusServiceUnavailable || !strings.Contains(st.buf.String(), "field=region") {
		t.Errorf("a block with 9 records carrying the field: /readyz %d, log %q; want it reported", code, st.buf.String())
	}
}

// TestShapeWrongTypeAndNames: a value field that is a string in every
// record is reported as of the wrong type; records that are not maps lack
// every field and list no names; at most shapeMaxNames names are listed,
// each cut to shapeMaxNameLen bytes.
func TestShapeWrongTypeAndNames(t *testing.T) {
	st := newShapeTest(t)
	long := strings.Repeat("k", 100)
	var extra []string
	for i := range 30 {
		extra = append(extra, fmt.Sprintf("x%02d", i))
	}
	extra = append(extra, long)
	for i := range shapeBlock {
		st.feed(strings.Replace(event(i, "region", extra...), `"v":1.5`, `"v":"1.5"`, 1))
	}
	log := st.buf.String()
	if !strings.Contains(log, "field=v") || !strings.Contains(log, "of the wrong type in more than 99% of the last") {
		t.Errorf("log does not report v as of the wrong type:\n%s", log)
	}
	if strings.Contains(log, long) || !strings.Contains(log, strings.Repeat("k", shapeMaxNameLen)+"…") || !strings.Contains(log, `\"x13\", …`) {
		t.Errorf("names not capped at %d, each at %d bytes:\n%s", shapeMaxNames, shapeMaxNameLen, log)
	}

	st = newShapeTest(t)
	for range shapeBlock {
		st.feed(`[1, 2, 3]`)
	}
	if log := st.buf.String(); strings.Count(log, "level=ERROR") != 5 || !strings.Contains(log, "fields_seen=(none)") {
		t.Errorf("records that are not maps: want 5 fields reported, no names:\n%s", log)
	}
}

// TestShapeCheckSwitch: observability.shape_check (default on) turns the
// check off: an operator without it reports nothing.
func TestShapeCheckSwitch(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	for _, on := range []bool{true, false} {
		c.Observability.ShapeCheck = on
		op, err := New(c, WithKey(testKey()), WithRegistry(prometheus.NewRegistry()))
		if err != nil {
			t.Fatal(err)
		}
		if (op.shape != nil) != on {
			t.Errorf("shape_check %v: check present = %v", on, op.shape != nil)
		}
	}
	if !Default().Observability.ShapeCheck {
		t.Error("shape_check is off by default")
	}
}

// TestShapeNamesOncePerRecord: a name is listed only when half the
// sampled records carry it, so one record that repeats a key (a JSON
// object may hold a name twice) cannot get it listed. Fails on a tally
// that counts every occurrence: the one record's key was listed.
func TestShapeNamesOncePerRecord(t *testing.T) {
	st := newShapeTest(t)
	dup := strings.Repeat(`,"secret-name":1`, shapeSample)
	for i := range shapeBlock {
		msg := event(i, "regoin")
		if i == shapeBlock-1 {
			msg = strings.TrimSuffix(msg, "}") + dup + "}"
		}
		st.feed(msg)
	}
	log := st.buf.String()
	if !strings.Contains(log, "field=region") {
		t.Fatalf("the misspelt field is not reported:\n%s", log)
	}
	if strings.Contains(log, "secret-name") {
		t.Errorf("a key of one record is listed:\n%s", log)
	}
}

// TestShapeFindingOneRecord: what a report says of a field (absent, of
// the wrong type, or both) is not decided by one record: a block in which
// the field is absent from every record but one, that has it with the
// wrong type, reads as one in which it is absent from all (and likewise
// the other way round). Fails on a finding that names the mixed case
// whenever both kinds occur.
func TestShapeFindingOneRecord(t *testing.T) {
	finding := func(absent, wrong int) string {
		st := newShapeTest(t)
		f := slices.IndexFunc(st.s.fields, func(f schema.FieldInfo) bool { return f.Name == "v" })
		for i := range shapeBlock {
			var a, w uint64
			switch {
			case i < absent:
				a = 1 << f
			case i < absent+wrong:
				w = 1 << f
			}
			st.s.observe(st.log, []byte(`{}`), a, w)
		}
		return st.s.findings[f]
	}
	for _, c := range []struct{ absent, wrong int }{{shapeBlock, 0}, {shapeBlock - 1, 1}, {0, shapeBlock}, {1, shapeBlock - 1}} {
		got := finding(c.absent, c.wrong)
		want := finding(shapeBlock, 0)
		if c.absent < c.wrong {
			want = finding(0, shapeBlock)
		}
		if got != want {
			t.Errorf("absent %d, wrong type %d: finding %q, want %q (as with every record alike)", c.absent, c.wrong, got, want)
		}
	}
	if got := finding(shapeBlock/2, shapeBlock/2); !strings.Contains(got, "absent from or of the wrong type in") {
		t.Errorf("half absent, half of the wrong type: finding %q", got)
	}
}

// shapeAvroSchema is a writer schema of testConfig's fields in which the
// unit field is spelt usr: its messages are schema_mismatch.
const shapeAvroSchema = `{"type": "record", "name": "R", "fields": [
 {"name": "ts", "type": "long"}, {"name": "usr", "type": "string"},
 {"name": "region", "type": "string"}, {"name": "cat", "type": "string"},
 {"name": "v", "type": "double"}]}`

// TestShapeFramedAvroNames: with framed Avro whose writer schema lacks
// the unit field, the check (over the schema cache the fetchers fill)
// reports the field with the writer record's field names, not "(none)".
func TestShapeFramedAvroNames(t *testing.T) {
	sc := testConfig(nil, "in", "out", "g").Schema
	sc.Format, sc.Registry.URL = schema.FormatAvro, "http://127.0.0.1:9/apis/ccompat/v7"
	s, err := schema.NewSchemas(sc, func(id uint32) (schema.RegisteredSchema, error) {
		return schema.RegisteredSchema{Schema: shapeAvroSchema}, nil
	}, func(uint32, error) {})
	if err != nil {
		t.Fatal(err)
	}
	st := newShapeTest(t)
	if st.dec, err = schema.NewFramedDecoder(sc, s); err != nil {
		t.Fatal(err)
	}
	sdec, err := schema.NewFramedDecoder(sc, s)
	if err != nil {
		t.Fatal(err)
	}
	st.s = newShapeCheck(sdec, st.h)
	// ts 1, usr "u", region "north", cat "a", v 1.5; framed with id 1.
	rec := []byte{0, 0, 0, 0, 1, 2, 2, 'u', 10, 'n', 'o', 'r', 't', 'h', 2, 'a'}
	rec = binary.LittleEndian.AppendUint64(rec, math.Float64bits(1.5))
	for range shapeBlock {
		st.feed(string(rec))
	}
	if log := st.buf.String(); !strings.Contains(log, "field=user") ||
		!strings.Contains(log, `fields_seen="\"cat\", \"region\", \"ts\", \"usr\", \"v\""`) {
		t.Errorf("want user reported with the writer's field names:\n%s", log)
	}
}
