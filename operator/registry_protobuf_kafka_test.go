package operator

// Integration test of framed Protobuf input against a real schema
// registry (deploy/registry/registry.sh) and broker; it skips as
// TestKafkaRegistryAvro does.

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/dpstream/dpstream/schema"
)

// testProtoMeta is a file the test schema imports (a registry reference):
// the type of a field the config skips.
const testProtoMeta = `syntax = "proto3";
package dpstream.common;
message Meta { string extra = 1; }
`

// testProtoSchema has the test stream's events as its second message,
// Reading (message indexes [1]), after a Header the config never reads.
const testProtoSchema = `syntax = "proto3";
package dpstream.test;
import "dpstream/common/meta.proto";
message Header { string source = 1; }
message Reading {
  int64 ts = 1;
  string user = 2;
  dpstream.common.Meta meta = 3;
  string region = 4;
  string cat = 5;
  double v = 6;
}
`

// testProtoNoRegion is a schema without the group-by field region.
const testProtoNoRegion = `syntax = "proto3";
package dpstream.test;
message Reading { int64 ts = 1; string user = 2; string cat = 3; double v = 4; }
`

// protoMessage compiles the .proto files (the first is the schema, the
// others what it imports, by name) and returns message name of the first.
func protoMessage(t *testing.T, name string, files map[string]string, first string) protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(files)}}
	res, err := c.Compile(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	md := res[0].Messages().ByName(protoreflect.Name(name))
	if md == nil {
		t.Fatalf("no message %s", name)
	}
	return md
}

// framedProto encodes the event e as message md in the Confluent wire
// format: magic byte, id, the message indexes idx, the message.
func framedProto(t *testing.T, id uint32, idx []int64, md protoreflect.MessageDescriptor, e testEvent) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	set := func(field string, v protoreflect.Value) {
		if fd := md.Fields().ByName(protoreflect.Name(field)); fd != nil {
			m.Set(fd, v)
		}
	}
	set("ts", protoreflect.ValueOfInt64(e.time))
	set("user", protoreflect.ValueOfString(e.user))
	set("region", protoreflect.ValueOfString(e.region))
	set("cat", protoreflect.ValueOfString(e.cat))
	set("v", protoreflect.ValueOfFloat64(e.value))
	if fd := md.Fields().ByName("meta"); fd != nil {
		meta := dynamicpb.NewMessage(fd.Message())
		meta.Set(fd.Message().Fields().ByName("extra"), protoreflect.ValueOfString("ignored"))
		m.Set(fd, protoreflect.ValueOfMessage(meta))
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.BigEndian.AppendUint32([]byte{0}, id)
	out = protowire.AppendVarint(out, protowire.EncodeZigZag(int64(len(idx))))
	for _, i := range idx {
		out = protowire.AppendVarint(out, protowire.EncodeZigZag(i))
	}
	return append(out, b...)
}

// TestKafkaRegistryProtobuf: the test stream, produced as
// Confluent-framed Protobuf (the second message of a registered schema
// that imports a registered file through a reference), releases what the
// same events in JSON/msgpack release (checkReleases, as
// TestKafkaRegistryAvro); messages of a second schema id without the
// group-by field are skipped as schema_mismatch, with one ERROR naming
// the field and the id.
func TestKafkaRegistryProtobuf(t *testing.T) {
	url, c, cl := registryTest(t, "dpstream-proto")
	in := c.Kafka.InputTopics[0]
	const metaFile = "dpstream/common/meta.proto"
	registerSchema(t, url, in+"-meta", "PROTOBUF", testProtoMeta, nil)
	id := registerSchema(t, url, in+"-value", "PROTOBUF", testProtoSchema,
		[]map[string]any{{"name": metaFile, "subject": in + "-meta", "version": 1}})
	idNoRegion := registerSchema(t, url, in+"-other-value", "PROTOBUF", testProtoNoRegion, nil)
	reading := protoMessage(t, "Reading", map[string]string{"r.proto": testProtoSchema, metaFile: testProtoMeta}, "r.proto")
	noRegion := protoMessage(t, "Reading", map[string]string{"n.proto": testProtoNoRegion}, "n.proto")

	c.Schema.Format = schema.FormatProtobuf
	checkRegistryRun(t, registryRun{c: c, s: genStream(29, 3, 30), cl: cl, idNoRegion: idNoRegion,
		encode:   func(e testEvent) []byte { return framedProto(t, id, []int64{1}, reading, e) },
		mismatch: func(e testEvent) []byte { return framedProto(t, idNoRegion, nil, noRegion, e) },
	})
}
