package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/png" // registers the PNG decoder for image.DecodeConfig
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/internal/plot"
	"github.com/dpstream/dpstream/privacy"
)

// TestCompareJSON: the JSON output lists every feasible mechanism with the
// per-coordinate scale the library certifies, sorted by variance, and the
// winner is the first; tight accounting never needs more noise than basic
// or advanced composition.
func TestCompareJSON(t *testing.T) {
	out, err := runCmd(t, "compare", "--epsilon", "1", "--delta", "1e-6", "--l0", "4", "--windows", "3", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Compositions int
		Winner       string
		Error        string
		Mechanisms   []struct {
			Mechanism     string
			Scale         float64
			Accounting    string
			Variance      *float64
			BasicScale    *float64 `json:"basic_scale"`
			AdvancedScale *float64 `json:"advanced_scale"`
		}
		Infeasible []string
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if res.Compositions != 12 || res.Error != "variance" {
		t.Errorf("compositions %d, error %q", res.Compositions, res.Error)
	}
	if len(res.Mechanisms)+len(res.Infeasible) != len(compareMechanisms) {
		t.Errorf("%d rows + %d infeasible, want %d mechanisms", len(res.Mechanisms), len(res.Infeasible), len(compareMechanisms))
	}
	if len(res.Mechanisms) == 0 || res.Winner != res.Mechanisms[0].Mechanism {
		t.Fatalf("winner %q is not the first row", res.Winner)
	}
	prev := 0.0
	for _, r := range res.Mechanisms {
		v := math.Inf(1)
		if r.Variance != nil {
			v = *r.Variance
		}
		if v < prev {
			t.Errorf("%s: rows not sorted by variance", r.Mechanism)
		}
		prev = v
		for _, other := range []*float64{r.BasicScale, r.AdvancedScale} {
			if other != nil && r.Scale > *other*(1+1e-9) {
				t.Errorf("%s: tight scale %v above a composition theorem's %v", r.Mechanism, r.Scale, *other)
			}
		}
		m, err := privacy.Parse(r.Mechanism)
		if err != nil {
			t.Fatal(err)
		}
		p, err := privacy.CalibrateHorizon(m, privacy.Horizon{Total: privacy.Budget{Epsilon: 1, Delta: 1e-6}, Windows: 3, L0: 4, Linf: 1})
		if err != nil || p.Scale != r.Scale {
			t.Errorf("%s: scale %v, library %v (%v)", r.Mechanism, r.Scale, p.Scale, err)
		}
	}
}

// TestCompareText: a readable table naming the winner; bad flags fail with
// one clear error.
func TestCompareText(t *testing.T) {
	out, err := runCmd(t, "compare", "--epsilon", "1", "--delta", "0", "--l0", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mechanism", "laplace", "winner (smallest variance):", "cannot meet this budget"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{
		{"compare", "--epsilon", "0", "--delta", "1e-6"},
		{"compare", "--epsilon", "1", "--delta", "1"},
		{"compare", "--epsilon", "1", "--delta", "1e-6", "--l0", "0"},
		{"compare", "--epsilon", "1", "--delta", "1e-6", "--linf", "NaN"},
		{"compare", "--epsilon", "1", "--delta", "1e-6", "--error", "max"},
	} {
		if _, err := runCmd(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestComparePlot: --plot writes a PNG of the documented size (plotWidth ×
// plotHeight at 96 dpi = 960 × 720) and leaves the printed output, JSON or
// text, byte for byte what it is without --plot. An unwritable path is an
// plot.ErrPlot error.
func TestComparePlot(t *testing.T) {
	dir := t.TempDir()
	for i, args := range [][]string{
		{"compare", "--epsilon", "1", "--delta", "1e-6", "--l0", "2", "--json"},
		{"compare", "--epsilon", "1", "--delta", "1e-6", "--l0", "2", "--error", "mae"},
	} {
		want, err := runCmd(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("compare%d.png", i))
		got, err := runCmd(t, append(args, "--plot", path)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if got != want {
			t.Errorf("%v: output changed by --plot:\n%s\nwant\n%s", args, got, want)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, format, err := image.DecodeConfig(f)
		f.Close()
		if err != nil || format != "png" {
			t.Fatalf("%v: not a PNG: %q, %v", args, format, err)
		}
		if cfg.Width != 960 || cfg.Height != 720 {
			t.Errorf("%v: PNG is %d × %d, want 960 × 720", args, cfg.Width, cfg.Height)
		}
	}
	_, err := runCmd(t, "compare", "--epsilon", "1", "--delta", "1e-6", "--plot", filepath.Join(dir, "no", "such", "dir.png"))
	if !errors.Is(err, plot.ErrPlot) {
		t.Errorf("unwritable path: %v, want plot.ErrPlot", err)
	}
}
