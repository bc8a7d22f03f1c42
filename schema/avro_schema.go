package schema

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"
)

// This file turns an Avro writer schema into the decoder's view of it: a
// tree of avroType (what the binary encoding of each value looks like, so
// that values can be skipped by type) and, bound to the configured paths
// (pathtree.go), an avroPlan: for each record on a configured path, what
// to do with each of its fields in writer order — skip it, read it as a
// configured field, or descend into it. The schema is parsed by
// github.com/hamba/avro/v2; the binary is walked here (avro.go), reading
// only the configured fields.

// avroKind is the type of an Avro value.
type avroKind uint8

const (
	avNull avroKind = iota
	avBool
	avInt
	avLong
	avFloat
	avDouble
	avBytes
	avString
	avRecord
	avEnum
	avArray
	avMap
	avUnion
	avFixed
)

// Time logical types of an Avro long.
const (
	avTimeNone   uint8 = iota
	avTimeMillis       // timestamp-millis: unix ms
	avTimeMicros       // timestamp-micros: unix µs
)

// avroType is one Avro type as the decoder needs it.
type avroType struct {
	kind    avroKind
	logical uint8    // avTime* for a long
	names   []string // record field names
	// recFields are the record's field types (pointers, so that recursive
	// named types share one node).
	recFields []*avroType
	elem      *avroType   // array items, map values
	branches  []*avroType // union branches
	symbols   [][]byte    // enum symbols
	// size is the constant encoded size in bytes, or −1 when it varies
	// (a type of varying size takes at least one byte).
	size int
}

// plainAvro parses the configured writer schema and binds it to d's
// paths.
func (d *Decoder) plainAvro() (*avroPlan, error) {
	text := d.cfg.AvroSchema
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("format avro needs avro_schema or registry.url")
	}
	t, err := parseAvro(text)
	if err != nil {
		return nil, fmt.Errorf("avro_schema: %w", err)
	}
	plan, err := d.bindAvro(t)
	if err != nil {
		return nil, fmt.Errorf("avro_schema: %w", err)
	}
	d.avroRoot = t
	return plan, nil
}

// parseAvro parses a writer schema (with a fresh cache of named types, so
// that schemas of different ids never share a name's definition) and
// converts it.
func parseAvro(text string) (*avroType, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, err
	}
	return convertAvro(s, map[string]*avroType{}), nil
}

// convertAvro converts s; named holds the named types converted so far
// (a reference to one being converted is a recursive type).
func convertAvro(s avro.Schema, named map[string]*avroType) *avroType {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		if t := named[n.FullName()]; t != nil {
			return t
		}
	}
	switch s := s.(type) {
	case *avro.RecordSchema:
		t := &avroType{kind: avRecord, size: -1}
		named[s.FullName()] = t
		size := 0
		for _, f := range s.Fields() {
			ft := convertAvro(f.Type(), named)
			t.names = append(t.names, f.Name())
			t.recFields = append(t.recFields, ft)
			if size >= 0 && ft.size >= 0 && ft != t {
				size += ft.size
			} else {
				size = -1
			}
		}
		t.size = size
		return t
	case *avro.EnumSchema:
		t := &avroType{kind: avEnum, size: -1}
		named[s.FullName()] = t
		for _, sym := range s.Symbols() {
			t.symbols = append(t.symbols, []byte(sym))
		}
		return t
	case *avro.FixedSchema:
		t := &avroType{kind: avFixed, size: s.Size()}
		named[s.FullName()] = t
		return t
	case *avro.ArraySchema:
		return &avroType{kind: avArray, size: -1, elem: convertAvro(s.Items(), named)}
	case *avro.MapSchema:
		return &avroType{kind: avMap, size: -1, elem: convertAvro(s.Values(), named)}
	case *avro.UnionSchema:
		t := &avroType{kind: avUnion, size: -1}
		for _, b := range s.Types() {
			t.branches = append(t.branches, convertAvro(b, named))
		}
		return t
	case *avro.PrimitiveSchema:
		return primitiveAvro(s)
	}
	return &avroType{kind: avNull} // unreachable: every Avro schema is one of the above
}

// primitiveAvro converts a primitive type; the encoded sizes are those of
// the Avro specification (boolean one byte, float four, double eight).
func primitiveAvro(s *avro.PrimitiveSchema) *avroType {
	t := &avroType{size: -1}
	switch s.Type() {
	case avro.Null:
		t.kind, t.size = avNull, 0
	case avro.Boolean:
		t.kind, t.size = avBool, 1
	case avro.Int:
		t.kind = avInt
	case avro.Long:
		t.kind = avLong
		if l := s.Logical(); l != nil {
			switch l.Type() {
			case avro.TimestampMillis:
				t.logical = avTimeMillis
			case avro.TimestampMicros:
				t.logical = avTimeMicros
			}
		}
	case avro.Float:
		t.kind, t.size = avFloat, 4
	case avro.Double:
		t.kind, t.size = avDouble, 8
	case avro.Bytes:
		t.kind = avBytes
	case avro.String:
		t.kind = avString
	}
	return t
}

// avroStep is what the decoder does with one field of a record.
type avroStep struct {
	t *avroType
	// ref is unconfigured (skip the value), a field index (read it) or
	// ^node (descend: the configured fields of node lie below).
	ref int
	// sub, for a descent, is the plan of each record the value may be:
	// sub[0] for a record, sub[i] for union branch i (nil when the branch
	// is not a record).
	sub []*avroPlan
}

// avroPlan is a record bound to a node of the configured paths.
type avroPlan struct {
	steps []avroStep
}

// bindAvro binds the record root to node 0 of d's paths. It returns an
// error naming every configured field the schema does not contain.
func (d *Decoder) bindAvro(root *avroType) (*avroPlan, error) {
	if root.kind != avRecord {
		return nil, fmt.Errorf("%w: the Avro schema is not a record", ErrSchemaMismatch)
	}
	found := make([]bool, len(d.fields))
	plan := d.bindRecord(root, 0, found)
	var missing []string
	for i, ok := range found {
		if !ok {
			missing = append(missing, fmt.Sprintf("%q", d.fields[i].name))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: the Avro schema has no field %s", ErrSchemaMismatch, strings.Join(missing, ", "))
	}
	return plan, nil
}

// bindRecord binds record t to node ni, marking the fields found. It
// recurses once per key of a configured path: at most MaxPathDepth deep.
func (d *Decoder) bindRecord(t *avroType, ni int, found []bool) *avroPlan {
	p := &avroPlan{steps: make([]avroStep, len(t.recFields))}
	for i, ft := range t.recFields {
		ref := find(d.nodes[ni].keys, []byte(t.names[i]))
		st := avroStep{t: ft, ref: ref}
		switch {
		case ref >= 0:
			found[ref] = true
		case ref != unconfigured:
			sub := []*avroType{ft}
			if ft.kind == avUnion {
				sub = ft.branches
			}
			st.sub = make([]*avroPlan, len(sub))
			for j, b := range sub {
				if b.kind == avRecord {
					st.sub[j] = d.bindRecord(b, ^ref, found)
				}
			}
		}
		p.steps[i] = st
	}
	return p
}
