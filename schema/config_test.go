package schema

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateOK(t *testing.T) {
	for name, cfg := range map[string]Config{
		"typical":       testConfig(),
		"minimal":       {TimeField: "t"},
		"numeric hist":  {TimeField: "t", Histogram: &Histogram{Field: "x", Edges: []float64{-1, 0, 1}}},
		"other bucket":  {TimeField: "t", Histogram: &Histogram{Field: "x", Categories: []string{"a"}, Other: true, OtherLabel: "rest"}},
		"explicit json": {Format: FormatJSON, TimeField: "t", TimeFormat: TimeRFC3339, MaxKeyLen: 10, MaxStringLen: 10},
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestValidateProblems checks that each problem gives its own message, all
// at once, each wrapping ErrInvalidConfig.
func TestValidateProblems(t *testing.T) {
	cases := []struct {
		cfg  Config
		want []string // substrings, one per expected problem
	}{
		{Config{}, []string{"time_field is required"}},
		{Config{TimeField: "t", Format: "xml", TimeFormat: "unix_us"}, []string{`format "xml"`, `time_format "unix_us"`}},
		{Config{TimeField: "t", MaxKeyLen: -1, MaxStringLen: 1 << 30}, []string{"max_key_len", "max_string_len"}},
		{Config{TimeField: "t", MinTime: 5, MaxTime: 5}, []string{"time range"}},
		{Config{TimeField: "t", MaxKeyLen: 3, UnitField: "user"}, []string{`unit_field "user" is longer`}},
		{Config{TimeField: "t", GroupBy: []string{"a", "", "a"}}, []string{"group_by[1] is required", `"a" is listed twice`}},
		{Config{TimeField: "t", GroupBy: strings.Split(strings.Repeat("g,", MaxGroupBy)+"x", ",")}, []string{"more than 32", `"g" is listed twice`}},
		{Config{TimeField: "t", Histogram: &Histogram{}}, []string{"histogram.field is required", "needs categories or edges"}},
		{Config{TimeField: "t", Histogram: &Histogram{Field: "h", Categories: []string{"a"}, Edges: []float64{1}}}, []string{"both categories and edges"}},
		{Config{TimeField: "t", Histogram: &Histogram{Field: "h", Categories: []string{"a", "a", "\xff"}}}, []string{`"a" is listed twice`, "not valid UTF-8"}},
		{Config{TimeField: "t", Histogram: &Histogram{Field: "h", Categories: []string{"other"}, Other: true}}, []string{"equals a category"}},
		{Config{TimeField: "t", Histogram: &Histogram{Field: "h", Edges: []float64{1, 1, math.NaN()}, Other: true}}, []string{"categories only", "strictly increasing", "edges[2] is not finite"}},
		{Config{TimeField: "t", ValueField: "v"}, []string{"lower 0 must be below upper 0"}},
		{Config{TimeField: "t", ValueField: "v", Lower: math.Inf(-1), Upper: 1}, []string{"must be finite"}},
		{Config{TimeField: "t", Lower: 1, ValueOptional: true}, []string{"value_field is not", "value_optional is set"}},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if err == nil {
			t.Errorf("%+v: no error, want %q", c.cfg, c.want)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: does not wrap ErrInvalidConfig", err)
		}
		msgs := strings.Split(err.Error(), "\n")
		if len(msgs) != len(c.want) {
			t.Errorf("got %d problems %q, want %d", len(msgs), msgs, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(msgs[i], w) || !strings.HasPrefix(msgs[i], "schema: invalid config: ") {
				t.Errorf("problem %d = %q, want it to contain %q", i, msgs[i], w)
			}
		}
		if _, err := NewDecoder(c.cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewDecoder accepted a bad config: %v", err)
		}
	}
}

// TestDecoderCopiesConfig: later changes to the caller's slices do not
// reach the decoder.
func TestDecoderCopiesConfig(t *testing.T) {
	cfg := testConfig()
	d := mustDecoder(t, cfg)
	cfg.GroupBy[0] = "changed"
	cfg.Histogram.Categories[2] = "changed"
	var e Event
	if err := d.Decode(encMP(t, testEvent()...), &e); err != nil || e != testWant {
		t.Errorf("got %+v, %v", e, err)
	}
	if got := d.Config(); got.Format != FormatAuto || got.MaxKeyLen != DefaultMaxKeyLen || got.MaxTime != DefaultMaxTime {
		t.Errorf("Config() defaults not applied: %+v", got)
	}
}
