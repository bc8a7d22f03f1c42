package schema

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// pbCase is one golden Protobuf event: a Reading of pbTestSchema given in
// the Protobuf JSON mapping, or raw bytes made from the typical one's.
type pbCase struct {
	name string
	js   string
	raw  func(valid []byte) []byte
}

// pbCases are the golden events of testdata/protobuf_events.txt.
func pbCases() []pbCase {
	repl := func(old, repl string) string { return strings.Replace(pbTestJSON, old, repl, 1) }
	field := func(num protowire.Number, typ protowire.Type, val []byte) []byte { return pbField(num, typ, val) }
	str := func(s string) []byte { return protowire.AppendString(nil, s) }
	plus := func(extra ...[]byte) func([]byte) []byte {
		return func(v []byte) []byte {
			out := append([]byte(nil), v...)
			for _, x := range extra {
				out = append(out, x...)
			}
			return out
		}
	}
	const minimal = `{"meta": {"ts": "1714564800123"}, "user": {"id": "u-1"}, "device": {}, "page": "home", "amount": 1}`
	return []pbCase{
		{name: "typical", js: pbTestJSON},
		{name: "second enum value", js: repl(`"os": "ios"`, `"os": "android"`)},
		{name: "repeated, map, bytes, oneof and packed fields skipped", js: repl(`"tags": ["a", "b"]`, `"tags": ["x", "y", "z"]`)},
		{name: "implicit presence absent: zero values (country \"\", os ios)", js: minimal},
		{name: "category home", js: repl(`"checkout"`, `"home"`)},
		{name: "unicode unit", js: repl(`"u-1234567"`, `"ü-ñ-日本"`)},
		{name: "negative value", js: repl(`"amount": 12.5`, `"amount": -3.25`)},
		{name: "explicit presence absent (optional amount)", js: strings.Replace(minimal, `, "amount": 1`, "", 1)},
		{name: "message on the unit path absent", js: strings.Replace(minimal, `"user": {"id": "u-1"}, `, "", 1)},
		{name: "empty unit", js: repl(`"u-1234567"`, `""`)},
		{name: "unknown category", js: repl(`"checkout"`, `"cart"`)},
		{name: "undeclared enum number", js: repl(`"os": "ios"`, `"os": 9`)},
		{name: "oversized group value", js: repl(`"DE"`, `"`+strings.Repeat("x", DefaultMaxStringLen+1)+`"`)},
		{name: "time before min_time", js: repl(`"1714564800123"`, `"-1"`)},
		{name: "empty message (no meta)", raw: func([]byte) []byte { return nil }},
		{name: "unknown fields of each wire type", raw: plus(field(99, protowire.VarintType, []byte{0x96, 0x01}),
			field(98, protowire.Fixed64Type, make([]byte, 8)), field(97, protowire.Fixed32Type, make([]byte, 4)),
			field(96, protowire.BytesType, str("skipped")), field(95, protowire.StartGroupType, nil),
			field(1, protowire.VarintType, []byte{1}), field(95, protowire.EndGroupType, nil))},
		{name: "configured field twice", raw: plus(field(5, protowire.BytesType, str("home")))},
		{name: "message on a configured path twice", raw: plus(field(1, protowire.BytesType, str("")))},
		{name: "invalid UTF-8 group value", raw: func([]byte) []byte {
			return append(pbReadingWithout("country"), field(3, protowire.BytesType, str("D\xffE"))...)
		}},
		{name: "configured field of another wire type", raw: func(v []byte) []byte { return append(field(5, protowire.VarintType, []byte{1}), v...) }},
		{name: "truncated", raw: func(v []byte) []byte { return v[:len(v)-1] }},
		{name: "field number 0", raw: func(v []byte) []byte { return append([]byte{0x00}, v...) }},
		{name: "unmatched end group", raw: plus(field(95, protowire.EndGroupType, nil))},
		{name: "varint longer than 10 bytes", raw: func([]byte) []byte { return []byte("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01") }},
		{name: "length beyond the message", raw: func([]byte) []byte { return []byte{0x2a, 0x7e, 'a'} }},
	}
}

// pbReadingWithout is the typical Reading without the top-level field
// key (encoded without a testing.TB: the schema is the tested constant).
func pbReadingWithout(key string) []byte {
	fd, err := compileProto(pbTestSchema, nil)
	if err != nil {
		panic(err)
	}
	md := fd.Messages().ByName("Reading")
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(pbTestJSON), m); err != nil {
		panic(err)
	}
	m.Clear(md.Fields().ByName(protoreflect.Name(key)))
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// pbCaseBytes returns the bytes of each case.
func pbCaseBytes(t testing.TB) [][]byte {
	valid := pbReading(t, pbTestJSON)
	var out [][]byte
	for _, c := range pbCases() {
		if c.raw != nil {
			out = append(out, c.raw(valid))
		} else {
			out = append(out, pbReading(t, c.js))
		}
	}
	return out
}

