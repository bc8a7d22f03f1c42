package operator

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/dpstream/dpstream/schema"
)

// TestCheckOutputRegistry: with output.format avro, Check's registry
// line against an httptest registry: ok when the subject does not exist
// yet (404 40401) or its latest version accepts the release schema (the
// schema POSTed to the compatibility endpoint, nothing registered), FAIL
// when it does not, when the credentials are refused (401 at
// GET /subjects, the compatibility not asked), when the registry answers
// 503 or not at all; warn for an answer without is_compatible; no line
// with output.format json.
func TestCheckOutputRegistry(t *testing.T) {
	var mu sync.Mutex
	var subjects, compat int // status codes
	var compatBody string
	var posted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/subjects":
			w.WriteHeader(subjects)
			_, _ = w.Write([]byte(`["other-value"]`))
		case r.Method == http.MethodPost && r.URL.Path == "/compatibility/subjects/out-value/versions/latest":
			posted = append(posted, string(body))
			w.WriteHeader(compat)
			_, _ = w.Write([]byte(compatBody))
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := testConfig(nil, "in", "out", "g")
	if got := checkOutputRegistry(context.Background(), cfg); got != nil {
		t.Errorf("output.format %q: %v, want no line", cfg.Output.Format, got)
	}
	cfg.Output.Format, cfg.Output.Registry = FormatAvro, schema.RegistryConfig{URL: srv.URL}
	for _, c := range []struct {
		name             string
		subjects, compat int
		body             string
		status           CheckStatus
		detail           string
		posts            int
	}{
		{"no subject yet", 200, 404, `{"error_code": 40401, "message": "Subject 'out-value' not found."}`, CheckOK, "does not exist yet", 1},
		{"compatible", 200, 200, `{"is_compatible": true}`, CheckOK, "accepts the release schema", 1},
		{"not compatible", 200, 200, `{"is_compatible": false}`, CheckFail, "would refuse to start", 1},
		{"no answer", 200, 200, `{}`, CheckWarn, "no is_compatible", 1},
		{"refused credentials", 401, 200, ``, CheckFail, "check output.registry.username", 0},
		{"registry down", 503, 200, ``, CheckFail, "cannot reach the registry", 0},
		{"compatibility 503", 200, 503, ``, CheckFail, "cannot reach the registry", 1},
		{"unknown 404", 200, 404, `{"error_code": 404}`, CheckFail, "status 404", 1},
	} {
		mu.Lock()
		subjects, compat, compatBody, posted = c.subjects, c.compat, c.body, nil
		mu.Unlock()
		got := checkOutputRegistry(context.Background(), cfg)
		mu.Lock()
		if len(got) != 1 || got[0].Status != c.status || got[0].Name != "output registry" || !strings.Contains(got[0].Detail, c.detail) {
			t.Errorf("%s: %v, want %s with %q", c.name, got, c.status, c.detail)
		}
		if len(posted) != c.posts || (len(posted) > 0 && !strings.Contains(posted[0], `\"name\":\"ReleaseValue\"`)) {
			t.Errorf("%s: compatibility requests %q, want %d with the release schema", c.name, posted, c.posts)
		}
		mu.Unlock()
	}
	srv.Close()
	got := checkOutputRegistry(context.Background(), cfg)
	if len(got) != 1 || got[0].Status != CheckFail || !strings.Contains(got[0].Detail, "cannot reach the registry") {
		t.Errorf("registry gone: %v, want FAIL cannot reach", got)
	}
}
