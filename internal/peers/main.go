// Command peers measures dpstream's accuracy against Google's
// differential-privacy library (dpagg, v3) on the synthetic settings S1–S3
// of issue 20: per aggregate, both root mean squared errors over
// repetitions, their ratio (Google / dpstream: above 1, dpstream is more
// accurate) and the ratio's standard error. dpstream runs its real release
// path (operator.New and Run on an in-process fake Kafka broker).
//
//	go run . [-short] [-json] [-settings S1,S2,S3] [-data DIR] [-reps N] [-google-reps N]
//	go run . -table FILE   # the table of an earlier -json output
//
// -data DIR also writes each setting's events (DIR/S1.csv, …) for
// opendp_bench.py, which reads them with the -json output.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Default repetitions per setting (dpstream windows, Google runs), chosen
// so a full run takes a few minutes on 2 cores: dpstream's cost is the
// events it reads (R × about 10k, 3k and 300k events), Google's about a
// tenth of that per event. -short divides both by shortDivisor.
var (
	defaultDpstreamReps = map[string]int{"S1": 300, "S2": 600, "S3": 40}
	defaultGoogleReps   = map[string]int{"S1": 1000, "S2": 2000, "S3": 200}
)

// shortDivisor divides the repetitions with -short (at least 2 remain).
const shortDivisor = 10

// Result is the JSON output: one entry per setting.
type Result struct {
	Seed uint64 `json:"seed"`
	// Bound is dpstream's -bound (BoundTotal or BoundCell; empty in
	// outputs from before the flag: BoundCell).
	Bound    string          `json:"dpstream_bound,omitempty"`
	Settings []SettingResult `json:"settings"`
}

// SettingResult holds a setting's rows.
type SettingResult struct {
	Setting
	Events int         `json:"events"`
	Rows   []RowResult `json:"rows"`
}

// RowResult is one measured row: dpstream's and Google's errors and the
// ratio of the better Google noise to dpstream.
type RowResult struct {
	Row       string `json:"row"`
	Dpstream  Stat   `json:"dpstream"`
	Mechanism string `json:"dpstream_mechanism"`
	// Scale is the noise scale of the series carrying the row's values
	// (for the quantile rows, of the tree's node counts); 0 for the mean
	// and the variance (derived from several series).
	Scale float64 `json:"dpstream_scale,omitempty"`
	// Expected is the RMSE dpstream's noise has by its scale (count,
	// units, sum and histogram cells with Laplace or discrete Laplace
	// noise): exact where the measured RMSE is an estimate.
	Expected *float64        `json:"dpstream_expected_rmse,omitempty"`
	Google   map[string]Stat `json:"google"`
	// Best is the Google noise with the smaller RMSE; Ratio and RatioSE
	// are its RMSE over dpstream's and their standard error (null when
	// dpstream's RMSE is 0).
	Best    string   `json:"google_best"`
	Ratio   *float64 `json:"ratio"`
	RatioSE *float64 `json:"ratio_se"`
}

