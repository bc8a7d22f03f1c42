package operator

// brokererrors.go names the causes of failures to talk to the brokers
// (unreachable, TLS, SASL, protocol, missing topic) so that an operator
// sees which configuration keys to check; no error text carries a
// password, event data, unit ids or keys.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
)

// Causes of broker errors the operator can name. A *BrokerError wraps
// ErrKafka and one of these; a missing topic wraps ErrKafka and
// ErrTopicMissing.
var (
	// ErrBrokerUnreachable: no TCP connection to the broker (connection
	// refused, unknown host, no route, timeout).
	ErrBrokerUnreachable = errors.New("operator: kafka: broker unreachable")
	// ErrBrokerTLS: the TLS handshake failed or the broker rejected the
	// client certificate (untrusted broker certificate, missing, expired
	// or untrusted client certificate, TLS against a plaintext listener).
	ErrBrokerTLS = errors.New("operator: kafka: TLS failed")
	// ErrBrokerAuth: SASL authentication failed (wrong user or password,
	// mechanism not enabled on the listener).
	ErrBrokerAuth = errors.New("operator: kafka: SASL authentication failed")
	// ErrBrokerProtocol: the broker closed the connection before
	// answering, typically a client without TLS or SASL on a listener that
	// requires them.
	ErrBrokerProtocol = errors.New("operator: kafka: broker closed the connection")
	// ErrTopicMissing: a topic the operator reads or writes does not
	// exist. It wraps ErrKafka.
	ErrTopicMissing = fmt.Errorf("%w: topic does not exist", ErrKafka)
)

// BrokerError is a failure to talk to one broker, with its cause named
// and the configuration keys to check (several brokers' errors are
// joined with errors.Join). Its text never contains the SASL
// password (no error of the client library does: the password is only
// sent to the broker), event data, unit ids or keys.
type BrokerError struct {
	// Addr is the broker's address, host:port.
	Addr string
	// Kind is ErrBrokerUnreachable, ErrBrokerTLS, ErrBrokerAuth or
	// ErrBrokerProtocol.
	Kind error
	// Cause says what failed, in words ("the broker requires a client
	// certificate").
	Cause string
	// Hint says what to change, naming the configuration keys.
	Hint string
	// Err is the error as the Kafka client or the network reported it.
	Err error
}

