package operator

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	for _, tc := range []struct {
		o    OutputConfig
		want string // "" = no output problem
	}{
		{OutputConfig{Format: FormatMsgpack}, ""},
		{OutputConfig{Format: FormatJSON}, ""},
		{OutputConfig{Format: FormatJSON, ConnectSchema: true}, ""},
		{OutputConfig{Format: "avro"}, "output.format:"},
		{OutputConfig{Format: FormatMsgpack, ConnectSchema: true}, "output.connect_schema:"},
	} {
		var p problems
		tc.o.check(&p)
		found := slices.IndexFunc(p, func(s string) bool { return strings.HasPrefix(s, tc.want) })
		if (tc.want == "") != (len(p) == 0) || (tc.want != "" && found < 0) {
			t.Errorf("%+v: problems %q, want one starting %q", tc.o, p, tc.want)
		}
	}
}