func main() {
	var (
		short    = flag.Bool("short", false, "fewer repetitions (a tenth): a quick look, not a measurement")
		asJSON   = flag.Bool("json", false, "print JSON instead of a Markdown table")
		settings = flag.String("settings", "S1,S2,S3", "settings to measure, comma-separated")
		seed     = flag.Uint64("seed", 1, "seed of the synthetic data and of dpstream's noise keys")
		dataDir  = flag.String("data", "", "also write each setting's events to DIR/<setting>.csv (for opendp_bench.py)")
		dpReps   = flag.Int("reps", 0, "dpstream repetitions per setting (0: the defaults)")
		gReps    = flag.Int("google-reps", 0, "Google repetitions per setting (0: the defaults)")
		table    = flag.String("table", "", "print the table of an earlier -json output FILE and exit")
		aggs     = flag.String("aggregates", strings.Join(dpstreamAggregates, ","), "dpstream aggregates to measure, comma-separated (the table keeps their rows only)")
		qmech    = flag.String("quantile-mechanism", "auto", "dpstream's windows.quantile_mechanism: tree, exponential, joint or auto")
		qdepth   = flag.Int("quantile-depth", 0, "dpstream's windows.quantile_depth (0: the default, 4; 16^depth leaves)")
		bound    = flag.String("bound", BoundTotal, "dpstream's bound on a unit's histogram and count contributions: total (bounds.max_contributions) or cell (max_buckets × max_per_bucket only)")
	)
	flag.Parse()
	if *table != "" {
		if err := printTable(*table); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := run(ctx, options{settings: strings.Split(*settings, ","), seed: *seed, short: *short,
		dataDir: *dataDir, dpReps: *dpReps, googleReps: *gReps,
		dp: dpRun{aggregates: strings.Split(*aggs, ","), quantiles: *qmech, depth: *qdepth, bound: *bound}}, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	} else {
		err = writeTable(os.Stdout, res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// options are run's parameters.
type options struct {
	settings           []string
	seed               uint64
	short              bool
	dataDir            string
	dpReps, googleReps int
	dp                 dpRun
}

// dpRun is what dpstream runs: its aggregates (a subset of
// dpstreamAggregates; the table keeps their rows only),
// windows.quantile_mechanism and which bound limits a unit's histogram
// and count contributions (BoundTotal or BoundCell).
type dpRun struct {
	aggregates []string
	quantiles  string
	depth      int
	bound      string
}

// Values of -bound: how dpstream bounds a unit's contributions to the
// histogram and the count.
const (
	// BoundTotal adds bounds.max_contributions = Setting.Bound (a unit
	// has at most Bound events in all, the settings' neighbouring
	// relation): histogram L1 = L2 = Bound.
	BoundTotal = "total"
	// BoundCell leaves bounds.max_contributions unset, as before it
	// existed: max_buckets × max_per_bucket bound the histogram (L1 =
	// Cells·Bound, L2 = √Cells·Bound), as Google's L0 × L∞ do.
	BoundCell = "cell"
)

// reps returns the repetitions of a setting: the flag, else the default,
// divided with -short.
func (o options) reps(flagValue int, defaults map[string]int, setting string) int {
	n := flagValue
	if n == 0 {
		n = defaults[setting]
		if o.short {
			n = max(2, n/shortDivisor)
		}
	}
	return n
}

// run measures every setting of o; progress goes to logw.
func run(ctx context.Context, o options, logw io.Writer) (*Result, error) {
	if o.dp.bound != BoundTotal && o.dp.bound != BoundCell {
		return nil, fmt.Errorf("%w: -bound %q: want %s or %s", ErrDpstream, o.dp.bound, BoundTotal, BoundCell)
	}
	res := &Result{Seed: o.seed, Bound: o.dp.bound}
	for _, name := range o.settings {
		i := slices.IndexFunc(Settings, func(s Setting) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown setting %q", ErrData, name)
		}
		s := Settings[i]
		d, err := Generate(s, o.seed)
		if err != nil {
			return nil, err
		}
		if o.dataDir != "" {
			if err := writeData(d, o.dataDir); err != nil {
				return nil, err
			}
		}
		sr, err := measure(ctx, d, o.dp, o.reps(o.dpReps, defaultDpstreamReps, s.Name),
			o.reps(o.googleReps, defaultGoogleReps, s.Name), o.seed, logw)
		if err != nil {
			return nil, err
		}
		res.Settings = append(res.Settings, *sr)
	}
	return res, nil
}

// writeData writes d's events to dir/<setting>.csv.
func writeData(d *Data, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrData, err)
	}
	f, err := os.Create(filepath.Join(dir, d.Setting.Name+".csv"))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrData, err)
	}
	if err := d.WriteCSV(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: %v", ErrData, err)
	}
	return nil
}

