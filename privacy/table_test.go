package privacy

import (
	"math"
	"math/rand/v2"
	"testing"
)

// lcSolverLow is how far below a solver result the exact minimum can be:
// the solver returns the upper end of a bracket of relative width solverTol,
// times 1 + evalMargin (and a few ulps from settle).
const lcSolverLow = 1/(1+evalMargin)/(1+solverTol) - 1e-15

// lcTable is a generated table with its key.
type lcTable struct {
	key tableKey
	tb  *scaleTable
}

// lcTablesUnderTest returns the generated tables of the registered specs in
// a fixed order (so that seeded tests are deterministic), failing if a
// registered spec has no table (the file is stale).
func lcTablesUnderTest(t *testing.T) []lcTable {
	t.Helper()
	var out []lcTable
	for _, key := range tableKeys() {
		tb := tableFor(key)
		if tb == nil {
			t.Errorf("no generated table for %v: run go generate ./privacy", key)
			continue
		}
		out = append(out, lcTable{key, tb})
	}
	return out
}

// Random off-grid points (fixed seed, so the test is deterministic) on every
// table: the lookup meets the exact criterion, is never below the solver's
// lower bound on the exact minimum, and is within 1e-3 above the solver.
// Pure (1-D) tables have costly solvers, so they get fewer points.
func TestTableLookupVsSolver(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 7))
	for _, lt := range lcTablesUnderTest(t) {
		key, tb := lt.key, lt.tb
		spec := tableSpecs[key]
		n := 40
		if spec.pure {
			n = 3
		}
		worst := 0.0
		for range n {
			eps := math.Exp(math.Log(tableEpsMin) + rng.Float64()*math.Log(tableEpsMax/tableEpsMin))
			delta := 0.0
			if !spec.pure {
				delta = tb.y.value(rng.Float64() * float64(tb.data.nDelta-1))
			}
			got, ok := tb.unitLookup(eps, delta)
			if !ok {
				t.Errorf("%v: lookup at ε = %v, δ = %v missed", key, eps, delta)
				continue
			}
			exact, err := spec.solve(eps, delta)
			if err != nil {
				t.Fatal(err)
			}
			if spec.holds != nil && !spec.holds(eps, delta, got) {
				t.Errorf("%v ε = %v δ = %v: lookup %v fails the exact criterion", key, eps, delta, got)
			}
			if got < exact*lcSolverLow || got > exact*(1+1e-3) {
				t.Errorf("%v ε = %v δ = %v: lookup %.10g, solver %.10g (relative %+.2e)", key, eps, delta, got, exact, got/exact-1)
			}
			worst = math.Max(worst, got/exact-1)
		}
		t.Logf("%v: lookup at most %.1e above the solver", key, worst)
	}
}

// The checked-in tables match the current solvers (a stale file after a
// solver change fails here), have the current grid, and are monotone as
// Lemma 2 says (non-increasing in ε and δ) up to the solver's 1e-8 noise.
func TestTableDataFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 11))
	for _, lt := range lcTablesUnderTest(t) {
		key, tb := lt.key, lt.tb
		spec, d := tableSpecs[key], tb.data
		g := gridFor(spec)
		if d.epsMin != g.epsMin || d.epsMax != g.epsMax || d.nEps != gridSize(g.epsMin, g.epsMax, g.epsPerDecade) ||
			(!d.pure && (d.deltaMin != g.deltaMin || d.deltaMax != g.deltaMax || d.nDelta != gridSize(g.deltaMin, g.deltaMax, g.deltaPerDecade))) {
			t.Errorf("%v: generated grid differs from the current one: run go generate ./privacy", key)
			continue
		}
		n := 10
		if spec.pure {
			n = 2
		}
		for range n {
			i, j := rng.IntN(d.nEps), rng.IntN(d.nDelta)
			eps := tb.x.value(float64(i))
			delta := 0.0
			if !d.pure {
				delta = tb.y.value(float64(j))
			}
			// The generator pins the ends exactly.
			switch i {
			case 0:
				eps = d.epsMin
			case d.nEps - 1:
				eps = d.epsMax
			}
			if !d.pure && j == 0 {
				delta = d.deltaMin
			} else if !d.pure && j == d.nDelta-1 {
				delta = d.deltaMax
			}
			want, err := spec.solve(eps*(1-gridNudge), delta*(1-gridNudge))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.scale[i*d.nDelta+j]; got < want || got > want*(1+2e-9) {
				t.Errorf("%v entry (%d, %d): %.12g, solver %.12g: run go generate ./privacy", key, i, j, got, want)
			}
		}
		for i := range d.nEps {
			for j := range d.nDelta {
				k := i*d.nDelta + j
				if i > 0 && d.scale[k] > d.scale[k-d.nDelta]*(1+1e-7) {
					t.Errorf("%v: entry (%d, %d) = %v above the one at smaller ε, %v", key, i, j, d.scale[k], d.scale[k-d.nDelta])
				}
				if j > 0 && d.scale[k] > d.scale[k-1]*(1+1e-7) {
					t.Errorf("%v: entry (%d, %d) = %v above the one at smaller δ, %v", key, i, j, d.scale[k], d.scale[k-1])
				}
			}
		}
	}
}

