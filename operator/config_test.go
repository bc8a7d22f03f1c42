package operator

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

func validConfig() Config {
	c := Default()
	c.Kafka.InputTopics = []string{"events"}
	c.Privacy.Epsilon = 1
	return c
}

func TestDefaultPlusTopicsIsValid(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	c, err := Load(filepath.Join("..", "deploy", "dpstream.example.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("example config: %v", err)
	}
	if c.Windows.Size != time.Minute || c.Schema.Upper != 0.5 || c.Privacy.Delta != 1e-6 || len(c.Privacy.PublicGroups) != 4 ||
		!slices.Equal(c.Schema.Histogram.Categories, []string{"day", "night", "weekend"}) ||
		c.Privacy.MechanismFor(AggSum) != "laplace" {
		t.Fatalf("example config decoded wrongly: %+v", c)
	}
}

// TestValidateReportsEveryProblem: each bad setting gives its own line
// naming the key, and all of them are reported at once.
func TestValidateReportsEveryProblem(t *testing.T) {
	c := validConfig()
	c.Kafka.Brokers = []string{"nohost"}
	c.Kafka.OutputTopic = "bad topic"
	c.Kafka.SASL.Mechanism = "kerberos"
	c.Schema.ValueField, c.Schema.Lower, c.Schema.Upper = "v", 3, 1
	c.Windows.Size = 0
	c.Windows.Aggregates = []string{"count", "median"}
	c.Bounds.MaxGroups = 0
	c.Privacy.Epsilon = -1
	c.Privacy.Delta = 1
	c.Privacy.Mechanism = "nope"
	c.Observability.LogLevel = "loud"
	ps := c.Problems()
	want := []string{
		"kafka.brokers:", "kafka.output_topic:", "kafka.sasl.mechanism:",
		"schema.lower 3 must be below upper 1", "windows.size:", "windows.aggregates: \"median\"",
		"bounds.max_groups:", "privacy.epsilon:", "privacy.delta:", "privacy.mechanism:",
		"observability.log_level:",
	}
	for _, w := range want {
		if !slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(p, w) }) {
			t.Errorf("no problem starting with %q in:\n%s", w, strings.Join(ps, "\n"))
		}
	}
	for _, p := range ps {
		if strings.Contains(p, "\n") {
			t.Errorf("problem spans lines: %q", p)
		}
	}
	err := c.Validate()
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("Validate error %v does not wrap ErrConfig", err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(ps) {
		t.Errorf("Validate has %d lines, want %d", n, len(ps))
	}
}

func TestValidateBudgetChoices(t *testing.T) {
	c := validConfig()
	c.Privacy.Horizon = time.Hour
	c.Privacy.HorizonEpsilon = 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("per-window and horizon budgets together: got %v", err)
	}
	c.Privacy.Epsilon = 0
	if err := c.Validate(); err != nil {
		t.Fatalf("horizon budget rejected: %v", err)
	}
	// 1h of 1m windows: the total covers 60 windows.
	if b, n := c.TotalBudget(); b.Epsilon != 1 || b.Delta != 0 || n != 60 {
		t.Fatalf("TotalBudget = %+v, %d", b, n)
	}
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	yaml := "kafka:\n  input_topics: [a]\n  group_id: from-file\n  output_topic: out-file\nwindows:\n  size: 30s\nprivacy:\n  epsilon: 0.5\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DPSTREAM_KAFKA_GROUP_ID", "from-env")
	t.Setenv("DPSTREAM_KAFKA_OUTPUT_TOPIC", "out-env")
	t.Setenv("DPSTREAM_KAFKA_BROKERS", "h1:1,h2:2")
	t.Setenv("DPSTREAM_BOUNDS_MAX_GROUPS", "3")
	t.Setenv("DPSTREAM_PRIVACY_MECHANISMS_COUNT", "gaussian")
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse([]string{"--output-topic", "out-flag", "--set", "windows.allowed_lateness=3s"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, fs)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"group from env over file", c.Kafka.GroupID, "from-env"},
		{"output topic from flag over env", c.Kafka.OutputTopic, "out-flag"},
		{"size from file", c.Windows.Size, 30 * time.Second},
		{"lateness from --set", c.Windows.AllowedLateness, 3 * time.Second},
		{"idle timeout default", c.Windows.IdleTimeout, time.Minute},
		{"max groups from env", c.Bounds.MaxGroups, 3},
		{"epsilon from file", c.Privacy.Epsilon, 0.5},
		{"count mechanism from env", c.Privacy.MechanismFor(AggCount), "gaussian"},
		{"sum mechanism default", c.Privacy.MechanismFor(AggSum), "laplace"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if !slices.Equal(c.Kafka.Brokers, []string{"h1:1", "h2:2"}) {
		t.Errorf("brokers from env: %v", c.Kafka.Brokers)
	}
}

