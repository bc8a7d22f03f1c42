package operator

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	s, err := newShapeCheck(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
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

// TestShapeMisspeltField: a group-by field absent from shapeRun
// consecutive records is reported exactly at the shapeRun-th (not one
// before), with an ERROR naming it and the names most records carry (not
// a name few records carry, and no value); /readyz answers 503 with the
// reason; one record carrying the field clears it (INFO, /readyz 200).
func TestShapeMisspeltField(t *testing.T) {
	st := newShapeTest(t)
	for i := range shapeRun - 1 {
		var extra []string
		if i%10 == 0 {
			extra = []string{"rare_key"} // 10% of the records: never listed
		}
		st.feed(event(i, "regoin", extra...))
	}
	if code, body := st.readyz(); code != http.StatusOK || strings.Contains(st.buf.String(), "ERROR") {
		t.Fatalf("after %d records: /readyz %d %q, log %q; want nothing reported yet", shapeRun-1, code, body, st.buf.String())
	}
	st.feed(event(shapeRun, "regoin"))
	log := st.buf.String()
	for _, w := range []string{"level=ERROR", `field=region`, "config=group_by",
		fmt.Sprintf("absent from each of the last %d decoded records", shapeRun),
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
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `input shape: field "region" (group_by) absent from each`) ||
		!strings.Contains(body, `fields seen: "cat", "regoin"`) {
		t.Errorf("/readyz = %d %q; want 503 naming the field and the fields seen", code, body)
	}
	st.feed(event(0, "region"))
	if code, body := st.readyz(); code != http.StatusOK {
		t.Errorf("after a record with the field: /readyz = %d %q, want 200", code, body)
	}
	if !strings.Contains(st.buf.String(), "field is in the input again") {
		t.Errorf("no INFO line when the field came back:\n%s", st.buf.String())
	}
}

// TestShapeSometimesAbsent: a field absent from most records but present
// at least once in every shapeRun consecutive ones (here once every
// shapeRun−1 records, the most absent it can be), and records absent a
// field for other reasons (malformed), never report anything.
func TestShapeSometimesAbsent(t *testing.T) {
	st := newShapeTest(t)
	for i := range 5 * shapeRun {
		if i%(shapeRun-1) == 0 {
			st.feed(event(i, "region"))
		} else {
			st.feed(event(i, "regoin"))
		}
	}
	if code, body := st.readyz(); code != http.StatusOK || strings.Contains(st.buf.String(), "ERROR") {
		t.Errorf("/readyz %d %q, log %q; want nothing reported", code, body, st.buf.String())
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
	for i := range shapeRun {
		st.feed(strings.Replace(event(i, "region", extra...), `"v":1.5`, `"v":"1.5"`, 1))
	}
	log := st.buf.String()
	if !strings.Contains(log, "field=v") || !strings.Contains(log, "of the wrong type in each of the last") {
		t.Errorf("log does not report v as of the wrong type:\n%s", log)
	}
	if strings.Contains(log, long) || !strings.Contains(log, strings.Repeat("k", shapeMaxNameLen)+"…") || !strings.Contains(log, `\"x13\", …`) {
		t.Errorf("names not capped at %d, each at %d bytes:\n%s", shapeMaxNames, shapeMaxNameLen, log)
	}

	st = newShapeTest(t)
	for range shapeRun {
		st.feed(`[1, 2, 3]`)
	}
	if log := st.buf.String(); strings.Count(log, "level=ERROR") != 5 || !strings.Contains(log, "fields_seen=(none)") {
		t.Errorf("records that are not maps: want 5 fields reported, no names:\n%s", log)
	}
}
