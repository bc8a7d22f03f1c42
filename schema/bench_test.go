package schema

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkDecode decodes the typical 6-field event of testEvent (time,
// unit, two group-by fields, a categorical histogram field and a value) in
// each way, all in one run so the figures compare as ratios:
//
//	msgpack           this package's scanner
//	json              this package's JSON scanner
//	msgpack-v5-lowlevel  msgpack/v5's Decoder (DecodeMapLen, DecodeString, …)
//	                  on a reused bytes.Reader, reading the same six fields;
//	                  the alternative this package's scanner was measured
//	                  against
//	naive-unmarshal   baseline: msgpack.Unmarshal into a map[string]any
//
// Each reports events/s (wall clock; one core with go test -cpu 1) and
// events/cpu-s (events per second of CPU time used by the process, GC
// included), which is what a dedicated core would give when the machine
// is shared.
func BenchmarkDecode(b *testing.B) {
	mp := encMP(b, testEvent()...)
	js := encJS(b, testEvent()...)
	var cpu0 time.Duration
	start := func(b *testing.B) {
		b.ReportAllocs()
		cpu0 = cpuTime()
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		if cpu := cpuTime() - cpu0; cpu > 0 {
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
		}
	}
	b.Run("msgpack", func(b *testing.B) {
		d := mustDecoder(b, testConfig())
		var e Event
		b.SetBytes(int64(len(mp)))
		start(b)
		for b.Loop() {
			if err := d.Decode(mp, &e); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("json", func(b *testing.B) {
		d := mustDecoder(b, testConfig())
		var e Event
		b.SetBytes(int64(len(js)))
		start(b)
		for b.Loop() {
			if err := d.Decode(js, &e); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("msgpack-v5-lowlevel", func(b *testing.B) {
		r := bytes.NewReader(nil)
		dec := msgpack.NewDecoder(r)
		var e Event
		b.SetBytes(int64(len(mp)))
		start(b)
		for b.Loop() {
			r.Reset(mp)
			dec.Reset(r)
			if err := v5Decode(dec, &e); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("naive-unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(mp)))
		start(b)
		for b.Loop() {
			var m map[string]any
			if err := msgpack.Unmarshal(mp, &m); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
}

// BenchmarkDecodeNested decodes the event of testEvent written flat (with
// testConfig) and nested (with nestedBenchConfig: the same six values in
// maps two levels deep, beside the time) in both encodings, in one run so
// that nested/flat is a ratio on the same machine state. Reports events/s
// and allocations, as BenchmarkDecode.
func BenchmarkDecodeNested(b *testing.B) {
	flat, nested := testEvent(), nestedBenchEvent()
	for _, c := range []struct {
		name string
		cfg  Config
		kvs  []kv
		enc  func(testing.TB, ...kv) []byte
	}{
		{"flat-msgpack", testConfig(), flat, encMP},
		{"nested-msgpack", nestedBenchConfig(), nested, encMP},
		{"flat-json", testConfig(), flat, encJS},
		{"nested-json", nestedBenchConfig(), nested, encJS},
	} {
		b.Run(c.name, func(b *testing.B) {
			d := mustDecoder(b, c.cfg)
			msg := c.enc(b, c.kvs...)
			var e Event
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Decode(msg, &e); err != nil {
					b.Fatal(err)
				}
			}
			if e != testWant {
				b.Fatalf("decoded %+v", e)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// nestedBenchConfig is testConfig with the fields in nested maps.
func nestedBenchConfig() Config {
	c := testConfig()
	c.UnitField, c.GroupBy = "user.id", []string{"geo.country", "device.type"}
	c.Histogram.Field, c.ValueField = "event.page", "event.amount"
	return c
}

// nestedBenchEvent is testEvent nested as nestedBenchConfig reads it.
func nestedBenchEvent() []kv {
	return []kv{
		{"ts", int64(1714564800123)},
		{"user", obj{{"id", "u-1234567"}}},
		{"geo", obj{{"country", "DE"}}},
		{"device", obj{{"type", "mobile"}}},
		{"event", obj{{"page", "checkout"}, {"amount", 12.5}}},
	}
}

// v5Decode reads testConfig's fields with msgpack/v5's low-level API. It
// is a performance comparison only: no validation beyond types.
func v5Decode(dec *msgpack.Decoder, e *Event) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	var country, device string
	*e = Event{Bucket: -1}
	for ; n > 0; n-- {
		key, err := dec.DecodeString()
		if err != nil {
			return err
		}
		switch key {
		case "ts":
			e.Time, err = dec.DecodeInt64()
		case "user_id":
			e.Unit, err = dec.DecodeString()
		case "country":
			country, err = dec.DecodeString()
		case "device":
			device, err = dec.DecodeString()
		case "page":
			var p string
			p, err = dec.DecodeString()
			e.Bucket = map[string]int{"home": 0, "search": 1, "checkout": 2}[p]
		case "amount":
			e.Value, err = dec.DecodeFloat64()
			e.HasValue = true
		default:
			err = dec.Skip()
		}
		if err != nil {
			return err
		}
	}
	e.Group = MakeGroup(country, device)
	return nil
}

// BenchmarkEncodeRelease encodes the golden histogram release into a
// reused buffer.
func BenchmarkEncodeRelease(b *testing.B) {
	r := goldenReleases()["release_histogram"]
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendRelease(buf[:0], r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCategory compares the two category lookups of Decode, "linear"
// (signature scan) and "map", for n categories of equal length, looking
// up each in turn; linearCategories is the largest n where linear is not
// slower.
func BenchmarkCategory(b *testing.B) {
	for _, n := range []int{4, 8, 16} {
		cats := make([]string, n)
		keys := make([][]byte, n)
		for i := range cats {
			cats[i] = "category-" + string(rune('a'+i))
			keys[i] = []byte(cats[i])
		}
		for _, name := range []string{"linear", "map"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, name), func(b *testing.B) {
				d := mustDecoder(b, Config{TimeField: "t", Histogram: &Histogram{Field: "c", Categories: cats}})
				d.hist.cats = nil
				d.hist.catSigs = d.hist.catSigs[:0]
				for _, c := range cats {
					d.hist.catSigs = append(d.hist.catSigs, sig([]byte(c)))
				}
				if name == "map" {
					d.hist.cats = make(map[string]int)
					for i, c := range cats {
						d.hist.cats[c] = i
					}
				}
				i := 0
				for b.Loop() {
					if d.hist.category(keys[i]) != i {
						b.Fatal("wrong bucket")
					}
					if i++; i == n {
						i = 0
					}
				}
			})
		}
	}
}
