package operator

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/schema"
)

// TestOutputConfig: output.format defaults to msgpack; json and the
// Connect envelope load from YAML; an unknown format, and the envelope
// without json, are configuration problems naming their key.
func TestOutputConfig(t *testing.T) {
	if f := Default().Output.Format; f != FormatMsgpack {
		t.Errorf("default output.format = %q, want msgpack", f)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("output:\n  format: json\n  connect_schema: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Output != (OutputConfig{Format: FormatJSON, ConnectSchema: true}) {
		t.Errorf("loaded output = %+v", c.Output)
	}
	reg := schema.RegistryConfig{URL: "http://127.0.0.1:8081/apis/ccompat/v7"}
	for _, tc := range []struct {
		o    OutputConfig
		want string // "" = no output problem
	}{
		{OutputConfig{Format: FormatMsgpack}, ""},
		{OutputConfig{Format: FormatJSON}, ""},
		{OutputConfig{Format: FormatJSON, ConnectSchema: true}, ""},
		{OutputConfig{Format: "xml"}, "output.format:"},
		{OutputConfig{Format: FormatMsgpack, ConnectSchema: true}, "output.connect_schema:"},
		{OutputConfig{Format: FormatAvro, ConnectSchema: true}, "output.connect_schema:"},
		{OutputConfig{Format: FormatAvro}, "output.format avro: needs output.registry.url"},
		{OutputConfig{Format: FormatAvro, Registry: reg}, ""},
		{OutputConfig{Format: FormatAvro, Registry: schema.RegistryConfig{URL: "ftp://x"}}, "output.registry.url is not"},
		{OutputConfig{Format: FormatAvro, Registry: schema.RegistryConfig{Username: "u"}}, "output.registry settings are set"},
		{OutputConfig{Format: FormatJSON, Registry: reg}, "output.registry: needs output.format avro"},
	} {
		var p problems
		tc.o.check(&p, schema.Config{GroupBy: []string{"region"}})
		found := slices.IndexFunc(p, func(s string) bool { return strings.HasPrefix(s, tc.want) })
		if (tc.want == "") != (len(p) == 0) || (tc.want != "" && found < 0) {
			t.Errorf("%+v: problems %q, want one starting %q", tc.o, p, tc.want)
		}
	}
	t.Setenv("DPSTREAM_OUTPUT_REGISTRY_PASSWORD", "from-env")
	if c, err := Load(path, nil); err != nil || c.Output.Registry.Password != "from-env" {
		t.Errorf("output.registry.password from the environment: %q, %v", c.Output.Registry.Password, err)
	}
	// The input's registry serves when output.registry has no URL; a
	// group-by field that makes no Avro name is a problem naming it.
	var p problems
	OutputConfig{Format: FormatAvro}.check(&p, schema.Config{Registry: reg, GroupBy: []string{"user.id"}})
	if len(p) != 1 || !strings.Contains(p[0], `"user.id"`) {
		t.Errorf("avro with schema.registry and group_by user.id: %q, want one problem naming user.id", p)
	}
}
