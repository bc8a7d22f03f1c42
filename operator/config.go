package operator

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dpstream/dpstream/internal/keyfile"
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
	// and publishes exactly as a single instance would. Needs
	// windows.start (every instance must agree on the first window).
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
	// Quantiles are the ranks in [0, 1] the quantiles aggregate releases,
	// strictly increasing (default DefaultQuantiles: 0.5, 0.9, 0.99). All
	// come from one noised quantile tree per group and window.
	Quantiles []float64 `mapstructure:"quantiles"`
	// QuantileBranching and QuantileDepth shape the quantile tree over
	// [schema.lower, schema.upper]: branching^depth leaves of equal width
	// (0: the defaults 16 and 4 of Google's tree-based quantiles, 65536
	// leaves). Deeper trees resolve finer but add noise on more levels.
	QuantileBranching int `mapstructure:"quantile_branching"`
	QuantileDepth     int `mapstructure:"quantile_depth"`
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
			Listen:    "127.0.0.1:9464",
			LogLevel:  "info",
			LogFormat: "json",
		},
	}
}

// ErrConfig is wrapped by every configuration problem.
var ErrConfig = errors.New("operator: invalid config")

// problems collects configuration problems, one line each.
type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// Problems returns every configuration problem, one short line each, in a
// fixed order; an empty result means the configuration is valid.
func (c Config) Problems() []string {
	var p problems
	c.Kafka.check(&p)
	checkSchema(&p, c.Schema)
	c.Windows.check(&p, c.Schema)
	c.Bounds.check(&p, c.Schema)
	c.Privacy.check(&p, c.Windows, c.Schema)
	c.Observability.check(&p)
	checkRunning(&p, c)
	if c.Kafka.ScaleOut {
		if c.Windows.Start == "" {
			p.addf("kafka.scale_out: needs windows.start (every instance must agree on the first window without looking at the data)")
		}
		if t := c.Kafka.partialsTopic(); t == c.Kafka.stateTopic() || t == c.Kafka.OutputTopic || slices.Contains(c.Kafka.InputTopics, t) {
			p.addf("kafka.partials_topic: %q must differ from the input, output and state topics", t)
		}
	}
	return p
}

// Validate returns nil or an error joining every problem (each wraps ErrConfig).
func (c Config) Validate() error {
	ps := c.Problems()
	if len(ps) == 0 {
		return nil
	}
	errs := make([]error, len(ps))
	for i, s := range ps {
		errs[i] = fmt.Errorf("%w: %s", ErrConfig, s)
	}
	return errors.Join(errs...)
}

