package privacy

import (
	"math"
	"slices"
	"strconv"
	"sync"
)

//go:generate go run ../internal/tables/gentables -o table_data.go

// Precomputed scale tables.
//
// By Lemma 2 of Vinterbo (2022) the minimal scale is s(ε, δ, Δ) =
// Δ·s(ε, δ, 1), so one table per mechanism at Δ = 1 serves every
// sensitivity. The tables (table_data.go) are generated from the exact
// solvers by BuildScaleTables (rendered by internal/tables, run by `go generate ./privacy` and by
// `dpstream tables`); every entry is a solver result, so it is ≥ the exact
// minimum at its grid point.
//
// The grid is uniform in x = ln ε and y = logit δ = ln(δ/(1−δ)) (logit
// rather than ln δ because s bends sharply as δ approaches 1/2). A lookup
// interpolates ln s with tensor-product cubic Lagrange polynomials on the
// 4×4 surrounding points, multiplies by 1 + lookupMargin and accepts the
// result only if the exact criterion holds there: for Gaussian and
// Subbotin their Delta method, evaluated at the very scale returned for the
// caller's Δ (calibrateScale); for other tables tableSpec.holds at Δ = 1
// (tableOrSolve). While the criterion fails it steps up by lookupMargin, at
// most lookupSteps times. If that fails too, or the table
// has no cheap criterion, the lookup returns the table entry at the grid
// corner with the smaller ε and the smaller δ: s is non-increasing in ε and
// in δ (Lemma 2), so that entry is ≥ the exact minimum at the query (it is
// checked as well, and if even it fails, a damaged table, the solver
// answers). Points off the grid go to the solver.
//
// Mechanisms that only give pure ε-DP (sas:A) have 1-D tables over ε with
// δ = 0. Another file registers a table with registerTable from an init
// function, for example (α-stable noise):
//
//	func init() {
//		for _, a := range []float64{1.25, 1.5, 1.75} {
//			m := Stable{Alpha: a}
//			registerTable(tableSpec{
//				key:   tableKey{family: "sas", param: a},
//				pure:  true,
//				solve: func(eps, _ float64) (float64, error) { return m.unitScale(eps) },
//				holds: nil, // or a cheap exact check: func(eps, _, s float64) bool
//			})
//		}
//	}
//
// looks up with tableOrSolve(key, ε, 0, solver), and `go generate
// ./privacy` adds the table to table_data.go.

// The table grid covers the supported range of the calibration, ε ∈ [1e-3,
// 20] and δ ∈ [1e-15, 0.5]. The densities were chosen by measuring the
// interpolation error against the solver: with 4 points per decade of ε and
// 6 per decade of δ (in logit) it stays below 5e-4 on every table
// (BuildScaleTables measures it at all cell centres, reports it, and fails
// above tableInterpTol); 1-D pure-ε tables are cheap, so they get 16 points
// per decade. lookupMargin and lookupSteps then keep every lookup within
// about 6e-4 of the exact minimum, under the promised 1e-3.
const (
	tableEpsMin           = 1e-3
	tableEpsMax           = 20
	tableEpsPerDecade     = 4
	tablePureEpsPerDecade = 16
	tableDeltaMin         = 1e-15
	tableDeltaMax         = 0.5
	tableDeltaPerDecade   = 6

	// lookupMargin is the relative step added to an interpolated scale
	// before each check.
	lookupMargin = 1e-4
	// lookupSteps is how many steps of lookupMargin a lookup tries before
	// it falls back to the grid corner: enough to absorb an interpolation
	// error below tableInterpTol.
	lookupSteps = 8
	// tableInterpTol is the largest relative interpolation error the
	// generator accepts at a cell centre.
	tableInterpTol = 6e-4
)

// subbotinTableR is the grid of Subbotin parameters with tables: dense
// between the Laplace (R = 1) and Gaussian (R = 2) shapes, where the scale
// changes fastest with R, then roughly doubling up to the maximum. R = 1 and
// R = 2 are served by the Laplace closed form and the Gaussian table; other
// R use the solver.
var subbotinTableR = []float64{1.25, 1.5, 1.75, 2.5, 3, 4, 6, 8, 16, 50}

// tableKey identifies a table: a mechanism family and its parameter (R for
// subbotin, α for sas, 0 otherwise).
type tableKey struct {
	family string
	param  float64
}

// String returns the mechanism name the key stands for.
func (k tableKey) String() string {
	if k.param == 0 {
		return k.family
	}
	return k.family + ":" + strconv.FormatFloat(k.param, 'g', -1, 64)
}