// measure runs dpstream (dpReps windows) and Google (gReps runs per noise)
// on d.
func measure(ctx context.Context, d *Data, run dpRun, dpReps, gReps int, seed uint64, logw io.Writer) (*SettingResult, error) {
	s := d.Setting
	t0 := time.Now()
	for _, a := range run.aggregates {
		if !slices.Contains(dpstreamAggregates, a) {
			return nil, fmt.Errorf("%w: unknown aggregate %q", ErrDpstream, a)
		}
	}
	rels, err := runDpstream(ctx, d, run, dpReps, seed, logw)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logw, "peers: %s: dpstream %d windows of %d events × %d aggregates in %v\n",
		s.Name, dpReps, len(d.Events), len(run.aggregates), time.Since(t0).Round(time.Millisecond))
	dp := map[string][]float64{}
	noises := map[string]Noise{}
	for _, agg := range run.aggregates {
		for _, r := range rels[agg] {
			e, nz, err := dpstreamErrors(&r, &d.Truth)
			if err != nil {
				return nil, err
			}
			for row, v := range e {
				dp[row] = append(dp[row], v)
				noises[row] = nz
			}
		}
	}

	t0 = time.Now()
	p := aggregatePerUnit(d)
	g := map[string]map[string][]float64{}
	for _, kind := range googleNoises(s) {
		g[kind] = map[string][]float64{}
		for range gReps {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			e, err := googleRep(d, p, kind)
			if err != nil {
				return nil, err
			}
			for row, v := range e {
				g[kind][row] = append(g[kind][row], v)
			}
		}
	}
	fmt.Fprintf(logw, "peers: %s: Google %d runs per noise in %v\n", s.Name, gReps, time.Since(t0).Round(time.Millisecond))

	sr := &SettingResult{Setting: s, Events: len(d.Events)}
	for _, row := range Rows() {
		if len(dp[row]) == 0 {
			if len(run.aggregates) < len(dpstreamAggregates) {
				continue // an aggregate not measured
			}
			return nil, fmt.Errorf("%w: no %s errors", ErrDpstream, row)
		}
		nz := noises[row]
		rr := RowResult{Row: row, Dpstream: NewStat(dp[row]), Mechanism: nz.Mechanism, Scale: nz.Scale,
			Google: map[string]Stat{}}
		if x := ExpectedRMSE(nz.Mechanism, nz.Scale); !math.IsNaN(x) && !strings.HasPrefix(row, "p") {
			rr.Expected = &x
		}
		for kind, rows := range g {
			st := NewStat(rows[row])
			rr.Google[kind] = st
			if rr.Best == "" || st.RMSE < rr.Google[rr.Best].RMSE {
				rr.Best = kind
			}
		}
		if ratio, se := Ratio(rr.Google[rr.Best], rr.Dpstream); !math.IsNaN(ratio) {
			rr.Ratio, rr.RatioSE = &ratio, &se
		}
		sr.Rows = append(sr.Rows, rr)
	}
	return sr, nil
}

// printTable prints the table of the JSON result in file path.
func printTable(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrData, err)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrData, path, err)
	}
	return writeTable(os.Stdout, &res)
}

// writeTable writes res as a Markdown table.
func writeTable(w io.Writer, res *Result) error {
	var b strings.Builder
	b.WriteString("| setting | aggregate | dpstream RMSE (mechanism, scale) | dpstream RMSE by its scale | Google Laplace RMSE | Google Gaussian RMSE | Google best / dpstream ± SE | R dpstream / Google |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, sr := range res.Settings {
		for _, r := range sr.Rows {
			gauss := "—"
			if st, ok := r.Google[NoiseGaussian]; ok {
				gauss = num(st.RMSE)
			}
			ratio := "n/a (dpstream RMSE 0)"
			if r.Ratio != nil {
				ratio = fmt.Sprintf("%.2f ± %.2f", *r.Ratio, *r.RatioSE)
			}
			mech, expected := r.Mechanism, "—"
			if r.Scale > 0 {
				mech += ", " + num(r.Scale)
			}
			if r.Expected != nil {
				expected = num(*r.Expected)
			}
			fmt.Fprintf(&b, "| %s | %s | %s (%s) | %s | %s | %s | %s | %d / %d |\n",
				sr.Name, rowLabel(r.Row, sr.Setting, res.Bound), num(r.Dpstream.RMSE), mech, expected, num(r.Google[NoiseLaplace].RMSE), gauss,
				ratio, r.Dpstream.Reps, r.Google[r.Best].Reps)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// num formats an RMSE with 3 significant digits.
func num(x float64) string {
	if x == 0 || math.IsNaN(x) {
		return fmt.Sprint(x)
	}
	return fmt.Sprintf("%.3g", x)
}

// rowLabel is row's name in the table: the histogram's says which bound
// dpstream ran with where the two differ (a unit may touch several
// cells).
func rowLabel(row string, s Setting, bound string) string {
	if row != RowHist || s.Cells() == 1 {
		return row
	}
	if bound == BoundTotal {
		return row + " (total bound)"
	}
	return row + " (per-cell bound)"
}
