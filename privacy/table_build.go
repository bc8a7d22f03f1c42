package privacy

import (
	"fmt"
	"math"
	"strconv"
)

// gridNudge moves every generated grid point down by this relative amount
// before it is solved: a lookup locates its cell from a rounded logarithm, so
// the query can sit a few ulps below the corner it picks; solving at the
// nudged point keeps the corner entry an upper bound for every such query.
const gridNudge = 1e-12

// tableGrid is the shape of a generated table.
type tableGrid struct {
	epsMin, epsMax     float64
	epsPerDecade       int
	deltaMin, deltaMax float64
	deltaPerDecade     int
}

// gridFor returns the grid of the table of spec.
func gridFor(spec tableSpec) tableGrid {
	if spec.pure {
		return tableGrid{epsMin: tableEpsMin, epsMax: tableEpsMax, epsPerDecade: tablePureEpsPerDecade}
	}
	return tableGrid{tableEpsMin, tableEpsMax, tableEpsPerDecade, tableDeltaMin, tableDeltaMax, tableDeltaPerDecade}
}

// gridSize returns the number of points for about perDecade points per
// factor of 10 between lo and hi (at least 4, the cubic stencil).
func gridSize(lo, hi float64, perDecade int) int {
	return max(4, int(math.Ceil(math.Log10(hi/lo)*float64(perDecade)))+1)
}

// tableStats summarizes a generated table.
type tableStats struct {
	entries int
	// maxUnder and maxOver are the largest relative amounts by which the
	// interpolant (before lookupMargin) falls below / exceeds the solver at
	// the cell centres.
	maxUnder, maxOver float64
}

// buildTable solves spec on grid g and measures the interpolation error at
// every cell centre.
func buildTable(spec tableSpec, g tableGrid) (tableData, tableStats, error) {
	d := tableData{family: spec.key.family, param: spec.key.param, pure: spec.pure,
		epsMin: g.epsMin, epsMax: g.epsMax, nEps: gridSize(g.epsMin, g.epsMax, g.epsPerDecade), nDelta: 1}
	x := newAxis(d.epsMin, d.epsMax, d.nEps, false)
	var y axis
	if !spec.pure {
		d.deltaMin, d.deltaMax = g.deltaMin, g.deltaMax
		d.nDelta = gridSize(g.deltaMin, g.deltaMax, g.deltaPerDecade)
		y = newAxis(d.deltaMin, d.deltaMax, d.nDelta, true)
	}
	// at returns the grid point (ε, δ) at positions (p, q), with the ends
	// exact.
	at := func(p, q float64) (float64, float64) {
		e := x.value(p)
		switch p {
		case 0:
			e = d.epsMin
		case float64(d.nEps - 1):
			e = d.epsMax
		}
		if spec.pure {
			return e, 0
		}
		dl := y.value(q)
		switch q {
		case 0:
			dl = d.deltaMin
		case float64(d.nDelta - 1):
			dl = d.deltaMax
		}
		return e, dl
	}
	solve := func(e, dl float64) (float64, error) {
		s, err := spec.solve(e, dl)
		if err == nil && !(s > 0 && !math.IsInf(s, 1)) {
			err = fmt.Errorf("%w: solver returned %v", ErrInfeasible, s)
		}
		if err != nil {
			return 0, fmt.Errorf("privacy: table %v at ε = %v, δ = %v: %w", spec.key, e, dl, err)
		}
		return s, nil
	}
	d.scale = make([]float64, 0, d.nEps*d.nDelta)
	for i := range d.nEps {
		for j := range d.nDelta {
			e, dl := at(float64(i), float64(j))
			s, err := solve(e*(1-gridNudge), dl*(1-gridNudge))
			if err != nil {
				return tableData{}, tableStats{}, err
			}
			d.scale = append(d.scale, roundedUp(s))
		}
	}
	st := tableStats{entries: len(d.scale)}
	t := newScaleTable(&d, nil)
	for i := 0; i+1 < d.nEps; i++ {
		for j := 0; j < d.nDelta; j++ {
			q := float64(j) + 0.5
			if spec.pure {
				q = 0
			} else if j+1 == d.nDelta {
				break
			}
			e, dl := at(float64(i)+0.5, q)
			exact, err := solve(e, dl)
			if err != nil {
				return tableData{}, tableStats{}, err
			}
			s, _, ok := t.interpolate(e, dl)
			if !ok {
				return tableData{}, tableStats{}, fmt.Errorf("privacy: table %v: cell centre ε = %v, δ = %v off the grid", spec.key, e, dl)
			}
			r := s/exact - 1
			st.maxUnder = math.Max(st.maxUnder, -r)
			st.maxOver = math.Max(st.maxOver, r)
		}
	}
	if st.maxUnder > tableInterpTol || st.maxOver > tableInterpTol {
		return tableData{}, st, fmt.Errorf("privacy: table %v: interpolation error −%.2g/+%.2g exceeds %v; refine the grid",
			spec.key, st.maxUnder, st.maxOver, tableInterpTol)
	}
	return d, st, nil
}