// tableSpec says how to compute and check the entries of one table, all at
// unit sensitivity.
type tableSpec struct {
	key tableKey
	// pure: δ = 0 only, a 1-D table over ε.
	pure bool
	// solve returns a scale ≥ the exact minimum and within 1e-6 of it.
	solve func(epsilon, delta float64) (float64, error)
	// holds reports whether the exact criterion holds at this scale. It
	// should cost about a microsecond; nil means there is no cheap check,
	// and lookups return the safe grid corner.
	holds func(epsilon, delta, scale float64) bool
}

// tableSpecs holds the registered tables, by key.
var tableSpecs = map[tableKey]tableSpec{}

// registerTable registers a table spec; call it from an init function.
func registerTable(spec tableSpec) { tableSpecs[spec.key] = spec }

func init() {
	registerTable(tableSpec{
		key:   gaussianKey,
		solve: gaussianSolve,
		holds: func(eps, delta, s float64) bool { return lemma1(Gaussian{}, eps, dOf(1, s)) <= delta },
	})
	for _, r := range subbotinTableR {
		m := Subbotin{R: r}
		registerTable(tableSpec{
			key:   tableKey{family: "subbotin", param: r},
			solve: m.solve,
			holds: func(eps, delta, s float64) bool { return lemma1(m, eps, dOf(1, s)) <= delta },
		})
	}
}

// tableData is one generated table: unit-sensitivity scales on a grid
// uniform in ln ε (nEps points from epsMin to epsMax) and logit δ (nDelta
// points from deltaMin to deltaMax), row-major by ε. A pure table has
// nDelta = 1 and δ = 0.
type tableData struct {
	family         string
	param          float64
	pure           bool
	epsMin, epsMax float64
	nEps           int
	deltaMin       float64
	deltaMax       float64
	nDelta         int
	scale          []float64
}

// axis is one grid coordinate: n points uniform in c(v), from c0 with step h,
// where c is ln (ε) or logit (δ).
type axis struct {
	c0, h float64
	n     int
	logit bool
}

func newAxis(lo, hi float64, n int, logit bool) axis {
	a := axis{n: n, logit: logit}
	a.c0 = a.coord(lo)
	a.h = (a.coord(hi) - a.c0) / float64(n-1)
	return a
}

// coord maps a value to the grid coordinate.
func (a axis) coord(v float64) float64 {
	if a.logit {
		return math.Log(v) - math.Log1p(-v)
	}
	return math.Log(v)
}

// value is the inverse of coord at grid position p.
func (a axis) value(p float64) float64 {
	c := a.c0 + p*a.h
	if a.logit {
		return 1 / (1 + math.Exp(-c))
	}
	return math.Exp(c)
}

// locate returns the position p of v on the grid (0 ≤ p ≤ n−1), the index
// i of the lower point of its cell (0 ≤ i ≤ n−2), and the start j of the
// 4-point cubic stencil with the weights of its points; ok is false off the
// grid.
func (a axis) locate(v float64) (i, j int, w [4]float64, ok bool) {
	p := (a.coord(v) - a.c0) / a.h
	if !(p >= 0 && p <= float64(a.n-1)) {
		return 0, 0, w, false
	}
	i = min(int(p), a.n-2)
	j = max(0, min(i-1, a.n-4))
	// Cubic Lagrange weights for nodes at −1, 0, 1, 2 relative to j+1.
	t := p - float64(j+1)
	w = [4]float64{
		-t * (t - 1) * (t - 2) / 6,
		(t + 1) * (t - 1) * (t - 2) / 2,
		-(t + 1) * t * (t - 2) / 2,
		(t + 1) * t * (t - 1) / 6,
	}
	return i, j, w, true
}

// scaleTable is a tableData prepared for lookups.
type scaleTable struct {
	data  *tableData
	holds func(epsilon, delta, scale float64) bool
	x, y  axis
	logs  []float64 // ln of the entries
}

func newScaleTable(d *tableData, holds func(epsilon, delta, scale float64) bool) *scaleTable {
	t := &scaleTable{data: d, holds: holds, x: newAxis(d.epsMin, d.epsMax, d.nEps, false)}
	if !d.pure {
		t.y = newAxis(d.deltaMin, d.deltaMax, d.nDelta, true)
	}
	t.logs = make([]float64, len(d.scale))
	for j, s := range d.scale {
		t.logs[j] = math.Log(s)
	}
	return t
}

var (
	tablesOnce sync.Once
	tables     map[tableKey]*scaleTable
)

// tableFor returns the table for key, or nil. Tables whose spec is no
// longer registered, or whose shape is inconsistent, are ignored.
func tableFor(key tableKey) *scaleTable {
	tablesOnce.Do(func() {
		tables = make(map[tableKey]*scaleTable, len(generatedTables))
		for i := range generatedTables {
			d := &generatedTables[i]
			spec, ok := tableSpecs[tableKey{d.family, d.param}]
			if !ok || spec.pure != d.pure || d.nEps < 4 || len(d.scale) != d.nEps*d.nDelta ||
				(!d.pure && d.nDelta < 4) || (d.pure && d.nDelta != 1) {
				continue
			}
			tables[spec.key] = newScaleTable(d, spec.holds)
		}
	})
	return tables[key]
}

