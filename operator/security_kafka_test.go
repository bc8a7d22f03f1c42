package operator

// Tests against the TLS and SASL listeners of the second test broker
// (deploy/kafka/secure.sh). They skip when DPSTREAM_TEST_SECURE_BROKER is
// unset or the broker does not answer.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// envSecureBroker names the broker.json that `deploy/kafka/secure.sh
// start` writes (and prints): the listeners, certificate files and users
// of the security test broker.
const envSecureBroker = "DPSTREAM_TEST_SECURE_BROKER"

// secureBroker is broker.json.
type secureBroker struct {
	SSL               string `json:"ssl"`            // TLS, server authentication
	MTLS              string `json:"mtls"`           // TLS, client certificate required
	SASLSSL           string `json:"sasl_ssl"`       // TLS + SCRAM-SHA-256/512
	SASLPlaintext     string `json:"sasl_plaintext"` // PLAIN without TLS
	Plaintext         string `json:"plaintext"`      // no security (auto.create.topics.enable=false)
	CAFile            string `json:"ca_file"`
	ClientCert        string `json:"client_cert"`
	ClientKey         string `json:"client_key"`
	ExpiredCert       string `json:"expired_cert"`
	ExpiredKey        string `json:"expired_key"`
	UntrustedCert     string `json:"untrusted_cert"`
	UntrustedKey      string `json:"untrusted_key"`
	OtherCAFile       string `json:"other_ca_file"`
	User              string `json:"user"`
	SCRAMPasswordFile string `json:"scram_password_file"`
	PlainPasswordFile string `json:"plain_password_file"`

	scramPassword, plainPassword string
}

// secureBrokerInfo reads broker.json, or skips the test when the variable
// is unset or the broker does not accept connections.
func secureBrokerInfo(t *testing.T) secureBroker {
	t.Helper()
	path := os.Getenv(envSecureBroker)
	if path == "" {
		t.Skip(envSecureBroker + " is not set: run deploy/kafka/secure.sh start and export " + envSecureBroker + "=<the path it prints>")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s=%s: %v: start the broker with deploy/kafka/secure.sh start", envSecureBroker, path, err)
	}
	var sb secureBroker
	if err := json.Unmarshal(b, &sb); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	conn, err := net.DialTimeout("tcp", sb.Plaintext, 3*time.Second)
	if err != nil {
		t.Skipf("the security test broker (%s) does not accept connections (%v): start it with deploy/kafka/secure.sh start", path, err)
	}
	conn.Close()
	for _, f := range []struct {
		file string
		pw   *string
	}{{sb.SCRAMPasswordFile, &sb.scramPassword}, {sb.PlainPasswordFile, &sb.plainPassword}} {
		p, err := readPassword(f.file)
		if err != nil || p == "" {
			t.Fatalf("password file %s: %v", f.file, err)
		}
		*f.pw = p
	}
	return sb
}

// logSink collects the log lines of every operator of a test (at debug
// level, so that every line any level could print is there).
type logSink struct{ kafkatest.Buffer }

