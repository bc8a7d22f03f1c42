package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHealthcheck: the probe exits 0 on 200 and reports the body, fails
// with errNotReady (and the endpoint's reason) on 503, fails on a closed
// port, and probes 127.0.0.1 for an every-interface address.
func TestHealthcheck(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !ready {
			http.Error(w, "not ready: joining the consumer group", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))

	var out bytes.Buffer
	if err := healthcheck(context.Background(), &out, "0.0.0.0:"+port, "readyz", time.Second); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if !strings.Contains(out.String(), "200 OK ok") {
		t.Errorf("ready: output %q", out.String())
	}
	ready = false
	err := healthcheck(context.Background(), &out, "127.0.0.1:"+port, "/readyz", time.Second)
	if !errors.Is(err, errNotReady) || !strings.Contains(err.Error(), "joining the consumer group") {
		t.Errorf("not ready: err %v", err)
	}
	srv.Close()
	if err := healthcheck(context.Background(), &out, "127.0.0.1:"+port, "/readyz", time.Second); !errors.Is(err, errNotReady) {
		t.Errorf("closed port: err %v", err)
	}
	if err := healthcheck(context.Background(), &out, "no-port", "/readyz", time.Second); err == nil || errors.Is(err, errNotReady) {
		t.Errorf("bad address: err %v", err)
	}
}

// TestHealthcheckAddrFromEnv: without --addr, healthcheck probes the
// address DPSTREAM_OBSERVABILITY_LISTEN gives dpstream run (the
// walkthrough sets it once for both); without the variable, the default
// listen address. The code before always defaulted to 127.0.0.1:9464.
func TestHealthcheckAddrFromEnv(t *testing.T) {
	t.Setenv("DPSTREAM_OBSERVABILITY_LISTEN", "127.0.0.1:19464")
	if got := newHealthcheckCmd().Flags().Lookup("addr").DefValue; got != "127.0.0.1:19464" {
		t.Errorf("--addr default with the variable set = %q", got)
	}
	t.Setenv("DPSTREAM_OBSERVABILITY_LISTEN", "")
	if got := newHealthcheckCmd().Flags().Lookup("addr").DefValue; got != "127.0.0.1:9464" {
		t.Errorf("--addr default without the variable = %q", got)
	}
}
