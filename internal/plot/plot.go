// Package plot draws `dpstream compare --plot out.png`: the expected
// error of one coordinate versus L0, one line per mechanism, on log-log
// axes, under the same accounting as the command's table (privacy.Compare).
// It is the only package that imports gonum/plot.
package plot

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/dpstream/dpstream/privacy"
)

// ErrPlot is wrapped by every error of Write (`compare --plot`).
var ErrPlot = errors.New("compare: plot")

// Options say what Write plots: the budget of the horizon and the
// candidates, as for the table of dpstream compare.
type Options struct {
	// Total is the budget of the whole horizon.
	Total privacy.Budget
	// Linf is the largest change of one coordinate (L∞).
	Linf float64
	// Windows is the number of releases in the horizon.
	Windows int
	// Measure is the error plotted: "variance" (plotted as the standard
	// deviation) or "mae" (the mean absolute error).
	Measure string
	// Candidates are the mechanisms' names (privacy.CompareCandidates in
	// dpstream compare), in legend-tie order.
	Candidates []string
}

// plotL0 are the L0 values the plot shows: powers of two from one
// coordinate to 64, the range of histogram widths users configure.
var plotL0 = []int{1, 2, 4, 8, 16, 32, 64}

// The plot's size. PNGs are drawn at vgimg.DefaultDPI (96 dots per inch),
// so the image is plotWidth·96 × plotHeight·96 = 960 × 720 pixels.
const (
	plotWidth  = 10 * vg.Inch
	plotHeight = 7.5 * vg.Inch
	// plotLegendWidth is the column right of the axes that holds the
	// legend (the longest name, subbotin:1.25, with its line sample).
	plotLegendWidth = 2 * vg.Inch
)

// plotSeries is one mechanism's line: its error at each L0 where it is
// feasible and finite.
type plotSeries struct {
	name string
	pts  plotter.XYs
}

// compareSeries calibrates every candidate at each L0 of plotL0 (one
// privacy.Compare per L0; the composition theorems are skipped) and returns
// one series per candidate, in candidate order, plus the candidates that
// have no finite error at any L0. The error is the noise's standard
// deviation (measure "variance") or mean absolute error ("mae").
func compareSeries(o Options) ([]plotSeries, []string, error) {
	total, linf, windows, measure := o.Total, o.Linf, o.Windows, o.Measure
	byName := map[string]*plotSeries{}
	for _, l0 := range plotL0 {
		c, err := privacy.Compare(privacy.Horizon{Total: total, Windows: windows, L0: l0, Linf: linf}, privacy.CompareOptions{
			Candidates: o.Candidates, Measure: privacy.ErrorMeasure(measure),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("%w: L0 %d: %w", ErrPlot, l0, err)
		}
		for _, o := range c.Options {
			name := o.Mechanism.Name()
			e := o.MeanAbsError
			if measure != string(privacy.ByMAE) {
				e = math.Sqrt(o.Variance)
			}
			s, ok := byName[name]
			if !ok {
				s = &plotSeries{name: name}
				byName[name] = s
			}
			if e > 0 && !math.IsInf(e, 0) && !math.IsNaN(e) { // a log axis needs finite values > 0
				s.pts = append(s.pts, plotter.XY{X: float64(l0), Y: e})
			}
		}
	}
	var series []plotSeries
	var missing []string
	for _, name := range o.Candidates {
		m, err := privacy.Parse(name)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrPlot, err)
		}
		if s, ok := byName[m.Name()]; ok && len(s.pts) > 0 {
			series = append(series, *s)
		} else {
			missing = append(missing, m.Name())
		}
	}
	return series, missing, nil
}

