package plot

import (
	"errors"
	"image"
	_ "image/png" // registers the PNG decoder for image.DecodeConfig
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dpstream/dpstream/privacy"
)

// TestWrite: Write makes a PNG of the documented size (plotWidth ×
// plotHeight at 96 dpi = 960 × 720); a budget no mechanism meets is an
// ErrPlot error. (cmd/dpstream's TestComparePlot checks the flag and an
// unwritable path.)
func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "compare.png")
	o := Options{Total: privacy.Budget{Epsilon: 1, Delta: 1e-6}, Linf: 1, Windows: 1, Measure: "mae",
		Candidates: privacy.CompareCandidates}
	if err := Write(path, o); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, format, err := image.DecodeConfig(f)
	f.Close()
	if err != nil || format != "png" {
		t.Fatalf("not a PNG: %q, %v", format, err)
	}
	if cfg.Width != 960 || cfg.Height != 720 {
		t.Errorf("PNG is %d × %d, want 960 × 720", cfg.Width, cfg.Height)
	}
	o.Candidates = []string{"no-such-mechanism"}
	if err := Write(path, o); !errors.Is(err, ErrPlot) {
		t.Errorf("unknown candidate: %v, want ErrPlot", err)
	}
}

// TestCompareSeries: one line per candidate with a finite error, each
// increasing with L0 (more coordinates to hide means more noise), and the
// line at the table's L0 equal to the table's error (the table of
// dpstream compare: privacy.Compare with the composition theorems, its
// standard deviation the square root of a finite variance).
func TestCompareSeries(t *testing.T) {
	total := privacy.Budget{Epsilon: 1, Delta: 1e-6}
	o := Options{Total: total, Linf: 1, Windows: 1, Measure: "variance", Candidates: privacy.CompareCandidates}
	series, missing, err := compareSeries(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(series)+len(missing) != len(o.Candidates) {
		t.Errorf("%d series + %d missing, want %d", len(series), len(missing), len(o.Candidates))
	}
	res, err := privacy.Compare(privacy.Horizon{Total: total, Windows: 1, L0: 4, Linf: 1}, privacy.CompareOptions{
		Candidates: o.Candidates, Measure: privacy.ByVariance, Theorems: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]float64{}
	for _, r := range res.Options {
		if sd := math.Sqrt(r.Variance); !math.IsInf(sd, 0) && !math.IsNaN(sd) {
			table[r.Mechanism.Name()] = sd
		}
	}
	for _, s := range series {
		for i := 1; i < len(s.pts); i++ {
			if !(s.pts[i].Y > s.pts[i-1].Y) {
				t.Errorf("%s: error not increasing in L0: %v", s.name, s.pts)
			}
		}
		if sd, ok := table[s.name]; ok && lastAt(s.pts, 4) != sd {
			t.Errorf("%s: plot %v at L0 = 4, table %v", s.name, lastAt(s.pts, 4), sd)
		}
	}
}
