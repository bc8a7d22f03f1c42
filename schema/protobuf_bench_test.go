package schema

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// BenchmarkDecodeProtobuf compares decoding the same event as Protobuf
// (plain and framed) with msgpack, JSON and Avro, in one run so that the
// ratios are on the same machine state: testEvent's six fields and one
// unconfigured string, in a flat proto3 message of the same types (int64
// time, string unit, groups and category, double value). Reports
// events/s and allocations, as BenchmarkDecodeAvro. dynamicpb is the
// alternative this decoder was measured against: google.golang.org/
// protobuf's Unmarshal of the whole message into a dynamic message (the
// fields would still have to be taken out and checked).
func BenchmarkDecodeProtobuf(b *testing.B) {
	const flatProto = `syntax = "proto3";
message E {
  int64 ts = 1; string user_id = 2; string country = 3; string device = 4;
  string page = 5; double amount = 6; string extra = 7;
}`
	kvs := with(testEvent(), "extra", "ignored")
	md := pbDescriptor(b, flatProto, "E")
	pbMsg := encPB(b, md, `{"ts": "1714564800123", "user_id": "u-1234567", "country": "DE", "device": "mobile",
	 "page": "checkout", "amount": 12.5, "extra": "ignored"}`)
	avroCfg := testConfig()
	avroCfg.Format, avroCfg.AvroSchema = FormatAvro, benchFlatAvro
	plain := testConfig()
	plain.Format, plain.ProtobufSchema, plain.ProtobufMessage = FormatProtobuf, flatProto, "E"
	framed := testConfig()
	framed.Format, framed.Registry.URL = FormatProtobuf, "http://127.0.0.1:1"
	reg := newFakeRegistry(map[uint32]string{1: flatProto})
	reg.typ = schemaTypeProtobuf
	fd := framedDecoder(b, framed, reg)
	for _, c := range []decodeCase{
		{"msgpack", mustDecoder(b, testConfig()), encMP(b, kvs...)},
		{"json", mustDecoder(b, testConfig()), encJS(b, kvs...)},
		{"avro", mustDecoder(b, avroCfg), benchAvroEvent(b)},
		{"protobuf", mustDecoder(b, plain), pbMsg},
		{"protobuf-framed", fd, pbFrame(1, nil, pbMsg)},
	} {
		b.Run(c.name, c.run)
	}
	b.Run("dynamicpb", func(b *testing.B) {
		m := dynamicpb.NewMessage(md)
		b.SetBytes(int64(len(pbMsg)))
		b.ReportAllocs()
		for b.Loop() {
			m.Reset()
			if err := proto.Unmarshal(pbMsg, m); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