func (k KafkaConfig) check(p *problems) {
	if len(k.Brokers) == 0 {
		p.addf("kafka.brokers: at least one broker address is required")
	}
	for _, b := range k.Brokers {
		checkListen(p, "kafka.brokers", b, "127.0.0.1:9092")
	}
	if len(k.InputTopics) == 0 {
		p.addf("kafka.input_topics: at least one input topic is required")
	}
	for _, t := range k.InputTopics {
		checkTopic(p, "kafka.input_topics", t)
	}
	checkTopic(p, "kafka.output_topic", k.OutputTopic)
	if k.DeadLetterTopic != "" {
		checkTopic(p, "kafka.dead_letter_topic", k.DeadLetterTopic)
	}
	if k.StateTopic != "" {
		checkTopic(p, "kafka.state_topic", k.StateTopic)
		if k.StateTopic == k.OutputTopic || slices.Contains(k.InputTopics, k.StateTopic) {
			p.addf("kafka.state_topic: %q must differ from the input and output topics", k.StateTopic)
		}
	}
	if slices.Contains(k.InputTopics, k.OutputTopic) {
		p.addf("kafka.output_topic: %q is also an input topic", k.OutputTopic)
	}
	if k.DeadLetterTopic != "" && (slices.Contains(k.InputTopics, k.DeadLetterTopic) || k.DeadLetterTopic == k.OutputTopic) {
		p.addf("kafka.dead_letter_topic: %q must differ from the input and output topics", k.DeadLetterTopic)
	}
	if k.GroupID == "" {
		p.addf("kafka.group_id: a consumer group id is required")
	}
	if k.StartOffset != "earliest" && k.StartOffset != "latest" {
		p.addf("kafka.start_offset: %q is not earliest or latest", k.StartOffset)
	}
	positive(p, "kafka.commit_interval", k.CommitInterval)
	positive(p, "kafka.session_timeout", k.SessionTimeout)
	positive(p, "kafka.retry_backoff", k.RetryBackoff)
	if k.RetryBackoffMax < k.RetryBackoff {
		p.addf("kafka.retry_backoff_max: must be at least kafka.retry_backoff")
	}
	if k.BatchTimeout < 0 {
		p.addf("kafka.batch_timeout: must not be negative")
	}
	t := k.TLS
	if (t.CertFile == "") != (t.KeyFile == "") {
		p.addf("kafka.tls: cert_file and key_file must be set together")
	}
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.InsecureSkipVerify) {
		p.addf("kafka.tls: files or options are set but kafka.tls.enabled is false")
	}
	for _, f := range []struct{ key, path string }{{"kafka.tls.ca_file", t.CAFile}, {"kafka.tls.cert_file", t.CertFile}, {"kafka.tls.key_file", t.KeyFile}} {
		if f.path != "" {
			if _, err := os.Stat(f.path); err != nil {
				p.addf("%s: cannot read %q", f.key, f.path)
			}
		}
	}
	s := k.SASL
	switch strings.ToLower(s.Mechanism) {
	case "":
		if s.Username != "" {
			p.addf("kafka.sasl.mechanism: a username is set but no mechanism (plain, scram-sha-256, scram-sha-512)")
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		if s.Username == "" {
			p.addf("kafka.sasl.username: required with SASL %s", s.Mechanism)
		}
		if s.Password == "" && s.PasswordFile == "" {
			p.addf("kafka.sasl.password: required with SASL %s (or password_file, or DPSTREAM_KAFKA_SASL_PASSWORD)", s.Mechanism)
		}
		if s.Password != "" && s.PasswordFile != "" {
			p.addf("kafka.sasl: set password or password_file, not both")
		}
	default:
		p.addf("kafka.sasl.mechanism: %q is not plain, scram-sha-256 or scram-sha-512", s.Mechanism)
	}
}

// checkTopic applies Kafka's topic name rule: 1–249 characters of
// [a-zA-Z0-9._-], not "." or "..".
func checkTopic(p *problems, key, t string) {
	if t == "" {
		p.addf("%s: a topic name is required", key)
		return
	}
	ok := len(t) <= 249 && t != "." && t != ".."
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			ok = false
		}
	}
	if !ok {
		p.addf("%s: %q is not a valid topic name ([a-zA-Z0-9._-], at most 249)", key, t)
	}
}

