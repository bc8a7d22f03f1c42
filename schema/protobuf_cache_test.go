package schema

import (
	"fmt"
	"testing"
)

// TestProtobufCompiledOnce: two decoders (and the validation before
// each) of the same plain Protobuf schema share one compiled file; a
// different text is compiled apart; the cache keeps at most
// protoCacheSize texts, the most recent ones.
func TestProtobufCompiledOnce(t *testing.T) {
	a, b := mustDecoder(t, pbTestConfig()), mustDecoder(t, pbTestConfig())
	if a.protoMD.ParentFile() != b.protoMD.ParentFile() {
		t.Error("two decoders of one schema compiled it twice")
	}
	other := pbTestConfig()
	other.ProtobufSchema += "\n// another text\n"
	if c := mustDecoder(t, other); c.protoMD.ParentFile() == a.protoMD.ParentFile() {
		t.Error("two texts share one compiled file")
	}
	for i := range protoCacheSize + 3 {
		if _, err := compilePlainProto(fmt.Sprintf("syntax = \"proto3\";\nmessage M%d { int64 ts = 1; }\n", i)); err != nil {
			t.Fatal(err)
		}
	}
	protoCache.mu.Lock()
	n, m := len(protoCache.files), len(protoCache.order)
	_, newest := protoCache.files[fmt.Sprintf("syntax = \"proto3\";\nmessage M%d { int64 ts = 1; }\n", protoCacheSize+2)]
	protoCache.mu.Unlock()
	if n != protoCacheSize || m != protoCacheSize || !newest {
		t.Errorf("cache holds %d texts (%d in order), newest kept %v; want %d and the newest", n, m, newest, protoCacheSize)
	}
}