// logger returns a debug-level logger writing to s (and to the test's
// log with -v).
func (s *logSink) logger(t *testing.T) *slog.Logger {
	var w io.Writer = s
	if testing.Verbose() {
		w = io.MultiWriter(s, testWriter{t})
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// secrets are what no log line may contain: the noise key, the SASL
// passwords (right and wrong), and the test input's unit ids and values.
type secrets struct {
	mu       sync.Mutex
	literals map[string]string // text → what it is
	tokens   map[string]string // text that must not appear as a whole token → what it is
}

func (s *secrets) literal(what, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.literals == nil {
		s.literals = map[string]string{}
	}
	s.literals[v] = what
}

func (s *secrets) token(what, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		s.tokens = map[string]string{}
	}
	s.tokens[v] = what
}

// find returns a finding for every secret in logs. Unit ids and values
// are matched as whole tokens (not preceded or followed by a letter,
// digit, '.' or '-'), so that "unit-…-1" does not match "unit-…-12" and
// a value does not match inside a longer number.
func (s *secrets) find(logs string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	lines := strings.Split(logs, "\n")
	for v, what := range s.literals {
		for i, l := range lines {
			if strings.Contains(l, v) {
				out = append(out, fmt.Sprintf("log line %d contains the %s: %.300q", i+1, what, l))
				break
			}
		}
	}
	if len(s.tokens) == 0 {
		return out
	}
	alts := make([]string, 0, len(s.tokens))
	for v := range s.tokens {
		alts = append(alts, regexp.QuoteMeta(v))
	}
	// One regexp for all tokens (RE2: linear in the line's length).
	re := regexp.MustCompile(`(?:^|[^0-9A-Za-z.\-])(` + strings.Join(alts, "|") + `)(?:$|[^0-9A-Za-z\-.]|\.(?:$|[^0-9]))`)
	seen := map[string]bool{}
	for i, l := range lines {
		for _, m := range re.FindAllStringSubmatch(l, -1) {
			if v := m[1]; !seen[v] {
				seen[v] = true
				out = append(out, fmt.Sprintf("log line %d contains the %s %q: %.300q", i+1, s.tokens[v], v, l))
			}
		}
	}
	return out
}

// key registers the test noise key: raw, in hex (both cases) and
// in base64.
func (s *secrets) key() {
	k := testKey()
	s.literal("noise key (raw)", string(k[:]))
	s.literal("noise key (hex)", hex.EncodeToString(k[:]))
	s.literal("noise key (HEX)", strings.ToUpper(hex.EncodeToString(k[:])))
	s.literal("noise key (base64)", base64.StdEncoding.EncodeToString(k[:]))
	s.literal("noise key (base64 raw URL)", base64.RawURLEncoding.EncodeToString(k[:]))
}

// secureStream is genStream with unit ids and values no log line could
// contain by chance: units "unit-<8 random hex>-<n>", each value moved
// to its integer part + 0.5 + a distinct multiple of 1e-9 (the truth is
// updated to match). The ids and values are registered in sec.
func secureStream(seed uint64, nWindows, nUsers int, sec *secrets) testStream {
	s := genStream(seed, nWindows, nUsers)
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "unit-" + hex.EncodeToString(b[:]) + "-"
	size := testSize.Milliseconds()
	for i := range s.events {
		e := &s.events[i]
		e.user = prefix + strings.TrimPrefix(e.user, "user-")
		v := math.Floor(e.value) + 0.5 + float64(i+1)*1e-9
		start := testBase + (e.time-testBase)/size*size
		s.truth[start][e.region].sum += v - e.value
		e.value = v
		sec.token("unit id", e.user)
		sec.token("event value", strconv.FormatFloat(v, 'g', -1, 64))
	}
	return s
}

// secureProduce writes msgs to topic through cl's (TLS, SASL) transport.
func secureProduce(t *testing.T, cl *clients, topic string, msgs []kafka.Message) {
	t.Helper()
	produceVia(t, cl.brokers, cl.transport, topic, msgs)
}

// listener is one way of connecting to the security test broker.
type listener struct {
	name   string
	broker func(sb secureBroker) string
	kafka  func(sb secureBroker, k *KafkaConfig)
}

// goodListeners are the listeners with the right settings.
func goodListeners() []listener {
	return []listener{
		{"tls", func(sb secureBroker) string { return sb.SSL }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile}
		}},
		{"mutual-tls", func(sb secureBroker) string { return sb.MTLS }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile, CertFile: sb.ClientCert, KeyFile: sb.ClientKey}
		}},
		{"scram-sha-256", func(sb secureBroker) string { return sb.SASLSSL }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile}
			k.SASL = SASLConfig{Mechanism: "scram-sha-256", Username: sb.User, PasswordFile: sb.SCRAMPasswordFile}
		}},
		{"scram-sha-512", func(sb secureBroker) string { return sb.SASLSSL }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile}
			// The password in the config (not a file), as from
			// DPSTREAM_KAFKA_SASL_PASSWORD.
			k.SASL = SASLConfig{Mechanism: "SCRAM-SHA-512", Username: sb.User, Password: sb.scramPassword}
		}},
		{"plain", func(sb secureBroker) string { return sb.SASLPlaintext }, func(sb secureBroker, k *KafkaConfig) {
			k.SASL = SASLConfig{Mechanism: "plain", Username: sb.User, Password: sb.plainPassword}
		}},
	}
}

// listenerConfig returns the test config of listener l (fresh topics and
// group named after prefix, kafka.create_topics on) and clients for it,
// closed when the test ends.
func listenerConfig(t *testing.T, sb secureBroker, l listener, prefix string) (Config, *clients) {
	t.Helper()
	c := testConfig([]string{l.broker(sb)}, uniqueName(prefix+"-in"), uniqueName(prefix+"-out"), uniqueName(prefix))
	l.kafka(sb, &c.Kafka)
	c.Kafka.CreateTopics = true
	cl, err := newClients(c.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.close)
	return c, cl
}

