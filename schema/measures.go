package schema

import (
	"fmt"
	"math"
)

// Limits on the extra measures and histograms of a Config. With
// MaxGroupBy group-by fields and the time, unit, histogram and value
// fields, a Config then names at most 32 + 4 + 8 + 8 = 52 distinct
// fields, within the ShapeFields bits of Shape.
const (
	// MaxMeasures is the largest number of extra measures (Config.Measures).
	MaxMeasures = 8
	// MaxHistograms is the largest number of extra histograms
	// (Config.Histograms).
	MaxHistograms = 8
	// maxNameLen is the longest measure or histogram name, in bytes: a
	// name is part of every release key of its aggregates.
	maxNameLen = 64
)

// Measure is an extra numeric field released beside the value field, with
// its own clamping bounds (see Config.Measures).
type Measure struct {
	// Name names the measure in releases (the aggregate "sum:<name>"):
	// letters, digits, '_', '-' and '.', at most 64 bytes, unique among
	// the measures.
	Name string `mapstructure:"name"`
	// Field is the numeric field (a path, like every field).
	Field string `mapstructure:"field"`
	// Lower and Upper are the measure's clamping bounds, finite with
	// Lower < Upper.
	Lower float64 `mapstructure:"lower"`
	Upper float64 `mapstructure:"upper"`
	// Optional accepts events without the field (the measure then has no
	// value for the event) instead of rejecting them.
	Optional bool `mapstructure:"optional"`
}

// NamedHistogram is an extra histogram released beside Config.Histogram
// (see Config.Histograms): the same settings plus a name.
type NamedHistogram struct {
	// Name names the histogram in releases (the aggregate
	// "histogram:<name>"), with the rules of Measure.Name, unique among the
	// histograms.
	Name      string `mapstructure:"name"`
	Histogram `mapstructure:",squash"`
}

// Extra is what an Event carries of the extra measures and histograms.
type Extra struct {
	// Measures are the values of Config.Measures, in order.
	Measures []MeasureValue
	// Buckets are the buckets of Config.Histograms, in order.
	Buckets []int
}

// MeasureValue is one extra measure's value in an Event.
type MeasureValue struct {
	// Value is the (unclamped, finite) value; meaningful when Has.
	Value float64
	// Has reports whether the event carries the measure (false only for
	// an absent optional measure).
	Has bool
}

// validName reports whether s is a usable measure or histogram name.
func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validateExtras checks the extra measures and histograms.
func (c Config) validateExtras(p *problems, d Config) {
	if len(c.Measures) > MaxMeasures {
		p.bad("measures has %d entries, more than %d", len(c.Measures), MaxMeasures)
	}
	if len(c.Histograms) > MaxHistograms {
		p.bad("histograms has %d entries, more than %d", len(c.Histograms), MaxHistograms)
	}
	if len(c.Measures) > 0 && c.ValueField == "" {
		p.bad("measures need value_field (the first measure)")
	}
	if len(c.Histograms) > 0 && c.Histogram == nil {
		p.bad("histograms need histogram (the first histogram)")
	}
	names := map[string]bool{}
	for i, m := range c.Measures {
		role := fmt.Sprintf("measures[%d]", i)
		p.name(names, role, m.Name)
		p.field(d, role+".field", m.Field, true)
		switch {
		case math.IsNaN(m.Lower) || math.IsInf(m.Lower, 0) || math.IsNaN(m.Upper) || math.IsInf(m.Upper, 0):
			p.bad("%s.lower and .upper must be finite", role)
		case !(m.Lower < m.Upper):
			p.bad("%s.lower %g must be below upper %g", role, m.Lower, m.Upper)
		}
	}
	names = map[string]bool{}
	for i := range c.Histograms {
		h := &c.Histograms[i]
		role := fmt.Sprintf("histograms[%d]", i)
		p.name(names, role, h.Name)
		c.checkHistogram(p, d, role, &h.Histogram)
	}
}

// name checks the name of the measure or histogram configured under role
// and records it in names (those of its list so far).
func (p *problems) name(names map[string]bool, role, name string) {
	switch {
	case !validName(name):
		p.bad("%s.name %q must be 1 to %d letters, digits, '_', '-' or '.'", role, name, maxNameLen)
	case names[name]:
		p.bad("%s.name %q is used twice", role, name)
	}
	names[name] = true
}
