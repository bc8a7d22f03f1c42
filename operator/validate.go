package operator

// validate.go checks a Config: one short line per problem (Problems), all
// of them joined (Validate), and the files and addresses the configuration
// names (FileProblems). Config's types and defaults are in config.go, the
// loading from YAML, environment and flags in load.go, the digests in
// digest.go.

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

	"github.com/dpstream/dpstream/operator/keyfile"
	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/quantile"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

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
	c.Output.check(&p, c.Schema)
	checkRunning(&p, c)
	checkLanes(&p, c)
	if c.Kafka.ScaleOut {
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
	if w.AckBackfill < 0 {
		p.addf("windows.ack_backfill: must not be negative (0: at most %d windows before now on a first start)", MaxBackfillWindows)
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
	switch w.QuantileMechanism {
	case "", QuantileTree, QuantileExponential, QuantileAuto:
	case QuantileJoint:
		if n := len(w.quantileRanks()); n > quantile.MaxJointRanks {
			p.addf("windows.quantiles: %d ranks; windows.quantile_mechanism %s selects at most %d (use exponential or tree, or fewer ranks)",
				n, QuantileJoint, quantile.MaxJointRanks)
		}
	default:
		p.addf("windows.quantile_mechanism: %q: want %s, %s, %s or %s", w.QuantileMechanism, QuantileTree, QuantileExponential, QuantileJoint, QuantileAuto)
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
	case b.MaxContributions < 0 || b.MaxContributions > windows.MaxPerBucketLimit:
		p.addf("bounds.max_contributions: must be in [0, %d] (0: unset)", windows.MaxPerBucketLimit)
	case b.MaxContributions > 0 && s.UnitField == "":
		p.addf("bounds.max_contributions: needs schema.unit_field (with event-level privacy every event contributes once)")
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