// secureOperator builds an operator logging to sink at debug level, with
// /readyz on a free port, and a hook sending the start of every
// published window.
func secureOperator(t *testing.T, c Config, sink *logSink) (*Operator, chan int64) {
	t.Helper()
	ch := make(chan int64, 1024)
	c.Observability.Listen = "127.0.0.1:0"
	op, err := New(c, WithKey(testKey()), WithLogger(sink.logger(t)), WithRegistry(prometheus.NewRegistry()),
		WithClock(testClock(c.Windows.IdleTimeout)), WithReleaseHook(func(p Published) { ch <- p.Window.Start }))
	if err != nil {
		t.Fatal(err)
	}
	return op, ch
}

// readyz returns /readyz's status code and body.
func readyz(addr string) (int, string, error) {
	r, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	return r.StatusCode, string(b), err
}

// TestKafkaSecurity runs the operator end to end over every listener of
// the security test broker (TLS, mutual TLS, SASL_SSL with SCRAM-SHA-256
// and -512, SASL_PLAINTEXT with PLAIN); then with a wrong password, a
// wrong CA, an expired, an untrusted and a missing client certificate,
// each of which must keep the operator up, not ready, retrying, with
// /readyz and the log naming the cause; then scans every log line of
// all these runs, at debug level, for the noise key, the SASL passwords,
// and the unit ids and values of the input.
func TestKafkaSecurity(t *testing.T) {
	t.Parallel() // waits on the broker mostly; own topics and groups (docs/development.md)
	sb := secureBrokerInfo(t)
	sink := &logSink{}
	sec := &secrets{}
	sec.key()
	sec.literal("SCRAM password", sb.scramPassword)
	sec.literal("PLAIN password", sb.plainPassword)
	var b [8]byte
	_, _ = rand.Read(b[:])
	wrongPassword := "wrong-" + hex.EncodeToString(b[:])
	sec.literal("wrong SASL password", wrongPassword)

	for i, l := range goodListeners() {
		t.Run(l.name, func(t *testing.T) {
			broker := l.broker(sb)
			c, cl := listenerConfig(t, sb, l, "dpstream-sec")
			in, out := c.Kafka.InputTopics[0], c.Kafka.OutputTopic
			createTopic(t, cl, in, 1)
			const nWindows = 2
			s := secureStream(uint64(100+i), nWindows, 30, sec)
			secureProduce(t, cl, in, s.messages(0, c.Windows.AllowedLateness))

			op, pub := secureOperator(t, c, sink)
			sawReady := make(chan bool, 1)
			go func() {
				addr := op.MetricsAddr(context.Background())
				for range 600 {
					if code, _, err := readyz(addr); err == nil && code == http.StatusOK {
						sawReady <- true
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				sawReady <- false
			}()
			last := testBase + (nWindows-1)*testSize.Milliseconds()
			if err := runUntil(t, op, last, pub, 3*time.Minute); err != nil {
				t.Fatalf("Run over %s (%s): %v", l.name, broker, err)
			}
			if !<-sawReady {
				t.Errorf("/readyz never answered 200 over %s", l.name)
			}
			rels, _ := readReleases(t, cl, out)
			if len(rels) == 0 {
				t.Fatalf("no releases on %s over %s", out, l.name)
			}
			checkReleases(t, s, c, rels)
		})
	}

	for _, tc := range []struct {
		name   string
		broker func(sb secureBroker) string
		kafka  func(sb secureBroker, k *KafkaConfig)
		kind   error
		want   []string // in /readyz's body and in the log
	}{
		{"wrong-password-scram-sha-256", func(sb secureBroker) string { return sb.SASLSSL }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile}
			k.SASL = SASLConfig{Mechanism: "scram-sha-256", Username: sb.User, Password: wrongPassword}
		}, ErrBrokerAuth, []string{`SASL authentication failed for user "dpstream" with SCRAM-SHA-256`, "kafka.sasl.password"}},
		{"wrong-password-scram-sha-512", func(sb secureBroker) string { return sb.SASLSSL }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile}
			k.SASL = SASLConfig{Mechanism: "scram-sha-512", Username: sb.User, Password: wrongPassword}
		}, ErrBrokerAuth, []string{`SASL authentication failed for user "dpstream" with SCRAM-SHA-512`, "kafka.sasl.password"}},
		{"wrong-password-plain", func(sb secureBroker) string { return sb.SASLPlaintext }, func(sb secureBroker, k *KafkaConfig) {
			k.SASL = SASLConfig{Mechanism: "plain", Username: sb.User, Password: wrongPassword}
		}, ErrBrokerAuth, []string{`SASL authentication failed for user "dpstream" with PLAIN`, "kafka.sasl.password"}},
		{"wrong-ca", func(sb secureBroker) string { return sb.SSL }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.OtherCAFile}
		}, ErrBrokerTLS, []string{"the broker's certificate is not signed by a trusted CA", "certificate signed by unknown authority", "kafka.tls.ca_file"}},
		{"expired-client-certificate", func(sb secureBroker) string { return sb.MTLS }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile, CertFile: sb.ExpiredCert, KeyFile: sb.ExpiredKey}
		}, ErrBrokerTLS, []string{"the broker rejected the client certificate: it expired at 2020-01-02T00:00:00Z", "renew kafka.tls.cert_file"}},
		{"untrusted-client-certificate", func(sb secureBroker) string { return sb.MTLS }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile, CertFile: sb.UntrustedCert, KeyFile: sb.UntrustedKey}
		}, ErrBrokerTLS, []string{`the broker rejected the client certificate (issued by "CN=dpstream untrusted test CA")`, "truststore"}},
		{"missing-client-certificate", func(sb secureBroker) string { return sb.MTLS }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile}
		}, ErrBrokerTLS, []string{"the broker requires a client certificate (mutual TLS) and none is configured", "kafka.tls.cert_file"}},
		{"plaintext-client-on-tls-listener", func(sb secureBroker) string { return sb.SSL }, func(sb secureBroker, k *KafkaConfig) {
		}, ErrBrokerProtocol, []string{"the broker closed the connection before answering", "kafka.tls.enabled"}},
		{"tls-client-on-plaintext-listener", func(sb secureBroker) string { return sb.SASLPlaintext }, func(sb secureBroker, k *KafkaConfig) {
			k.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile}
			k.SASL = SASLConfig{Mechanism: "plain", Username: sb.User, Password: sb.plainPassword}
		}, ErrBrokerTLS, []string{"the broker closed the connection during the TLS handshake"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broker := tc.broker(sb)
			c := testConfig([]string{broker}, uniqueName("dpstream-sec-in"), uniqueName("dpstream-sec-out"), uniqueName("dpstream-sec"))
			tc.kafka(sb, &c.Kafka)
			c.Kafka.CreateTopics = true
			want := append([]string{"broker " + broker + ": "}, tc.want...)

			// The classified error itself.
			cl, err := newClients(c.Kafka)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = cl.check(ctx)
			cancel()
			cl.close()
			if !errors.Is(err, tc.kind) || !errors.Is(err, ErrKafka) {
				t.Errorf("check: %v; want an error wrapping %v and ErrKafka", err, tc.kind)
			}
			for _, w := range want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("check: %v; want it to contain %q", err, w)
				}
			}

			// The operator: up, not ready, retrying, the cause in
			// /readyz and in the log.
			opSink := &logSink{}
			op, _ := secureOperator(t, c, opSink)
			_, stop, errc := waitNotReady(t, op, want)
			stop()
			if err := <-errc; err != nil {
				t.Errorf("Run after cancel: %v; want nil (stopped while retrying the setup)", err)
			}
			logs := opSink.String()
			// The text handler quotes attribute values: unescape quotes.
			if !containsAll(strings.ReplaceAll(logs, `\"`, `"`), want...) {
				t.Errorf("the log does not name the cause %q:\n%s", want, logs)
			}
			_, _ = sink.Write([]byte(logs))
		})
	}

	// A rotated password file or client certificate (a Kubernetes Secret
	// updated in place, cert-manager) is read at the next attempt: the
	// operator, not ready while the files are wrong, recovers without a
	// restart.
	t.Run("password-file-rotation", func(t *testing.T) {
		pwFile := filepath.Join(t.TempDir(), "password")
		writeFile(t, pwFile, []byte(wrongPassword+"\n"))
		c := testConfig([]string{sb.SASLSSL}, uniqueName("dpstream-sec-in"), uniqueName("dpstream-sec-out"), uniqueName("dpstream-sec"))
		c.Kafka.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile}
		c.Kafka.SASL = SASLConfig{Mechanism: "scram-sha-256", Username: sb.User, PasswordFile: sb.SCRAMPasswordFile}
		rotation(t, c, sink, sec, func(k *KafkaConfig) { k.SASL.PasswordFile = pwFile },
			[]string{`SASL authentication failed for user "dpstream" with SCRAM-SHA-256`},
			func() { writeFile(t, pwFile, []byte(sb.scramPassword+"\n")) })
	})
	t.Run("client-certificate-rotation", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		copyFile := func(from, to string) {
			b, err := os.ReadFile(from)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, to, b)
		}
		copyFile(sb.ExpiredCert, certFile)
		copyFile(sb.ExpiredKey, keyFile)
		c := testConfig([]string{sb.MTLS}, uniqueName("dpstream-sec-in"), uniqueName("dpstream-sec-out"), uniqueName("dpstream-sec"))
		c.Kafka.TLS = TLSConfig{Enabled: true, CAFile: sb.CAFile, CertFile: sb.ClientCert, KeyFile: sb.ClientKey}
		rotation(t, c, sink, sec, func(k *KafkaConfig) { k.TLS.CertFile, k.TLS.KeyFile = certFile, keyFile },
			[]string{"the broker rejected the client certificate: it expired at"},
			func() { copyFile(sb.ClientKey, keyFile); copyFile(sb.ClientCert, certFile) })
	})

	t.Run("logs-hold-no-secrets", func(t *testing.T) {
		logs := sink.String()
		if !strings.Contains(logs, "level=DEBUG") {
			t.Fatalf("no debug lines were captured (%d bytes): the scan would prove nothing", len(logs))
		}
		for _, f := range sec.find(logs) {
			t.Error(f)
		}
		t.Logf("scanned %d log lines (%d bytes) for %d secrets and %d unit ids and values",
			strings.Count(logs, "\n"), len(logs), len(sec.literals), len(sec.tokens))
	})
}

