package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenReleases are the releases checked in under testdata/.
func goldenReleases() map[string]*Release {
	return map[string]*Release{
		"release_histogram": {
			ReleaseID:   "pageviews/1714564800000",
			WindowStart: 1714564800000, WindowEnd: 1714568400000,
			Aggregate: "pages_by_country", Kind: KindHistogram,
			Group: []GroupValue{{"country", "DE"}, {"device", "mobile"}},
			Series: []Series{{
				Name: SeriesCounts, Mechanism: "discrete-laplace", Scale: 2.5,
				Sensitivity: Sensitivity{L0: 2, L1: 2, L2: math.Sqrt2, LInf: 1},
				Labels:      []string{"home", "search", "checkout", "other"},
				Ints:        []int64{1042, 311, -2, 57},
				Level:       0.95, Lo: []float64{1034.5, 303.5, -9.5, 49.5}, Hi: []float64{1049.5, 318.5, 5.5, 64.5},
			}},
			Budget: Budget{Epsilon: 0.5, Delta: 0}, Spent: Budget{Epsilon: 4.5, Delta: 0},
			Horizon:  Horizon{Start: 1714521600000, End: 1714608000000, Budget: Budget{Epsilon: 12, Delta: 0}},
			Unit:     "user_id",
			Bounds:   Bounds{MaxGroups: 1, MaxBuckets: 2, MaxPerBucket: 1},
			Instance: "dpstream-0", Note: "horizon 24h / window 1h = 24 windows; basic composition: 12/24 = 0.5 per window",
		},
		"release_mean": {
			ReleaseID:   "orders/1714564800000",
			WindowStart: 1714564800000, WindowEnd: 1714564860000,
			Aggregate: "mean_amount", Kind: KindMean,
			Series: []Series{
				{Name: SeriesSum, Mechanism: "gaussian", Scale: 96.25, Sensitivity: Sensitivity{L0: 1, L1: 50, L2: 50, LInf: 50},
					Floats: []float64{-1250.75}, Level: 0.9, Lo: []float64{-1409.0625}, Hi: []float64{-1092.4375}},
				{Name: SeriesCount, Mechanism: "gaussian", Scale: 1.925, Sensitivity: Sensitivity{L0: 1, L1: 1, L2: 1, LInf: 1},
					Floats: []float64{88.125}, Level: 0.9, Lo: []float64{84.96}, Hi: []float64{91.29}},
				{Name: SeriesMean, Mechanism: DerivedMechanism, Floats: []float64{35.8}, Level: 0.9, Lo: []float64{33.7}, Hi: []float64{37.9}},
			},
			Budget: Budget{Epsilon: 1, Delta: 1e-7}, Spent: Budget{Epsilon: 1, Delta: 1e-7},
			Bounds:   Bounds{MaxGroups: 1, MaxValues: 3, Lower: 0, Upper: 100},
			Instance: "dpstream-1", Note: "per-window budget; sum and count share it equally; mean = 50 + sum/count",
		},
	}
}

func TestReleaseGolden(t *testing.T) {
	for name, r := range goldenReleases() {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, r) })
	}
}

