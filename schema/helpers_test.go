package schema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// kv is one map entry of a test message, in order. A value of type rawMP
// is written as-is into msgpack, rawJS as-is into JSON.
type kv struct {
	k string
	v any
}

// An obj value is a nested map, written in the given order (unlike a Go
// map, whose order encoders choose).
type (
	rawMP []byte
	rawJS string
	obj   []kv
)

// encMP encodes kvs as a msgpack map in the given order, with msgpack/v5
// as an independent encoder.
func encMP(t testing.TB, kvs ...kv) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeMapLen(len(kvs)); err != nil {
		t.Fatal(err)
	}
	for _, e := range kvs {
		if err := enc.EncodeString(e.k); err != nil {
			t.Fatal(err)
		}
		var err error
		switch v := e.v.(type) {
		case rawMP:
			_, err = buf.Write(v)
		case rawJS:
			t.Fatalf("rawJS value for key %q in a msgpack message", e.k)
		case obj:
			_, err = buf.Write(encMP(t, v...))
		default:
			err = enc.Encode(v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// encJS encodes kvs as a JSON object in the given order, each value with
// encoding/json.
func encJS(t testing.TB, kvs ...kv) []byte {
	t.Helper()
	b := []byte{'{'}
	for i, e := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(e.k)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, k...), ':')
		switch v := e.v.(type) {
		case rawJS:
			b = append(b, v...)
		case rawMP:
			t.Fatalf("rawMP value for key %q in a JSON message", e.k)
		case obj:
			b = append(b, encJS(t, v...)...)
		default:
			j, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, j...)
		}
	}
	return append(b, '}')
}

// testConfig is the typical 6-field configuration used across the tests.
func testConfig() Config {
	return Config{
		TimeField:  "ts",
		TimeFormat: TimeUnixMillis,
		UnitField:  "user_id",
		GroupBy:    []string{"country", "device"},
		Histogram:  &Histogram{Field: "page", Categories: []string{"home", "search", "checkout"}},
		ValueField: "amount",
		Lower:      0,
		Upper:      100,
	}
}

// testEvent is a typical event for testConfig, and want is its decoding.
func testEvent() []kv {
	return []kv{
		{"ts", int64(1714564800123)},
		{"user_id", "u-1234567"},
		{"country", "DE"},
		{"device", "mobile"},
		{"page", "checkout"},
		{"amount", 12.5},
	}
}

var testWant = Event{
	Time: 1714564800123, Unit: "u-1234567", Group: MakeGroup("DE", "mobile"),
	Bucket: 2, Value: 12.5, HasValue: true,
}

func mustDecoder(t testing.TB, cfg Config) *Decoder {
	t.Helper()
	d, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// with returns kvs with key k set to v (appended if absent); a nil v of
// type deleteKey removes it.
func with(kvs []kv, k string, v any) []kv {
	out := append([]kv(nil), kvs...)
	for i := range out {
		if out[i].k == k {
			if _, del := v.(deleteKey); del {
				return append(out[:i], out[i+1:]...)
			}
			out[i].v = v
			return out
		}
	}
	return append(out, kv{k, v})
}

type deleteKey struct{}

var del deleteKey
