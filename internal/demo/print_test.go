package demo

import (
	"strings"
	"testing"

	"github.com/dpstream/dpstream/schema"
)

// TestReleaseLedger: the demo prints the ledger a release carries — with a
// horizon the spent and total budgets and the accountant the note names,
// without one the window's own spend — never a hard-coded accounting.
func TestReleaseLedger(t *testing.T) {
	r := schema.Release{
		Budget: schema.Budget{Epsilon: 0.1, Delta: 1e-8},
		Spent:  schema.Budget{Epsilon: 0.35, Delta: 4e-8},
		Horizon: schema.Horizon{Start: 0, End: 86_400_000,
			Budget: schema.Budget{Epsilon: 2, Delta: 1e-6}},
		Note: "budget ε=2, δ=1e-06 per horizon of 24h0m0s (1440 windows); one calibration of all 3 noised parts over all 1440 windows, accounting pld; count: laplace",
	}
	for _, got := range []string{releaseLedger(&r), summaryLedger(&r, 7)} {
		for _, want := range []string{"ε=0.35, δ=4e-08", "of ε=2, δ=1e-06", "(accounting pld)", "1970-01-02 00:00"} {
			if !strings.Contains(got, want) {
				t.Errorf("%q lacks %q", got, want)
			}
		}
		if strings.Contains(got, "basic") {
			t.Errorf("%q names basic composition", got)
		}
	}
	r.Note = "free text"
	if got := noteAccounting(r.Note); got != "as recorded in the release" {
		t.Errorf("noteAccounting(free text) = %q", got)
	}
	r.Horizon, r.Spent = schema.Horizon{}, r.Budget
	if got := summaryLedger(&r, 3); !strings.Contains(got, "spent ε=0.3") || !strings.Contains(got, "no horizon") {
		t.Errorf("no horizon: %q", got)
	}
	if got := summaryLedger(nil, 0); got != "no releases read back" {
		t.Errorf("no releases: %q", got)
	}
}
