package schema

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// keysOf returns what Keys lists for msg, joined by commas.
func keysOf(d *Decoder, msg []byte) string {
	var got []string
	d.Keys(msg, func(k []byte) { got = append(got, string(k)) })
	return strings.Join(got, ",")
}

// avroTestNames are the top-level field names of avroTestSchema.
const avroTestNames = "meta,user,country,device,page,amount,blob,hash,score,n,flag"

// TestShapeKeysAvro: Keys lists the writer record's top-level field
// names for a well-formed record (plain: the configured schema; framed:
// the schema of the frame's id, also one lacking a configured field),
// nothing for a truncated record, an id the cache does not hold (never
// fetched by Keys) or an unframed message.
func TestShapeKeysAvro(t *testing.T) {
	rec := encAvro(t, avroTestSchema, avroTestRecord())
	d := mustDecoder(t, avroTestConfig())
	if got := keysOf(d, rec); got != avroTestNames {
		t.Errorf("plain: Keys = %q, want %q", got, avroTestNames)
	}
	if got := keysOf(d, rec[:len(rec)-1]); got != "" {
		t.Errorf("plain, truncated: Keys = %q, want none", got)
	}
	reg := newFakeRegistry(map[uint32]string{7: avroTestSchema, 8: avroNoUnitSchema})
	f := framedDecoder(t, framedConfig(), reg)
	noUnit := encAvro(t, avroNoUnitSchema, avroTestRecord())
	var e Event
	_ = f.Decode(frame(7, rec), &e)
	if err := f.Decode(frame(8, noUnit), &e); ReasonOf(err) != ReasonSchemaMismatch {
		t.Fatalf("schema 8: %v, want schema_mismatch", err)
	}
	fresh := sharedDecoder(t, framedConfig(), f.schemas) // has decoded nothing: the shared cache answers
	for _, c := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"id 7", frame(7, rec), avroTestNames},
		{"id 8, not fitting", frame(8, noUnit), avroTestNames},
		{"id 7, trailing byte", frame(7, append(rec[:len(rec):len(rec)], 0)), ""},
		{"id 9, not fetched", frame(9, rec), ""},
		{"unframed", rec, ""},
	} {
		for i, dec := range []*Decoder{f, fresh} {
			if got := keysOf(dec, c.msg); got != c.want {
				t.Errorf("framed %s, decoder %d: Keys = %q, want %q", c.name, i, got, c.want)
			}
		}
	}
	if reg.fetches[9] != 0 {
		t.Errorf("Keys fetched id 9 %d times", reg.fetches[9])
	}
}

// pbTestNames are the fields of pbTestSchema's Reading that pbTestJSON
// sets, in declaration order (b, of the oneof, it does not).
const pbTestNames = "meta,user,country,device,page,amount,blob,hash,score,n,flag,packed,a"

// TestShapeKeysProtobuf: Keys lists the fields of the message type a
// well-formed message carries and those with implicit presence (read as
// their zero value when absent), not the absent ones with presence (an
// `optional` field, a message, a oneof member), for plain and framed
// Protobuf (framed: the type the message indexes name, also one lacking
// a configured field); nothing for a malformed message.
func TestShapeKeysProtobuf(t *testing.T) {
	msg := pbReading(t, pbTestJSON)
	sparse := pbReading(t, `{"meta": {"ts": "1"}, "b": 3}`)
	const sparseNames = "meta,country,page,blob,hash,score,n,flag,packed,b"
	d := mustDecoder(t, pbTestConfig())
	for _, c := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"typical", msg, pbTestNames},
		{"sparse", sparse, sparseNames},
		{"truncated", msg[:len(msg)-1], ""},
	} {
		if got := keysOf(d, c.msg); got != c.want {
			t.Errorf("plain %s: Keys = %q, want %q", c.name, got, c.want)
		}
	}
	reg := newFakeRegistry(map[uint32]string{7: pbTestSchema, 8: pbSecondSchema})
	reg.typ = schemaTypeProtobuf
	f := framedDecoder(t, pbFramedConfig(), reg)
	var e Event
	_ = f.Decode(pbFrame(7, nil, msg), &e)
	if err := f.Decode(pbFrame(8, nil, msg), &e); ReasonOf(err) != ReasonSchemaMismatch {
		t.Fatalf("schema 8, First: %v, want schema_mismatch", err)
	}
	first := pbFrame(8, nil, pbField(1, protowire.BytesType, protowire.AppendBytes(nil, []byte("u")))) // First{user: "u"}
	for _, c := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"id 7", pbFrame(7, nil, msg), pbTestNames},
		{"id 7, sparse", pbFrame(7, []int64{0}, sparse), sparseNames},
		{"id 8, Reading [1]", pbFrame(8, []int64{1}, msg), pbTestNames},
		{"id 8, First, not fitting", first, "user"},
		{"id 8, no such message [5]", pbFrame(8, []int64{5}, msg), ""},
		{"id 7, truncated", pbFrame(7, nil, msg[:len(msg)-1]), ""},
		{"id 9, not fetched", pbFrame(9, nil, msg), ""},
	} {
		if got := keysOf(f, c.msg); got != c.want {
			t.Errorf("framed %s: Keys = %q, want %q", c.name, got, c.want)
		}
	}
	if reg.fetches[9] != 0 {
		t.Errorf("Keys fetched id 9 %d times", reg.fetches[9])
	}
}
