package operator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/dpstream/dpstream/schema"
)

// releaseDigestVersion names the layout of releaseShape: a change of the
// layout changes every digest (and so every noise stream), which is safe
// (new noise) but must be deliberate.
const releaseDigestVersion = "dpstream/release-shape/v1"

// releaseShape is everything that decides what a window's releases contain
// and how they are noised: the input (topics, fields, categories and
// their order, bounds and clamp), the windows (size, offset, lateness, the
// guards that drop events), the aggregates, the budget, the mechanisms, the
// accounting and the namespace. Operational settings (brokers, TLS, SASL,
// timeouts, the output and state topics, logging, the key's location) are
// not in it: they do not change a release's bytes.
//
// windows.start is not in it either: it only says which window a fresh
// deployment releases first (see Operator.Run), never the content of a
// window.
type releaseShape struct {
	Version        string            `json:"v"`
	Namespace      string            `json:"namespace"`
	InputTopics    []string          `json:"input_topics"`
	Schema         schema.Config     `json:"schema"`
	Size           time.Duration     `json:"size"`
	Offset         time.Duration     `json:"offset"`
	Lateness       time.Duration     `json:"allowed_lateness"`
	MaxSkew        time.Duration     `json:"max_skew"`
	MaxOpenWindows int               `json:"max_open_windows"`
	MaxOpenGroups  int               `json:"max_open_groups"`
	Aggregates     []string          `json:"aggregates"`
	Bounds         BoundsConfig      `json:"bounds"`
	Epsilon        float64           `json:"epsilon"`
	Delta          float64           `json:"delta"`
	Horizon        time.Duration     `json:"horizon"`
	HorizonEpsilon float64           `json:"horizon_epsilon"`
	HorizonDelta   float64           `json:"horizon_delta"`
	Accounting     string            `json:"accounting"`
	Mechanism      string            `json:"mechanism"`
	Mechanisms     map[string]string `json:"mechanisms"`
	ErrorMeasure   string            `json:"error_measure"`
	PublicGroups   [][]string        `json:"public_groups"`
	Confidence     float64           `json:"confidence"`
	Running        bool              `json:"running,omitempty"` // omitted when off: digests without it are unchanged
	// RunningMechanism is "factorization" when running totals are
	// released by the factorization (omitted otherwise: digests without it
	// are unchanged). It changes every noise stream of such a
	// configuration, so that per-window noise and factorized noise never
	// share draws.
	RunningMechanism string `json:"running_mechanism,omitempty"`
	// Quantiles holds the ranks and the tree shape, only with the quantiles
	// aggregate (omitted otherwise: digests without it are unchanged).
	Quantiles *quantileShape `json:"quantiles,omitempty"`
}

// quantileShape is what shapes a quantiles release besides the bounds.
type quantileShape struct {
	Ranks     []float64 `json:"ranks"`
	Branching int       `json:"branching"`
	Depth     int       `json:"depth"`
	// Mechanism is windows.quantile_mechanism, omitted for the tree (the
	// default: digests without it are unchanged); autoJointDigest for
	// "auto" where it may choose the joint mechanism.
	Mechanism string `json:"mechanism,omitempty"`
}

// autoJointDigest is quantileShape.Mechanism for windows.quantile_mechanism
// "auto" with ranks for which auto may choose the joint exponential
// mechanism (autoJointRanks). Before "joint" existed auto released such a
// configuration by the exponential mechanism (one draw per rank); the
// digest names the new resolution, so its noise streams are new and a
// window released by the earlier auto never shares draws with the same
// window released jointly.
const autoJointDigest = "auto/joint"

// ReleaseDigest returns the hex SHA-256 digest of everything in c that
// shapes a release (see releaseShape). The noise of every release message
// is drawn from a stream keyed by HMAC(key, digest, release key), so two
// configurations that could release the same window differently never draw
// the same noise, and a re-release of a window under another configuration
// cannot publish the exact difference of two true values. Equal
// configurations (on every instance, on every restart) give equal digests.
// It fails only for values JSON cannot encode (NaN or infinite numbers),
// which Validate rejects.
func ReleaseDigest(c Config) (string, error) {
	s := releaseShape{
		Version:        releaseDigestVersion,
		Namespace:      c.Kafka.namespace(),
		InputTopics:    slices.Sorted(slices.Values(c.Kafka.InputTopics)),
		Schema:         c.Schema,
		Size:           c.Windows.Size,
		Offset:         c.Windows.Offset,
		Lateness:       c.Windows.AllowedLateness,
		MaxSkew:        c.Windows.MaxSkew,
		MaxOpenWindows: c.Windows.MaxOpenWindows,
		MaxOpenGroups:  c.Windows.MaxOpenGroups,
		Aggregates:     c.Windows.Aggregates,
		Bounds:         c.Bounds,
		Epsilon:        c.Privacy.Epsilon,
		Delta:          c.Privacy.Delta,
		Horizon:        c.Privacy.Horizon,
		HorizonEpsilon: c.Privacy.HorizonEpsilon,
		HorizonDelta:   c.Privacy.HorizonDelta,
		Accounting:     c.Privacy.Accounting,
		Mechanism:      c.Privacy.Mechanism,
		Mechanisms:     c.Privacy.Mechanisms,
		ErrorMeasure:   c.Privacy.ErrorMeasure,
		PublicGroups:   c.Privacy.PublicGroups,
		Confidence:     c.Privacy.Confidence,
	}
	s.Running = c.Windows.Running
	if ok, _ := c.runningFactorization(); ok {
		s.RunningMechanism = RunningFactorization
	}
	if slices.Contains(c.Windows.Aggregates, AggQuantiles) {
		b, d := c.Windows.quantileLeaves()
		s.Quantiles = &quantileShape{Ranks: c.Windows.quantileRanks(), Branching: b, Depth: d}
		if m := c.Windows.quantileMechanism(); m != QuantileTree {
			s.Quantiles.Mechanism = m
		}
		if s.Quantiles.Mechanism == QuantileAuto && autoJointRanks(len(s.Quantiles.Ranks)) {
			s.Quantiles.Mechanism = autoJointDigest
		}
	}
	// encoding/json writes struct fields in declaration order and map keys
	// sorted, so the encoding is canonical for a given releaseShape.
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("%w: release digest: %v", ErrConfig, err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}