// Write draws the error-versus-L0 plot of one budget as a PNG at path
// (always PNG, whatever the file's extension).
func Write(path string, o Options) error {
	total, linf, windows, measure := o.Total, o.Linf, o.Windows, o.Measure
	series, missing, err := compareSeries(o)
	if err != nil {
		return err
	}
	if len(series) == 0 {
		return fmt.Errorf("%w: no mechanism has a finite %s for this budget at any L0", ErrPlot, measure)
	}
	p := gplot.New()
	what, ylabel := "standard deviation", "noise standard deviation per coordinate (log)"
	if measure == string(privacy.ByMAE) {
		what, ylabel = "mean absolute error", "mean absolute error per coordinate (log)"
	}
	title := fmt.Sprintf("dpstream compare: %s of one coordinate versus L0\n"+
		"total budget ε = %g, δ = %g over %s; L∞ = %g; tightest valid accounting",
		what, total.Epsilon, total.Delta, releases(windows), linf)
	if len(missing) > 0 {
		title += fmt.Sprintf("\nnot shown (infeasible or infinite %s): %s", what, strings.Join(missing, ", "))
	}
	p.Title.Text = title
	p.X.Label.Text = "L0: coordinates one unit changes per release (log)"
	p.Y.Label.Text = ylabel
	p.X.Scale, p.Y.Scale = gplot.LogScale{}, gplot.LogScale{}
	var xt gplot.ConstantTicks
	for _, l0 := range plotL0 {
		xt = append(xt, gplot.Tick{Value: float64(l0), Label: strconv.Itoa(l0)})
	}
	p.X.Tick.Marker = xt
	p.Y.Tick.Marker = logTicks125{}
	p.Add(plotter.NewGrid())
	// The legend goes in a column right of the axes, never over the data.
	legend := gplot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	// Best first in the legend: by the error at the largest L0 (the lines
	// are close to parallel, so this is the ranking at every L0 but ties).
	slices.SortStableFunc(series, func(a, b plotSeries) int {
		return cmp.Compare(lastAt(a.pts, plotL0[len(plotL0)-1]), lastAt(b.pts, plotL0[len(plotL0)-1]))
	})
	for i := range series {
		l, pts, err := plotter.NewLinePoints(series[i].pts)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPlot, err)
		}
		// Colour, dash pattern, marker shape and marker size all vary, so
		// that lines with equal errors (laplace and subbotin:1, say) stay
		// visible: later lines have smaller markers drawn on top of
		// larger ones.
		c := plotPalette[i%len(plotPalette)]
		l.Color, l.Width, l.Dashes = c, vg.Points(1.5), plotutil.Dashes(i)
		pts.Color, pts.Shape = c, plotutil.Shape(i)
		pts.Radius = vg.Points(6 - 4*float64(i)/float64(max(len(series)-1, 1)))
		p.Add(l, pts)
		legend.Add(series[i].name, l, pts)
	}
	img := vgimg.New(plotWidth, plotHeight)
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -plotLegendWidth, 0, 0))
	legend.Draw(draw.Crop(dc, plotWidth-plotLegendWidth+vg.Points(10), 0, -vg.Points(20), -vg.Points(60)))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return fmt.Errorf("%w: drawing: %w", ErrPlot, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("%w: %w", ErrPlot, err)
	}
	return nil
}

// plotPalette are 13 distinguishable line colours, one per candidate of
// privacy.CompareCandidates (Tableau 10 plus three darker tones).
var plotPalette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255}, color.RGBA{188, 189, 34, 255},
	color.RGBA{23, 190, 207, 255}, color.RGBA{0, 0, 0, 255}, color.RGBA{0, 0, 128, 255},
	color.RGBA{128, 64, 0, 255},
}

// lastAt returns the y of pts at x, +Inf when pts has no point there.
func lastAt(pts plotter.XYs, x int) float64 {
	for _, p := range pts {
		if p.X == float64(x) {
			return p.Y
		}
	}
	return math.Inf(1)
}

// releases returns "1 release", "2 releases".
func releases(n int) string {
	if n == 1 {
		return "1 release"
	}
	return strconv.Itoa(n) + " releases"
}
