package operator

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
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
	c, problems, err := LoadAll(path, fs)
	if err != nil {
		return Config{}, err
	}
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = fmt.Errorf("%w: %s", ErrConfig, p)
		}
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// LoadAll is Load for --check-config: it also returns the configuration
// when values have the wrong type or keys are unknown, with those values
// at their defaults, and one line per such problem (key, bad value and an
// example; the nearest valid key), so that they can be reported together
// with Problems. err is for what stops loading altogether (an unreadable
// file, a malformed --set).
func LoadAll(path string, fs *pflag.FlagSet) (Config, []string, error) {
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
			return Config{}, nil, fmt.Errorf("operator: %w", err)
		}
	}
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return Config{}, nil, fmt.Errorf("%w: reading %s: %v", ErrConfig, path, err)
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
			return Config{}, nil, err
		}
	}
	// YAML reads an unquoted RFC 3339 value (windows.start:
	// 2024-05-01T00:00:00Z) as a timestamp; the field is a string.
	if t, ok := v.Get("windows.start").(time.Time); ok {
		v.Set("windows.start", t.Format(time.RFC3339Nano))
	}
	// Readable type errors and unknown keys, every one at once (the
	// decoder stops at the first and prints Go types). Bad values are
	// replaced by their defaults so that the rest can still be decoded
	// and checked (LoadAll).
	problems := typeProblems(v)
	var c Config
	decode := v.UnmarshalExact
	if len(problems) > 0 {
		decode = v.Unmarshal
	}
	if err := decode(&c); err != nil {
		return Config{}, problems, fmt.Errorf("%w: %v", ErrConfig, cleanDecodeError(err))
	}
	for _, f := range []struct {
		setting string
		value   *string
		isText  func(string) bool // a schema's text, not a path
	}{
		// An Avro schema's JSON starts with '{', '[' or '"'.
		{"schema.avro_schema", &c.Schema.AvroSchema, func(s string) bool { return strings.ContainsAny(s[:1], `{["`) }},
		// A .proto file defines a message: it holds a '{'.
		{"schema.protobuf_schema", &c.Schema.ProtobufSchema, func(s string) bool { return strings.Contains(s, "{") }},
	} {
		if p := schemaFile(f.setting, f.value, f.isText); p != "" {
			problems = append(problems, p)
		}
	}
	// Per-aggregate overrides bound to unset environment variables decode
	// as empty strings; drop them.
	for k, m := range c.Mechanisms() {
		if m == "" {
			delete(c.Privacy.Mechanisms, k)
		}
	}
	return c, problems, nil
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
			for key, i := range taggedFields(v.Type(), prefix) {
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

// taggedFields yields the config key (prefix.tag) and index of every field
// of struct type t with a mapstructure tag, in field order.
func taggedFields(t reflect.Type, prefix string) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		for i := range t.NumField() {
			tag := t.Field(i).Tag.Get("mapstructure")
			if tag == "" {
				continue
			}
			key := tag
			if prefix != "" {
				key = prefix + "." + tag
			}
			if !yield(key, i) {
				return
			}
		}
	}
}

// keyKind is how a config key's value is typed, for readable type errors.
type keyKind uint8

const (
	kindString keyKind = iota
	kindDuration
	kindInt
	kindFloat
	kindBool
	kindList       // []string
	kindFloatList  // []float64
	kindGroupLists // [][]string (privacy.public_groups)
	kindMap        // map[string]string (privacy.mechanisms)
)

