package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dpstream/dpstream/operator"
)

func init() { commands = append(commands, newHealthcheckCmd) }

// errNotReady is returned by `dpstream healthcheck` when the probed
// endpoint does not answer 200.
var errNotReady = errors.New("healthcheck: not ready")

// healthcheckTimeout is the default time one probe may take: well under
// the usual container healthcheck timeouts (Docker's default is 30 s).
const healthcheckTimeout = 5 * time.Second

func newHealthcheckCmd() *cobra.Command {
	var (
		addr    string
		path    string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck [--addr 127.0.0.1:9464] [--path /readyz]",
		Short: "Probe a running dpstream's /readyz (or /healthz) over HTTP; exit 0 when it answers 200",
		Long: `Healthcheck sends one HTTP GET to a running dpstream's observability
endpoint (observability.listen) and exits 0 if it answers 200, 1 otherwise,
printing the endpoint's answer (/readyz says why it is not ready). It is
meant for container healthchecks where the image has no shell or curl
(the dpstream image has neither), for example in Docker Compose:

  healthcheck:
    test: ["CMD", "dpstream", "healthcheck", "--addr", "127.0.0.1:9464"]

Without --addr it probes DPSTREAM_OBSERVABILITY_LISTEN when that is set
(the variable that sets observability.listen for dpstream run), else
127.0.0.1:9464. An address that listens on every interface (":9464",
"0.0.0.0:9464") is probed on 127.0.0.1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return healthcheck(cmd.Context(), cmd.OutOrStdout(), addr, path, timeout)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", healthcheckAddr(), "host:port of dpstream's observability.listen")
	cmd.Flags().StringVar(&path, "path", "/readyz", "endpoint to probe: /readyz (ready to publish) or /healthz (the process runs)")
	cmd.Flags().DurationVar(&timeout, "timeout", healthcheckTimeout, "how long the probe may take")
	return cmd
}

// healthcheckAddr is --addr's default: $DPSTREAM_OBSERVABILITY_LISTEN (how
// the environment sets observability.listen for dpstream run) when set,
// else observability.listen's default.
func healthcheckAddr() string {
	if a := os.Getenv(operator.EnvPrefix + "_OBSERVABILITY_LISTEN"); a != "" {
		return a
	}
	return operator.Default().Observability.Listen
}

// healthcheck probes http://addr+path once and reports the answer on out.
func healthcheck(ctx context.Context, out io.Writer, addr, path string, timeout time.Duration) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("healthcheck: --addr %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errNotReady, url, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	msg := strings.TrimSpace(string(body))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s answered %s: %s", errNotReady, url, res.Status, msg)
	}
	fmt.Fprintf(out, "%s: %s %s\n", url, res.Status, msg)
	return nil
}
