package schema

import (
	"testing"

	"github.com/hamba/avro/v2"
)

// BenchmarkDecodeAvro compares decoding the same event as Avro (plain and
// framed) with today's flat msgpack and JSON decode, in one run so that
// the ratios are on the same machine state: testEvent's six fields and
// one unconfigured string, in a flat record of the same types (long time,
// string unit, groups and category, double value). Reports events/s and
// allocations, as BenchmarkDecode. hamba-generic is the alternative this
// decoder was measured against: hamba/avro's Unmarshal of the whole record
// into a map (the fields would still have to be taken out and checked).
func BenchmarkDecodeAvro(b *testing.B) {
	const flat = benchFlatAvro
	kvs := with(testEvent(), "extra", "ignored")
	avroMsg := benchAvroEvent(b)
	plain := testConfig()
	plain.Format, plain.AvroSchema = FormatAvro, flat
	framed := testConfig()
	framed.Format, framed.Registry.URL = FormatAvro, "http://127.0.0.1:1"
	reg := newFakeRegistry(map[uint32]string{1: flat})
	fd := framedDecoder(b, framed, reg)
	for _, c := range []decodeCase{
		{"msgpack", mustDecoder(b, testConfig()), encMP(b, kvs...)},
		{"json", mustDecoder(b, testConfig()), encJS(b, kvs...)},
		{"avro", mustDecoder(b, plain), avroMsg},
		{"avro-framed", fd, frame(1, avroMsg)},
	} {
		b.Run(c.name, c.run)
	}
	b.Run("hamba-generic", func(b *testing.B) {
		sch, err := avro.ParseWithCache(flat, "", &avro.SchemaCache{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(avroMsg)))
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := avro.Unmarshal(sch, avroMsg, &m); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// benchFlatAvro is the flat Avro schema of the format benchmarks' event:
// testEvent's fields and one unconfigured string.
const benchFlatAvro = `{"type": "record", "name": "E", "fields": [
 {"name": "ts", "type": "long"}, {"name": "user_id", "type": "string"},
 {"name": "country", "type": "string"}, {"name": "device", "type": "string"},
 {"name": "page", "type": "string"}, {"name": "amount", "type": "double"},
 {"name": "extra", "type": "string"}]}`

// benchAvroEvent is testEvent with the field extra, in benchFlatAvro.
func benchAvroEvent(b *testing.B) []byte {
	rec := map[string]any{}
	for _, f := range with(testEvent(), "extra", "ignored") {
		rec[f.k] = f.v
	}
	return encAvro(b, benchFlatAvro, rec)
}

// decodeCase is one decoder and message of a format benchmark; the
// message decodes to testWant.
type decodeCase struct {
	name string
	d    *Decoder
	msg  []byte
}

// run decodes c.msg b.N times, reporting events/s and allocations.
func (c decodeCase) run(b *testing.B) {
	var e Event
	b.SetBytes(int64(len(c.msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := c.d.Decode(c.msg, &e); err != nil {
			b.Fatal(err)
		}
	}
	if e != testWant {
		b.Fatalf("decoded %+v", e)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
