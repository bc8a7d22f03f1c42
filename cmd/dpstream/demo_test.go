package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/internal/demo"
)

// TestDemoOptions: bad flags are reported, each with its own message,
// before any broker is started. (internal/demo's TestRunInfeasibleBudget
// checks the operator's own errors, also before the broker.)
func TestDemoOptions(t *testing.T) {
	cmd := newRoot()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"demo", "--windows", "0", "--epsilon", "-1", "--delta", "1", "--mechanism", "nope", "--events-per-window", "0"})
	err := cmd.Execute()
	if !errors.Is(err, demo.ErrOptions) {
		t.Fatalf("got %v, want demo.ErrOptions", err)
	}
	for _, want := range []string{"--windows", "--epsilon", "--delta", "--mechanism", "--events-per-window"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
