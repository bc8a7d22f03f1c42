package operator

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestLogAppendTimeLayout: the fields of kafka-go's Batch that
// logAppendTime reads by reflection (the current record batch header:
// magic, attributes, max timestamp) are where this kafka-go version keeps
// them. An upgrade that moves them fails here: then check with
// TestKafkaLogAppendTime whether the new version reports LogAppendTime
// itself, and adapt logAppendTime. A Batch without a message set (as
// kafka-go returns on errors) has no header: no LogAppendTime, no panic.
func TestLogAppendTimeLayout(t *testing.T) {
	if !batchHeaderLayout.ok {
		t.Fatal("kafka-go's Batch no longer has msgs.readerStack.header.{magic, v2.attributes, v2.lastTimestamp}: " +
			"LogAppendTime record timestamps would be reported as the producers' CreateTime")
	}
	var b kafka.Batch
	if ts, ok := logAppendTime(&b); ok {
		t.Errorf("an empty batch reports LogAppendTime %v", ts)
	}
}
