package schema

// release_avro.go is the Avro form of the release records: the same flat
// record as the JSON one (ReleaseRecords: the same fields, in the same
// order, with the same values), as an Avro record in the Confluent wire
// format (the byte 0, the writer schema's id in a schema registry, 4
// bytes big endian, then the Avro binary record). The writer schema is
// fixed by the group-by field names, so one deployment registers one
// schema. Each record is made from the JSON record of the same value, so
// the two formats cannot drift apart.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
)

// AvroRecordName is the full name of the Avro release record (Connect's
// AvroConverter makes it the Connect schema's name, as ConnectSchemaName
// in the JSON envelope).
const AvroRecordName = ConnectSchemaName

// avroTypes maps the record's field types to Avro's.
var avroTypes = map[fieldType]string{ftString: "string", ftInt: "long", ftFloat: "double", ftBool: "boolean"}

// AvroReleases encodes releases as framed Avro records with one writer
// schema (NewAvroReleases).
type AvroReleases struct {
	text   string      // the writer schema's JSON, fixed for the group names
	schema avro.Schema // text, parsed
	groups []string    // the group-by field names, in order
	types  map[string]fieldType
}

// AvroReleaseSchema returns the Avro writer schema (JSON) of the release
// records of a configuration with the group-by fields groups (in order):
// a record AvroRecordName with the fields of the JSON record in its order,
// the group fields "group_<name>" strings with default "" (so that a
// schema with another group-by field reads older records: BACKWARD
// compatible), every other field required. The text is deterministic.
// A group name that makes no valid Avro field name (letters, digits, _)
// is an error wrapping ErrInvalidConfig.
func AvroReleaseSchema(groups []string) (string, error) {
	e, err := NewAvroReleases(groups)
	if err != nil {
		return "", err
	}
	return e.text, nil
}

// NewAvroReleases returns the encoder of the release records of a
// configuration with the group-by fields groups (AvroReleaseSchema).
func NewAvroReleases(groups []string) (*AvroReleases, error) {
	var b strings.Builder
	b.WriteString(`{"type":"record","name":"ReleaseValue","namespace":"dpstream","fields":[`)
	types := map[string]fieldType{}
	field := func(name string, t fieldType, group bool) {
		if len(types) > 0 {
			b.WriteByte(',')
		}
		types[name] = t
		q, _ := json.Marshal(name)
		fmt.Fprintf(&b, `{"name":%s,"type":"%s"`, q, avroTypes[t])
		if group {
			b.WriteString(`,"default":""`)
		}
		b.WriteByte('}')
	}
	for _, f := range headFields {
		field(f.name, f.typ, false)
	}
	for _, g := range groups {
		if !validAvroName(GroupFieldPrefix + g) {
			return nil, fmt.Errorf("%w: group-by field %q gives the Avro field name %q: Avro names are letters, digits and _", ErrInvalidConfig, g, GroupFieldPrefix+g)
		}
		field(GroupFieldPrefix+g, ftString, true)
	}
	for _, f := range tailFields {
		field(f.name, f.typ, false)
	}
	b.WriteString("]}")
	s, err := avro.ParseWithCache(b.String(), "", &avro.SchemaCache{})
	if err != nil { // a duplicate field name
		return nil, fmt.Errorf("%w: the release schema of group-by fields %q: %w", ErrInvalidConfig, groups, err)
	}
	return &AvroReleases{text: b.String(), schema: s, groups: groups, types: types}, nil
}

// validAvroName reports whether n is a valid Avro name: [A-Za-z_] then
// [A-Za-z0-9_]*.
func validAvroName(n string) bool {
	for i, c := range n {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return n != ""
}

// Schema returns the writer schema's JSON (AvroReleaseSchema).
func (e *AvroReleases) Schema() string { return e.text }

// Records validates r and returns its framed Avro records, one per
// released value, keyed as ReleaseRecords keys them, with the writer
// schema's registry id id. Equal releases give equal bytes. A release
// whose group fields are not those of the schema is an error wrapping
// ErrInvalidRelease.
func (e *AvroReleases) Records(r *Release, id uint32) ([]Record, error) {
	if len(r.Group) != len(e.groups) {
		return nil, fmt.Errorf("%w: %d group fields, the Avro release schema has %d", ErrInvalidRelease, len(r.Group), len(e.groups))
	}
	for i, g := range r.Group {
		if g.Name != e.groups[i] {
			return nil, fmt.Errorf("%w: group field %q, the Avro release schema has %q", ErrInvalidRelease, g.Name, e.groups[i])
		}
	}
	recs, err := ReleaseRecords(r, JSONOptions{})
	if err != nil {
		return nil, err
	}
	for i := range recs {
		m, err := e.avroValues(recs[i].Value)
		if err != nil {
			return nil, err
		}
		b, err := avro.Marshal(e.schema, m)
		if err != nil {
			return nil, fmt.Errorf("%w: Avro: %w", ErrInvalidRelease, err)
		}
		recs[i].Value = append(binary.BigEndian.AppendUint32([]byte{framedMagic}, id), b...)
	}
	return recs, nil
}

// avroValues converts a JSON release record to the values of its Avro
// record, by the fields' types: the same values (an int value becomes
// its double, exact up to 2⁵³).
func (e *AvroReleases) avroValues(rec []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(rec))
	d.UseNumber()
	var raw map[string]any
	if err := d.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRelease, err)
	}
	m := make(map[string]any, len(raw))
	for name, v := range raw {
		var err error
		switch e.types[name] {
		case ftInt:
			m[name], err = v.(json.Number).Int64()
		case ftFloat:
			m[name], err = v.(json.Number).Float64()
		default: // strings and the boolean
			m[name] = v
		}
		if err != nil {
			return nil, fmt.Errorf("%w: field %s: %w", ErrInvalidRelease, name, err)
		}
	}
	return m, nil
}

