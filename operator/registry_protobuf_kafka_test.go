package operator

// Integration test of framed Protobuf input against a real schema
// registry (deploy/registry/registry.sh) and broker; it skips as
// TestKafkaRegistryAvro does.

import (
	"context"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/dpstream/dpstream/operator/kafkatest"
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
	url := os.Getenv(envRegistry)
	if url == "" {
		t.Skip(envRegistry + " is not set: run deploy/registry/registry.sh start and export " + envRegistry + " as the URL it prints; deploy/test.sh does both")
	}
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName("dpstream-proto-in"), uniqueName("dpstream-proto-out")
	createTopic(t, cl, in, 1)
	const metaFile = "dpstream/common/meta.proto"
	registerSchema(t, url, in+"-meta", "PROTOBUF", testProtoMeta, nil)
	id := registerSchema(t, url, in+"-value", "PROTOBUF", testProtoSchema,
		[]map[string]any{{"name": metaFile, "subject": in + "-meta", "version": 1}})
	idNoRegion := registerSchema(t, url, in+"-other-value", "PROTOBUF", testProtoNoRegion, nil)
	reading := protoMessage(t, "Reading", map[string]string{"r.proto": testProtoSchema, metaFile: testProtoMeta}, "r.proto")
	noRegion := protoMessage(t, "Reading", map[string]string{"n.proto": testProtoNoRegion}, "n.proto")

	s := genStream(29, 3, 30)
	c := testConfig(brokers, in, out, uniqueName("dpstream-proto"))
	c.Kafka.CreateTopics = true
	c.Observability.SensitiveMetrics = true // the test reads the decode and skip counters
	c.Schema.Format = schema.FormatProtobuf
	c.Schema.Registry.URL = url
	msgs := s.messages(0, c.Windows.AllowedLateness) // the events, then the sentinel
	const mismatched = 3
	var pbMsgs []kafka.Message
	for i, m := range msgs {
		e := testEvent{user: "sentinel", region: "north", cat: "a", time: testStreamEnd.Load() - testArrivalDelay}
		if i < len(s.events) {
			e = s.events[i]
		}
		m.Value = framedProto(t, id, []int64{1}, reading, e)
		pbMsgs = append(pbMsgs, m)
		if i == 0 {
			for range mismatched {
				m.Value = framedProto(t, idNoRegion, nil, noRegion, e)
				pbMsgs = append(pbMsgs, m)
			}
		}
	}
	produce(t, brokers, in, pbMsgs)

	op, pub, logs := newLoggedTestOperator(t, c)
	if err := runUntil(t, op, testBase+2*testSize.Milliseconds(), pub, 90*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rels, _ := readReleases(t, cl, out)
	if n := checkReleases(t, s, c, rels); n != 72 {
		t.Errorf("checked %d values, want 72", n)
	}
	reg := op.Registry()
	if got := counter(t, reg, "dpstream_events_skipped_total", schema.ReasonSchemaMismatch.String()); got != mismatched {
		t.Errorf("schema_mismatch skips = %v, want %d", got, mismatched)
	}
	if got := counter(t, reg, "dpstream_events_in_total", in); got != float64(len(pbMsgs)) {
		t.Errorf("events_in_total = %v, want %d", got, len(pbMsgs))
	}
	if errs := errorLines(logs.String()); len(errs) != 1 || !strings.Contains(errs[0], `region`) || !strings.Contains(errs[0], "schema_id") ||
		!strings.Contains(errs[0], strconv.FormatUint(uint64(idNoRegion), 10)) {
		t.Errorf("ERROR lines %q, want one naming region and schema id %d", errs, idNoRegion)
	}
}
