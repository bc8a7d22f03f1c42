package schema

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file is Protobuf in the Confluent wire format: after the magic
// byte and the schema id come the message indexes, which name the message
// type within the schema's .proto file — a zig-zag varint count, then as
// many zig-zag varint indexes (the first into the file's top-level
// messages, each next one into the nested messages of the previous); the
// count 0 alone (the single byte 0) means [0], the file's first message.
// A message type is bound to the configured paths at its first message
// and cached per schema id; one that lacks a configured field is reported
// once per id and type, and its messages are schema_mismatch.

// maxPbDecoderKeys bounds the (id, index bytes) pairs a Decoder caches
// without the lock: index bytes may vary (a varint has many encodings),
// and past the bound lookups go through the shared, bounded cache.
const maxPbDecoderKeys = 1024

// pbSchema is one compiled Protobuf schema of the registry.
type pbSchema struct {
	file protoreflect.FileDescriptor

	mu    sync.Mutex
	bound map[string]pbBound // by message full name; only names in file
}

// pbBound is a message type bound to the configured paths, or the reason
// its messages are skipped.
type pbBound struct {
	plan   *pbPlan
	reason Reason
}

// pbKey is a Decoder's cache key of a message type: the schema id and
// the bytes of the message indexes.
type pbKey struct {
	id  uint32
	idx string
}

// pbMessageOf returns the message type that the message indexes idx
// (well formed: pbIndexLen) name in file, or nil when they name none.
func pbMessageOf(file protoreflect.FileDescriptor, idx []byte) protoreflect.MessageDescriptor {
	u, p := protowire.ConsumeVarint(idx)
	count := protowire.DecodeZigZag(u)
	msgs := file.Messages()
	if count == 0 {
		count, idx = 1, []byte{0} // [0]: the first message
		p = 0
	}
	var md protoreflect.MessageDescriptor
	for ; count > 0; count-- {
		u, n := protowire.ConsumeVarint(idx[p:])
		p += n
		i := protowire.DecodeZigZag(u)
		if i < 0 || i >= int64(msgs.Len()) {
			return nil
		}
		md = msgs.Get(int(i))
		msgs = md.Messages()
	}
	return md
}

// message returns the binding of message type md of schema id, binding
// it (and reporting it when it does not fit) at its first use.
func (s *Schemas) message(id uint32, ps *pbSchema, md protoreflect.MessageDescriptor) pbBound {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	name := string(md.FullName())
	if b, ok := ps.bound[name]; ok {
		return b
	}
	plan, err := s.tmpl.bindProto(md)
	b := pbBound{plan: plan}
	if err != nil {
		s.report(id, fmt.Errorf("message type %s: %w", name, err))
		b.reason = ReasonSchemaMismatch
	}
	ps.bound[name] = b
	return b
}

// scanFramedProto reads the message indexes and the message in b, of
// schema id.
func (d *Decoder) scanFramedProto(id uint32, ps *pbSchema, b []byte) Reason {
	k := 1 // the bytes of the indexes; the usual single byte 0 first
	if len(b) == 0 || b[0] != 0 {
		k = pbIndexLen(b)
		if k < 0 {
			return ReasonMalformed
		}
	}
	if l := &d.pbLast; l.ok && l.key.id == id && l.key.idx == string(b[:k]) {
		return d.scanProto(l.bound.plan, b[k:]) // the common case: as the last message
	}
	key := pbKey{id, string(b[:k])}
	bound, ok := d.pbByKey[key]
	if !ok {
		md := pbMessageOf(ps.file, b[:k])
		if md == nil {
			return ReasonUnknownSchema
		}
		bound = d.schemas.message(id, ps, md)
		if len(d.pbByKey) < maxPbDecoderKeys {
			if d.pbByKey == nil {
				d.pbByKey = map[pbKey]pbBound{}
			}
			d.pbByKey[key] = bound
		}
	}
	if bound.plan == nil {
		return bound.reason
	}
	d.pbLast = pbLast{key: key, bound: bound, ok: true}
	return d.scanProto(bound.plan, b[k:])
}

// pbLast is a Decoder's last usable message type (the id and indexes of
// one topic's messages rarely change), looked up before pbByKey.
type pbLast struct {
	key   pbKey
	bound pbBound
	ok    bool
}

// pbIndexLen returns the length in bytes of the message indexes at the
// start of b, or −1 when they are malformed.
func pbIndexLen(b []byte) int {
	u, p := protowire.ConsumeVarint(b)
	if p < 0 {
		return -1
	}
	count := protowire.DecodeZigZag(u)
	if count < 0 || count > int64(len(b)-p) { // every index takes a byte
		return -1
	}
	for ; count > 0; count-- {
		_, n := protowire.ConsumeVarint(b[p:])
		if n < 0 {
			return -1
		}
		p += n
	}
	return p
}