func positive(p *problems, key string, d time.Duration) {
	if d <= 0 {
		p.addf("%s: must be positive", key)
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// checkSchema reports the schema package's own validation, one line per
// problem, under the "schema." prefix.
func checkSchema(p *problems, s schema.Config) {
	err := s.Validate()
	if err == nil {
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimPrefix(line, schema.ErrInvalidConfig.Error()+": ")
		p.addf("schema.%s", line)
	}
}

func (w WindowsConfig) check(p *problems, s schema.Config) {
	positive(p, "windows.size", w.Size)
	if w.Size > 0 && w.Size%time.Millisecond != 0 {
		p.addf("windows.size: must be a whole number of milliseconds")
	}
	if w.Offset < 0 || (w.Size > 0 && w.Offset >= w.Size) {
		p.addf("windows.offset: must be in [0, windows.size)")
	}
	if w.AllowedLateness < 0 {
		p.addf("windows.allowed_lateness: must not be negative")
	}
	positive(p, "windows.idle_timeout", w.IdleTimeout)
	if w.Start != "" {
		if _, err := time.Parse(time.RFC3339Nano, w.Start); err != nil {
			p.addf("windows.start: %q is not an RFC 3339 time; use e.g. 2024-05-01T00:00:00Z", w.Start)
		}
	}
	if len(w.Aggregates) == 0 {
		p.addf("windows.aggregates: at least one of %s is required", strings.Join(knownAggregates, ", "))
	}
	seen := map[string]bool{}
	for _, a := range w.Aggregates {
		switch {
		case !slices.Contains(knownAggregates, a):
			p.addf("windows.aggregates: %q is not an aggregate; use one of %s", a, strings.Join(knownAggregates, ", "))
		case seen[a]:
			p.addf("windows.aggregates: %q is listed twice", a)
		case a == AggHistogram && s.Histogram == nil:
			p.addf("windows.aggregates: histogram needs schema.histogram.field")
		case (a == AggSum || a == AggMean || a == AggVariance || a == AggQuantiles) && s.ValueField == "":
			p.addf("windows.aggregates: %s needs schema.value_field", a)
		}
		seen[a] = true
	}
	for i, q := range w.Quantiles {
		if !(q >= 0 && q <= 1) || i > 0 && !(q > w.Quantiles[i-1]) {
			p.addf("windows.quantiles: must be ranks in [0, 1], strictly increasing, e.g. [0.5, 0.9, 0.99]")
			break
		}
	}
	if b, d := w.quantileTree(); seen[AggQuantiles] || w.QuantileBranching != 0 || w.QuantileDepth != 0 {
		tc := windows.Config{Quantiles: true, TreeBranching: b, TreeDepth: d}
		if b < 2 || b > windows.MaxTreeBranching || d < 1 || d > windows.MaxTreeDepth || tc.TreeLeaves() == 0 {
			p.addf("windows.quantile_branching, windows.quantile_depth: need branching in [2, %d], depth in [1, %d] and at most %d leaves (branching^depth), got %d and %d",
				windows.MaxTreeBranching, windows.MaxTreeDepth, windows.MaxTreeLeaves, b, d)
		}
	}
	switch {
	case w.MaxSkew < 0:
		p.addf("windows.max_skew: must not be negative (0: off)")
	case w.MaxSkew%time.Millisecond != 0:
		p.addf("windows.max_skew: %v is not a whole number of milliseconds", w.MaxSkew)
	}
	switch {
	case w.MaxOpenWindows < 0:
		p.addf("windows.max_open_windows: must not be negative (0: no cap)")
	case w.MaxOpenWindows > 0 && w.Size > 0 && w.AllowedLateness >= 0 && w.MaxSkew >= 0 && w.IdleTimeout > 0:
		if need := minOpenWindows(w); int64(w.MaxOpenWindows) < need {
			p.addf("windows.max_open_windows: %d is below the %d windows an in-sync consumer keeps open (⌈(max_skew + allowed_lateness + idle_timeout)/size⌉ + 2); raise it or use 0 for no cap", w.MaxOpenWindows, need)
		}
	}
	switch {
	case w.MaxOpenGroups < 0:
		p.addf("windows.max_open_groups: must not be negative (0: no cap)")
	case w.MaxOpenGroups > 0 && s.UnitField != "":
		p.addf("windows.max_open_groups: applies only to event-level privacy (no schema.unit_field); with units, open groups are bounded by bounds.max_units × bounds.max_groups")
	}
}

// minOpenWindows is the smallest windows.max_open_windows an in-sync
// consumer never reaches: an accepted event's window starts before its
// arrival + max_skew, and the first window not yet published starts after
// the watermark − allowed_lateness − size, the watermark lagging an
// arrival by at most idle_timeout (a partition advanced when read to its
// end) plus under a window of tick and fetch delays; so the window lies
// fewer than ⌈(max_skew + allowed_lateness + idle_timeout)/size⌉ + 2
// windows after it (windows.Tumbling).
func minOpenWindows(w WindowsConfig) int64 {
	span := w.MaxSkew + w.AllowedLateness + w.IdleTimeout
	need := int64(span/w.Size) + 2
	if span%w.Size != 0 {
		need++
	}
	return need
}

func (b BoundsConfig) check(p *problems, s schema.Config) {
	for _, f := range []struct {
		key string
		v   int
	}{{"bounds.max_groups", b.MaxGroups}, {"bounds.max_buckets", b.MaxBuckets}, {"bounds.max_per_bucket", b.MaxPerBucket}, {"bounds.max_values", b.MaxValues}} {
		if f.v < 1 {
			p.addf("%s: must be at least 1", f.key)
		}
	}
	switch {
	case b.MaxUnits < 0:
		p.addf("bounds.max_units: must not be negative (0: no cap)")
	case b.MaxUnits > 0 && s.UnitField == "":
		p.addf("bounds.max_units: needs schema.unit_field (with event-level privacy every event is a unit; use windows.max_open_groups)")
	}
}

func (c PrivacyConfig) check(p *problems, w WindowsConfig, s schema.Config) {
	perWindow := c.Epsilon != 0 || c.Delta != 0
	horizon := c.Horizon != 0 || c.HorizonEpsilon != 0 || c.HorizonDelta != 0
	switch {
	case perWindow && horizon:
		p.addf("privacy: set either epsilon/delta (per window) or horizon/horizon_epsilon/horizon_delta, not both")
	case horizon:
		positive(p, "privacy.horizon", c.Horizon)
		budget(p, "privacy.horizon_epsilon", "privacy.horizon_delta", c.HorizonEpsilon, c.HorizonDelta)
		if w.Size > 0 && c.Horizon > 0 && (c.Horizon < w.Size || c.Horizon%w.Size != 0) {
			p.addf("privacy.horizon: must be a whole number of windows.size")
		}
	default:
		budget(p, "privacy.epsilon", "privacy.delta", c.Epsilon, c.Delta)
	}
	checkMechanism(p, "privacy.mechanism", c.Mechanism)
	for agg, m := range sortedMap(c.Mechanisms) {
		if !slices.Contains(knownAggregates, agg) {
			p.addf("privacy.mechanisms: %q is not an aggregate (%s)", agg, strings.Join(knownAggregates, ", "))
		}
		checkMechanism(p, "privacy.mechanisms."+agg, m)
	}
	if !slices.Contains(accountings, c.Accounting) {
		p.addf("privacy.accounting: %q is not tightest, pld, basic or advanced", c.Accounting)
	}
	if _, err := privacy.ParseErrorMeasure(c.ErrorMeasure); err != nil || c.ErrorMeasure == "" {
		p.addf("privacy.error_measure: %q is not variance or mae", c.ErrorMeasure)
	}
	if len(c.PublicGroups) > 0 && len(s.GroupBy) == 0 {
		p.addf("privacy.public_groups: set, but schema.group_by is empty")
	}
	for i, g := range c.PublicGroups {
		if len(s.GroupBy) > 0 && len(g) != len(s.GroupBy) {
			p.addf("privacy.public_groups[%d]: has %d values (%s), schema.group_by has %d fields; one list per group, e.g. [[north], [south]] in YAML, or north;south in the environment and --set (';' between groups)",
				i, len(g), strings.Join(g, ", "), len(s.GroupBy))
		}
	}
	if len(s.GroupBy) > 0 && len(c.PublicGroups) == 0 {
		if b, _ := (Config{Privacy: c, Windows: w}).TotalBudget(); !(b.Delta > 0) {
			p.addf("privacy.public_groups: with schema.group_by and δ = 0, list the public groups (private group selection needs δ > 0)")
		}
	}
	if !(c.Confidence > 0 && c.Confidence < 1) {
		p.addf("privacy.confidence: must be in (0, 1), e.g. 0.95")
	}
	if c.KeyFile == "" && c.KeyEnv == "" {
		p.addf("privacy: a secret key is required: set privacy.key_file or privacy.key_env")
	}
}

func budget(p *problems, ekey, dkey string, eps, delta float64) {
	if !(eps > 0) || !finite(eps) {
		p.addf("%s: must be a finite number > 0", ekey)
	}
	if !(delta >= 0 && delta < 1) {
		p.addf("%s: must be in [0, 1)", dkey)
	}
}

func (o ObservabilityConfig) check(p *problems) {
	if o.Listen != "" {
		checkListen(p, "observability.listen", o.Listen, "127.0.0.1:9464, or :9464 for every interface")
	}
	switch strings.ToLower(o.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		p.addf("observability.log_level: %q is not debug, info, warn or error", o.LogLevel)
	}
	switch o.LogFormat {
	case "json", "text":
	default:
		p.addf("observability.log_format: %q is not json or text", o.LogFormat)
	}
}

// sortedMap iterates a map in key order, so problems come out in a fixed order.
func sortedMap(m map[string]string) func(func(string, string) bool) {
	return func(yield func(string, string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

// accountings are the values of privacy.accounting.
var accountings = []string{string(privacy.Tightest), string(privacy.AccountPLD), string(privacy.AccountBasic), string(privacy.AccountAdvanced)}

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

// FileProblems checks the files the configuration names — the secret key
// file, the TLS files and the SASL password file — and says for each
// problem which it is: missing, not a regular file, unreadable (with the
// reason), or, for secrets, a mode that lets group or others read it. It
// also checks that the key is available (privacy.key_env or the file). For
// --check-config: Run needs the same files, and fails on the first.
func (c Config) FileProblems() []string {
	var p problems
	if f := c.Privacy.KeyFile; f != "" {
		checkFile(&p, "privacy.key_file", f, true)
	}
	t := c.Kafka.TLS
	for _, f := range []struct {
		key, path string
		secret    bool
	}{{"kafka.tls.ca_file", t.CAFile, false}, {"kafka.tls.cert_file", t.CertFile, false}, {"kafka.tls.key_file", t.KeyFile, true},
		{"kafka.sasl.password_file", c.Kafka.SASL.PasswordFile, true}} {
		if f.path != "" {
			checkFile(&p, f.key, f.path, f.secret)
		}
	}
	if c.Privacy.KeyFile == "" && c.Privacy.KeyEnv != "" && os.Getenv(c.Privacy.KeyEnv) == "" {
		p.addf("privacy.key_env: the environment variable %s is not set (export %s=$(openssl rand -hex 32), or set privacy.key_file)", c.Privacy.KeyEnv, c.Privacy.KeyEnv)
	}
	return p
}

// checkFile reports why the file at path cannot serve as key: missing,
// not a regular file, unreadable, or (secret) readable by group or others.
func checkFile(p *problems, key, path string, secret bool) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		p.addf("%s: %q is missing (no such file)", key, path)
		return
	case errors.Is(err, os.ErrPermission):
		p.addf("%s: %q cannot be reached: permission denied on a directory of its path", key, path)
		return
	case err != nil:
		p.addf("%s: %q cannot be checked: %v", key, path, errors.Unwrap(err))
		return
	case !st.Mode().IsRegular():
		p.addf("%s: %q is not a regular file", key, path)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		reason := "permission denied"
		if !errors.Is(err, os.ErrPermission) {
			reason = errors.Unwrap(err).Error()
		}
		p.addf("%s: %q exists but is unreadable by this user (%s; mode %04o)", key, path, reason, st.Mode().Perm())
		return
	}
	f.Close()
	// privacy's rule: no bits for group or others, or the layout of a
	// Kubernetes Secret file seen by a non-root container with an fsGroup.
	if perm := st.Mode().Perm(); secret && !keyfile.ModeOK(st) {
		p.addf("%s: %q has the wrong mode %04o: a secret must not be readable by group or others (chmod 600 %s)", key, path, perm, path)
	}
}

// checkListen reports an address that is not host:port with a port in
// 0–65535 (0: any free port).
func checkListen(p *problems, key, addr, example string) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(addr))
	if err != nil {
		p.addf("%s: %q is not host:port (e.g. %s)", key, addr, example)
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		p.addf("%s: %q: port %q is not a number in 0–65535", key, addr, port)
		return
	}
	if strings.ContainsAny(host, " /") {
		p.addf("%s: %q: %q is not a host name or IP address", key, addr, host)
	}
}
