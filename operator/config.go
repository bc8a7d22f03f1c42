package operator

import (
	"strings"
	"time"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// Config is the operator's whole configuration. Load fills it from a YAML
// file, DPSTREAM_* environment variables and command-line flags; Default
// gives the defaults; Validate reports every problem.
//
// The mapstructure tags are the YAML keys; the environment variable of a key
// is DPSTREAM_ followed by the key path in upper case with dots replaced by
// underscores (kafka.group_id → DPSTREAM_KAFKA_GROUP_ID). Lists in
// environment variables are comma-separated.
type Config struct {
	Kafka         KafkaConfig         `mapstructure:"kafka"`
	Schema        schema.Config       `mapstructure:"schema"`
	Windows       WindowsConfig       `mapstructure:"windows"`
	Bounds        BoundsConfig        `mapstructure:"bounds"`
	Privacy       PrivacyConfig       `mapstructure:"privacy"`
	Observability ObservabilityConfig `mapstructure:"observability"`
	Output        OutputConfig        `mapstructure:"output"`
}

// KafkaConfig says where events come from and where releases go.
type KafkaConfig struct {
	// Brokers are the bootstrap addresses, host:port.
	Brokers []string `mapstructure:"brokers"`
	// InputTopics are the topics of raw events.
	InputTopics []string `mapstructure:"input_topics"`
	// GroupID is the consumer group. Without ScaleOut it must have exactly
	// one dpstream instance; with ScaleOut any number (see the README).
	GroupID string `mapstructure:"group_id"`
	// ScaleOut runs the two-stage topology, so that any number of
	// instances with the same configuration can share the consumer group:
	// stage 1 (every instance, its assigned input partitions) bounds each
	// unit's contributions per window and input partition and writes that
	// partial state to PartialsTopic; stage 2 (one instance at a time, the
	// owner of the partials topic's single partition in the group
	// GroupID + ".merge") merges the partials of every input partition,
	// re-applying every bound per unit across the whole input, and noises
	// and publishes exactly as a single instance would. Every instance
	// must agree on the first window: windows.start when set, else the
	// origin the first instance records in the state topic (origin.go).
	ScaleOut bool `mapstructure:"scale_out"`
	// PartialsTopic is the internal topic of stage 1's partial states
	// (default: OutputTopic + ".partials"). It holds exact, un-noised
	// per-unit contributions: give it the input topics' access control.
	PartialsTopic string `mapstructure:"partials_topic"`
	// OutputTopic receives one message per release (window × aggregate ×
	// group), keyed by the release key.
	OutputTopic string `mapstructure:"output_topic"`
	// ReleaseNamespace names this deployment's releases: release ids are
	// "<namespace>/<window start>" (default: GroupID). Two deployments
	// sharing a secret key must use different namespaces, or equal release
	// ids would carry equal noise.
	ReleaseNamespace string `mapstructure:"release_namespace"`
	// StateTopic is the operator's own compacted topic recording which
	// windows are final (default: OutputTopic + ".state"). See the README's
	// finality section.
	StateTopic string `mapstructure:"state_topic"`
	// DeadLetterTopic, if set, receives undecodable input messages
	// unchanged (with the reason in a header) instead of dropping them.
	DeadLetterTopic string `mapstructure:"dead_letter_topic"`
	// ClientID names this client to the brokers.
	ClientID string `mapstructure:"client_id"`
	// Instance names this instance in release metadata (default: host name).
	Instance string `mapstructure:"instance"`
	// StartOffset is where a partition without a committed offset starts:
	// "earliest" or "latest".
	StartOffset string `mapstructure:"start_offset"`
	// CommitInterval is how often finalized input offsets are committed.
	CommitInterval time.Duration `mapstructure:"commit_interval"`
	// BatchTimeout is the writer's batch linger (small keeps publish latency low).
	BatchTimeout time.Duration `mapstructure:"batch_timeout"`
	// SessionTimeout is the consumer group session timeout.
	SessionTimeout time.Duration `mapstructure:"session_timeout"`
	// CreateTopics creates missing output and dead-letter topics at start.
	CreateTopics bool `mapstructure:"create_topics"`
	// RetryBackoff is the first wait after a broker error; it doubles up to
	// RetryBackoffMax.
	RetryBackoff time.Duration `mapstructure:"retry_backoff"`
	// RetryBackoffMax caps the wait between retries.
	RetryBackoffMax time.Duration `mapstructure:"retry_backoff_max"`
	// TLS configures encryption to the brokers.
	TLS TLSConfig `mapstructure:"tls"`
	// SASL configures authentication to the brokers.
	SASL SASLConfig `mapstructure:"sasl"`
}

// TLSConfig enables TLS to the brokers.
type TLSConfig struct {
	// Enabled turns TLS on.
	Enabled bool `mapstructure:"enabled"`
	// CAFile is a PEM bundle of trusted CAs (default: the system pool).
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and key for mutual TLS.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ServerName overrides the name checked in the broker's certificate.
	ServerName string `mapstructure:"server_name"`
	// InsecureSkipVerify disables certificate checks (tests only).
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
}

// SASLConfig enables SASL authentication.
type SASLConfig struct {
	// Mechanism is "", "plain", "scram-sha-256" or "scram-sha-512".
	Mechanism string `mapstructure:"mechanism"`
	// Username is the SASL user.
	Username string `mapstructure:"username"`
	// Password is the SASL password; prefer PasswordFile or the
	// DPSTREAM_KAFKA_SASL_PASSWORD environment variable to a value in a file
	// under version control.
	Password string `mapstructure:"password"`
	// PasswordFile is a file holding the password (trailing newline ignored).
	PasswordFile string `mapstructure:"password_file"`
}

// WindowsConfig sets the event-time tumbling windows and which aggregates
// are released per window.
type WindowsConfig struct {
	// Size is the window length.
	Size time.Duration `mapstructure:"size"`
	// Offset shifts window boundaries from the Unix epoch.
	Offset time.Duration `mapstructure:"offset"`
	// Start is the first window released on a deployment's first start,
	// as an RFC 3339 time (rounded up to a window boundary), e.g.
	// "2024-05-01T00:00:00Z" to publish history from the input topics.
	// Empty (the default): the first window that starts after the first
	// start. Either way the first release never depends on the data (which
	// windows exist must not reveal that some unit had an early event).
	// On later starts the state topic says where to continue; a Start
	// later than that postpones releases until it.
	Start string `mapstructure:"start"`
	// AckBackfill acknowledges that a first start with Start far in the
	// past releases up to this many windows that began before now (0: the
	// default bound MaxBackfillWindows). Every such window is released and
	// spends its budget whether or not the input holds data for it, so a
	// first start that would release more than the bound is refused and
	// says how many (see Operator.checkBackfill); set this to at least that
	// number to go ahead. Later starts continue from the state topic and
	// ignore it.
	AckBackfill int `mapstructure:"ack_backfill"`
	// AllowedLateness keeps a window open past its end for late events.
	AllowedLateness time.Duration `mapstructure:"allowed_lateness"`
	// IdleTimeout is the most the brokers' record timestamps may lag the
	// operator's clock, and so how long a partition without new records
	// holds windows open: once a partition is read to its end, its
	// watermark moves to the operator's clock minus IdleTimeout (a later
	// record is appended later, so its broker timestamp is at least that,
	// if the broker's clock is less than IdleTimeout behind). A window
	// closes at the latest IdleTimeout after its end + allowed_lateness by
	// the operator's clock, and a live window is published then and never
	// earlier, even when a record closed it sooner (end +
	// allowed_lateness + IdleTimeout is its scheduled publication time and
	// its releases' record timestamp: when a window is published must not
	// show whether a record arrived after it). Larger is safer against
	// clock skew, smaller publishes sooner.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// Aggregates are released per window and group: any of "count",
	// "histogram", "sum", "mean".
	Aggregates []string `mapstructure:"aggregates"`
	// MaxOpenWindows caps the windows open at once (0: no cap; default
	// DefaultMaxOpenWindows). An event whose window starts
	// max_open_windows windows or more after the first window not yet
	// published is dropped and counted as skipped with reason
	// "too_many_windows". The cap counts from the publication point, which
	// only the record timestamps and the operator's clock move, so one
	// unit's events cannot push another's out. It must be at least
	// ⌈(max_skew + allowed_lateness + idle_timeout)/size⌉ + 2 (the windows
	// an in-sync consumer keeps open, see Problems), so that it only drops
	// events while one partition catches up on a backlog far behind the
	// others.
	MaxOpenWindows int `mapstructure:"max_open_windows"`
	// MaxSkew is how far an event's time may be ahead of its own arrival
	// (the record timestamp): the clock skew tolerated between the event
	// sources and the brokers (0: off; default DefaultMaxSkew). Events
	// further ahead are dropped and counted as skipped with reason
	// "too_far_ahead". Each event is measured against its own arrival, so
	// a bogus timestamp (the year 9999) drops only its own event; it bounds
	// how far ahead of the clock one event can open a window.
	MaxSkew time.Duration `mapstructure:"max_skew"`
	// MaxOpenGroups caps the distinct groups per window with event-level
	// privacy (no schema.unit_field; 0: no cap, the default). Events of
	// groups beyond it are dropped (reason "group_cap", counted when the
	// window closes). A memory guard only: a window in which the cap is
	// reached is NOT covered by the privacy guarantee (which groups survive
	// depends on which exist), so a cap that is ever reached must be
	// raised. With units, open groups are bounded by bounds.max_units ×
	// bounds.max_groups instead.
	MaxOpenGroups int `mapstructure:"max_open_groups"`
	// Running adds to every count and sum release the group's running
	// total since the horizon started (series "running"): the sum of its
	// released values of the horizon's windows, post-processing with no
	// budget of its own (see operator/running.go). Totals restart with
	// every horizon (privacy.horizon); with a per-window budget they run
	// from the first window released with running on.
	Running bool `mapstructure:"running"`
	// RunningMechanism is how running totals are released: "sum" (sums of
	// the per-window releases, each window noised on its own), or
	// "factorization" (the square-root matrix factorization over the
	// horizon's windows: a smaller worst-case error of the totals — 1.9×
	// at 16 windows, 5.6× at 256 — for 1.6–2.1× the noise on each window's
	// own value; only with event-level privacy, a horizon budget, δ > 0,
	// Gaussian noise for count and sum, and no private group selection; see
	// operator/running_factor.go). "auto": the factorization where it
	// applies, else sums. Empty means "sum" (the default, which keeps the
	// releases of existing deployments unchanged).
	RunningMechanism string `mapstructure:"running_mechanism"`
	// Quantiles are the ranks in [0, 1] the quantiles aggregate releases,
	// strictly increasing (default DefaultQuantiles: 0.5, 0.9, 0.99). All
	// come from one noised quantile tree per group and window.
	Quantiles []float64 `mapstructure:"quantiles"`
	// QuantileBranching and QuantileDepth shape the quantile tree over
	// [schema.lower, schema.upper]: branching^depth leaves of equal width
	// (0: the defaults 16 and 4 of Google's tree-based quantiles, 65536
	// leaves). Deeper trees resolve finer but add noise on more levels.
	// The selection mechanisms ("exponential", "joint", and "auto", whose
	// tree keeps the default depth) add no noise per level: with
	// QuantileDepth unset their candidates are the edges of the deepest
	// grid of at most windows.MaxTreeLeaves leaves (16^5 = 2^20 for the
	// default branching), so that a leaf holds few values even in large
	// windows (quantileLeaves).
	QuantileBranching int `mapstructure:"quantile_branching"`
	QuantileDepth     int `mapstructure:"quantile_depth"`
	// QuantileMechanism chooses how the quantiles are released:
	// QuantileTree ("tree", the default when empty: a noised quantile
	// tree, every rank from one tree, value intervals), QuantileExponential
	// ("exponential": permute-and-flip over the leaf edges, ε split evenly
	// over the ranks; rank-error bounds, value interval [lower, upper]),
	// QuantileJoint ("joint": all ranks of a group in one draw of the
	// joint exponential mechanism at the group's whole ε; at most
	// quantile.MaxJointRanks ranks) or QuantileAuto ("auto": the tree or
	// the exponential mechanism, whichever's stated rank-error bound, the
	// largest over the ranks, is smaller for this configuration, the
	// exponential one released jointly for two ranks or more).
	QuantileMechanism string `mapstructure:"quantile_mechanism"`
	// autoQuantiles is set by autoQuantilePlan on the configurations it
	// plans "auto" with (QuantileMechanism then names the candidate):
	// the groups' leaf histogram is auto's, whatever the candidate
	// (quantileLeaves). Never set by a configuration file.
	autoQuantiles bool
}

// The values of windows.quantile_mechanism.
const (
	// QuantileTree releases quantiles from a noised quantile tree.
	QuantileTree = "tree"
	// QuantileExponential releases each quantile by permute-and-flip (an
	// exponential-mechanism selection) over the leaf histogram.
	QuantileExponential = "exponential"
	// QuantileJoint releases all ranks of a group in one selection of the
	// joint exponential mechanism (Gillenwater, Joseph & Kulesza 2021)
	// over the leaf histogram.
	QuantileJoint = "joint"
	// QuantileAuto picks QuantileTree or QuantileExponential by their
	// stated rank-error bounds, and QuantileJoint in place of
	// QuantileExponential for two ranks or more (plan_quantile.go).
	QuantileAuto = "auto"
)

// quantileMechanism returns windows.quantile_mechanism, QuantileTree when
// unset.
func (w WindowsConfig) quantileMechanism() string {
	if w.QuantileMechanism == "" {
		return QuantileTree
	}
	return w.QuantileMechanism
}

// startMillis returns windows.start in Unix ms, and false when unset or
// invalid (Validate reports invalid values).
func (w WindowsConfig) startMillis() (int64, bool) {
	if w.Start == "" {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, w.Start)
	if err != nil {
		return 0, false
	}
	return t.UnixMilli(), true
}

// DefaultMaxOpenWindows is the default windows.max_open_windows: far more
// than the ⌈(max_skew + allowed_lateness + idle_timeout)/size⌉ + 2 = 9
// windows an in-sync consumer keeps open with the defaults (5m + 10s + 1m
// over 1m windows), enough for partitions up to about an hour apart while
// a backlog is read, and it bounds memory to 64 windows' state whatever
// the timestamps.
const DefaultMaxOpenWindows = 64

// DefaultMaxSkew is the default windows.max_skew: 5 minutes, well above the
// skew of clocks kept by NTP or a mobile network (typically under a
// second) and of a device whose clock drifted by a few minutes, while an
// event stamped further ahead (a bad clock or a forged timestamp) is
// dropped instead of opening windows ahead of time.
const DefaultMaxSkew = 5 * time.Minute

// BoundsConfig holds the per-unit, per-window contribution bounds.
type BoundsConfig struct {
	// MaxGroups is the number of group keys one unit may touch.
	MaxGroups int `mapstructure:"max_groups"`
	// MaxBuckets is the number of histogram cells one unit may touch per group (L0).
	MaxBuckets int `mapstructure:"max_buckets"`
	// MaxPerBucket is the count one unit may add to a cell (L∞).
	MaxPerBucket int `mapstructure:"max_per_bucket"`
	// MaxValues is the number of values one unit may add per group.
	MaxValues int `mapstructure:"max_values"`
	// MaxContributions is the most one unit may add per window in total
	// to the histogram (over all its cells and groups) and to the count
	// (over all groups): the L1 bound beside max_buckets (L0) and
	// max_per_bucket (L∞). 0 (the default) leaves it unset: only the
	// products groups × cells × per-cell and groups × values bound a unit
	// then. Below those products it cuts the noise (Laplace-like noise on
	// L1, Gaussian on L2; windows.Config.MaxContributions, Sensitivities);
	// a unit over it keeps a keyed uniformly random subset of its
	// contributions. Omitted from the release digest when 0, so digests
	// without it are unchanged.
	MaxContributions int `mapstructure:"max_contributions" json:",omitempty"`
	// MaxUnits caps the privacy units tracked per window (0: no cap, the
	// default). When more units appear, a keyed uniformly random subset of
	// MaxUnits units is kept and the events of the others are dropped
	// (reason "unit_cap", counted when the window closes). It bounds memory
	// against a flood of units, at a privacy cost: keeping one unit can
	// push out another, so the noise is calibrated for replacing one unit
	// (windows.Sensitivities: twice the coordinates L0 of every vector, and
	// twice the L∞ of vectors a unit can move both ways, such as the mean's
	// centred sum) — up to about twice the noise. Needs schema.unit_field.
	MaxUnits int `mapstructure:"max_units"`
}

// PrivacyConfig holds the budget, the mechanisms and the key.
type PrivacyConfig struct {
	// Epsilon and Delta are the per-window budget (ε_w, δ_w). Either these or
	// the horizon budget are set.
	Epsilon float64 `mapstructure:"epsilon"`
	Delta   float64 `mapstructure:"delta"`
	// Horizon, HorizonEpsilon and HorizonDelta set a total budget over a
	// horizon: the noise of every window is calibrated so that the
	// composition of all N = horizon/size windows meets the total (with the
	// accountant below). The horizon must be a whole number of windows.
	Horizon        time.Duration `mapstructure:"horizon"`
	HorizonEpsilon float64       `mapstructure:"horizon_epsilon"`
	HorizonDelta   float64       `mapstructure:"horizon_delta"`
	// Accounting is the accountant that certifies the composition of a
	// window's parts (and of the horizon's windows): "tightest" (default:
	// the smallest noise any valid accountant certifies — privacy loss
	// distributions, exact Gaussian or exact pure-ε composition), "pld",
	// or, for comparison, "basic" or "advanced" composition.
	Accounting string `mapstructure:"accounting"`
	// Mechanism is the default mechanism (see privacy.Parse), or "auto" to
	// choose per aggregate the mechanism with the smallest expected error
	// (ErrorMeasure) under the accounting. See ReleaseMechanism for the
	// noise that actually runs on integer and real values.
	Mechanism string `mapstructure:"mechanism"`
	// Mechanisms overrides the mechanism per aggregate name ("auto" allowed).
	Mechanisms map[string]string `mapstructure:"mechanisms"`
	// ErrorMeasure is what "auto" minimises: "variance" (default;
	// infinite-variance noise never wins) or "mae" (mean absolute error).
	ErrorMeasure string `mapstructure:"error_measure"`
	// PublicGroups lists the group keys (one value per group_by field)
	// that are released in every window, with zeros when absent; events of
	// other groups are skipped. Without it and with group_by, groups are
	// selected privately (needs δ > 0) and absent groups are never
	// released.
	PublicGroups [][]string `mapstructure:"public_groups"`
	// Confidence is the level 1−β of the published confidence intervals.
	Confidence float64 `mapstructure:"confidence"`
	// KeyFile holds the secret noise key (32 bytes, raw or hex).
	KeyFile string `mapstructure:"key_file"`
	// KeyEnv names an environment variable holding the key in hex.
	KeyEnv string `mapstructure:"key_env"`
}

// ObservabilityConfig sets metrics, health and logs.
type ObservabilityConfig struct {
	// Listen is the address of /metrics, /healthz and /readyz; empty disables.
	Listen string `mapstructure:"listen"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `mapstructure:"log_level"`
	// LogFormat is json or text.
	LogFormat string `mapstructure:"log_format"`
	// SensitiveMetrics (default false) registers the metrics that count
	// input data exactly — messages in, decoded, skipped per reason, late,
	// dead-lettered, groups withheld by private group selection, windows
	// holding events, consumer lag — and adds the same exact counts to the
	// info and warn logs ("window published" gets groups_withheld,
	// "drained" open_windows, the windows.max_open_groups warning the
	// number of windows). These are not differentially private: one unit
	// changes them by an exact amount (a unit alone in its group shows up
	// in groups withheld, which defeats private group selection). Turn it
	// on only where the metrics and logs reach no one who may not read the
	// input topic. Off, those metrics are not registered at all and the
	// logs say that something happened without counting it.
	SensitiveMetrics bool `mapstructure:"sensitive_metrics"`
	// ShapeCheck (default true) runs the input-shape check (shape.go): a
	// configured field that fewer than 1% of a block of 1000 decoded
	// records carry is logged at ERROR, by name, with the key names most
	// records carry, and makes /readyz answer 503. It is an exact signal,
	// not differentially private (docs/operations.md, "Input shape");
	// false turns it off.
	ShapeCheck bool `mapstructure:"shape_check"`
}

// The aggregates a window can release.
const (
	AggCount     = "count"
	AggHistogram = "histogram"
	AggSum       = "sum"
	AggMean      = "mean"
	// AggUnits is the number of distinct privacy units per group.
	AggUnits = "units"
	// AggVariance is the variance (and standard deviation) of the clamped
	// values per group.
	AggVariance = "variance"
	// AggQuantiles are the quantiles windows.quantiles of the clamped
	// values per group, from a noised quantile tree.
	AggQuantiles = "quantiles"
)

var knownAggregates = []string{AggCount, AggHistogram, AggSum, AggMean, AggUnits, AggVariance, AggQuantiles}

// DefaultQuantiles are the ranks released by the quantiles aggregate when
// windows.quantiles is empty: the median and the usual tail latencies.
var DefaultQuantiles = []float64{0.5, 0.9, 0.99}

// quantileRanks returns windows.quantiles, or DefaultQuantiles.
func (w WindowsConfig) quantileRanks() []float64 {
	if len(w.Quantiles) == 0 {
		return DefaultQuantiles
	}
	return w.Quantiles
}

// quantileTree returns the tree's branching factor and depth, the defaults
// (windows.DefaultTreeBranching and DefaultTreeDepth) for zero values.
func (w WindowsConfig) quantileTree() (branching, depth int) {
	branching, depth = w.QuantileBranching, w.QuantileDepth
	if branching == 0 {
		branching = windows.DefaultTreeBranching
	}
	if depth == 0 {
		depth = windows.DefaultTreeDepth
	}
	return branching, depth
}

// quantileLeaves returns the branching factor and depth of every group's
// leaf histogram (the windows' state; the selection mechanisms'
// candidates are its edges): windows.quantile_depth when set; else, when
// windows.quantile_mechanism may select ("exponential", "joint",
// "auto"), the deepest grid of at most windows.MaxTreeLeaves leaves; else
// the tree's (quantileTree). The tree of "auto" keeps quantileTree's
// depth and reads the finer histogram coarsened (quantilePlan.leafDiv).
//
// Why the deepest grid: the selections' rank error has a floor at the
// leaf resolution (a released edge is at least half a leaf's count from
// rank·N where a leaf holds many values), while their noise does not
// grow with the number of leaves; at issue 20's S3 (300,000 values in a
// window) 16^4 leaves hold up to about 16 values each near the median and
// cost the joint mechanism a rank error of about 8 there, and through its
// loss p90 too (internal/peers/README.md, "Finer leaves").
func (w WindowsConfig) quantileLeaves() (branching, depth int) {
	branching, depth = w.quantileTree()
	if w.QuantileDepth != 0 || w.quantileMechanism() == QuantileTree && !w.autoQuantiles {
		return branching, depth
	}
	for n, d := 1, 0; branching >= 2 && n <= windows.MaxTreeLeaves/branching && d < windows.MaxTreeDepth; d++ {
		n *= branching
		depth = d + 1
	}
	return branching, depth
}

// quantileHistogramLeaves returns the number of leaves of the groups'
// leaf histogram (quantileLeaves' branching^depth).
func (w WindowsConfig) quantileHistogramLeaves() int {
	b, d := w.quantileLeaves()
	return windows.Config{Quantiles: true, TreeBranching: b, TreeDepth: d}.TreeLeaves()
}

// Default returns the default configuration. It is not valid by itself:
// topics and the key must be set.
func Default() Config {
	return Config{
		Kafka: KafkaConfig{
			Brokers:         []string{"127.0.0.1:9092"},
			GroupID:         "dpstream",
			OutputTopic:     "dpstream.releases",
			ClientID:        "dpstream",
			StartOffset:     "earliest",
			CommitInterval:  time.Second,
			BatchTimeout:    5 * time.Millisecond,
			SessionTimeout:  30 * time.Second,
			RetryBackoff:    250 * time.Millisecond,
			RetryBackoffMax: 30 * time.Second,
		},
		Schema: schema.Config{
			Format:     schema.FormatAuto,
			TimeField:  "ts",
			TimeFormat: schema.TimeAuto,
		},
		Windows: WindowsConfig{
			Size:            time.Minute,
			AllowedLateness: 10 * time.Second,
			IdleTimeout:     time.Minute,
			Aggregates:      []string{AggCount},
			MaxOpenWindows:  DefaultMaxOpenWindows,
			MaxSkew:         DefaultMaxSkew,
		},
		Bounds: BoundsConfig{MaxGroups: 1, MaxBuckets: 1, MaxPerBucket: 1, MaxValues: 1},
		Privacy: PrivacyConfig{
			Accounting:   string(privacy.Tightest),
			Mechanism:    "laplace",
			ErrorMeasure: string(privacy.ByVariance),
			Confidence:   0.95,
			KeyEnv:       "DPSTREAM_KEY",
		},
		Observability: ObservabilityConfig{
			Listen:     "127.0.0.1:9464",
			LogLevel:   "info",
			LogFormat:  "json",
			ShapeCheck: true,
		},
		Output: OutputConfig{Format: FormatMsgpack},
	}
}

// OperatorMechanisms lists, for messages and shell completion, the
// mechanism names the operator runs (see ReleaseMechanism).
const OperatorMechanisms = "laplace, gaussian, logistic, subbotin:R (R ≥ 1), discrete-laplace, discrete-gaussian, or auto"

// Auto is the mechanism name that asks for an automatic choice.
const Auto = "auto"

// checkMechanism reports a mechanism name that is neither "auto" nor one the
// operator can run.
func checkMechanism(p *problems, key, name string) {
	if name == Auto {
		return
	}
	if _, err := privacy.Parse(name); err != nil {
		p.addf("%s: %q is not a known mechanism; use one of %s", key, name, OperatorMechanisms)
		return
	}
	if _, err := ReleaseMechanism(name, true); err != nil {
		p.addf("%s: %v", key, strings.TrimPrefix(err.Error(), "operator: "))
	}
}

// TotalBudget returns the budget the noise is calibrated for and the number
// of windows it covers: the per-window budget over one window, or the
// horizon budget over N = horizon/size windows (the composition of all N
// windows meets it).
func (c Config) TotalBudget() (privacy.Budget, int) {
	pc := c.Privacy
	if pc.Horizon == 0 {
		return privacy.Budget{Epsilon: pc.Epsilon, Delta: pc.Delta}, 1
	}
	n := 1
	if c.Windows.Size > 0 {
		n = int(pc.Horizon / c.Windows.Size)
		if pc.Horizon%c.Windows.Size != 0 {
			n++
		}
	}
	return privacy.Budget{Epsilon: pc.HorizonEpsilon, Delta: pc.HorizonDelta}, max(n, 1)
}

// ParallelComposition reports whether the horizon budget applies to every
// window in full (parallel composition, DESIGN §1 "Use the structure"):
// with event-level privacy (no schema.unit_field) and a horizon budget.
// Each event lies in exactly one window, and removing it changes no other
// window: at event level the windows aggregate events directly and never
// select among events by their identity (partition, offset) —
// bounds.max_units, the one cap that samples units, is refused at event
// level; windows.max_open_groups keeps groups by a keyed hash of the group
// key among the groups of the same window only; windows.max_open_windows,
// windows.max_skew and lateness test each event against its own arrival
// time and the emission point, which the operator fixes (EmitFrom) before
// any event and only arrival times and its clock move. Scale-out merges
// event-level partials by adding per-group sums, per window. With units
// (one unit's events in many windows) the N windows compose sequentially.
func (c Config) ParallelComposition() bool {
	return c.Schema.UnitField == "" && c.Privacy.Horizon != 0
}

// namespace returns the release namespace.
func (k KafkaConfig) namespace() string {
	if k.ReleaseNamespace != "" {
		return k.ReleaseNamespace
	}
	return k.GroupID
}

// partialsTopic returns the partials topic's name.
func (k KafkaConfig) partialsTopic() string {
	if k.PartialsTopic != "" {
		return k.PartialsTopic
	}
	return k.OutputTopic + ".partials"
}

// mergeGroup returns stage 2's consumer group.
func (k KafkaConfig) mergeGroup() string { return k.GroupID + ".merge" }

// stateTopic returns the state topic's name.
func (k KafkaConfig) stateTopic() string {
	if k.StateTopic != "" {
		return k.StateTopic
	}
	return k.OutputTopic + ".state"
}

// MechanismFor returns the configured mechanism name of an aggregate.
func (c PrivacyConfig) MechanismFor(aggregate string) string {
	if m, ok := c.Mechanisms[aggregate]; ok && m != "" {
		return m
	}
	return c.Mechanism
}