func TestLoadRejectsUnknownKeysAndBadValues(t *testing.T) {
	dir := t.TempDir()
	for name, yaml := range map[string]string{
		"unknown key":  "kafka:\n  brokerz: [a:1]\n",
		"bad duration": "windows:\n  size: soon\n",
	} {
		file := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(file, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", name, err)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), nil); !errors.Is(err, ErrConfig) {
		t.Errorf("missing file: got %v", err)
	}
}

// TestValidateMechanismChoices: auto is a mechanism name, gaussian-classic
// (a comparison formula) is refused, and the accounting and error measure
// are checked, each problem naming its key.
func TestValidateMechanismChoices(t *testing.T) {
	c := validConfig()
	c.Privacy.Mechanism = Auto
	c.Privacy.Mechanisms = map[string]string{"count": "auto", "sum": "subbotin:3"}
	if err := c.Validate(); err != nil {
		t.Fatalf("auto rejected: %v", err)
	}
	c.Privacy.Mechanisms = map[string]string{"count": "gaussian-classic"}
	c.Privacy.Accounting = "renyi"
	c.Privacy.ErrorMeasure = "max"
	err := c.Validate()
	for _, want := range []string{"privacy.mechanisms.count: gaussian-classic is a comparison formula", "privacy.accounting", "privacy.error_measure"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want a problem %q", err, want)
		}
	}
}

// TestWindowsStart: windows.start loads from YAML written plainly (YAML
// reads an unquoted RFC 3339 value as a timestamp, not a string), quoted,
// or from the environment, to the same time; an invalid one is one
// problem naming the key.
func TestWindowsStart(t *testing.T) {
	dir := t.TempDir()
	want := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for name, yaml := range map[string]string{
		"plain":  "windows:\n  start: 2024-05-01T00:00:00Z\n",
		"quoted": "windows:\n  start: \"2024-05-01T00:00:00Z\"\n",
		"offset": "windows:\n  start: 2024-05-01T02:00:00+02:00\n",
	} {
		file := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(file, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ms, ok := c.Windows.startMillis(); !ok || ms != want {
			t.Errorf("%s: windows.start %q loads as %d (%v), want %d", name, c.Windows.Start, ms, ok, want)
		}
	}
	t.Setenv("DPSTREAM_WINDOWS_START", "2024-05-01T00:00:00Z")
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ms, ok := c.Windows.startMillis(); !ok || ms != want {
		t.Errorf("from the environment: windows.start %q loads as %d (%v)", c.Windows.Start, ms, ok)
	}
	c = validConfig()
	c.Windows.Start = "May 1st"
	checkOneProblem(t, "invalid start", c.Problems(), `windows.start: "May 1st" is not an RFC 3339 time`)
}

// TestExampleConfigHasEveryKey: deploy/dpstream.example.yaml sets every
// config key (so that a user finds each one, with its unit, in one place),
// including privacy.public_groups; a key added to Config must be added to
// the example too.
func TestExampleConfigHasEveryKey(t *testing.T) {
	v := viper.New()
	v.SetConfigFile(filepath.Join("..", "deploy", "dpstream.example.yaml"))
	if err := v.ReadInConfig(); err != nil {
		t.Fatal(err)
	}
	for _, k := range ConfigKeys() {
		if !v.InConfig(k) {
			t.Errorf("the example config lacks %s", k)
		}
	}
}