// configKeys returns every config key (by mapstructure tag) with its kind,
// walking the Config type (optional sections such as schema.histogram
// included).
func configKeys() map[string]keyKind {
	out := map[string]keyKind{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for key, i := range taggedFields(t, prefix) {
			ft := t.Field(i).Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft == reflect.TypeOf(time.Duration(0)):
				out[key] = kindDuration
			case ft.Kind() == reflect.Struct:
				walk(ft, key)
			case ft.Kind() == reflect.Map:
				out[key] = kindMap
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Slice:
				out[key] = kindGroupLists
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Float64:
				out[key] = kindFloatList
			case ft.Kind() == reflect.Slice:
				out[key] = kindList
			case ft.Kind() == reflect.Bool:
				out[key] = kindBool
			case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Uint64:
				out[key] = kindInt
			case ft.Kind() == reflect.Float32 || ft.Kind() == reflect.Float64:
				out[key] = kindFloat
			default:
				out[key] = kindString
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}

// typeExample is the "use e.g." part of a type error.
var typeExample = map[keyKind]string{
	kindDuration:   "is not a duration; use e.g. 60s or 1m (units ms, s, m, h)",
	kindInt:        "is not a whole number; use e.g. 4",
	kindFloat:      "is not a number; use e.g. 0.5 or 1e-6",
	kindBool:       "is not true or false",
	kindList:       "is not a list; use e.g. [a, b] in YAML, or a,b in the environment and --set",
	kindFloatList:  "is not a list of numbers; use e.g. [0, 1.5, 10] in YAML, or 0,1.5,10 in the environment and --set",
	kindGroupLists: "is not a list of groups; use e.g. [[north], [south]] in YAML, or north;south in the environment and --set (groups separated by ';', the values of one group by ',')",
	kindMap:        "is not a map; use e.g. {count: laplace} in YAML, or DPSTREAM_PRIVACY_MECHANISMS_COUNT=laplace / --set privacy.mechanisms.count=laplace",
}

// typeProblems checks the raw value of every key in v against its type and
// returns one readable line per bad value, with the key, the value and an
// example; and one line per unknown key (file or --set), with the nearest
// valid key. It also converts privacy.public_groups given as a string
// (environment, --set) into its list form.
func typeProblems(v *viper.Viper) []string {
	keys := configKeys()
	defaults := map[string]any{}
	for k, val := range leafKeys(reflect.ValueOf(Default()), "") {
		defaults[k] = val
	}
	var out []string
	for _, key := range sortedKeys(keys) {
		kind := keys[key]
		raw := v.Get(key)
		if raw == nil {
			continue
		}
		if s, ok := raw.(string); ok && kind == kindGroupLists {
			g, err := parseGroups(s)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: %s %s", key, quoteValue(raw), typeExample[kind]))
				v.Set(key, nil)
				continue
			}
			v.Set(key, g)
			continue
		}
		if !typeOK(kind, raw) {
			out = append(out, fmt.Sprintf("%s: %s %s", key, quoteValue(raw), typeExample[kind]))
			v.Set(key, defaults[key]) // so the rest can be decoded and checked
		}
	}
	// Unknown keys: every leaf of the file and of --set that is no key.
	var leaves []string
	var walk func(m map[string]any, prefix string)
	walk = func(m map[string]any, prefix string) {
		for k, val := range m {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			if _, ok := keys[key]; ok {
				continue
			}
			if strings.HasPrefix(key, "privacy.mechanisms.") {
				continue // per-aggregate overrides; Problems checks the names
			}
			if sub, ok := val.(map[string]any); ok {
				if _, isKey := keys[key]; !isKey && hasPrefixKey(keys, key+".") {
					walk(sub, key)
					continue
				}
			}
			leaves = append(leaves, key)
		}
	}
	walk(v.AllSettings(), "")
	slices.Sort(leaves)
	for _, key := range leaves {
		msg := fmt.Sprintf("%s: unknown key", key)
		if near := nearestKey(key, keys); near != "" {
			msg += fmt.Sprintf("; did you mean %s?", near)
		}
		out = append(out, msg)
	}
	return out
}

func hasPrefixKey(keys map[string]keyKind, prefix string) bool {
	for k := range keys {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]keyKind) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// typeOK reports whether raw (as YAML, the environment or a flag gave it)
// decodes as kind.
func typeOK(kind keyKind, raw any) bool {
	s, isString := raw.(string)
	switch kind {
	case kindDuration:
		switch x := raw.(type) {
		case time.Duration:
			return true
		case string:
			_, err := time.ParseDuration(strings.TrimSpace(x))
			return err == nil
		}
		return false // a bare number would be nanoseconds: never what was meant
	case kindInt:
		switch x := raw.(type) {
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
			return true
		case float64:
			return x == math.Trunc(x)
		}
		if isString {
			_, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			return err == nil
		}
		return false
	case kindFloat:
		switch raw.(type) {
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
			return true
		}
		if isString {
			_, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			return err == nil
		}
		return false
	case kindBool:
		if _, ok := raw.(bool); ok {
			return true
		}
		if isString {
			_, err := strconv.ParseBool(strings.TrimSpace(s))
			return err == nil
		}
		return false
	case kindList, kindFloatList:
		if isString {
			if kind == kindFloatList {
				for _, f := range strings.Split(s, ",") {
					if strings.TrimSpace(f) == "" {
						continue
					}
					if _, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err != nil {
						return false
					}
				}
			}
			return true
		}
		rv := reflect.ValueOf(raw)
		if rv.Kind() != reflect.Slice {
			return false
		}
		for i := range rv.Len() {
			e := rv.Index(i).Interface()
			if _, nested := e.([]any); nested {
				return false
			}
			if _, m := e.(map[string]any); m {
				return false
			}
			if kind == kindFloatList && !typeOK(kindFloat, e) {
				return false
			}
		}
		return true
	case kindGroupLists:
		rv := reflect.ValueOf(raw)
		if rv.Kind() != reflect.Slice {
			return false
		}
		for i := range rv.Len() {
			e := reflect.ValueOf(rv.Index(i).Interface())
			if e.Kind() != reflect.Slice {
				return false
			}
		}
		return true
	case kindMap:
		_, ok := raw.(map[string]any)
		_, ok2 := raw.(map[string]string)
		return ok || ok2
	}
	// Strings (and string types such as schema.Format): any scalar.
	switch reflect.ValueOf(raw).Kind() {
	case reflect.String, reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool:
		return true
	}
	return false
}

// parseGroups parses privacy.public_groups given as one string: a JSON
// list of lists ([["north"],["south"]]), or groups separated by ';' with
// the values of one group separated by ',' ("north;south", or
// "north,day;south,night" for two group_by fields).
func parseGroups(s string) ([][]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if strings.HasPrefix(s, "[") {
		var g [][]string
		if err := json.Unmarshal([]byte(s), &g); err != nil {
			return nil, err
		}
		return g, nil
	}
	var out [][]string
	for _, grp := range strings.Split(s, ";") {
		if strings.TrimSpace(grp) == "" {
			continue
		}
		var vals []string
		for _, val := range strings.Split(grp, ",") {
			vals = append(vals, strings.TrimSpace(val))
		}
		out = append(out, vals)
	}
	return out, nil
}

// quoteValue prints a raw config value for an error message: strings
// quoted, lists and maps in YAML-like flow syntax (never Go syntax).
func quoteValue(raw any) string {
	switch x := raw.(type) {
	case string:
		return strconv.Quote(x)
	case nil:
		return "null"
	}
	rv := reflect.ValueOf(raw)
	switch rv.Kind() {
	case reflect.Slice:
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = quoteValue(rv.Index(i).Interface())
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		var parts []string
		for _, k := range rv.MapKeys() {
			parts = append(parts, fmt.Sprint(k.Interface())+": "+quoteValue(rv.MapIndex(k).Interface()))
		}
		slices.Sort(parts)
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(raw)
}

// nearestKey returns the valid key closest to key (edit distance over the
// whole path, or over the last segment within the same section), or "" if
// none is close.
func nearestKey(key string, keys map[string]keyKind) string {
	best, bestD := "", math.MaxInt
	last := key[strings.LastIndex(key, ".")+1:]
	for _, k := range sortedKeys(keys) {
		d := editDistance(key, k)
		if kl := k[strings.LastIndex(k, ".")+1:]; kl == last {
			d = min(d, 1) // the right name in the wrong section
		}
		if d < bestD {
			best, bestD = k, d
		}
	}
	if bestD > max(2, len(last)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ConfigKeys returns every config key, sorted (for shell completion of
// --set and for messages).
func ConfigKeys() []string { return sortedKeys(configKeys()) }

// schemaFile replaces a file path in a schema setting (a value that is
// not isText) by the file's content, so that the schema package never
// reads files and the release digest covers the writer schema itself
// rather than its path. It returns a problem line when the file cannot be
// read.
func schemaFile(setting string, value *string, isText func(string) bool) string {
	path := strings.TrimSpace(*value)
	if path == "" || isText(path) {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("%s: cannot read the schema file %s", setting, path)
	}
	*value = string(b)
	return ""
}
