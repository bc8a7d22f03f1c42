package operator

// Broker errors a person can act on (issue 12): an unreachable broker is
// named with the cause, a missing topic by its name; the operator keeps
// retrying, not ready, with /readyz saying why.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// waitPublished waits until the operator running with errc publishes the
// window starting at last (pub receives every published window's start),
// failing t if Run returns first or after 3 minutes (a bound for a failing
// test; it takes seconds) since what the message names (the fix).
func waitPublished(t *testing.T, pub <-chan int64, errc <-chan error, last int64, since string) {
	t.Helper()
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case st := <-pub:
			if st >= last {
				return
			}
		case err := <-errc:
			t.Fatalf("Run returned %v before publishing", err)
		case <-timeout:
			t.Fatalf("window %d not published within 3 minutes of %s", last, since)
		}
	}
}

// waitNotReady runs op until /readyz answers 503 with every want in its
// body after at least two failed attempts of op ("setup"), failing the
// test if Run returns first; it then returns /readyz's body, op still
// running (stop: cancel, then read errc).
func waitNotReady(t *testing.T, op *Operator, want []string) (body string, cancel context.CancelFunc, errc chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc = make(chan error, 1)
	go func() { errc <- op.Run(ctx) }()
	addr := op.MetricsAddr(ctx)
	// A bound for a failing test, not a timing assertion: the cause shows
	// within a second or two (two attempts, 100 ms apart, testConfig).
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-errc:
			cancel()
			t.Fatalf("Run returned (%v) instead of retrying; /readyz said %q", err, body)
		default:
		}
		code, b, err := readyz(addr)
		body = b
		if err == nil && code == http.StatusServiceUnavailable &&
			counter(t, op.Registry(), "dpstream_broker_errors_total", "setup") >= 2 && containsAll(body, want...) {
			return body, cancel, errc
		}
		if time.Now().After(deadline) {
			cancel()
			<-errc
			t.Fatalf("/readyz within 90 s: %d %q; want 503 naming %q", code, body, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBrokerUnreachable: with no broker at the configured address, the
// error names the address and the network's cause, wraps
// ErrBrokerUnreachable, and the operator stays up, not ready, with the
// same text in /readyz and the log. Needs no broker.
func TestBrokerUnreachable(t *testing.T) {
	// A port nothing listens on: bind one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	want := []string{"broker " + addr + ": cannot connect (dial tcp " + addr + ": connect: connection refused)", "kafka.brokers"}

	c := testConfig([]string{addr}, "in", "out", "group")
	cl, err := newClients(c.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, err := range map[string]error{
		"check":         cl.check(ctx),
		"create topics": cl.createTopics(ctx, 1, nil, "t"),
		"partitions":    func() error { _, err := cl.partitions(ctx, "t"); return err }(),
	} {
		if !errors.Is(err, ErrBrokerUnreachable) || !errors.Is(err, ErrKafka) || err == nil || !containsAll(err.Error(), want...) {
			t.Errorf("%s: %v; want ErrBrokerUnreachable naming %q", name, err, want)
		}
	}

	sink := &logSink{}
	op, _ := secureOperator(t, c, sink)
	body, stop, errc := waitNotReady(t, op, want)
	stop()
	if err := <-errc; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
	if !strings.Contains(body, "not ready: starting") {
		t.Errorf("/readyz: %q; want the state (starting) and the cause", body)
	}
	if logs := strings.ReplaceAll(sink.String(), `\"`, `"`); !containsAll(logs, want...) {
		t.Errorf("the log does not name the cause %q:\n%s", want, logs)
	}
}

// TestKafkaMissingTopic: a missing input topic, and a missing output
// topic without kafka.create_topics, are named in the error, /readyz and
// the log; the operator keeps retrying and publishes once the output
// topic exists. It needs a broker that does not create topics on a
// metadata request: the plaintext listener of the security test broker
// (deploy/kafka/secure.sh; the development broker auto-creates).
func TestKafkaMissingTopic(t *testing.T) {
	sb := secureBrokerInfo(t)
	brokers := []string{sb.Plaintext}
	cl, err := newClients(KafkaConfig{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()

	t.Run("input", func(t *testing.T) {
		in := uniqueName("dpstream-missing-in")
		c := testConfig(brokers, in, uniqueName("dpstream-missing-out"), uniqueName("dpstream-missing"))
		c.Kafka.CreateTopics = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		want := []string{`topic does not exist: "` + in + `"`}
		if _, err := cl.partitions(ctx, in); !errors.Is(err, ErrTopicMissing) || !containsAll(err.Error(), want...) {
			t.Errorf("partitions: %v; want ErrTopicMissing naming %q", err, in)
		}
		// Several topics in one request: each missing one is named.
		createTopic(t, cl, c.Kafka.OutputTopic, 1)
		both := []string{"topic does not exist: ", `"dpstream-exists-not"`, `"` + in + `"`}
		_, err := cl.partitions(ctx, "dpstream-exists-not", c.Kafka.OutputTopic, in)
		if !errors.Is(err, ErrTopicMissing) || !containsAll(err.Error(), both...) || strings.Contains(err.Error(), c.Kafka.OutputTopic) {
			t.Errorf("partitions: %v; want ErrTopicMissing naming the two missing topics only", err)
		}
		op, _ := secureOperator(t, c, &logSink{})
		_, stop, errc := waitNotReady(t, op, want)
		stop()
		if err := <-errc; err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	})

	t.Run("output", func(t *testing.T) {
		in, out := uniqueName("dpstream-missing-in"), uniqueName("dpstream-missing-out")
		c := testConfig(brokers, in, out, uniqueName("dpstream-missing"))
		c.Kafka.CreateTopics = false
		createTopic(t, cl, in, 1)
		const nWindows = 2
		s := genStream(21, nWindows, 30)
		secureProduce(t, cl, in, s.messages(0, c.Windows.AllowedLateness))
		sink := &logSink{}
		op, pub := secureOperator(t, c, sink)
		want := []string{`topic does not exist: "` + out + `"`}
		_, stop, errc := waitNotReady(t, op, want)
		defer stop()
		if logs := strings.ReplaceAll(sink.String(), `\"`, `"`); !containsAll(logs, want...) {
			t.Errorf("the log does not name the missing topic %q:\n%s", out, logs)
		}
		// Create it: the operator, still retrying, goes on and publishes.
		createTopic(t, cl, out, 1)
		waitPublished(t, pub, errc, testBase+(nWindows-1)*testSize.Milliseconds(), "creating "+out)
		stop()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
		rels, _ := readReleases(t, cl, out)
		checkReleases(t, s, c, rels)

		// No line of this run holds the noise key or a unit id (the
		// values of genStream are too short to scan for: see
		// TestKafkaSecurity, whose input is made to be found).
		sec := &secrets{}
		sec.key()
		for _, e := range s.events {
			sec.token("unit id", e.user)
		}
		for _, f := range sec.find(sink.String()) {
			t.Error(f)
		}
	})
}
