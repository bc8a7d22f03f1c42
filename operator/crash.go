package operator

import "errors"

// crashPoint names a point of the publication protocol (publish.go) at
// which a test may simulate a crash: the process stops there, without
// draining or committing, like a killed one. The hook is Operator.crash;
// production code never sets it.
type crashPoint uint8

const (
	// crashHalf: the publication intent is durable and half of the
	// releases are written (a window published in part).
	crashHalf crashPoint = iota + 1
	// crashReleases: every release is written, the state record saying
	// the windows are final is not.
	crashReleases
	// crashState: the state record is written, the input offsets are not
	// yet committed.
	crashState
	// crashPartials: stage 1 (scale-out) wrote half of a batch of partial
	// states.
	crashPartials
)

// String returns the crash point's name, as tests name their topics.
func (c crashPoint) String() string {
	switch c {
	case crashHalf:
		return "half"
	case crashReleases:
		return "releases"
	case crashState:
		return "state"
	case crashPartials:
		return "partials"
	}
	return "unknown"
}

// errCrash is returned by Run when a test's crash hook fired.
var errCrash = errors.New("operator: simulated crash")

// crashes reports whether the test hook asks for a crash at p (false when
// no hook is set).
func (o *Operator) crashes(p crashPoint) bool { return o.crash != nil && o.crash(p) }