// A damaged table never yields an unverified scale: slightly low entries
// are stepped up until the criterion holds, and entries far too low make
// the lookup miss, so that the solver answers.
func TestTableDamaged(t *testing.T) {
	good := tableFor(gaussianKey)
	if good == nil {
		t.Fatal("no gaussian table")
	}
	spec := tableSpecs[gaussianKey]
	for _, factor := range []float64{1 - 3e-4, 0.5} {
		d := *good.data
		d.scale = make([]float64, len(good.data.scale))
		for i, s := range good.data.scale {
			d.scale[i] = s * factor
		}
		tb := newScaleTable(&d, spec.holds)
		for _, p := range [][2]float64{{0.0123, 3.3e-9}, {1.7, 0.0042}, {15, 2e-14}} {
			got, ok := tb.unitLookup(p[0], p[1])
			exact, _ := gaussianSolve(p[0], p[1])
			switch {
			case factor == 0.5 && ok:
				t.Errorf("entries halved, ε = %v δ = %v: lookup returned %v, want a miss", p[0], p[1], got)
			case factor != 0.5 && (!ok || got < exact*lcSolverLow || got > exact*(1+1e-3)):
				t.Errorf("entries ×%v, ε = %v δ = %v: lookup %v (ok %v), solver %v", factor, p[0], p[1], got, ok, exact)
			}
		}
	}
}

// Off-grid requests fall back to the solver and say so.
func TestTableOffGrid(t *testing.T) {
	for _, p := range [][2]float64{{0.0005, 1e-6}, {25, 1e-6}, {1, 1e-16}, {1, 0.7}} {
		for _, m := range []Mechanism{Gaussian{}, Subbotin{R: 3}} {
			c, err := m.Calibrate(p[0], p[1], 1)
			if err != nil {
				t.Fatal(err)
			}
			if c.Method != Solver {
				t.Errorf("%s at ε = %v, δ = %v: method %s, want solver", m.Name(), p[0], p[1], c.Method)
			}
		}
	}
	for _, m := range []Mechanism{Gaussian{}, Subbotin{R: 3}} {
		if c, _ := m.Calibrate(0.5, 1e-6, 1); c.Method != Table {
			t.Errorf("%s on the grid: method %s, want table", m.Name(), c.Method)
		}
	}
	if c, _ := (Subbotin{R: 2.7}).Calibrate(0.5, 1e-6, 1); c.Method != Solver {
		t.Errorf("subbotin:2.7 (no table): method %s, want solver", c.Method)
	}
}

// The generator on a small grid: entries come from the solver and the
// interpolation error is measured. (That the rendered source parses back to
// the same numbers is internal/tables' TestRenderParsesBack.)
func TestGenerateSmallTable(t *testing.T) {
	spec := tableSpecs[tableKey{family: "subbotin", param: 3}]
	d, st, err := buildTable(spec, tableGrid{0.5, 2, 4, 1e-6, 1e-3, 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.entries != len(d.scale) || st.entries != d.nEps*d.nDelta || d.nEps != 4 || d.nDelta != 7 {
		t.Fatalf("shape: %d entries, %d×%d", st.entries, d.nEps, d.nDelta)
	}
	if st.maxOver <= 0 && st.maxUnder <= 0 {
		t.Errorf("interpolation error not measured: %+v", st)
	}
	want, _ := spec.solve(0.5*(1-gridNudge), 1e-6*(1-gridNudge))
	if d.scale[0] < want || d.scale[0] > want*(1+2e-9) {
		t.Errorf("first entry %v, solver %v", d.scale[0], want)
	}
}
