package schema

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// problems collects every problem a Validate method finds, each wrapping
// sentinel, so that one call reports them all (errors.Join).
type problems struct {
	sentinel error
	errs     []error
}

// bad records one problem.
func (p *problems) bad(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%w: "+format, append([]any{p.sentinel}, args...)...))
}

// err returns the problems found, joined, or nil.
func (p *problems) err() error { return errors.Join(p.errs...) }

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// text records a problem if s is empty while required, or not valid UTF-8.
func (p *problems) text(what, s string, required bool) {
	if required && s == "" {
		p.bad("%s is empty", what)
	}
	if !utf8.ValidString(s) {
		p.bad("%s is not valid UTF-8", what)
	}
}

// budget records a problem unless b has ε > 0 finite and 0 ≤ δ < 1.
func (p *problems) budget(what string, b Budget) {
	if !(b.Epsilon > 0) || !finite(b.Epsilon) || !(b.Delta >= 0 && b.Delta < 1) {
		p.bad("%s needs ε > 0 finite and 0 ≤ δ < 1", what)
	}
}
