package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dpstream/dpstream/operator/keyfile"
	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/rng"
)

func init() { commands = append(commands, newNoiseCmd) }

// maxNoiseRepeat bounds --repeat (a typo guard, not a privacy bound: every
// copy spends the budget again).
const maxNoiseRepeat = 1_000_000

// maxNoiseLine is the longest input line accepted, in bytes.
const maxNoiseLine = 4096

// noiseOptions are the flags of dpstream noise.
type noiseOptions struct {
	mechanism                   string
	scale                       float64
	epsilon, delta, sensitivity float64
	keyFile, releaseID          string
	repeat                      int
	lower, upper                float64
}

func newNoiseCmd() *cobra.Command {
	var o noiseOptions
	cmd := &cobra.Command{
		Use:   "noise --mechanism NAME (--scale S | --epsilon E [--delta D] [--sensitivity S]) [--key-file F --release-id ID] [--repeat N] [--lower L --upper U]",
		Short: "Add differentially private noise to numbers read from stdin",
		Long: `Noise reads numbers from standard input, one per line, and writes each
noised value on its own line (with --repeat N, N independently noised copies
of each, one per line).

The noise scale is given directly (--scale) or calibrated from a budget
(--epsilon, --delta, --sensitivity; see "dpstream calibrate"). Calibration
information goes to standard error.

Randomness: without --key-file a fresh random key is used, so every run
differs. With --key-file and --release-id the noise is derived from
HMAC-SHA256(key, release id) and the output is identical for identical input:
re-running cannot average the noise away. Never use the same key and release
id for different data: the difference of two such outputs is the exact
difference of the inputs. The key file must be readable by its owner only
(chmod 600).

Integer mechanisms (discrete-laplace, discrete-gaussian) need integer inputs
and print integers; their output is exactly private. For real values, give
--lower and --upper (with a budget): the value is clamped into [lower, upper]
and the release is snapped to a power-of-two grid, which closes the
floating-point side channel of naive noise (the noise is calibrated for the
sensitivity plus the grid step). Without bounds, real values get plain
floating-point noise and a warning: fine for experiments, not for
publication.

Bad input lines are reported with their line number; their content is never
echoed.`,
		Example: `  echo 42 | dpstream noise --mechanism discrete-laplace --epsilon 1
  dpstream noise --mechanism laplace --epsilon 0.5 --sensitivity 10 --lower 0 --upper 1000 < sums.txt
  dpstream noise --mechanism gaussian --epsilon 1 --delta 1e-6 --key-file key.hex --release-id 2024-06-01 < counts.txt
  echo 0 | dpstream noise --mechanism cauchy --scale 1 --repeat 10000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := func(name string) bool { return cmd.Flags().Changed(name) }
			return runNoise(o, set, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.mechanism, "mechanism", "", "mechanism name (see dpstream calibrate --help)")
	f.Float64Var(&o.scale, "scale", 0, "noise scale (instead of a budget)")
	f.Float64Var(&o.epsilon, "epsilon", 0, "ε of the budget (> 0)")
	f.Float64Var(&o.delta, "delta", 0, "δ of the budget (0 ≤ δ < 1)")
	f.Float64Var(&o.sensitivity, "sensitivity", 1, "sensitivity Δ of each number (> 0; an integer for integer mechanisms)")
	f.StringVar(&o.keyFile, "key-file", "", "secret key file (64 hex digits, mode 0600) for reproducible noise")
	f.StringVar(&o.releaseID, "release-id", "", "release identity for reproducible noise (with --key-file)")
	f.IntVar(&o.repeat, "repeat", 1, "noised copies of each number")
	f.Float64Var(&o.lower, "lower", 0, "lower bound of the values (with --upper: clamp and snap)")
	f.Float64Var(&o.upper, "upper", 0, "upper bound of the values (with --lower: clamp and snap)")
	_ = cmd.MarkFlagRequired("mechanism") // the name exists: cannot fail
	return cmd
}

// noiser adds noise to one value; it is the calibrated mechanism, snapped
// or not.
type noiser func(s *rng.Stream, v float64) (float64, error)

func runNoise(o noiseOptions, set func(string) bool, in io.Reader, out, errOut io.Writer) error {
	m, err := privacy.Parse(o.mechanism)
	if err != nil {
		return fmt.Errorf("%w; valid names: %s", err, strings.TrimSuffix(calibrateNames, ", all"))
	}
	_, discrete := m.(privacy.DiscreteLaplace)
	if _, ok := m.(privacy.DiscreteGaussian); ok {
		discrete = true
	}
	budget := set("epsilon") || set("delta") || set("sensitivity")
	bounds := set("lower") || set("upper")
	switch {
	case set("scale") && budget:
		return errors.New("noise: give either --scale or a budget (--epsilon, --delta, --sensitivity), not both")
	case !set("scale") && !set("epsilon"):
		return errors.New("noise: give --scale or --epsilon")
	case set("scale") && !(o.scale > 0 && !math.IsInf(o.scale, 1)):
		return fmt.Errorf("noise: --scale must be finite and > 0, got %v", o.scale)
	case o.repeat < 1 || o.repeat > maxNoiseRepeat:
		return fmt.Errorf("noise: --repeat must be between 1 and %d, got %d", maxNoiseRepeat, o.repeat)
	case set("key-file") != set("release-id"):
		return errors.New("noise: --key-file and --release-id go together (reproducible noise needs both)")
	case bounds && !(set("lower") && set("upper")):
		return errors.New("noise: give both --lower and --upper")
	case bounds && discrete:
		return fmt.Errorf("noise: %s releases integers exactly; --lower/--upper are for real-valued mechanisms", m.Name())
	case bounds && !set("epsilon"):
		return errors.New("noise: --lower/--upper need a budget (--epsilon): snapping calibrates for the sensitivity plus the grid step")
	}

	var add noiser
	switch {
	case bounds:
		p, err := privacy.NewSnapped(m, privacy.SnapQuery{Budget: privacy.Budget{Epsilon: o.epsilon, Delta: o.delta}, Sensitivity: o.sensitivity, Lower: o.lower, Upper: o.upper})
		if err != nil {
			return fmt.Errorf("noise: %w", err)
		}
		c := p.Calibration
		note := "exact"
		if !p.Exact {
			note = fmt.Sprintf("ε %.3g and δ %.3g reserved for floating-point error", p.FloatEpsilon, p.FloatDelta)
		}
		fmt.Fprintf(errOut, "dpstream noise: %s scale %.6g for ε=%g δ=%g Δ=%g, clamped to [%g, %g], snapped to multiples of %g (%s)\n",
			c.Mechanism, c.Scale, c.Epsilon, c.Delta, c.Sensitivity, p.Lower, p.Upper, p.Step, note)
		add = p.Release
	default:
		scale := o.scale
		if !set("scale") {
			c, err := m.Calibrate(o.epsilon, o.delta, o.sensitivity)
			if err != nil {
				return fmt.Errorf("noise: %w", err)
			}
			scale = c.Scale
			fmt.Fprintf(errOut, "dpstream noise: %s scale %.6g for ε=%g δ=%g Δ=%g (%s)\n",
				c.Mechanism, c.Scale, c.Epsilon, c.Delta, c.Sensitivity, c.Method)
		}
		if !discrete {
			fmt.Fprintln(errOut, "dpstream noise: warning: unsnapped floating-point noise (its low bits can leak the input); give --lower, --upper and a budget to snap")
		}
		add = func(s *rng.Stream, v float64) (float64, error) {
			z := m.Sample(s, scale)
			if math.IsNaN(z) {
				return 0, fmt.Errorf("%s cannot sample with scale %v", m.Name(), scale)
			}
			return v + z, nil
		}
	}

	var key rng.Key
	id := o.releaseID
	if set("key-file") {
		key, err = keyfile.Read(o.keyFile)
	} else {
		key, err = keyfile.NewRandomKey()
		id = "dpstream-noise"
	}
	if err != nil {
		return fmt.Errorf("noise: %w", err)
	}
	stream := rng.NewStream(key, id)
	return noiseLines(in, out, stream, add, discrete, m.Name(), o.repeat)
}

// noiseLines reads numbers, one per line, and writes repeat noised copies of
// each. Errors name the line, never its content.
func noiseLines(in io.Reader, out io.Writer, s *rng.Stream, add noiser, discrete bool, name string, repeat int) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 256), maxNoiseLine)
	w := bufio.NewWriter(out)
	line := 0
	fail := func(format string, args ...any) error {
		w.Flush()
		return fmt.Errorf("noise: line %d: "+format, append([]any{line}, args...)...)
	}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			return fail("empty line")
		}
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return fail("not a number")
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fail("not a finite number")
		}
		if discrete && (v != math.Trunc(v) || math.Abs(v) > 1<<52) {
			return fail("%s needs an integer (|value| ≤ 2^52)", name)
		}
		for i := 0; i < repeat; i++ {
			y, err := add(s, v)
			if err != nil {
				return fail("%v", err)
			}
			if discrete {
				w.WriteString(strconv.FormatFloat(y, 'f', 0, 64))
			} else {
				w.WriteString(strconv.FormatFloat(y, 'g', -1, 64))
			}
			w.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		line++
		if errors.Is(err, bufio.ErrTooLong) {
			return fail("longer than %d bytes", maxNoiseLine)
		}
		w.Flush()
		return fmt.Errorf("noise: reading input: %w", err)
	}
	return w.Flush()
}