// interpolate returns the interpolated scale at (ε, δ) and the entry at
// the lower grid corner of its cell; ok is false off the grid.
func (t *scaleTable) interpolate(epsilon, delta float64) (s, corner float64, ok bool) {
	d := t.data
	if d.pure != (delta == 0) {
		return 0, 0, false
	}
	i, si, wx, ok := t.x.locate(epsilon)
	if !ok {
		return 0, 0, false
	}
	var v float64
	if d.pure {
		for a := range 4 {
			v += wx[a] * t.logs[si+a]
		}
		return math.Exp(v), d.scale[i], true
	}
	j, sj, wy, ok := t.y.locate(delta)
	if !ok {
		return 0, 0, false
	}
	for a := range 4 {
		row := t.logs[(si+a)*d.nDelta+sj:]
		v += wx[a] * (wy[0]*row[0] + wy[1]*row[1] + wy[2]*row[2] + wy[3]*row[3])
	}
	return math.Exp(v), d.scale[i*d.nDelta+j], true
}

// lookup returns a scale for (ε, δ) from the table, or false if the point
// is off the grid or no candidate passes. check turns a unit-sensitivity
// candidate into the final scale and reports whether the exact criterion
// holds there; the candidates are the interpolant times (1 + lookupMargin)^k,
// k = 1…lookupSteps, then the grid corner.
func (t *scaleTable) lookup(epsilon, delta float64, check func(unit float64) (float64, bool)) (float64, bool) {
	s, corner, ok := t.interpolate(epsilon, delta)
	if !ok {
		return 0, false
	}
	for range lookupSteps {
		s *= 1 + lookupMargin
		if s >= corner {
			break
		}
		if v, ok := check(s); ok {
			return v, true
		}
	}
	// The corner entry is an upper bound by monotonicity; checking it too
	// guards against a damaged table (then the solver answers).
	return check(corner)
}

// unitLookup returns the unit-sensitivity scale for (ε, δ) from the table,
// checked with the spec's holds, or (with no cheap criterion) the grid
// corner; false if the point is off the grid or nothing passes.
func (t *scaleTable) unitLookup(epsilon, delta float64) (float64, bool) {
	if t.holds == nil {
		_, corner, ok := t.interpolate(epsilon, delta)
		return corner, ok
	}
	return t.lookup(epsilon, delta, func(u float64) (float64, bool) { return u, t.holds(epsilon, delta, u) })
}

// tableOrSolve returns the unit-sensitivity scale for (ε, δ) from the table
// named by key if there is one covering the point (unitLookup), and from
// solve otherwise, with the method used.
func tableOrSolve(key tableKey, epsilon, delta float64, solve func(epsilon, delta float64) (float64, error)) (float64, Method, error) {
	if t := tableFor(key); t != nil {
		if s, ok := t.unitLookup(epsilon, delta); ok {
			return s, Table, nil
		}
	}
	s, err := solve(epsilon, delta)
	return s, Solver, err
}

// calibrateScale returns the scale for (ε, δ, Δ) of a mechanism with a
// cheap exact criterion deltaAt (its Delta method): a table lookup checked
// at the very scale it returns (one evaluation of the criterion in the
// common case), or else the solver, rescaled and checked the same way.
func calibrateScale(key tableKey, epsilon, delta, sensitivity float64,
	solve func(epsilon, delta float64) (float64, error),
	deltaAt func(epsilon, scale, sensitivity float64) float64) (float64, Method, error) {
	if t := tableFor(key); t != nil {
		check := func(u float64) (float64, bool) {
			s, err := scaleFor(u, sensitivity)
			return s, err == nil && deltaAt(epsilon, s, sensitivity) <= delta
		}
		if s, ok := t.lookup(epsilon, delta, check); ok {
			return s, Table, nil
		}
	}
	unit, err := solve(epsilon, delta)
	if err != nil {
		return 0, Solver, err
	}
	s, err := finishScale(unit, epsilon, delta, sensitivity, deltaAt)
	return s, Solver, err
}

// tableKeys returns the registered keys in a stable order: by family, then
// parameter.
func tableKeys() []tableKey {
	keys := make([]tableKey, 0, len(tableSpecs))
	for k := range tableSpecs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tableKey) int {
		if a.family != b.family {
			if a.family < b.family {
				return -1
			}
			return 1
		}
		switch {
		case a.param < b.param:
			return -1
		case a.param > b.param:
			return 1
		}
		return 0
	})
	return keys
}