// TestLogSecretScan checks the scan of TestKafkaSecurity itself: it
// finds each kind of secret, and does not match a unit id or value
// inside a longer one.
func TestLogSecretScan(t *testing.T) {
	sec := &secrets{}
	sec.key()
	sec.literal("SASL password", "pw-0123")
	sec.token("unit id", "unit-ab-1")
	sec.token("event value", "3.500000001")
	k := testKey()
	for _, tc := range []struct {
		line  string
		found bool
	}{
		{`level=INFO msg=ok unit=unit-ab-12 v=13.5000000012 x=3.5000000011`, false},
		{`level=DEBUG msg=x key=` + hex.EncodeToString(k[:]), true},
		{`level=DEBUG msg=x key=` + string(k[:]), true},
		{`level=DEBUG msg=x key=` + base64.StdEncoding.EncodeToString(k[:]), true},
		{`level=WARN msg=x err="auth pw-0123"`, true},
		{`level=DEBUG msg=x key=unit-ab-1`, true},
		{`level=DEBUG msg=x key="unit-ab-1"`, true},
		{`level=DEBUG msg=x v=3.500000001`, true},
		{`level=DEBUG msg=x v=[3.500000001,1]`, true},
		{`level=DEBUG msg=x v=3.500000001.`, true},
	} {
		if f := sec.find(tc.line); (len(f) > 0) != tc.found {
			t.Errorf("%q: found %q, want found=%v", tc.line, f, tc.found)
		}
	}
}