// checkGolden encodes r and checks it against testdata/<name>.msgpack and
// its JSON rendering against testdata/<name>.json (both rewritten with
// -update); the golden bytes must decode back to r, and an independent
// decoder (msgpack/v5) must read the same document as the JSON rendering.
// It returns the golden file's path.
func checkGolden(t *testing.T, name string, r *Release) string {
	t.Helper()
	b, err := EncodeRelease(r)
	if err != nil {
		t.Fatal(err)
	}
	js, err := renderJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	mpPath, jsPath := filepath.Join("testdata", name+".msgpack"), filepath.Join("testdata", name+".json")
	if *update {
		if err := errors.Join(os.WriteFile(mpPath, b, 0o644), os.WriteFile(jsPath, []byte(js), 0o644)); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(mpPath)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(b, golden) {
		t.Errorf("encoding differs from %s (run with -update if the change is intended)", mpPath)
	}
	goldenJS, err := os.ReadFile(jsPath)
	if err != nil || string(goldenJS) != js {
		t.Errorf("JSON rendering differs from %s: %v", jsPath, err)
	}
	got, err := DecodeRelease(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, r) {
		t.Errorf("DecodeRelease(golden) = %+v, want %+v", got, *r)
	}
	// An independent decoder reads the same document.
	var generic any
	if err := msgpack.Unmarshal(golden, &generic); err != nil {
		t.Fatalf("msgpack/v5 cannot read the golden bytes: %v", err)
	}
	var fromJS any
	if err := json.Unmarshal(goldenJS, &fromJS); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(generic)
	j, _ := json.Marshal(fromJS)
	if !bytes.Equal(g, j) {
		t.Errorf("msgpack/v5 reading of the golden bytes differs from the JSON rendering:\n%s\n%s", g, j)
	}
	return mpPath
}

func renderJSON(b []byte) (string, error) {
	var out strings.Builder
	p, err := renderValue(&out, b, 0, 0)
	if err == nil && p != len(b) {
		err = errors.New("trailing bytes")
	}
	out.WriteByte('\n')
	return out.String(), err
}

func renderValue(out *strings.Builder, b []byte, p, depth int) (int, error) {
	indent := func(d int) { out.WriteString("\n" + strings.Repeat("  ", d)) }
	if n, next, isMap, ok := mpMapLen(b, p); ok && isMap {
		out.WriteByte('{')
		p = next
		for i := 0; i < n; i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			indent(depth + 1)
			key, next, isStr, ok := mpStr(b, p)
			if !ok || !isStr {
				return p, errors.New("bad key")
			}
			k, _ := json.Marshal(string(key))
			out.Write(k)
			out.WriteString(": ")
			var err error
			if p, err = renderValue(out, b, next, depth+1); err != nil {
				return p, err
			}
		}
		if n > 0 {
			indent(depth)
		}
		out.WriteByte('}')
		return p, nil
	}
	if n, next, ok := mpArrayLen(b, p); ok {
		out.WriteByte('[')
		p = next
		var err error
		for i := 0; i < n; i++ {
			if i > 0 {
				out.WriteString(", ")
			}
			if p, err = renderValue(out, b, p, depth+1); err != nil {
				return p, err
			}
		}
		out.WriteByte(']')
		return p, nil
	}
	var v scalar
	p, ok := mpScalar(b, p, &v)
	if !ok {
		return p, errors.New("bad value")
	}
	switch v.k {
	case kNil:
		out.WriteString("null")
	case kBool:
		out.WriteString(strconv.FormatBool(v.b))
	case kInt:
		out.WriteString(strconv.FormatInt(v.i, 10))
	case kFloat:
		s := strconv.FormatFloat(v.f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		out.WriteString(s)
	case kStr:
		s, _ := json.Marshal(string(v.s))
		out.Write(s)
	default:
		return p, fmt.Errorf("unexpected kind %d", v.k)
	}
	return p, nil
}

// testReleases covers each kind and the encoding size classes.
func testReleases() []*Release {
	g := goldenReleases()
	rs := []*Release{g["release_histogram"], g["release_mean"]}
	big := *g["release_histogram"]
	big.Group = []GroupValue{{"a|b", "x%y|z\x00"}, {"é", ""}, {strings.Repeat("n", 40), strings.Repeat("v", 300)}}
	s := big.Series[0]
	s.Labels, s.Ints, s.Lo, s.Hi = nil, nil, nil, nil
	for i := 0; i < 70000; i += 997 {
		s.Labels = append(s.Labels, strconv.Itoa(i))
		s.Ints = append(s.Ints, int64(i*i)-1<<40)
		s.Lo = append(s.Lo, float64(i)-0.5)
		s.Hi = append(s.Hi, float64(i)+0.5)
	}
	s.Mechanism = "subbotin:3"
	big.Series = []Series{s}
	big.Unit, big.Note = "", strings.Repeat("n", 70000)
	rs = append(rs, &big)
	for _, k := range []Kind{KindCount, KindSum} {
		r := *g["release_mean"]
		r.Kind, r.Aggregate = k, string(k)
		r.Series = []Series{r.Series[1]}
		r.Series[0].Name = string(k)
		r.Horizon = Horizon{Start: -5, End: 5, Budget: Budget{Epsilon: 3, Delta: 1e-6}}
		rs = append(rs, &r)
	}
	return rs
}

func TestReleaseRoundTrip(t *testing.T) {
	for _, r := range testReleases() {
		b, err := EncodeRelease(r)
		if err != nil {
			t.Fatalf("%s: %v", r.Aggregate, err)
		}
		got, err := DecodeRelease(b)
		if err != nil {
			t.Fatalf("%s: %v", r.Aggregate, err)
		}
		if !reflect.DeepEqual(&got, r) {
			t.Errorf("%s: round trip changed the release", r.Aggregate)
		}
		again, _ := AppendRelease([]byte("prefix"), &got)
		if !bytes.Equal(again[len("prefix"):], b) {
			t.Errorf("%s: re-encoding is not byte-identical", r.Aggregate)
		}
		// Key order is not significant to the decoder: msgpack/v5 writes
		// the map back in Go's random map order.
		var m map[string]any
		if err := msgpack.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		shuffled, err := msgpack.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeRelease(shuffled); err != nil || !reflect.DeepEqual(&got, r) {
			t.Errorf("%s: decoding a re-ordered map: %v", r.Aggregate, err)
		}
	}
}

// mutate decodes a release into a generic map, applies f and re-encodes.
func mutate(t *testing.T, r *Release, f func(m map[string]any)) []byte {
	t.Helper()
	b, err := EncodeRelease(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDecodeReleaseStrict(t *testing.T) {
	r := goldenReleases()["release_histogram"]
	b, _ := EncodeRelease(r)
	var top map[string]any
	if err := msgpack.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	// Every key is required, at every level.
	for k := range top {
		msg := mutate(t, r, func(m map[string]any) { delete(m, k) })
		if _, err := DecodeRelease(msg); !errors.Is(err, ErrInvalidRelease) {
			t.Errorf("without %q: %v, want ErrInvalidRelease", k, err)
		}
	}
	nested := map[string]func(m map[string]any) map[string]any{
		"series": func(m map[string]any) map[string]any { return m["series"].([]any)[0].(map[string]any) },
		"sensitivity": func(m map[string]any) map[string]any {
			return m["series"].([]any)[0].(map[string]any)["sensitivity"].(map[string]any)
		},
		"bounds": func(m map[string]any) map[string]any { return m["bounds"].(map[string]any) },
		"group":  func(m map[string]any) map[string]any { return m["group"].([]any)[0].(map[string]any) },
	}
	for name, get := range nested {
		var tmp map[string]any
		msgpack.Unmarshal(b, &tmp)
		for k := range get(tmp) {
			msg := mutate(t, r, func(m map[string]any) { delete(get(m), k) })
			if _, err := DecodeRelease(msg); !errors.Is(err, ErrInvalidRelease) {
				t.Errorf("%s without %q: %v, want ErrInvalidRelease", name, k, err)
			}
		}
	}
	cases := []struct {
		name string
		f    func(m map[string]any)
		want error
	}{
		{"version 2", func(m map[string]any) { m["schema_version"] = 2 }, ErrVersion},
		{"version as string", func(m map[string]any) { m["schema_version"] = "1" }, ErrInvalidRelease},
		{"key mismatch", func(m map[string]any) { m["key"] = "other|key" }, ErrInvalidRelease},
		{"window_start as float", func(m map[string]any) { m["window_start"] = 1.5 }, ErrInvalidRelease},
		{"epsilon as string", func(m map[string]any) { m["epsilon"] = "0.5" }, ErrInvalidRelease},
		{"epsilon zero", func(m map[string]any) { m["epsilon"] = 0.0 }, ErrInvalidRelease},
		{"unknown kind", func(m map[string]any) { m["kind"] = "median" }, ErrInvalidRelease},
		{"int series with a float", func(m map[string]any) {
			m["series"].([]any)[0].(map[string]any)["values"] = []any{1, 2, 3.5, 4}
		}, ErrInvalidRelease},
		{"bad value_type", func(m map[string]any) { m["series"].([]any)[0].(map[string]any)["value_type"] = "str" }, ErrInvalidRelease},
		{"labels do not match values", func(m map[string]any) { m["series"].([]any)[0].(map[string]any)["labels"] = []any{"a"} }, ErrInvalidRelease},
		{"event_level with a unit", func(m map[string]any) { m["event_level"] = true }, ErrInvalidRelease},
		{"series not an array", func(m map[string]any) { m["series"] = map[string]any{} }, ErrInvalidRelease},
		{"unknown keys are skipped", func(m map[string]any) { m["future_key"] = []any{1, map[string]any{"x": nil}} }, nil},
		{"integral floats written as ints are accepted", func(m map[string]any) { m["epsilon"] = 1; m["spent_epsilon"] = 5 }, nil},
	}
	for _, c := range cases {
		_, err := DecodeRelease(mutate(t, r, c.f))
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Raw byte problems.
	for name, msg := range map[string][]byte{
		"empty":          nil,
		"not a map":      {0x91, 0x01},
		"trailing bytes": append(append([]byte(nil), b...), 0xc0),
		"duplicate key":  append(append([]byte{0xde, 0x00, 23}, b[3:]...), mpAppendStr(mpAppendStr(nil, "note"), "x")...),
	} {
		if _, err := DecodeRelease(msg); !errors.Is(err, ErrInvalidRelease) {
			t.Errorf("%s: %v, want ErrInvalidRelease", name, err)
		} else if name == "duplicate key" && !strings.Contains(err.Error(), `"note" twice`) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Every truncation fails cleanly.
	for i := 0; i < len(b); i++ {
		if _, err := DecodeRelease(b[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", i)
		}
	}
}

func TestReleaseValidate(t *testing.T) {
	base := goldenReleases()["release_mean"]
	cases := map[string]func(r *Release){
		"empty id":             func(r *Release) { r.ReleaseID = "" },
		"empty window":         func(r *Release) { r.WindowEnd = r.WindowStart },
		"NaN value":            func(r *Release) { r.Series[0].Floats = []float64{math.NaN()} },
		"both value kinds":     func(r *Release) { r.Series[1].Ints = []int64{1} },
		"no values":            func(r *Release) { r.Series[1].Floats = nil },
		"wrong series order":   func(r *Release) { r.Series[0], r.Series[1] = r.Series[1], r.Series[0] },
		"missing series":       func(r *Release) { r.Series = r.Series[:2] },
		"negative scale":       func(r *Release) { r.Series[0].Scale = -1 },
		"derived sum":          func(r *Release) { r.Series[0].Mechanism = DerivedMechanism },
		"interval upside down": func(r *Release) { r.Series[0].Lo[0] = r.Series[0].Hi[0] + 1 },
		"level 1":              func(r *Release) { r.Series[0].Level = 1 },
		"delta 1":              func(r *Release) { r.Budget.Delta = 1 },
		"infinite epsilon":     func(r *Release) { r.Spent.Epsilon = math.Inf(1) },
		"horizon without end":  func(r *Release) { r.Horizon.Start = 5 },
		"horizon no budget":    func(r *Release) { r.Horizon = Horizon{Start: 0, End: 10} },
		"negative bound":       func(r *Release) { r.Bounds.MaxValues = -1 },
		"bad value bounds":     func(r *Release) { r.Bounds.Lower = 100 },
		"duplicate group":      func(r *Release) { r.Group = []GroupValue{{"a", "1"}, {"a", "2"}} },
		"invalid UTF-8":        func(r *Release) { r.Note = "\xff" },
		"labels on a mean":     func(r *Release) { r.Series[0].Labels = []string{"x"} },
	}
	for name, f := range cases {
		r := cloneRelease(base)
		f(r)
		if _, err := EncodeRelease(r); !errors.Is(err, ErrInvalidRelease) {
			t.Errorf("%s: %v, want ErrInvalidRelease", name, err)
		}
	}
}

func cloneRelease(r *Release) *Release {
	c := *r
	c.Group = append([]GroupValue(nil), r.Group...)
	c.Series = nil
	for _, s := range r.Series {
		s.Labels = append([]string(nil), s.Labels...)
		s.Lo = append([]float64(nil), s.Lo...)
		s.Hi = append([]float64(nil), s.Hi...)
		if s.Ints != nil {
			s.Ints = append([]int64{}, s.Ints...)
		}
		if s.Floats != nil {
			s.Floats = append([]float64{}, s.Floats...)
		}
		c.Series = append(c.Series, s)
	}
	return &c
}

func TestReleaseKey(t *testing.T) {
	cases := []struct {
		id, agg string
		group   []string
		want    string
	}{
		{"w/1", "views", nil, "w/1|views"},
		{"w/1", "views", []string{""}, "w/1|views|"},
		{"w/1", "views", []string{"DE", "mobile"}, "w/1|views|DE|mobile"},
		{"a|b", "50%", []string{"x\ny", "é"}, "a%7Cb|50%25|x%0Ay|é"},
	}
	for _, c := range cases {
		got := ReleaseKey(c.id, c.agg, c.group...)
		if got != c.want {
			t.Errorf("ReleaseKey(%q, %q, %q) = %q, want %q", c.id, c.agg, c.group, got, c.want)
		}
		id, agg, group, err := SplitKey(got)
		if err != nil || id != c.id || agg != c.agg || strings.Join(group, "\x00") != strings.Join(c.group, "\x00") || len(group) != len(c.group) {
			t.Errorf("SplitKey(%q) = %q, %q, %q, %v", got, id, agg, group, err)
		}
	}
	for _, bad := range []string{"noagg", "a|b%", "a|b%4", "a|%zz"} {
		if _, _, _, err := SplitKey(bad); !errors.Is(err, ErrInvalidRelease) {
			t.Errorf("SplitKey(%q): %v", bad, err)
		}
	}
}

// FuzzDecodeRelease: DecodeRelease never panics, and whatever it accepts
// re-encodes to bytes it decodes to the same release.
func FuzzDecodeRelease(f *testing.F) {
	for _, r := range testReleases()[:2] {
		b, _ := EncodeRelease(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRelease(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidRelease) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		enc, err := EncodeRelease(&r)
		if err != nil {
			t.Fatalf("accepted release does not encode: %v", err)
		}
		r2, err := DecodeRelease(enc)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-decoding: %v", err)
		}
	})
}
