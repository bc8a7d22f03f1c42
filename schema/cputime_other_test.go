//go:build !unix

package schema

import "time"

// cpuTime is not measured on this platform; benchmarks omit the per
// CPU-second metric.
func cpuTime() time.Duration { return 0 }
