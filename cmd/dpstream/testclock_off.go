//go:build !dpstream_testclock

package main

import "github.com/dpstream/dpstream/operator"

// testClockOptions is empty in a normal build: the operator keeps the real
// clock (see testclock_on.go for the subprocess tests' builds).
func testClockOptions() []operator.Option { return nil }
