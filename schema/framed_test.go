package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// fakeRegistry serves schemas by id and counts fetches and reports.
type fakeRegistry struct {
	mu       sync.Mutex
	typ      string // the schemaType of every schema ("" for Avro)
	schemas  map[uint32]string
	down     map[uint32]bool // ids whose fetch fails (registry unreachable)
	fetches  map[uint32]int
	reported map[uint32][]error
}

func newFakeRegistry(schemas map[uint32]string) *fakeRegistry {
	return &fakeRegistry{schemas: schemas, down: map[uint32]bool{}, fetches: map[uint32]int{}, reported: map[uint32][]error{}}
}

func (f *fakeRegistry) fetch(id uint32) (RegisteredSchema, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches[id]++
	if f.down[id] {
		return RegisteredSchema{}, errors.New("connection refused")
	}
	s, ok := f.schemas[id]
	if !ok {
		return RegisteredSchema{}, fmt.Errorf("%w: %d", ErrUnknownSchema, id)
	}
	return RegisteredSchema{Type: f.typ, Schema: s}, nil
}

func (f *fakeRegistry) report(id uint32, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reported[id] = append(f.reported[id], err)
}

// framedDecoder returns a decoder of cfg (framed) over a new Schemas
// fetching from reg; sharedDecoder(t, cfg, d.schemas) makes more.
func framedDecoder(t testing.TB, cfg Config, reg *fakeRegistry) *Decoder {
	t.Helper()
	s, err := NewSchemas(cfg, reg.fetch, reg.report)
	if err != nil {
		t.Fatal(err)
	}
	return sharedDecoder(t, cfg, s)
}

// sharedDecoder returns a decoder of cfg over s.
func sharedDecoder(t testing.TB, cfg Config, s *Schemas) *Decoder {
	t.Helper()
	d, err := NewFramedDecoder(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// framedCase is a framed message and the reason it is rejected with
// (ReasonNone: it decodes to the test's event).
type framedCase struct {
	name string
	msg  []byte
	want Reason
}

// checkFramedCases decodes every case three times (every id met again),
// by each decoder in turn, checking the reason or the event want.
func checkFramedCases(t *testing.T, decs []*Decoder, cases []framedCase, want Event) {
	t.Helper()
	for round := range 3 {
		for _, c := range cases {
			var e Event
			err := decs[round%len(decs)].Decode(c.msg, &e)
			if ReasonOf(err) != c.want || (c.want == ReasonNone && (err != nil || e != want)) {
				t.Errorf("round %d, %s: %v %+v, want %v", round, c.name, err, e, c.want)
			}
		}
	}
}

// framedConfig is avroTestConfig read through a registry.
func framedConfig() Config {
	c := avroTestConfig()
	c.AvroSchema, c.Registry = "", RegistryConfig{URL: "http://127.0.0.1:1/apis/ccompat/v7"}
	return c
}

// frame prefixes an Avro record with the magic byte and schema id.
func frame(id uint32, rec []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{framedMagic}, id), rec...)
}

// avroNoUnitSchema is avroTestSchema without user.id (the user record
// has only tags).
var avroNoUnitSchema = strings.Replace(avroTestSchema, `{"name": "id", "type": "string"},`, "", 1)

func TestFramedAvro(t *testing.T) {
	reg := newFakeRegistry(map[uint32]string{7: avroTestSchema, 8: avroNoUnitSchema, 9: `{"type": "record"`})
	reg.down[10] = true
	cfg := framedConfig()
	d := framedDecoder(t, cfg, reg)
	decs := []*Decoder{d, sharedDecoder(t, cfg, d.schemas)}
	rec := encAvro(t, avroTestSchema, avroTestRecord())
	want := Event{}
	if err := mustDecoder(t, avroTestConfig()).Decode(rec, &want); err != nil {
		t.Fatal(err)
	}
	noUnit := avroTestRecord()
	noUnit["user"] = map[string]any{"t.User": map[string]any{"tags": []any{}}}
	cases := []framedCase{
		{"known id", frame(7, rec), ReasonNone},
		{"schema without the unit", frame(8, encAvro(t, avroNoUnitSchema, noUnit)), ReasonSchemaMismatch},
		{"schema that does not parse", frame(9, rec), ReasonSchemaMismatch},
		{"id not in the registry", frame(11, rec), ReasonUnknownSchema},
		{"bad magic", append([]byte{1}, frame(7, rec)[1:]...), ReasonUnknownSchema},
		{"short", []byte{0, 0, 0}, ReasonUnknownSchema},
		{"plain Avro", rec, ReasonUnknownSchema},
		{"truncated record", frame(7, rec[:len(rec)-1]), ReasonMalformed},
	}
	checkFramedCases(t, decs, cases, want)
	for round := range 3 { // registry down: not a rejection (no reason), decoded at a later try
		var e Event
		if err := decs[round%2].Decode(frame(10, rec), &e); !errors.Is(err, ErrRegistryUnavailable) || ReasonOf(err) != ReasonNone {
			t.Errorf("round %d, registry down: %v, want ErrRegistryUnavailable without a reason", round, err)
		}
	}
	for _, id := range []uint32{7, 8, 9, 11} {
		if reg.fetches[id] != 1 {
			t.Errorf("id %d fetched %d times, want once", id, reg.fetches[id])
		}
	}
	if reg.fetches[10] != 3 {
		t.Errorf("id 10 (registry down) fetched %d times, want at each of its 3 messages", reg.fetches[10])
	}
	reg.mu.Lock()
	reg.down[10], reg.schemas[10] = false, avroTestSchema
	reg.mu.Unlock()
	if e := (Event{}); decs[0].Decode(frame(10, rec), &e) != nil || e != want {
		t.Errorf("id 10 once the registry is back: %+v, want %+v", e, want)
	}
	if errs := reg.reported[8]; len(errs) != 1 || !errors.Is(errs[0], ErrSchemaMismatch) || !strings.Contains(errs[0].Error(), `"user.id"`) {
		t.Errorf("id 8 reported %v, want one schema mismatch naming user.id", errs)
	}
	if errs := reg.reported[11]; len(errs) != 1 || !errors.Is(errs[0], ErrUnknownSchema) {
		t.Errorf("id 11 reported %v, want one unknown schema", errs)
	}
	if len(reg.reported[7]) != 0 {
		t.Errorf("id 7 reported %v", reg.reported[7])
	}
}

