package schema

// shape_schema.go lists the top-level field names of an Avro record or a
// Protobuf message for the input-shape check (Keys): the names of the
// writer schema the message is written with — the configured schema
// (plain) or the schema of the frame's id (framed: only one the Schemas
// already hold, never fetched here; also one that does not fit the
// configuration, whose messages are schema_mismatch, so that the check
// shows the names the producers use). Nothing is listed for a message
// that is not well formed in its schema.

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// schemaKeys is Keys for Avro and Protobuf.
func (d *Decoder) schemaKeys(msg []byte, fn func(key []byte)) {
	switch {
	case d.cfg.framed():
		d.framedKeys(msg, fn)
	case d.protoMD != nil:
		d.protoKeys(d.protoMD, msg, fn)
	default:
		d.avroKeys(d.avroRoot, msg, 0, fn)
	}
}

// framedKeys lists the names of a framed message whose schema id the
// Schemas hold (a message of another id lists none).
func (d *Decoder) framedKeys(msg []byte, fn func(key []byte)) {
	if d.schemas == nil || len(msg) < framedHeader || msg[0] != framedMagic {
		return
	}
	id := binary.BigEndian.Uint32(msg[1:framedHeader])
	e, ok := d.byID[id]
	if !ok {
		if e, ok = d.schemas.cached(id); !ok {
			return
		}
		if e.plan != nil || e.proto != nil || e.reason == ReasonSchemaMismatch {
			d.byID[id] = e // final, as scanFramed keeps it: the lock is not taken again for id
		}
	}
	if e.proto == nil {
		d.avroKeys(e.root, msg, framedHeader, fn)
		return
	}
	b := msg[framedHeader:]
	k := 1 // the single byte 0: the first message
	if len(b) == 0 || b[0] != 0 {
		if k = pbIndexLen(b); k < 0 {
			return
		}
	}
	if md := pbMessageOf(e.proto.file, b[:k]); md != nil {
		d.protoKeys(md, b[k:], fn)
	}
}

// cached returns the entry of id if s holds one, without fetching.
func (s *Schemas) cached(id uint32) (schemaEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	return e, ok
}

// avroKeys lists the field names of record t when msg from p is one
// well-formed record of t (every record carries every field of its
// schema; a null in a union is a value, as a JSON null is).
func (d *Decoder) avroKeys(t *avroType, msg []byte, p int, fn func(key []byte)) {
	if t == nil || t.kind != avRecord {
		return
	}
	if end, r := d.avSkip(t, msg, p, 0); r != ReasonNone || end != len(msg) {
		return
	}
	for _, n := range t.names {
		d.nameKey(n, fn)
	}
}

// protoKeys lists, when b is a well-formed message of md, the names of
// md's fields that b carries and those of its fields with implicit
// presence (proto3 without `optional`, repeated and map fields: an absent
// one reads as its zero value, Decode's rule), in declaration order.
// Unknown field numbers have no name and are not listed.
func (d *Decoder) protoKeys(md protoreflect.MessageDescriptor, b []byte, fn func(key []byte)) {
	fields := md.Fields()
	on := make([]bool, fields.Len()) // by field index: on the wire
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return
		}
		b = b[n:]
		if fd := fields.ByNumber(num); fd != nil {
			on[fd.Index()] = true
		}
	}
	for i := range fields.Len() {
		if fd := fields.Get(i); on[i] || !fd.HasPresence() {
			d.nameKey(string(fd.Name()), fn)
		}
	}
}

// nameKey calls fn with name unless it is longer than MaxKeyLen (as Keys
// skips such keys of JSON and msgpack).
func (d *Decoder) nameKey(name string, fn func(key []byte)) {
	if len(name) <= d.cfg.MaxKeyLen {
		fn([]byte(name))
	}
}