// writeFile replaces file with b as Kubernetes updates a mounted Secret:
// a new file renamed over the old one (mode 0400).
func writeFile(t *testing.T, file string, b []byte) {
	t.Helper()
	tmp := file + ".new"
	if err := os.WriteFile(tmp, b, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// rotation produces a stream over c's (good) settings, runs the operator
// with c changed by bad (files holding wrong credentials) until /readyz
// names the cause want, calls fix (which rewrites those files), and
// checks that the same operator then publishes every window.
func rotation(t *testing.T, c Config, sink *logSink, sec *secrets, bad func(*KafkaConfig), want []string, fix func()) {
	t.Helper()
	c.Kafka.CreateTopics = true
	admin, err := newClients(c.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.close()
	in, out := c.Kafka.InputTopics[0], c.Kafka.OutputTopic
	createTopic(t, admin, in, 1)
	const nWindows = 2
	s := secureStream(200, nWindows, 30, sec)
	secureProduce(t, admin, in, s.messages(0, c.Windows.AllowedLateness))

	bad(&c.Kafka)
	opSink := &logSink{}
	op, pub := secureOperator(t, c, opSink)
	_, stop, errc := waitNotReady(t, op, want)
	defer stop()
	fix()
	waitPublished(t, pub, errc, testBase+(nWindows-1)*testSize.Milliseconds(), "fixing the files")
	stop()
	if err := <-errc; err != nil {
		t.Errorf("Run: %v", err)
	}
	_, _ = sink.Write([]byte(opSink.String()))
	rels, _ := readReleases(t, admin, out)
	checkReleases(t, s, c, rels)
}
