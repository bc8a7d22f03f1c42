package schema

import (
	"errors"
	"strings"
	"testing"
)

// measuresConfig is testConfig with two extra measures (one optional) and
// two extra histograms (categorical, numeric).
func measuresConfig() Config {
	c := testConfig()
	c.Measures = []Measure{{Name: "qty", Field: "qty", Lower: 0, Upper: 10, Optional: true}, {Name: "volt", Field: "meter.volt", Lower: 200, Upper: 260}}
	c.Histograms = []NamedHistogram{
		{Name: "dev", Histogram: Histogram{Field: "device", Categories: []string{"phone", "mobile"}}},
		{Name: "ab", Histogram: Histogram{Field: "amount", Edges: []float64{10, 50}}},
	}
	return c
}

// TestDecodeMeasures: every extra measure and histogram is decoded once per
// event, in configured order, in both formats; an absent optional measure
// has no value; an absent required one, or an undeclared category of an
// extra histogram, rejects the event naming the field; a decoder reusing
// the event's Extra allocates nothing more.
func TestDecodeMeasures(t *testing.T) {
	d := mustDecoder(t, measuresConfig())
	base := with(testEvent(), "meter", map[string]any{"volt": 231.5})
	for name, enc := range map[string]func(testing.TB, ...kv) []byte{"msgpack": encMP, "json": encJS} {
		var e Event
		if err := d.Decode(enc(t, with(base, "qty", 3)...), &e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := Extra{Measures: []MeasureValue{{3, true}, {231.5, true}}, Buckets: []int{1, 1}}
		if e.Extra == nil || !equalExtra(*e.Extra, want) || e.Value != 12.5 || e.Bucket != 2 {
			t.Fatalf("%s: event %+v extra %+v, want %+v", name, e, e.Extra, want)
		}
		if err := d.Decode(enc(t, base...), &e); err != nil || e.Extra.Measures[0].Has {
			t.Fatalf("%s: without the optional measure: %v, %+v", name, err, e.Extra)
		}
		for _, c := range []struct {
			msg    []kv
			reason Reason
			field  string
		}{
			{with(base, "meter", del), ReasonMissingField, "meter.volt"},
			{with(base, "device", "tablet"), ReasonUnknownCategory, "device"},
			{with(base, "qty", "three"), ReasonWrongType, "qty"},
		} {
			err := d.Decode(enc(t, c.msg...), &e)
			var se *Error
			if !errors.As(err, &se) || se.Reason != c.reason || se.Field != c.field {
				t.Errorf("%s: %v, want %v of %q", name, err, c.reason, c.field)
			}
		}
	}
	msg := encMP(t, with(base, "qty", 3)...)
	var e Event
	_ = d.Decode(msg, &e)
	if n := testing.AllocsPerRun(100, func() { _ = d.Decode(msg, &e) }); n > 1 { // the Unit string
		t.Errorf("%.1f allocations per decode with a reused Extra, want ≤ 1", n)
	}
}

func equalExtra(a, b Extra) bool {
	if len(a.Measures) != len(b.Measures) || len(a.Buckets) != len(b.Buckets) {
		return false
	}
	for i := range a.Measures {
		if a.Measures[i] != b.Measures[i] {
			return false
		}
	}
	for i := range a.Buckets {
		if a.Buckets[i] != b.Buckets[i] {
			return false
		}
	}
	return true
}

// TestValidateMeasures: the extra measures and histograms are checked like
// the first ones, plus their names, their number and the first one they
// need.
func TestValidateMeasures(t *testing.T) {
	if err := measuresConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Measures[1].Name = "qty" }, `measures[1].name "qty" is used twice`},
		{func(c *Config) { c.Measures[0].Name = "a:b" }, `measures[0].name "a:b" must be`},
		{func(c *Config) { c.Measures[0].Lower = 20 }, `measures[0].lower 20 must be below upper 10`},
		{func(c *Config) { c.Measures[0].Field = "" }, `measures[0].field is required`},
		{func(c *Config) { c.ValueField, c.Lower, c.Upper = "", 0, 0 }, `measures need value_field`},
		{func(c *Config) { c.Histogram = nil }, `histograms need histogram`},
		{func(c *Config) { c.Histograms[0].Categories = nil }, `histograms[0] needs categories or edges`},
		{func(c *Config) { c.Histograms[1].Name = "dev" }, `histograms[1].name "dev" is used twice`},
		{func(c *Config) { c.Measures[0].Field = "meter" }, `measures[1].field "meter.volt" lies inside measures[0].field "meter"`},
		{func(c *Config) { c.Measures = make([]Measure, MaxMeasures+1) }, `measures has 9 entries, more than 8`},
	} {
		cfg := measuresConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("error %v, want one containing %q", err, c.want)
		}
	}
}

// TestShapeMeasures: the extra fields take part in the shape check, an
// optional measure may be absent.
func TestShapeMeasures(t *testing.T) {
	d := mustDecoder(t, measuresConfig())
	var e Event
	_ = d.Decode(encMP(t, with(testEvent(), "qty", "x")...), &e)
	absent, wrong := d.Shape()
	fields := d.Fields()
	var names []string
	for i, f := range fields {
		if absent&(1<<i) != 0 {
			names = append(names, "absent "+f.Name)
		}
		if wrong&(1<<i) != 0 {
			names = append(names, "wrong "+f.Name+" "+strings.Join(f.Roles, ","))
		}
	}
	if got := strings.Join(names, "; "); got != "wrong qty measures.field; absent meter.volt" {
		t.Errorf("shape: %s", got)
	}
}
