//go:build unix

package schema

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) this process has used, so
// benchmarks can report throughput per CPU-second, which stays meaningful
// when other processes share the machine's cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