// roundedUp returns the shortest decimal with 10 significant digits that is
// ≥ v (at most 1e-9 above it), which keeps the generated file small.
func roundedUp(v float64) float64 {
	w := v * (1 + 1e-9)
	for {
		r, err := strconv.ParseFloat(strconv.FormatFloat(w, 'e', 9, 64), 64)
		if err == nil && r >= v {
			return r
		}
		w *= 1 + 1e-10
	}
}

// ScaleTable is one precomputed unit-sensitivity scale table as
// BuildScaleTables computes it: the data of one entry of table_data.go and
// the interpolation error measured on it. Rendering it as Go source and
// writing the file is internal/tables' job (package privacy writes no file).
type ScaleTable struct {
	// Name is the mechanism the table serves, as Parse reads it
	// ("gaussian", "subbotin:3", "sas:1.5").
	Name string
	// Family and Param identify the mechanism: Param is R for subbotin, α
	// for sas, 0 otherwise.
	Family string
	Param  float64
	// Pure: δ = 0 only, a 1-D table over ε (NDelta = 1).
	Pure bool
	// The grid: NEps points uniform in ln ε from EpsMin to EpsMax, NDelta
	// points uniform in logit δ from DeltaMin to DeltaMax.
	EpsMin, EpsMax     float64
	NEps               int
	DeltaMin, DeltaMax float64
	NDelta             int
	// Scale holds the unit-sensitivity scales, row-major by ε.
	Scale []float64
	// MaxUnder and MaxOver are the largest relative amounts by which the
	// interpolant (before the lookup margin) falls below / exceeds the
	// solver at the cell centres.
	MaxUnder, MaxOver float64
}

// BuildScaleTables computes every registered scale table with its exact
// solver, in the order of table_data.go. It fails if a solver fails or the
// interpolation error on a table exceeds its tolerance. If each is not nil
// it is called with every table as soon as it is computed (the generator
// reports progress with it).
func BuildScaleTables(each func(ScaleTable)) ([]ScaleTable, error) {
	var out []ScaleTable
	for _, key := range tableKeys() {
		spec := tableSpecs[key]
		d, st, err := buildTable(spec, gridFor(spec))
		if err != nil {
			return nil, err
		}
		t := ScaleTable{Name: key.String(), Family: d.family, Param: d.param, Pure: d.pure,
			EpsMin: d.epsMin, EpsMax: d.epsMax, NEps: d.nEps, DeltaMin: d.deltaMin, DeltaMax: d.deltaMax, NDelta: d.nDelta,
			Scale: d.scale, MaxUnder: st.maxUnder, MaxOver: st.maxOver}
		if each != nil {
			each(t)
		}
		out = append(out, t)
	}
	return out, nil
}
