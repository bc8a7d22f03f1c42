package operator

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// EnvPrefix is the prefix of the environment variables Load reads.
const EnvPrefix = "DPSTREAM"

// flagKeys maps the command-line flags that AddFlags defines to config keys.
var flagKeys = map[string]string{
	"brokers":           "kafka.brokers",
	"input-topics":      "kafka.input_topics",
	"group-id":          "kafka.group_id",
	"output-topic":      "kafka.output_topic",
	"dead-letter-topic": "kafka.dead_letter_topic",
	"instance":          "kafka.instance",
	"epsilon":           "privacy.epsilon",
	"delta":             "privacy.delta",
	"mechanism":         "privacy.mechanism",
	"key-file":          "privacy.key_file",
	"listen":            "observability.listen",
	"log-level":         "observability.log_level",
	"log-format":        "observability.log_format",
}

// AddFlags defines the operator's configuration flags on fs: a few common
// settings by name, and --set key=value (repeatable) for any config key.
// Load applies the flags that were set; unset flags never override the
// file or the environment.
func AddFlags(fs *pflag.FlagSet) {
	fs.StringSlice("brokers", nil, "Kafka bootstrap brokers, host:port (kafka.brokers)")
	fs.StringSlice("input-topics", nil, "input topics (kafka.input_topics)")
	fs.String("group-id", "", "consumer group id (kafka.group_id)")
	fs.String("output-topic", "", "release topic (kafka.output_topic)")
	fs.String("dead-letter-topic", "", "dead-letter topic for bad input (kafka.dead_letter_topic)")
	fs.String("instance", "", "instance name in release metadata (kafka.instance)")
	fs.Float64("epsilon", 0, "per-window ε (privacy.epsilon)")
	fs.Float64("delta", 0, "per-window δ (privacy.delta)")
	fs.String("mechanism", "", "default noise mechanism (privacy.mechanism)")
	fs.String("key-file", "", "secret noise key file (privacy.key_file)")
	fs.String("listen", "", "metrics and health address, empty to disable (observability.listen)")
	fs.String("log-level", "", "debug, info, warn or error (observability.log_level)")
	fs.String("log-format", "", "json or text (observability.log_format)")
	fs.StringArray("set", nil, "set any config key, e.g. --set windows.size=30s (repeatable)")
}

// Load builds the configuration from, in increasing precedence: Default(),
// the YAML file at path (skipped if path is empty), DPSTREAM_* environment
// variables, and the flags of fs that were set (fs may be nil). Unknown keys
// in the file are an error. Load does not validate; call Validate.
func Load(path string, fs *pflag.FlagSet) (Config, error) {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	def := Default()
	for key, val := range leafKeys(reflect.ValueOf(def), "") {
		v.SetDefault(key, val)
	}
	// Per-aggregate mechanisms, settable as DPSTREAM_PRIVACY_MECHANISMS_COUNT etc.
	for _, a := range knownAggregates {
		if err := v.BindEnv("privacy.mechanisms." + a); err != nil {
			return Config{}, fmt.Errorf("operator: %w", err)
		}
	}
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("%w: reading %s: %v", ErrConfig, path, err)
		}
	}
	if fs != nil {
		var err error
		fs.Visit(func(f *pflag.Flag) {
			if err != nil {
				return
			}
			if f.Name == "set" {
				vals, _ := fs.GetStringArray("set")
				for _, kv := range vals {
					k, val, ok := strings.Cut(kv, "=")
					if !ok || strings.TrimSpace(k) == "" {
						err = fmt.Errorf("%w: --set %q: want key=value", ErrConfig, kv)
						return
					}
					v.Set(strings.TrimSpace(k), val)
				}
				return
			}
			key, ok := flagKeys[f.Name]
			if !ok {
				return
			}
			if sv, isSlice := f.Value.(pflag.SliceValue); isSlice {
				v.Set(key, sv.GetSlice())
				return
			}
			v.Set(key, f.Value.String())
		})
		if err != nil {
			return Config{}, err
		}
	}
	// YAML reads an unquoted RFC 3339 value (windows.start:
	// 2024-05-01T00:00:00Z) as a timestamp; the field is a string.
	if t, ok := v.Get("windows.start").(time.Time); ok {
		v.Set("windows.start", t.Format(time.RFC3339Nano))
	}
	var c Config
	if err := v.UnmarshalExact(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, cleanDecodeError(err))
	}
	// Per-aggregate overrides bound to unset environment variables decode
	// as empty strings; drop them.
	for k, m := range c.Mechanisms() {
		if m == "" {
			delete(c.Privacy.Mechanisms, k)
		}
	}
	return c, nil
}

// Mechanisms returns the per-aggregate mechanism overrides.
func (c Config) Mechanisms() map[string]string { return c.Privacy.Mechanisms }

// cleanDecodeError flattens mapstructure's multi-line error into one line
// per problem.
func cleanDecodeError(err error) error {
	s := strings.TrimSpace(err.Error())
	s = strings.ReplaceAll(s, "\n* ", "\n")
	s = strings.ReplaceAll(s, "decoding failed due to the following error(s):\n\n", "")
	return errors.New(s)
}

// leafKeys yields every leaf config key of a struct (by mapstructure tag)
// with its value, for viper defaults and environment binding.
func leafKeys(v reflect.Value, prefix string) func(func(string, any) bool) {
	return func(yield func(string, any) bool) {
		var walk func(v reflect.Value, prefix string) bool
		walk = func(v reflect.Value, prefix string) bool {
			t := v.Type()
			for i := range t.NumField() {
				tag := t.Field(i).Tag.Get("mapstructure")
				if tag == "" {
					continue
				}
				key := tag
				if prefix != "" {
					key = prefix + "." + tag
				}
				f := v.Field(i)
				if f.Kind() == reflect.Pointer {
					if f.IsNil() {
						continue // optional sections (schema.histogram) have no defaults
					}
					f = f.Elem()
				}
				if f.Kind() == reflect.Struct {
					if !walk(f, key) {
						return false
					}
					continue
				}
				if f.Kind() == reflect.Map {
					continue // maps are bound explicitly
				}
				if !yield(key, f.Interface()) {
					return false
				}
			}
			return true
		}
		walk(v, prefix)
	}
}
