package windows

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// sampleWindows returns closed windows of every kind: unit and event level,
// with and without histograms, empty.
func sampleWindows(t testing.TB) []Window {
	var out []Window
	for _, eventLevel := range []bool{false, true} {
		cfg := propCfg()
		cfg.EventLevel = eventLevel
		seqs := genPartitions(rand.New(rand.NewPCG(21, 22)), 2, 200, 15)
		tu := mustNew(t, cfg)
		tu.AssignPartitions(0, 1)
		for _, s := range seqs {
			for _, e := range s {
				if e.Bucket != -2 { // skip watermark hints
					tu.Add(e)
				}
			}
		}
		// One more event after a gap, so that empty windows lie between.
		tu.Add(Event{Time: lastTime(seqs...) + 30_000, Unit: "late-comer", Bucket: -1})
		end := lastTime(seqs...) + 50_000
		tu.Advance(0, end)
		tu.Advance(1, end)
		out = append(out, tu.Poll(0)...)
	}
	return out
}

func TestMarshalRoundTrip(t *testing.T) {
	ws := sampleWindows(t)
	empty, withHist := 0, 0
	for i, w := range ws {
		b, err := w.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Window
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("window %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("window %d: round trip changed it:\n got %+v\nwant %+v", i, got, w)
		}
		b2, _ := got.MarshalBinary()
		if !bytes.Equal(b, b2) {
			t.Fatalf("window %d: encoding not stable", i)
		}
		if len(w.Groups) == 0 {
			empty++
		} else if w.Groups[0].Histogram != nil {
			withHist++
		}
	}
	if empty == 0 || withHist == 0 {
		t.Fatalf("sample lacks empty windows (%d) or histograms (%d)", empty, withHist)
	}
}

// The encoding is a plain msgpack map that any msgpack library can read.
func TestMarshalIsPlainMsgpack(t *testing.T) {
	w := sampleWindows(t)[0]
	b, _ := w.MarshalBinary()
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["v"] != int8(1) || m["start"] == nil || m["groups"] == nil {
		t.Fatalf("decoded map %v", m)
	}
}

// richWindow is a sample window with at least two groups and histograms.
func richWindow(t testing.TB) Window {
	for _, w := range sampleWindows(t) {
		if len(w.Groups) >= 2 && w.Groups[0].Histogram != nil {
			return w
		}
	}
	t.Fatal("no window with two groups")
	return Window{}
}

func TestUnmarshalRejectsCorruptInput(t *testing.T) {
	w := richWindow(t)
	good, _ := w.MarshalBinary()
	// Every truncation fails cleanly.
	for n := 0; n < len(good); n++ {
		var got Window
		if err := got.UnmarshalBinary(good[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	enc := func(m map[string]any) []byte {
		b, err := msgpack.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	base := func() map[string]any {
		var m map[string]any
		if err := msgpack.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := map[string]func(m map[string]any){
		"wrong version":      func(m map[string]any) { m["v"] = 2 },
		"end before start":   func(m map[string]any) { m["end"] = m["start"] },
		"negative units":     func(m map[string]any) { m["units"] = -1 },
		"no partials":        func(m map[string]any) { m["partials"] = 0 },
		"missing start":      func(m map[string]any) { delete(m, "start") },
		"nan sensitivity":    func(m map[string]any) { m["sensitivity"].(map[string]any)["sum"] = []float64{1, math.NaN(), 1, 1} },
		"short sensitivity":  func(m map[string]any) { m["sensitivity"].(map[string]any)["count"] = []float64{1, 2} },
		"negative count":     func(m map[string]any) { m["groups"].([]any)[0].(map[string]any)["c"] = -3 },
		"inf partial":        func(m map[string]any) { m["groups"].([]any)[0].(map[string]any)["s"] = []float64{math.Inf(1)} },
		"overflowing sum":    func(m map[string]any) { m["groups"].([]any)[0].(map[string]any)["s"] = []float64{1.5e308, 1.6e308} },
		"unordered partials": func(m map[string]any) { m["groups"].([]any)[0].(map[string]any)["s"] = []float64{2, 1} },
		"unsorted groups": func(m map[string]any) {
			gs := m["groups"].([]any)
			gs[0], gs[1] = gs[1], gs[0]
		},
		"histogram sizes": func(m map[string]any) { m["groups"].([]any)[1].(map[string]any)["h"] = []int64{1} },
		"group without key": func(m map[string]any) {
			delete(m["groups"].([]any)[0].(map[string]any), "k")
		},
		"not a map": nil,
	}
	for name, mod := range cases {
		var b []byte
		if mod == nil {
			b, _ = msgpack.Marshal([]int{1, 2})
		} else {
			m := base()
			mod(m)
			b = enc(m)
		}
		var got Window
		if err := got.UnmarshalBinary(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	// Unknown keys are skipped.
	m := base()
	m["future_field"] = []any{1, "x"}
	var got Window
	if err := got.UnmarshalBinary(enc(m)); err != nil {
		t.Errorf("unknown key: %v", err)
	}
}

func TestMergeMismatch(t *testing.T) {
	ws := sampleWindows(t)
	a, b := richWindow(t), ws[len(ws)-1]
	if a.Start == b.Start {
		t.Fatal("sample windows do not differ in extent")
	}
	if err := a.Merge(&b); !errors.Is(err, ErrMismatch) {
		t.Errorf("different extents: %v", err)
	}
	c := a
	c.Sensitivity.Count.L1++
	if err := a.Merge(&c); !errors.Is(err, ErrMismatch) {
		t.Errorf("different sensitivities: %v", err)
	}
	d := a
	d.EventLevel = !d.EventLevel
	if err := a.Merge(&d); !errors.Is(err, ErrMismatch) {
		t.Errorf("different privacy level: %v", err)
	}
	e := a
	e.Groups = cloneGroups(e.Groups)
	e.Groups[0].Histogram = e.Groups[0].Histogram[:2]
	before, _ := a.MarshalBinary()
	if err := a.Merge(&e); !errors.Is(err, ErrMismatch) {
		t.Errorf("different histogram sizes: %v", err)
	}
	if after, _ := a.MarshalBinary(); !bytes.Equal(before, after) {
		t.Error("failed Merge changed the window")
	}
}

// Merge must not alias the other window's slices.
func TestMergeDoesNotAlias(t *testing.T) {
	w := richWindow(t)
	a, b := w, w
	a.Groups, b.Groups = cloneGroups(w.Groups), cloneGroups(w.Groups)
	if err := a.Merge(&b); err != nil {
		t.Fatal(err)
	}
	before, _ := b.MarshalBinary()
	a.Groups[0].Histogram[0] += 100
	a2 := a
	if err := a2.Merge(&b); err != nil {
		t.Fatal(err)
	}
	if after, _ := b.MarshalBinary(); !bytes.Equal(before, after) {
		t.Error("Merge changed its argument")
	}
}

// FuzzUnmarshal: no input makes UnmarshalBinary panic, and whatever it
// accepts encodes back to a window it accepts again with the same bytes.
func FuzzUnmarshal(f *testing.F) {
	for _, w := range sampleWindows(f)[:3] {
		b, _ := w.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var w Window
		if err := w.UnmarshalBinary(data); err != nil {
			return
		}
		b, err := w.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var w2 Window
		if err := w2.UnmarshalBinary(b); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if b2, _ := w2.MarshalBinary(); !bytes.Equal(b, b2) {
			t.Fatal("encoding not stable")
		}
	})
}
