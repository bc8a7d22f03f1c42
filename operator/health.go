package operator

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// health is the state /healthz and /readyz report.
type health struct {
	ready  atomic.Bool
	reason atomic.Value // string: why not ready
	// cause is the last broker error ("" after a broker operation
	// succeeded), shown by /readyz while not ready: a wrong password, an
	// untrusted certificate or a missing topic keeps the operator retrying
	// (it does not exit, so there is no crash loop), not ready, and this
	// says why.
	cause atomic.Value // string
	// shape is what the input-shape check reports ("" when nothing,
	// shape.go): while set, /readyz answers 503 with it, whatever ready
	// says.
	shape atomic.Value // string
	// registry is the schema registry outage ("" when none,
	// registry_outage.go): while set, /readyz answers 503 with it.
	registry atomic.Value // string

	mu     sync.Mutex
	stages map[string]string // scale-out: what each stage of this instance serves
}

// stage records what stage name of this instance does now ("" removes
// it), for /readyz.
func (h *health) stage(name, status string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stages == nil {
		h.stages = map[string]string{}
	}
	if status == "" {
		delete(h.stages, name)
		return
	}
	h.stages[name] = status
}

// stageLines returns "name: status" lines, sorted by name.
func (h *health) stageLines() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(h.stages)) {
		b.WriteString(n + ": " + h.stages[n] + "\n")
	}
	return b.String()
}

func (h *health) set(ready bool, reason string) {
	h.ready.Store(ready)
	h.reason.Store(reason)
	if ready {
		h.cause.Store("")
	}
}

// registryProblem sets the schema registry outage /readyz shows ("":
// none).
func (h *health) registryProblem(reason string) { h.registry.Store(reason) }

// shapeProblem sets what the input-shape check reports ("": nothing).
func (h *health) shapeProblem(reason string) { h.shape.Store(reason) }

// brokerError records the outcome of broker operation op: err's text
// (which never holds a secret: see BrokerError) as the cause /readyz
// shows, or nothing when err is nil.
func (h *health) brokerError(op string, err error) {
	if err == nil {
		if c, _ := h.cause.Load().(string); c != "" {
			h.cause.Store("")
		}
		return
	}
	h.cause.Store(op + ": " + strings.ReplaceAll(err.Error(), "\n", "; "))
}

// handler serves /metrics, /healthz (the process runs) and /readyz (it
// consumes with a full assignment and knows what was already published).
func (h *health) handler(g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ready := h.ready.Load()
		shape, _ := h.shape.Load().(string)
		registry, _ := h.registry.Load().(string)
		if ready && shape == "" && registry == "" {
			_, _ = w.Write([]byte("ready\n" + h.stageLines()))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		var msg string
		if !ready {
			reason, _ := h.reason.Load().(string)
			msg = "not ready: " + reason + "\n"
			if cause, _ := h.cause.Load().(string); cause != "" {
				msg += "last broker error: " + cause + "\n"
			}
		}
		if shape != "" {
			msg += "not ready: " + shape + "\n"
		}
		if registry != "" {
			msg += "not ready: " + registry + "\n"
		}
		_, _ = w.Write([]byte(msg + h.stageLines()))
	})
	return mux
}

// serve listens on addr until ctx ends; the bound address is sent on bound
// (useful with port 0).
func (h *health) serve(ctx context.Context, addr string, g prometheus.Gatherer, bound chan<- string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	bound <- ln.Addr().String()
	srv := &http.Server{Handler: h.handler(g), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