// TestProtobufGolden pins the Protobuf cases: testdata/protobuf_events.txt
// holds the schema, each event (wire format in hex) and its decoding
// under pbTestConfig (rewritten with -update). The test decodes the
// events read back from the file, so the file stays meaningful by itself;
// the same bytes framed (magic byte, schema id, message index 0) decode
// alike.
func TestProtobufGolden(t *testing.T) {
	d := mustDecoder(t, pbTestConfig())
	var out strings.Builder
	c := pbTestConfig()
	fmt.Fprintf(&out, "# Protobuf events of message %s of the schema below and their decoding: time_field %s, unit_field %s, group_by %s, histogram.field %s %q, value_field %s\n# schema: %s\n",
		c.ProtobufMessage, c.TimeField, c.UnitField, c.GroupBy, c.Histogram.Field, c.Histogram.Categories, c.ValueField, strings.Join(strings.Fields(pbTestSchema), " "))
	for i, msg := range pbCaseBytes(t) {
		var e Event
		fmt.Fprintf(&out, "\n## %s\n%s\n=> %s\n", pbCases()[i].name, hex.EncodeToString(msg), renderDecoded(&e, d.Decode(msg, &e)))
	}
	golden := compareGolden(t, filepath.Join("testdata", "protobuf_events.txt"), out.String())
	reg := newFakeRegistry(map[uint32]string{1: pbTestSchema})
	reg.typ = schemaTypeProtobuf
	fd := framedDecoder(t, pbFramedConfig(), reg)
	checkFramedGolden(t, golden, len(pbCases()), d, fd, func(msg []byte) []byte { return pbFrame(1, nil, msg) })
}

// FuzzDecodeProtobuf: plain Protobuf never panics, returns a valid event
// or an error with a known reason (checkResult), and an event it accepts
// is what google.golang.org/protobuf (dynamicpb: an independent reader)
// reads, when that reads the bytes (it refuses some messages this
// decoder skips unread, say invalid UTF-8 in an unconfigured string).
func FuzzDecodeProtobuf(f *testing.F) {
	for _, s := range pbCaseBytes(f) {
		f.Add(s)
	}
	cfg := fuzzLimits(pbTestConfig())
	cfg.TimeFormat = TimeUnixMillis
	d := mustDecoder(f, cfg) // the inputs of one process run one at a time
	md := pbDescriptor(f, pbTestSchema, "t.v1.Reading")
	fields := func(m protoreflect.Message, path ...string) protoreflect.Value {
		for _, k := range path[:len(path)-1] {
			m = m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(k))).Message()
		}
		return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(path[len(path)-1])))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var e Event
		err := d.Decode(msg, &e)
		checkResult(t, d, &e, err)
		ref := dynamicpb.NewMessage(md)
		if err != nil || proto.Unmarshal(msg, ref) != nil {
			return
		}
		osName := string(md.Fields().ByName("device").Message().Fields().ByName("os").Enum().Values().ByNumber(fields(ref, "device", "os").Enum()).Name())
		if fields(ref, "user", "id").String() != e.Unit || fields(ref, "amount").Float() != e.Value ||
			MakeGroup(fields(ref, "country").String(), osName) != e.Group || fields(ref, "meta", "ts").Int() != e.Time {
			t.Fatalf("decoded %+v, google.golang.org/protobuf %v", e, ref)
		}
	})
}

// FuzzDecodeFramedProtobuf: framed Protobuf (id 1, the test schema; id 2,
// pbSecondSchema, whose first message lacks the configured fields; every
// other id unknown) never panics and returns a valid event or an error
// with a known reason.
func FuzzDecodeFramedProtobuf(f *testing.F) {
	for _, s := range pbCaseBytes(f) {
		f.Add(pbFrame(1, nil, s))
		f.Add(pbFrame(2, []int64{1}, s))
	}
	f.Add(pbFrame(2, []int64{0, 0}, nil))
	cfg := pbFramedConfig()
	cfg.MaxKeyLen, cfg.MaxStringLen = 16, 24
	reg := newFakeRegistry(map[uint32]string{1: pbTestSchema, 2: pbSecondSchema})
	reg.typ = schemaTypeProtobuf
	d := framedDecoder(f, cfg, reg) // the inputs of one process run one at a time
	f.Fuzz(func(t *testing.T, msg []byte) {
		var e Event
		err := d.Decode(msg, &e)
		checkResult(t, d, &e, err)
		if len(msg) > framedHeader && msg[0] == 0 && msg[1]|msg[2]|msg[3] == 0 && msg[4] == 2 && msg[5] == 0 && ReasonOf(err) != ReasonSchemaMismatch {
			t.Fatalf("schema 2, message 0: %v, want schema_mismatch", err)
		}
	})
}
