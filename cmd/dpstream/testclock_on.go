//go:build dpstream_testclock

package main

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dpstream/dpstream/operator"
)

// testClockOptions, in a binary built with the dpstream_testclock tag (the
// subprocess tests' builds only, see buildDpstream), gives the operator a
// clock read from the file DPSTREAM_TEST_CLOCK_FILE names: a Unix ms time,
// which the test advances as it produces its simulated stream, so that
// windows are published on the stream's simulated schedule (a window is
// never published before end + allowed_lateness + idle_timeout by the
// operator's clock). Without the variable, or while the file holds no
// time, the clock is the real one.
func testClockOptions() []operator.Option {
	path := os.Getenv("DPSTREAM_TEST_CLOCK_FILE")
	if path == "" {
		return nil
	}
	return []operator.Option{operator.WithClock(func() time.Time {
		b, err := os.ReadFile(path)
		if err != nil {
			return time.Now()
		}
		ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return time.Now()
		}
		return time.UnixMilli(ms)
	})}
}
