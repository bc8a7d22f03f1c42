package rng

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const testKeyHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

func TestKeyNeverPrints(t *testing.T) {
	k, err := ParseKeyHex(testKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		fmt.Fprintf(&sb, verb+"|", k)
	}
	fmt.Fprintf(&sb, "%v|", struct{ K Key }{k})
	fmt.Fprintf(&sb, "%v|", &k)
	sb.WriteString(k.String() + k.GoString())
	j, err := json.Marshal(struct{ K Key }{k})
	if err != nil {
		t.Fatal(err)
	}
	sb.Write(j)
	h := slog.NewTextHandler(&sb, nil)
	slog.New(h).Info("key", "k", k)
	out := strings.ToLower(sb.String())
	// No two consecutive key bytes, in hex or decimal, may appear.
	for _, leak := range []string{"0011", "2233", "aabb", "ccdd", "[0 17", "0 17 34", "\\x00\\x11"} {
		if strings.Contains(out, leak) {
			t.Errorf("key material %q printed in %q", leak, out)
		}
	}
	if !strings.Contains(out, "redacted") {
		t.Errorf("expected redacted output, got %q", out)
	}
}

func TestParseKey(t *testing.T) {
	want, _ := ParseKeyHex(testKeyHex)
	raw := want
	cases := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"hex", []byte(testKeyHex), true},
		{"hex with newline", []byte(testKeyHex + "\n"), true},
		{"upper-case hex", []byte(strings.ToUpper(testKeyHex)), true},
		{"raw", raw[:], true},
		{"short hex", []byte(testKeyHex[:62]), false},
		{"not hex", []byte(strings.Repeat("zz", KeySize)), false},
		{"all zero", make([]byte, KeySize), false},
		{"empty", nil, false},
	}
	for _, c := range cases {
		k, err := ParseKey(c.data)
		if c.ok && (err != nil || k != want) {
			t.Errorf("%s: ParseKey = %v, %v", c.name, k == want, err)
		}
		if !c.ok && !errors.Is(err, ErrKey) {
			t.Errorf("%s: error %v, want ErrKey", c.name, err)
		}
		if err != nil && strings.Contains(strings.ToLower(err.Error()), "zz") {
			t.Errorf("%s: error echoes the input: %v", c.name, err)
		}
	}
}