// TestFramedAvroIDCap: past maxSchemaIDs distinct ids, new ids are not
// fetched (one report), so arbitrary ids cannot flood the registry.
func TestFramedAvroIDCap(t *testing.T) {
	reg := newFakeRegistry(map[uint32]string{})
	cfg := framedConfig()
	d := framedDecoder(t, cfg, reg)
	var e Event
	for id := range uint32(maxSchemaIDs + 10) {
		if r := ReasonOf(d.Decode(frame(id, nil), &e)); r != ReasonUnknownSchema {
			t.Fatalf("id %d: %v", id, r)
		}
	}
	if len(reg.fetches) != maxSchemaIDs {
		t.Fatalf("%d ids fetched, want %d", len(reg.fetches), maxSchemaIDs)
	}
	if n := len(reg.reported); n != maxSchemaIDs+1 {
		t.Fatalf("%d ids reported, want %d", n, maxSchemaIDs+1)
	}
}

func TestFramedAvroConfig(t *testing.T) {
	cfg := framedConfig()
	var e Event
	if r := ReasonOf(mustDecoder(t, cfg).Decode(frame(7, nil), &e)); r != ReasonUnknownSchema {
		t.Errorf("NewDecoder of a framed config: %v, want unknown_schema", r)
	}
	for name, mod := range map[string]func(*Config){
		"both schema and registry": func(c *Config) { c.AvroSchema = avroTestSchema },
		"not avro":                 func(c *Config) { c.Format = FormatJSON },
		"ftp url":                  func(c *Config) { c.Registry.URL = "ftp://x/y" },
		"tls on http":              func(c *Config) { c.Registry.TLS.Enabled = true },
		"password without user":    func(c *Config) { c.Registry.Password = "pw" },
		"settings without url":     func(c *Config) { c.Registry.URL, c.Registry.Username = "", "u" },
	} {
		c := framedConfig()
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want a config error", name, err)
		}
	}
	if _, err := NewSchemas(avroTestConfig(), nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewSchemas of plain Avro: %v", err)
	}
}

// TestFramedAvroConcurrent: decoders on several goroutines share one
// Schemas (the fetchers of a deployment); each id is still fetched and
// reported once (run with -race, as deploy/test.sh does).
func TestFramedAvroConcurrent(t *testing.T) {
	reg := newFakeRegistry(map[uint32]string{7: avroTestSchema, 8: avroNoUnitSchema})
	cfg := framedConfig()
	rec := encAvro(t, avroTestSchema, avroTestRecord())
	decodeConcurrently(t, cfg, reg, func(g, i int) ([]byte, Reason) {
		id := uint32(7 + (i+g)%3) // 7, 8 and the unknown 9
		return frame(id, rec), []Reason{ReasonNone, ReasonSchemaMismatch, ReasonUnknownSchema}[id-7]
	})
	for id := uint32(7); id <= 9; id++ {
		if reg.fetches[id] != 1 {
			t.Errorf("id %d fetched %d times, want once", id, reg.fetches[id])
		}
	}
	if len(reg.reported[8]) != 1 || len(reg.reported[9]) != 1 {
		t.Errorf("reports %v, want one for id 8 and one for id 9", reg.reported)
	}
}

// decodeConcurrently decodes on 4 goroutines, each with its decoder of
// cfg over one Schemas fetching from reg, 200 messages each: message i of
// goroutine g and its reason are msg(g, i).
func decodeConcurrently(t *testing.T, cfg Config, reg *fakeRegistry, msg func(g, i int) ([]byte, Reason)) {
	t.Helper()
	s := framedDecoder(t, cfg, reg).schemas
	var wg sync.WaitGroup
	for g := range 4 {
		d := sharedDecoder(t, cfg, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var e Event
			for i := range 200 {
				m, want := msg(g, i)
				if r := ReasonOf(d.Decode(m, &e)); r != want {
					t.Errorf("goroutine %d, message %d: %v, want %v", g, i, r, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