// AvroSchemaID returns the writer schema id of a framed Avro message, and
// false when b is not one (no magic byte 0, or shorter than the header).
func AvroSchemaID(b []byte) (uint32, bool) {
	if len(b) < framedHeader || b[0] != framedMagic {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[1:framedHeader]), true
}

// DecodeReleaseAvro decodes a framed Avro release record (AvroReleases)
// with its writer schema (the JSON the registry holds under the frame's
// id), as strictly as DecodeReleaseRecord: the same fields, versions and
// key checks. Errors wrap ErrInvalidRelease or ErrVersion and never quote
// the record's values.
func DecodeReleaseAvro(b []byte, writerSchema string) (ReleaseRecord, error) {
	if _, ok := AvroSchemaID(b); !ok {
		return ReleaseRecord{}, fmt.Errorf("%w: not a framed Avro record", ErrInvalidRelease)
	}
	s, err := avro.ParseWithCache(writerSchema, "", &avro.SchemaCache{})
	if err != nil {
		return ReleaseRecord{}, fmt.Errorf("%w: the writer schema: %w", ErrInvalidRelease, err)
	}
	rs, ok := s.(*avro.RecordSchema)
	if !ok {
		return ReleaseRecord{}, fmt.Errorf("%w: the writer schema is not a record", ErrInvalidRelease)
	}
	var m map[string]any
	if err := avro.Unmarshal(s, b[framedHeader:], &m); err != nil {
		return ReleaseRecord{}, fmt.Errorf("%w: Avro record does not decode", ErrInvalidRelease)
	}
	// The JSON record, in the writer schema's field order (the group
	// fields' order matters), read by the JSON decoder.
	w := &jsonWriter{b: []byte{'{'}}
	for _, f := range rs.Fields() {
		w.name(f.Name())
		v, err := json.Marshal(m[f.Name()])
		if err != nil {
			return ReleaseRecord{}, fmt.Errorf("%w: field %q", ErrInvalidRelease, f.Name())
		}
		if f.Name() == "value" && m["value_type"] == valueTypeInt {
			if x, ok := m["value"].(float64); ok && x == math.Trunc(x) && math.Abs(x) < 1<<63 { // an integral double: as an int
				v = strconv.AppendInt(nil, int64(x), 10)
			}
		}
		w.b = append(w.b, v...)
	}
	return DecodeReleaseRecord(append(w.b, '}'))
}

// DecodeReleaseAvroHead reads what identifies a framed Avro release
// record without its writer schema: the fields before the group fields,
// which every version of the schema starts with (schema_version, key,
// release_key, release_id, window_start, window_end, window_start_ms,
// window_end_ms; AvroReleases). Only those fields of the result are set;
// schema_version must be JSONRecordVersion (else ErrVersion) and the
// window texts must match their _ms fields (else ErrInvalidRelease).
func DecodeReleaseAvroHead(b []byte) (ReleaseRecord, error) {
	bad := fmt.Errorf("%w: not a framed Avro release record", ErrInvalidRelease)
	if _, ok := AvroSchemaID(b); !ok {
		return ReleaseRecord{}, bad
	}
	p := framedHeader
	long := func() int64 {
		v, n := binary.Varint(b[min(p, len(b)):]) // Avro longs are zigzag varints
		if n <= 0 {
			p = len(b) + 1
			return 0
		}
		p += n
		return v
	}
	str := func() string {
		n := long()
		if n < 0 || p > len(b) || n > int64(len(b)-p) {
			p = len(b) + 1
			return ""
		}
		s := string(b[p : p+int(n)])
		p += int(n)
		return s
	}
	var r ReleaseRecord
	version := long()
	r.Key, r.ReleaseKey, r.ReleaseID = str(), str(), str()
	start, end := str(), str()
	r.WindowStart, r.WindowEnd = long(), long()
	switch {
	case p > len(b):
		return ReleaseRecord{}, bad
	case version != JSONRecordVersion:
		return ReleaseRecord{}, fmt.Errorf("%w: Avro record version %d", ErrVersion, version)
	case start != rfc3339(r.WindowStart) || end != rfc3339(r.WindowEnd):
		return ReleaseRecord{}, bad
	}
	return r, nil
}
