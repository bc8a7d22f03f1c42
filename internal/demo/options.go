package demo

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/privacy"
)

// Errors of a demo run.
var (
	// ErrRun wraps every failure of a demo run (broker, operator, timeout).
	ErrRun = errors.New("demo")
	// ErrOptions wraps invalid demo options (the command's flags).
	ErrOptions = errors.New("demo: invalid option")
)

// Options are the settings of a demo run: the flags of dpstream demo.
type Options struct {
	// Brokers are Kafka brokers (host:port) to use instead of the
	// embedded broker; empty for the embedded one.
	Brokers []string
	// Windows is the number of closed windows after which the demo stops.
	Windows int
	// EventsPerWindow is the number of synthetic readings per window.
	EventsPerWindow int
	// Seed seeds the synthetic stream (the noise comes from the key).
	Seed uint64
	// Epsilon and Delta are the per-window budget.
	Epsilon, Delta float64
	// Mechanism is the noise mechanism's name, or operator.Auto.
	Mechanism string
	// JSON prints one JSON object per release on standard output instead
	// of tables (the report text goes to standard error).
	JSON bool
	// KeyFile is the secret noise key file; empty for a random key.
	KeyFile string
	// Timeout bounds the whole run.
	Timeout time.Duration
	// LogLevel is the operator's log level: debug, info, warn or error.
	LogLevel string
}

// DefaultOptions are the flag defaults: three windows of 5000 readings
// finish in a few seconds on the embedded broker.
func DefaultOptions() Options {
	return Options{
		Windows: 3, EventsPerWindow: 5000, Seed: 1,
		Epsilon: 1, Delta: 1e-6, Mechanism: "laplace",
		Timeout: 2 * time.Minute, LogLevel: "warn",
	}
}

// Validate checks the options that the operator's own validation does not
// cover. Its messages name the command's flags.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...))
	}
	if o.Windows < 1 || o.Windows > maxStreamWindows {
		bad("--windows must be in [1, %d]", maxStreamWindows)
	}
	if o.EventsPerWindow < 1 || o.EventsPerWindow > maxStreamEvents {
		bad("--events-per-window must be in [1, %d]", maxStreamEvents)
	}
	if !(o.Epsilon > 0) || math.IsInf(o.Epsilon, 0) {
		bad("--epsilon must be a finite number > 0")
	}
	if !(o.Delta >= 0 && o.Delta < 1) {
		bad("--delta must be in [0, 1)")
	}
	if o.Mechanism != operator.Auto {
		if _, err := privacy.Parse(o.Mechanism); err != nil {
			bad("--mechanism %q is not a known mechanism or auto", o.Mechanism)
		}
	}
	if o.Timeout <= 0 {
		bad("--timeout must be positive")
	}
	switch o.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("--log-level %q is not debug, info, warn or error", o.LogLevel)
	}
	return errors.Join(errs...)
}
