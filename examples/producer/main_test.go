package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"math/rand/v2"

	"github.com/hamba/avro/v2"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/schema"
)

// TestReadingsFitTheExampleConfig: one interval of readings decodes with
// the example config's schema (deploy/dpstream.example.yaml), has every
// meter exactly once, spreads the meters evenly over the example's public
// groups, and keeps every value inside [lower, upper] and every meter's
// readings per window within bounds.max_values (so nothing is clipped and
// the walkthrough's releases are unbiased). (The broker side, following
// the walkthrough, is cmd/dpstream's TestKafkaWalkthrough.)
func TestReadingsFitTheExampleConfig(t *testing.T) {
	cfg, err := operator.Load(filepath.Join("..", "..", "deploy", "dpstream.example.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := schema.NewDecoder(cfg.Schema)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Meters: 1000, Regions: []string{"north", "south", "east", "west"}, Interval: 15 * time.Second, Seed: 1}
	ms := meters(o)
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rs := Readings(o, ms, from, from.Add(cfg.Windows.Size), rand.New(rand.NewPCG(1, 2)))
	perWindow := int(cfg.Windows.Size / o.Interval)
	if len(rs) != o.Meters*perWindow {
		t.Fatalf("%d readings in one window, want %d", len(rs), o.Meters*perWindow)
	}
	if perWindow > cfg.Bounds.MaxValues || perWindow > cfg.Bounds.MaxPerBucket {
		t.Errorf("%d readings per meter and window exceed the example's bounds (max_values %d, max_per_bucket %d)",
			perWindow, cfg.Bounds.MaxValues, cfg.Bounds.MaxPerBucket)
	}
	public := map[string]bool{}
	for _, g := range cfg.Privacy.PublicGroups {
		public[g[0]] = true
	}
	perMeter, perRegion := map[string]int{}, map[string]int{}
	for _, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var e schema.Event
		if err := dec.Decode(b, &e); err != nil {
			t.Fatalf("%s does not decode with the example's schema: %v", b, err)
		}
		if !(r.KWh >= cfg.Schema.Lower && r.KWh <= cfg.Schema.Upper) {
			t.Errorf("kwh %g outside [%g, %g]", r.KWh, cfg.Schema.Lower, cfg.Schema.Upper)
		}
		if !public[r.Region] {
			t.Errorf("region %q is not a public group of the example", r.Region)
		}
		perMeter[r.Meter]++
		perRegion[r.Region]++
	}
	for m, n := range perMeter {
		if n != perWindow {
			t.Errorf("meter %s: %d readings, want %d", m, n, perWindow)
		}
	}
	for reg, n := range perRegion {
		if n != o.Meters/len(o.Regions)*perWindow {
			t.Errorf("region %s: %d readings, want %d", reg, n, o.Meters/len(o.Regions)*perWindow)
		}
	}
}

// TestAvroReadingsFitTheAvroConfig: with --format avro, every reading of
// one interval, framed with the registered schema's id, decodes with the
// Avro variant's config (deploy/dpstream.avro.yaml: schema.format avro
// with a registry, here answered by readingSchema) to the event its JSON
// form decodes to with the example config. (The registry and broker side
// is cmd/dpstream's TestKafkaAvroWalkthrough.)
func TestAvroReadingsFitTheAvroConfig(t *testing.T) {
	cfg, err := operator.Load(filepath.Join("..", "..", "deploy", "dpstream.avro.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	example, err := operator.Load(filepath.Join("..", "..", "deploy", "dpstream.example.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const id = 17
	schemas, err := schema.NewSchemas(cfg.Schema, func(got uint32) (schema.RegisteredSchema, error) {
		if got != id {
			return schema.RegisteredSchema{}, schema.ErrUnknownSchema
		}
		return schema.RegisteredSchema{Schema: readingSchema}, nil
	}, func(id uint32, err error) { t.Errorf("schema %d: %v", id, err) })
	if err != nil {
		t.Fatal(err)
	}
	avroDec, err := schema.NewFramedDecoder(cfg.Schema, schemas)
	if err != nil {
		t.Fatal(err)
	}
	jsonDec, err := schema.NewDecoder(example.Schema)
	if err != nil {
		t.Fatal(err)
	}
	s, err := avro.Parse(readingSchema)
	if err != nil {
		t.Fatal(err)
	}
	enc := &avroEncoder{schema: s, id: id}
	o := Options{Meters: 100, Regions: []string{"north", "south", "east", "west"}, Interval: 15 * time.Second, Seed: 1}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rs := Readings(o, meters(o), from, from.Add(o.Interval), rand.New(rand.NewPCG(1, 2)))
	if len(rs) != o.Meters {
		t.Fatalf("%d readings, want %d", len(rs), o.Meters)
	}
	for _, r := range rs {
		b, err := enc.encode(r)
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(r)
		var got, want schema.Event
		if err := avroDec.Decode(b, &got); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if err := jsonDec.Decode(js, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%+v: Avro decodes to %+v, JSON to %+v", r, got, want)
		}
	}
}
