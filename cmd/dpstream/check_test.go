package main

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/operator"
)

// TestCheckUnreachable: dpstream check (and run --check-config --connect)
// against an address where no broker listens fails, within its timeout,
// with a line naming the address and the cause, after "config ok"; the
// later checks are skipped. Before the check command, --check-config said
// "config ok" and exited 0. Needs no broker.
func TestCheckUnreachable(t *testing.T) {
	t.Setenv("DPSTREAM_KEY", strings.Repeat("ab", 32))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{
		{"check", "--config", exampleConfig, "--brokers", addr, "--timeout", "20s"},
		{"run", "--config", exampleConfig, "--brokers", addr, "--check-config", "--connect"},
	} {
		out, err := runCLI(t, args...)
		if !errors.Is(err, operator.ErrCheckFailed) {
			t.Errorf("%s: err = %v, want ErrCheckFailed; output:\n%s", args[0], err, out)
		}
		for _, want := range []string{"config ok\n", "FAIL  connect: operator: kafka: broker " + addr + ": cannot connect", "connection refused", "skip  topics"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", args[0], want, out)
			}
		}
	}
}

// TestCheckConfigOffline: --check-config alone still connects to nothing
// (it says "config ok" for an unreachable broker, as documented), and
// --connect alone is an error rather than a run.
func TestCheckConfigOffline(t *testing.T) {
	t.Setenv("DPSTREAM_KEY", strings.Repeat("ab", 32))
	out, err := runCLI(t, "run", "--config", exampleConfig, "--brokers", "127.0.0.1:1", "--check-config")
	if err != nil || strings.Contains(out, "connect") {
		t.Errorf("--check-config: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "run", "--config", exampleConfig, "--connect"); err == nil || !strings.Contains(err.Error(), "--connect needs --check-config") {
		t.Errorf("run --connect without --check-config: %v", err)
	}
}
