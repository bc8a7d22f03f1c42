package schema

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runningRelease is the golden count release with a running series
// (testdata/release_count_running.*).
func runningRelease() *Release {
	return &Release{
		ReleaseID:   "meters/2024-05-01T12:00:00.000Z",
		WindowStart: 1714564800000, WindowEnd: 1714564860000,
		Aggregate: "count", Kind: KindCount,
		Group: []GroupValue{{"region", "north"}},
		Series: []Series{
			{Name: SeriesCount, Mechanism: "discrete-gaussian", Scale: 3.5, Sensitivity: Sensitivity{L0: 1, L1: 3, L2: 3, LInf: 3},
				Ints: []int64{41}, Level: 0.95, Lo: []float64{34}, Hi: []float64{48}},
			{Name: SeriesRunning, Mechanism: DerivedMechanism, Ints: []int64{29870}, Level: 0.95,
				Lo: []float64{29720}, Hi: []float64{30020}, Windows: 720},
		},
		Budget: Budget{Epsilon: 0.21, Delta: 1e-9}, Spent: Budget{Epsilon: 6.8, Delta: 5e-7},
		Horizon:  Horizon{Start: 1714521600000, End: 1714608000000, Budget: Budget{Epsilon: 10, Delta: 1e-6}},
		Unit:     "meter_id",
		Bounds:   Bounds{MaxGroups: 1, MaxBuckets: 1, MaxPerBucket: 1, MaxValues: 3},
		Instance: "dpstream-0", Note: "running totals of count since the horizon's start: sums of the released window values",
	}
}

// TestRunningReleaseGolden: a count release with a running series encodes
// to the checked-in bytes (run with -update to rewrite), decodes back to
// itself with its windows field, and the Python example accepts it
// (with DPSTREAM_PYTHON set; skipped otherwise).
func TestRunningReleaseGolden(t *testing.T) {
	mp := checkGolden(t, "release_count_running", runningRelease())
	if py := os.Getenv("DPSTREAM_PYTHON"); py != "" {
		out, err := exec.Command(py, filepath.Join("..", "examples", "python", "consume_releases.py"), "--file", mp).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"running": [29870]`) {
			t.Errorf("python example: %v\n%s", err, out)
		}
	}
}

// TestRunningSeriesValidation: a running series only ends a count or sum
// release, has windows ≥ 1, and no other series has windows; the running
// series of an integer count is integer-valued, that of a real-valued
// count (event-level running totals by the factorization) real-valued.
func TestRunningSeriesValidation(t *testing.T) {
	for name, mut := range map[string]func(r *Release){
		"no windows":          func(r *Release) { r.Series[1].Windows = 0 },
		"windows on count":    func(r *Release) { r.Series[0].Windows = 3 },
		"float running count": func(r *Release) { r.Series[1].Ints, r.Series[1].Floats = nil, []float64{1.5} },
		"running on a mean": func(r *Release) {
			r.Kind = KindMean
			r.Series[0].Name = SeriesSum
		},
		"running first": func(r *Release) { r.Series[0], r.Series[1] = r.Series[1], r.Series[0] },
		"not derived":   func(r *Release) { r.Series[1].Mechanism = "laplace" },
	} {
		r := runningRelease()
		mut(r)
		if err := r.Validate(); !errors.Is(err, ErrInvalidRelease) {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := runningRelease().Validate(); err != nil {
		t.Error(err)
	}
	r := runningRelease()
	r.Series[0].Mechanism, r.Series[0].Ints, r.Series[0].Floats = "factorized-discrete-gaussian", nil, []float64{40.9990234375}
	r.Series[1].Ints, r.Series[1].Floats = nil, []float64{29870.25}
	if err := r.Validate(); err != nil {
		t.Errorf("real-valued count with a real-valued running series: %v", err)
	}
}