// Error returns "operator: kafka: broker ADDR: CAUSE (ERR); HINT".
func (e *BrokerError) Error() string {
	s := "operator: kafka: broker " + e.Addr + ": " + e.Cause
	if e.Err != nil {
		s += " (" + rootText(e.Err) + ")"
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Unwrap returns ErrKafka, the kind and the underlying error.
func (e *BrokerError) Unwrap() []error {
	out := []error{ErrKafka, e.Kind}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// rootText is the most specific text of err: the network or TLS error
// without kafka-go's "failed to dial: failed to open connection to …"
// wrapping (the address is already in BrokerError).
func rootText(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return op.Error() // "dial tcp 127.0.0.1:9999: connect: connection refused"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Error()
	}
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		return kerr.Error()
	}
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) {
		return verr.Error()
	}
	s := err.Error()
	for _, p := range []string{"failed to dial: ", "failed to open connection to "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// classify names the cause of err, an error talking to the broker at
// addr: a *BrokerError when it recognises it, err itself otherwise (and
// for context cancellation, and errors already classified). afterDial
// says the connection (TCP, TLS on the client's side, SASL) was set up
// and a request failed.
func (c *clients) classify(addr string, err error, afterDial bool) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var be *BrokerError
	if errors.As(err, &be) {
		return err
	}
	e := &BrokerError{Addr: addr, Err: err}
	msg := err.Error()
	var (
		kerr     kafka.Error
		dns      *net.DNSError
		op       *net.OpError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	mech := strings.ToUpper(c.sasl.Mechanism)
	switch {
	case errors.As(err, &kerr) && kerr == kafka.SASLAuthenticationFailed:
		e.Kind = ErrBrokerAuth
		e.Cause = fmt.Sprintf("SASL authentication failed for user %q with %s", c.sasl.Username, mech)
		e.Hint = "wrong user name or password: check kafka.sasl.username and kafka.sasl.password (or password_file); the broker's log says more"
	case errors.As(err, &kerr) && kerr == kafka.UnsupportedSASLMechanism:
		e.Kind = ErrBrokerAuth
		e.Cause = fmt.Sprintf("the listener does not enable SASL mechanism %s", mech)
		e.Hint = "set kafka.sasl.mechanism to one of the listener's sasl.enabled.mechanisms"
	case errors.As(err, &kerr) && kerr == kafka.IllegalSASLState:
		e.Kind = ErrBrokerAuth
		e.Cause = "the listener does not expect SASL"
		e.Hint = "unset kafka.sasl.mechanism for this listener, or use the broker's SASL listener"
	case errors.As(err, &unknown):
		e.Kind = ErrBrokerTLS
		e.Cause = "the broker's certificate is not signed by a trusted CA"
		if c.tls.CAFile == "" {
			e.Hint = "set kafka.tls.ca_file to the CA that signed the broker's certificate (without it the system's CAs are trusted)"
		} else {
			e.Hint = "kafka.tls.ca_file (" + c.tls.CAFile + ") must hold the CA that signed the broker's certificate"
		}
	case errors.As(err, &hostname):
		e.Kind = ErrBrokerTLS
		e.Cause = fmt.Sprintf("the broker's certificate is not valid for the name %q", hostname.Host)
		e.Hint = "use a name the certificate lists in kafka.brokers, or set kafka.tls.server_name"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		e.Kind = ErrBrokerTLS
		e.Cause = "the broker's certificate has expired or is not valid yet"
		e.Hint = "renew the broker's certificate (or check this machine's clock)"
	case errors.As(err, &invalid):
		e.Kind = ErrBrokerTLS
		e.Cause = "the broker's certificate is invalid"
		e.Hint = "check the broker's certificate chain and kafka.tls.ca_file"
	case strings.Contains(msg, "remote error: tls:"):
		// The broker refused the handshake. With TLS 1.3 the client
		// finishes its side first, so this arrives at the first request.
		e.Kind = ErrBrokerTLS
		c.clientCertCause(e)
	case errors.As(err, &dns):
		e.Kind = ErrBrokerUnreachable
		e.Cause = "cannot resolve the broker's host name"
		e.Hint = "check kafka.brokers and DNS"
	case errors.As(err, &op) && op.Op == "dial":
		e.Kind = ErrBrokerUnreachable
		e.Cause = "cannot connect"
		e.Hint = "check kafka.brokers, that the broker runs and listens there, and firewalls"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		switch {
		case c.tls.Enabled && !afterDial && !strings.Contains(msg, "with SASL"):
			e.Kind = ErrBrokerTLS
			e.Cause = "the broker closed the connection during the TLS handshake"
			e.Hint = "kafka.tls.enabled is on: is this a TLS (SSL or SASL_SSL) listener?"
		case c.tls.Enabled:
			e.Kind = ErrBrokerProtocol
			e.Cause = "the broker closed the connection before answering"
			e.Hint = "if the listener is SASL_SSL, set kafka.sasl.mechanism, username and password"
		default:
			e.Kind = ErrBrokerProtocol
			e.Cause = "the broker closed the connection before answering"
			e.Hint = "if the listener uses TLS (SSL, SASL_SSL), set kafka.tls.enabled; if it uses SASL, set kafka.sasl.mechanism"
		}
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		e.Kind = ErrBrokerUnreachable
		e.Cause = "no answer in time"
		e.Hint = "check kafka.brokers (a firewall dropping packets, or a TLS/plaintext mismatch), and the broker's load"
	default:
		return err
	}
	return e
}

// clientCertCause fills e for a broker that refused the TLS handshake:
// no client certificate, or one that is expired, not yet valid, or not
// signed by a CA the broker trusts.
func (c *clients) clientCertCause(e *BrokerError) {
	if c.tls.CertFile == "" {
		e.Cause = "the broker requires a client certificate (mutual TLS) and none is configured"
		e.Hint = "set kafka.tls.cert_file and kafka.tls.key_file"
		return
	}
	cert, err := tls.LoadX509KeyPair(c.tls.CertFile, c.tls.KeyFile)
	if err != nil || cert.Leaf == nil {
		e.Cause = "the broker rejected the TLS handshake, and the client certificate cannot be read"
		e.Hint = "check kafka.tls.cert_file and kafka.tls.key_file"
		return
	}
	now := time.Now()
	switch leaf := cert.Leaf; {
	case now.After(leaf.NotAfter):
		e.Cause = "the broker rejected the client certificate: it expired at " + leaf.NotAfter.UTC().Format(time.RFC3339)
		e.Hint = "renew kafka.tls.cert_file"
	case now.Before(leaf.NotBefore):
		e.Cause = "the broker rejected the client certificate: it is not valid before " + leaf.NotBefore.UTC().Format(time.RFC3339)
		e.Hint = "check kafka.tls.cert_file and this machine's clock"
	default:
		e.Cause = fmt.Sprintf("the broker rejected the client certificate (issued by %q)", leaf.Issuer.String())
		e.Hint = "the broker's truststore (ssl.truststore) must hold the CA that signed kafka.tls.cert_file; the broker's log says why"
	}
}

// check connects to each bootstrap broker (TCP, TLS, SASL) and asks it
// for the cluster's brokers. It returns nil when one answers, and
// otherwise every broker's classified error. The Transport (writer, admin
// requests) reports a failed connection as "[8] Broker Not Available";
// check finds the cause.
func (c *clients) check(ctx context.Context) error {
	var errs []error
	for _, b := range c.brokers {
		conn, err := c.dialer.DialContext(ctx, "tcp", b)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, c.classify(b, err, false))
			continue
		}
		// As partitionInfo: a metadata answer takes milliseconds; 30 s
		// tolerates a loaded broker.
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		_, err = conn.Brokers()
		conn.Close()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		errs = append(errs, c.classify(b, err, true))
	}
	return joinErrors("connect", errs)
}

// explain returns the cause of err, an error of a Transport request
// (op names it), when the bootstrap brokers cannot be reached (check),
// and err wrapped otherwise. It also drops the Transport's connection
// pools: kafka-go's Transport keeps answering "Broker Not Available"
// from a pool whose connection failed (for many seconds after the broker
// accepts connections again, e.g. once a rotated password file is
// right), and the next request should connect afresh.
func (c *clients) explain(ctx context.Context, op string, err error) error {
	c.transport.CloseIdleConnections()
	if ctx.Err() == nil {
		if cerr := c.check(ctx); cerr != nil && ctx.Err() == nil {
			return cerr
		}
	}
	return fmt.Errorf("%w: %s: %v", ErrKafka, op, err)
}
