package operator

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHealthEndpoints(t *testing.T) {
	var h health
	h.set(false, "joining the consumer group")
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg, false); err != nil {
		t.Fatal(err)
	}
	regS := prometheus.NewRegistry()
	if _, err := newMetrics(regS, true); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.handler(reg))
	defer srv.Close()
	srvS := httptest.NewServer(h.handler(regS))
	defer srvS.Close()
	get := func(path string) (int, string) { return getBody(t, srv.URL+path) }
	if code, body := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "joining") {
		t.Errorf("/readyz while joining: %d %q", code, body)
	}
	h.set(true, "")
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz when ready: %d", code)
	}
	// Sensitive metrics (exact counts of input data) are not served by
	// default, and say what they are when turned on.
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "dpstream_budget_window_epsilon") ||
		strings.Contains(body, "dpstream_events_skipped_total") {
		t.Errorf("/metrics by default: %d, want operational metrics without the skip counters:\n%s", code, body)
	}
	if code, body := getBody(t, srvS.URL+"/metrics"); code != 200 ||
		!strings.Contains(body, "# HELP dpstream_events_skipped_total") ||
		!strings.Contains(body, "Exact count of input data: sensitive") {
		t.Errorf("/metrics with sensitive_metrics: %d, skip counters or their sensitive help missing", code)
	}
}

// getBody GETs url and returns the status and the body.
func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r.StatusCode, string(b)
}
