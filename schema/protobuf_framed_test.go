package schema

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// pbFramedConfig is pbTestConfig read through a registry.
func pbFramedConfig() Config {
	c := pbTestConfig()
	c.ProtobufSchema, c.ProtobufMessage = "", ""
	c.Registry = RegistryConfig{URL: "http://127.0.0.1:1/apis/ccompat/v7"}
	return c
}

// pbFrame prefixes a Protobuf message with the magic byte, the schema id
// and the message indexes idx (nil: the single byte 0, the first
// message).
func pbFrame(id uint32, idx []int64, msg []byte) []byte {
	b := frame(id, nil)
	if idx == nil {
		b = append(b, 0)
	} else {
		b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(len(idx))))
		for _, i := range idx {
			b = protowire.AppendVarint(b, protowire.EncodeZigZag(i))
		}
	}
	return append(b, msg...)
}

// pbSecondSchema has Reading second (message index [1]) and, first, a
// message Reading2 without user.id.
var pbSecondSchema = strings.Replace(pbTestSchema, "message Reading {", `message First {
  message Reading { int64 x = 1; }
  string user = 1;
}

message Reading {`, 1)

func TestFramedProtobuf(t *testing.T) {
	reg := newFakeRegistry(map[uint32]string{7: pbTestSchema, 8: pbSecondSchema, 9: "message {"})
	reg.typ = schemaTypeProtobuf
	cfg := pbFramedConfig()
	d := framedDecoder(t, cfg, reg)
	decs := []*Decoder{d, sharedDecoder(t, cfg, d.schemas)}
	msg := pbReading(t, pbTestJSON)
	var want Event
	if err := mustDecoder(t, pbTestConfig()).Decode(msg, &want); err != nil {
		t.Fatal(err)
	}
	cases := []framedCase{
		{"first message, the byte 0", pbFrame(7, nil, msg), ReasonNone},
		{"first message, indexes [0]", pbFrame(7, []int64{0}, msg), ReasonNone},
		{"second message [1], Reading", pbFrame(8, []int64{1}, msg), ReasonNone},
		{"first message [0] of schema 8: no user.id", pbFrame(8, nil, msg), ReasonSchemaMismatch},
		{"nested message [0, 0] of schema 8", pbFrame(8, []int64{0, 0}, msg), ReasonSchemaMismatch},
		{"nested [0, 0] of schema 7: Reading.Meta", pbFrame(7, []int64{0, 0}, msg), ReasonSchemaMismatch},
		{"index beyond the messages", pbFrame(7, []int64{5}, msg), ReasonUnknownSchema},
		{"negative index", pbFrame(7, []int64{-1}, msg), ReasonUnknownSchema},
		{"negative count", append(frame(7, nil), 1), ReasonMalformed},
		{"count beyond the bytes", append(frame(7, nil), 8, 0), ReasonMalformed},
		{"no indexes", frame(7, nil), ReasonMalformed},
		{"schema that does not compile", pbFrame(9, nil, msg), ReasonSchemaMismatch},
		{"id not in the registry", pbFrame(11, nil, msg), ReasonUnknownSchema},
		{"plain Protobuf", msg, ReasonUnknownSchema},
		{"truncated message", pbFrame(7, nil, msg[:len(msg)-1]), ReasonMalformed},
	}
	checkFramedCases(t, decs, cases, want)
	for _, id := range []uint32{7, 8, 9, 11} {
		if reg.fetches[id] != 1 {
			t.Errorf("id %d fetched %d times, want once", id, reg.fetches[id])
		}
	}
	// Reported once per id and message type: 8's First and First.Reading,
	// 7's Reading.Meta; 9 once (it does not compile).
	errs := reg.reported[8]
	if len(errs) != 2 || !errors.Is(errs[0], ErrSchemaMismatch) || !strings.Contains(errs[0].Error(), `message t.v1.First has no field "meta.ts", "country"`) ||
		!strings.Contains(errs[0].Error(), `field "user.id": t.v1.First.user is not a message`) || !strings.Contains(errs[1].Error(), "message type t.v1.First.Reading") {
		t.Errorf("id 8 reported %v, want two schema mismatches naming the fields", errs)
	}
	if len(reg.reported[7]) != 1 || len(reg.reported[9]) != 1 || !errors.Is(reg.reported[9][0], ErrSchemaMismatch) {
		t.Errorf("reports of 7 %v and 9 %v, want one each", reg.reported[7], reg.reported[9])
	}
}

// TestFramedProtobufType: a registered schema of the other format is a
// schema mismatch, reported by type, both ways.
func TestFramedProtobufType(t *testing.T) {
	for _, c := range []struct {
		cfg          Config
		typ, schema  string
		wantInReport string
	}{
		{pbFramedConfig(), "", avroTestSchema, "is AVRO, not Protobuf"},
		{pbFramedConfig(), "JSON", "{}", "is JSON, not Protobuf"},
		{framedConfig(), schemaTypeProtobuf, pbTestSchema, "is PROTOBUF, not Avro"},
	} {
		reg := newFakeRegistry(map[uint32]string{1: c.schema})
		reg.typ = c.typ
		d := framedDecoder(t, c.cfg, reg)
		var e Event
		if r := ReasonOf(d.Decode(pbFrame(1, nil, nil), &e)); r != ReasonSchemaMismatch {
			t.Errorf("%s: %v, want schema_mismatch", c.wantInReport, r)
		}
		if errs := reg.reported[1]; len(errs) != 1 || !strings.Contains(errs[0].Error(), c.wantInReport) {
			t.Errorf("reported %v, want %q", errs, c.wantInReport)
		}
	}
}

// TestFramedProtobufConcurrent: decoders on several goroutines share one
// Schemas; each id is fetched once and each message type bound and
// reported once (run with -race, as deploy/test.sh does).
func TestFramedProtobufConcurrent(t *testing.T) {
	reg := newFakeRegistry(map[uint32]string{8: pbSecondSchema})
	reg.typ = schemaTypeProtobuf
	cfg := pbFramedConfig()
	msg := pbReading(t, pbTestJSON)
	decodeConcurrently(t, cfg, reg, func(g, i int) ([]byte, Reason) {
		k := (i + g) % 2 // First (no configured field) and Reading
		return pbFrame(8, []int64{int64(k)}, msg), []Reason{ReasonSchemaMismatch, ReasonNone}[k]
	})
	if reg.fetches[8] != 1 || len(reg.reported[8]) != 1 {
		t.Errorf("fetched %d times, reported %v; want once each", reg.fetches[8], reg.reported[8])
	}
}
