package operator

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/dpstream/dpstream/schema"
)

// TestRegisterRelease: registerRelease against an httptest registry: the
// schema is POSTed under the subject and its id returned; a subject with
// no compatibility of its own (404) gets BACKWARD (PUT, reported as set),
// one with a level keeps it (no PUT); a 409 (incompatible) is a refusal
// wrapping ErrRegistry with a hint, a 503 a failure to ask (retried).
func TestRegisterRelease(t *testing.T) {
	var mu sync.Mutex
	var puts []string
	post, config := http.StatusOK, http.StatusNotFound
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/subjects/out-value/versions":
			w.WriteHeader(post)
			if post == http.StatusOK && strings.Contains(string(body), `\"name\":\"ReleaseValue\"`) {
				_, _ = w.Write([]byte(`{"id": 42}`))
			} else {
				_, _ = w.Write([]byte(`{"error_code": 409, "message": "Schema being registered is incompatible"}`))
			}
		case r.Method == http.MethodGet && r.URL.Path == "/config/out-value":
			w.WriteHeader(config)
			if config == http.StatusOK {
				_, _ = w.Write([]byte(`{"compatibilityLevel": "FULL"}`))
			} else {
				_, _ = w.Write([]byte(`{"error_code": 40408, "message": "Subject does not have subject-level compatibility configured"}`))
			}
		case r.Method == http.MethodPut && r.URL.Path == "/config/out-value":
			puts = append(puts, string(body))
			_, _ = w.Write(body)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := newRegistryClient(schema.RegistryConfig{URL: srv.URL}, "schema.registry")
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := schema.NewAvroReleases([]string{"region"})
	id, level, set, err := c.registerRelease("out-value", enc.Schema())
	if err != nil || id != 42 || level != "BACKWARD" || !set || len(puts) != 1 || !strings.Contains(puts[0], `"compatibility":"BACKWARD"`) {
		t.Errorf("no subject level: id %d, level %q, set %v, %v, PUTs %q; want 42, BACKWARD set once", id, level, set, err, puts)
	}
	config = http.StatusOK
	id, level, set, err = c.registerRelease("out-value", enc.Schema())
	if err != nil || id != 42 || level != "FULL" || set || len(puts) != 1 {
		t.Errorf("subject level FULL: id %d, level %q, set %v, %v, %d PUTs; want 42, FULL left alone", id, level, set, err, len(puts))
	}
	post = http.StatusConflict
	if _, _, _, err := c.registerRelease("out-value", enc.Schema()); !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), "not compatible") {
		t.Errorf("409: %v, want ErrRegistry saying not compatible", err)
	}
	post = http.StatusServiceUnavailable
	if _, _, _, err := c.registerRelease("out-value", enc.Schema()); !errors.Is(err, schema.ErrRegistryUnavailable) || errors.Is(err, ErrRegistry) {
		t.Errorf("503: %v, want ErrRegistryUnavailable", err)
	}
}
