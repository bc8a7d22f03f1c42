package operator

// Records written by the code before the operator was cut into stages
// (commit eefee8e, generated there with the same inputs) are read by this
// code, and this code writes the same bytes: a state record pointing at a
// publication intent, the intent's chunk, and a partial-state message.
// Deterministic (fixed bytes, fixed key): no false-failure rate.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/windows"
)

// Written by eefee8e: json.Marshal of a stateRecord as stateMessage
// encodes it, the chunk of encodeIntent(compatReleases), and the message
// partialMessages wrote for an empty partial of window 60000 and input
// partition 3 under partialMACKey(testKey(), testBinding()).
const (
	compatState        = `{"v":2,"closed_through":60000,"output_offsets":{"0":3,"1":7},"digest":"digest-a","pending":{"through":120000,"chunks":1,"messages":2,"sha256":"d3fecec5aa2c0582b22dd46890da0002f3213c73d2eec49baa8661b35ba012b8","ledger":{"start":0,"end":0,"size":0,"total":{"Epsilon":0,"Delta":0},"base":{"Epsilon":0,"Delta":0},"budget":"","seg_start":0,"through":0,"spent":{"Epsilon":0,"Delta":0}},"digest":"digest-b"},"partials_bound_from":60000,"deployment":{"cluster_id":"cid","output_topic":"out","group_id":"g","namespace":"ns","input_topics":["a","b"],"partials_topic":"out.partials"}}`
	compatChunk        = "0b6e732f77312f636f756e74197b2276223a312c2272656c65617365223a22636f756e74227d096e732f77312f73756d04000102ff"
	compatPartialKey   = "60000/3"
	compatPartialValue = "64707033c0a90706b9bc857dec9087f06d58f5e5a1c97a73ba37df28d7efe2cc89795ce1acb3a895000144505350010000000000000000000000000000000000c0a907e0c508010600000000"
)

// compatReleases are the release messages of compatChunk.
var compatReleases = []kafka.Message{
	{Key: []byte("ns/w1/count"), Value: []byte(`{"v":1,"release":"count"}`)},
	{Key: []byte("ns/w1/sum"), Value: []byte{0, 1, 2, 255}},
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFormatsOfEarlierCode: the state record, its intent and a partial
// written by the earlier code are read, and written again byte for byte.
func TestFormatsOfEarlierCode(t *testing.T) {
	s, err := decodeState([]byte(compatState))
	if err != nil {
		t.Fatal(err)
	}
	if s.ClosedThrough != 60000 || s.Digest != "digest-a" || s.PartialsBoundFrom != 60000 || s.Pending == nil ||
		s.Pending.Through != 120000 || s.Deployment == nil || s.Deployment.PartialsTopic != "out.partials" {
		t.Fatalf("state record read as %+v", s)
	}
	if b, err := json.Marshal(s); err != nil || string(b) != compatState {
		t.Errorf("state record written again differs (err %v):\n%s\nwant\n%s", err, b, compatState)
	}

	chunk := unhex(t, compatChunk)
	msgs, err := readIntent(s.Pending, map[int][]byte{0: chunk})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(compatReleases) {
		t.Fatalf("intent read as %d messages, want %d", len(msgs), len(compatReleases))
	}
	for i, m := range msgs {
		if !bytes.Equal(m.Key, compatReleases[i].Key) || !bytes.Equal(m.Value, compatReleases[i].Value) {
			t.Errorf("intent message %d differs", i)
		}
	}
	if chunks, sum := encodeIntent(compatReleases); len(chunks) != 1 || !bytes.Equal(chunks[0], chunk) || sum != s.Pending.SHA256 {
		t.Errorf("intent written again differs")
	}

	macKey := partialMACKey(testKey(), testBinding())
	value := unhex(t, compatPartialValue)
	got, err := assembleWith(newAssembler(macKey, nil, math.MinInt64), []kafka.Message{{Value: value}})
	if err != nil || len(got) != 1 {
		t.Fatalf("partial read: %d assembled, err %v", len(got), err)
	}
	var p windows.Partial
	if err := p.UnmarshalBinary(got[0]); err != nil || p.Start != 60000 || len(p.Partitions) != 1 || p.Partitions[0] != 3 {
		t.Fatalf("partial decoded as %+v, err %v", p, err)
	}
	again := partialMessages("out.partials", macKey, 60000, 3, got[0])
	if len(again) != 1 || string(again[0].Key) != compatPartialKey || !bytes.Equal(again[0].Value, value) {
		t.Errorf("partial written again differs")
	}
}
