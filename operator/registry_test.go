package operator

import (
	"errors"
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
// GET /schemas/ids/{id}, with basic auth from a password file.
func TestRegistryClient(t *testing.T) {
	var fails atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "dp" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
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
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error_code": 40403, "message": "Schema not found"}`))
		case "/ccompat/schemas/ids/6":
			w.WriteHeader(http.StatusTooManyRequests)
		default: // a 404 without the error code: say, a wrong path
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
	if s, err := c.fetch(1); err != nil || !strings.Contains(s, `"record"`) {
		t.Errorf("id 1: %q %v", s, err)
	}
	if _, err := c.fetch(2); !errors.Is(err, schema.ErrSchemaMismatch) {
		t.Errorf("id 2 (Protobuf): %v, want ErrSchemaMismatch", err)
	}
	if _, err := c.fetch(3); !errors.Is(err, schema.ErrRegistryUnavailable) || !strings.Contains(err.Error(), "status 503") {
		t.Errorf("id 3 (503): %v, want ErrRegistryUnavailable", err)
	}
	if s, err := c.fetch(3); err != nil || s != `"long"` {
		t.Errorf("id 3 asked again: %q %v", s, err)
	}
	for _, id := range []uint32{4, 6, 7} { // 500, 429, a 404 without error code 40403
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

// TestLoadAvroSchemaFile: a file path in schema.avro_schema is read by the
// loader (the schema package reads no files), and an unreadable one is a
// config problem naming the setting.
func TestLoadAvroSchemaFile(t *testing.T) {
	dir := t.TempDir()
	avsc := filepath.Join(dir, "r.avsc")
	const js = `{"type": "record", "name": "R", "fields": [{"name": "ts", "type": "long"}]}`
	if err := os.WriteFile(avsc, []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{{avsc, js}, {filepath.Join(dir, "missing.avsc"), ""}} {
		file := filepath.Join(dir, "c.yaml")
		yaml := "kafka:\n  input_topics: [a]\n  group_id: g\n  output_topic: o\n" +
			"schema:\n  format: avro\n  avro_schema: " + c.path + "\n  time_field: ts\n"
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(file, nil)
		switch {
		case c.want != "" && (err != nil || cfg.Schema.AvroSchema != js):
			t.Errorf("%s: %v, avro_schema %q", c.path, err, cfg.Schema.AvroSchema)
		case c.want == "" && (err == nil || !strings.Contains(err.Error(), "schema.avro_schema")):
			t.Errorf("%s: %v, want a problem naming schema.avro_schema", c.path, err)
		}
	}
}
