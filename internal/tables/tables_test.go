package tables

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"strconv"
	"testing"

	"github.com/dpstream/dpstream/privacy"
)

// The rendered source parses back to the same numbers, also for values
// that need all 17 significant digits or sit at the ends of the float64
// range.
func TestRenderParsesBack(t *testing.T) {
	d := privacy.ScaleTable{Name: "subbotin:3", Family: "subbotin", Param: 3,
		EpsMin: 0.5, EpsMax: 2, NEps: 3, DeltaMin: 1e-6, DeltaMax: 1e-3, NDelta: 3,
		Scale: []float64{0.1, 1.0 / 3, math.Nextafter(2, 3), 7.123456789e-5, 1e300, math.SmallestNonzeroFloat64, 12, 13.5, math.Pi}}
	src, err := render([]privacy.ScaleTable{d})
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "table_data.go", src, 0)
	if err != nil {
		t.Fatalf("rendered tables do not parse: %v", err)
	}
	var got []float64
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok || kv.Key.(*ast.Ident).Name != "scale" {
			return true
		}
		for _, e := range kv.Value.(*ast.CompositeLit).Elts {
			v, err := strconv.ParseFloat(e.(*ast.BasicLit).Value, 64)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		return false
	})
	if len(got) != len(d.Scale) {
		t.Fatalf("rendered %d values, want %d", len(got), len(d.Scale))
	}
	for i := range got {
		if got[i] != d.Scale[i] {
			t.Errorf("value %d: rendered %v, want %v", i, got[i], d.Scale[i])
		}
	}
}
