package operator

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dpstream/dpstream/schema"
)

// TestRegistryClient: the client's answers to each status of
// GET /schemas/ids/{id} and of a reference's subject version, with basic
// auth from a password file: the schema (Avro, Protobuf with its
// references resolved); a definite "not found" (404 with error code
// 40403, or 40401 for a reference, which makes the schema a mismatch);
// every other failure — 503, 500, 429, a 404 without the code, a wrong
// password, connection refused — a failure to ask
// (ErrRegistryUnavailable), naming the registry but not the password, and
// answered at the next request once the registry answers.
func TestRegistryClient(t *testing.T) {
	var fails atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "dp" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		notFound := func(code int) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprintf(w, `{"error_code": %d, "message": "not found"}`, code)
		}
		switch r.URL.EscapedPath() {
		case "/ccompat/schemas/ids/1":
			_, _ = w.Write([]byte(`{"schema": "{\"type\": \"record\", \"name\": \"R\", \"fields\": []}"}`))
		case "/ccompat/schemas/ids/2":
			_, _ = w.Write([]byte(`{"schema": "syntax = \"proto3\";", "schemaType": "PROTOBUF"}`))
		case "/ccompat/schemas/ids/3": // fails once, then answers
			if fails.Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte(`{"schema": "\"long\"", "schemaType": "AVRO"}`))
		case "/ccompat/schemas/ids/4":
			w.WriteHeader(http.StatusInternalServerError)
		case "/ccompat/schemas/ids/5":
			notFound(40403)
		case "/ccompat/schemas/ids/6":
			_, _ = w.Write([]byte(`{"schema": "import \"a.proto\";", "schemaType": "PROTOBUF",
				"references": [{"name": "a.proto", "subject": "a/b", "version": 2}]}`))
		case "/ccompat/subjects/a%2Fb/versions/2":
			_, _ = w.Write([]byte(`{"schema": "import \"c.proto\";", "schemaType": "PROTOBUF",
				"references": [{"name": "c.proto", "subject": "c", "version": 1}]}`))
		case "/ccompat/subjects/c/versions/1":
			_, _ = w.Write([]byte(`{"schema": "message C {}", "schemaType": "PROTOBUF"}`))
		case "/ccompat/schemas/ids/7":
			_, _ = w.Write([]byte(`{"schema": "", "schemaType": "PROTOBUF",
				"references": [{"name": "gone.proto", "subject": "gone", "version": 1}]}`))
		case "/ccompat/subjects/gone/versions/1":
			notFound(40401)
		case "/ccompat/schemas/ids/8":
			w.WriteHeader(http.StatusTooManyRequests)
		default: // a 404 without an error code: say, a wrong path
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := newRegistryClient(schema.RegistryConfig{URL: srv.URL + "/ccompat/", Username: "dp", PasswordFile: pwFile}, "schema.registry")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.fetch(1); err != nil || !strings.Contains(s.Schema, `"record"`) || s.Type != "" {
		t.Errorf("id 1: %+v %v", s, err)
	}
	if s, err := c.fetch(2); err != nil || s.Type != "PROTOBUF" || s.Schema != `syntax = "proto3";` {
		t.Errorf("id 2 (Protobuf): %+v %v", s, err)
	}
	if _, err := c.fetch(3); !errors.Is(err, schema.ErrRegistryUnavailable) || !strings.Contains(err.Error(), "status 503") {
		t.Errorf("id 3 (503): %v, want ErrRegistryUnavailable", err)
	}
	if s, err := c.fetch(3); err != nil || s.Schema != `"long"` || s.Type != "AVRO" {
		t.Errorf("id 3 asked again: %+v %v", s, err)
	}
	want := map[string]string{"a.proto": `import "c.proto";`, "c.proto": "message C {}"}
	if s, err := c.fetch(6); err != nil || len(s.References) != 2 || s.References["a.proto"] != want["a.proto"] || s.References["c.proto"] != want["c.proto"] {
		t.Errorf("id 6 (references): %+v %v, want references %v", s, err, want)
	}
	if _, err := c.fetch(7); !errors.Is(err, schema.ErrSchemaMismatch) || !strings.Contains(err.Error(), "gone.proto") {
		t.Errorf("id 7 (a reference not in the registry): %v, want ErrSchemaMismatch naming it", err)
	}
	for _, id := range []uint32{4, 8, 9} { // 500, 429, a 404 without an error code
		if _, err := c.fetch(id); !errors.Is(err, schema.ErrRegistryUnavailable) || errors.Is(err, schema.ErrUnknownSchema) || !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("id %d: %v, want ErrRegistryUnavailable naming the URL", id, err)
		}
	}
	if _, err := c.fetch(5); !errors.Is(err, schema.ErrUnknownSchema) {
		t.Errorf("id 5 (404, error code 40403): %v, want ErrUnknownSchema", err)
	}
	bad, err := newRegistryClient(schema.RegistryConfig{URL: srv.URL + "/ccompat", Username: "dp", Password: "wrong"}, "schema.registry")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.fetch(1); err == nil || !strings.Contains(err.Error(), "status 401") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong password: %v, want status 401 without the password", err)
	}
	down, err := newRegistryClient(schema.RegistryConfig{URL: "http://user:hidden@" + srv.Listener.Addr().String() + "/ccompat"}, "schema.registry")
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // connection refused
	if _, err := down.fetch(1); !errors.Is(err, schema.ErrRegistryUnavailable) || strings.Contains(err.Error(), "hidden") {
		t.Errorf("registry down: %v, want ErrRegistryUnavailable without the password", err)
	}
}

// TestLoadSchemaFile: a file path in schema.avro_schema or
// schema.protobuf_schema is read by the loader (the schema package reads
// no files), and an unreadable one is a config problem naming the
// setting.
func TestLoadSchemaFile(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []struct {
		key, file, text, extra string
		got                    func(Config) string
	}{
		{"avro_schema", "r.avsc", `{"type": "record", "name": "R", "fields": [{"name": "ts", "type": "long"}]}`,
			"  format: avro\n", func(c Config) string { return c.Schema.AvroSchema }},
		{"protobuf_schema", "r.proto", "syntax = \"proto3\";\nmessage R { int64 ts = 1; }\n",
			"  format: protobuf\n  protobuf_message: R\n", func(c Config) string { return c.Schema.ProtobufSchema }},
	} {
		path := filepath.Join(dir, f.file)
		if err := os.WriteFile(path, []byte(f.text), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ path, want string }{{path, f.text}, {filepath.Join(dir, "missing"), ""}} {
			file := filepath.Join(dir, "c.yaml")
			yaml := "kafka:\n  input_topics: [a]\n  group_id: g\n  output_topic: o\n" +
				"schema:\n" + f.extra + "  " + f.key + ": " + c.path + "\n  time_field: ts\n"
			if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(file, nil)
			switch {
			case c.want != "" && (err != nil || f.got(cfg) != c.want):
				t.Errorf("%s %s: %v, read %q", f.key, c.path, err, f.got(cfg))
			case c.want == "" && (err == nil || !strings.Contains(err.Error(), "schema."+f.key)):
				t.Errorf("%s %s: %v, want a problem naming schema.%s", f.key, c.path, err, f.key)
			}
		}
	}
}
