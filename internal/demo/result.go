package demo

import (
	"time"

	"github.com/dpstream/dpstream/schema"
)

// Window is one published window as the demo read it back.
type Window struct {
	Start, End int64
	// Releases are decoded from the output topic, sorted by region and
	// aggregate in configuration order.
	Releases []schema.Release
	// Truth is the demo's own exact aggregate per region.
	Truth map[string]*GroupTruth
	// Latency is the operator's publish latency after the window closed.
	Latency time.Duration
	// Running holds the true running totals through this window
	// (runningTruths).
	Running map[string]float64
}

// Result is what a demo run produced, for tests.
type Result struct {
	// Brokers are the brokers used; Embedded says they are the embedded
	// broker's.
	Brokers  []string
	Embedded bool
	// InputTopic and OutputTopic are the run's topics (fresh per run).
	InputTopic, OutputTopic string
	// Windows are the windows read back, in order.
	Windows []Window
	// Stream counts the generated messages by kind.
	Stream StreamCounts
	// Checked and Covered count the displayed values and those whose true
	// value lies in the published interval.
	Checked, Covered int
	// Mismatches counts values where the demo's truth differs from the
	// operator's exact bounded aggregate (should be 0); Inexact counts
	// groups whose truth depends on random bounding.
	Mismatches, Inexact int
	// EventsIn, Late and Skipped (by reason) are the operator's input
	// counters, read from its registry at the end.
	EventsIn, Late float64
	Skipped        map[string]float64
}
