package operator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// ErrKafka wraps errors talking to the brokers.
var ErrKafka = errors.New("operator: kafka")

// clients holds what every Kafka connection of the operator shares: the
// TLS and SASL settings, as a Dialer (readers, consumer group) and a
// Transport (writer, admin client).
type clients struct {
	brokers   []string
	dialer    *kafka.Dialer
	transport *kafka.Transport
	client    *kafka.Client
}

func newClients(k KafkaConfig) (*clients, error) {
	tlsCfg, err := k.TLS.config()
	if err != nil {
		return nil, err
	}
	mech, err := k.SASL.mechanism()
	if err != nil {
		return nil, err
	}
	const dialTimeout = 10 * time.Second
	d := &kafka.Dialer{
		ClientID:      k.ClientID,
		Timeout:       dialTimeout,
		DualStack:     true,
		TLS:           tlsCfg,
		SASLMechanism: mech,
	}
	t := &kafka.Transport{
		ClientID:    k.ClientID,
		DialTimeout: dialTimeout,
		TLS:         tlsCfg,
		SASL:        mech,
		MetadataTTL: 30 * time.Second,
	}
	brokers := make([]string, len(k.Brokers))
	for i, b := range k.Brokers {
		brokers[i] = strings.TrimSpace(b)
	}
	return &clients{
		brokers:   brokers,
		dialer:    d,
		transport: t,
		client:    &kafka.Client{Addr: kafka.TCP(brokers...), Transport: t, Timeout: 30 * time.Second},
	}, nil
}

func (c *clients) close() { c.transport.CloseIdleConnections() }

// config builds the TLS configuration, or nil when TLS is off.
func (t TLSConfig) config() (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented as tests only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: kafka.tls.ca_file: %v", ErrConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: kafka.tls.ca_file: no PEM certificates in %s", ErrConfig, t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: kafka.tls.cert_file/key_file: %v", ErrConfig, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// mechanism builds the SASL mechanism, or nil when SASL is off. Errors
// never include the password.
func (s SASLConfig) mechanism() (sasl.Mechanism, error) {
	name := strings.ToLower(s.Mechanism)
	if name == "" {
		return nil, nil
	}
	pw := s.Password
	if s.PasswordFile != "" {
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("%w: kafka.sasl.password_file: cannot read %s", ErrConfig, s.PasswordFile)
		}
		pw = strings.TrimRight(string(b), "\r\n")
	}
	switch name {
	case "plain":
		return plain.Mechanism{Username: s.Username, Password: pw}, nil
	case "scram-sha-256", "scram-sha-512":
		algo := scram.SHA256
		if name == "scram-sha-512" {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, s.Username, pw)
		if err != nil {
			return nil, fmt.Errorf("%w: kafka.sasl: cannot set up %s", ErrConfig, name)
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: kafka.sasl.mechanism: %q is not plain, scram-sha-256 or scram-sha-512", ErrConfig, s.Mechanism)
}

// partitionInfo returns the partitions of each topic, from a metadata
// request sent to a broker (kafka-go's Transport answers metadata from a
// cache that does not see topics other clients created). A missing topic
// is an error.
func (c *clients) partitionInfo(ctx context.Context, topics ...string) (map[string][]kafka.Partition, error) {
	var lastErr error
	for _, b := range c.brokers {
		conn, err := c.dialer.DialContext(ctx, "tcp", b)
		if err != nil {
			lastErr = err
			continue
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		} else {
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		}
		ps, err := conn.ReadPartitions(topics...)
		conn.Close()
		if err != nil {
			lastErr = err
			continue
		}
		out := make(map[string][]kafka.Partition, len(topics))
		for _, p := range ps {
			if p.Error != nil {
				return nil, fmt.Errorf("%w: topic %s/%d: %v", ErrKafka, p.Topic, p.ID, p.Error)
			}
			out[p.Topic] = append(out[p.Topic], p)
		}
		for _, t := range topics {
			if len(out[t]) == 0 {
				return nil, fmt.Errorf("%w: topic %s has no partitions (does it exist?)", ErrKafka, t)
			}
			slices.SortFunc(out[t], func(a, b kafka.Partition) int { return a.ID - b.ID })
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: metadata: %v", ErrKafka, lastErr)
}

// partitions returns the partition ids of each topic, sorted.
func (c *clients) partitions(ctx context.Context, topics ...string) (map[string][]int, error) {
	info, err := c.partitionInfo(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]int, len(info))
	for t, ps := range info {
		for _, p := range ps {
			out[t] = append(out[t], p.ID)
		}
	}
	return out, nil
}

// createTopics creates the topics that do not exist yet, with the broker's
// default replication and the given partition count and configs.
func (c *clients) createTopics(ctx context.Context, partitions int, configs map[string]string, topics ...string) error {
	req := &kafka.CreateTopicsRequest{}
	for _, t := range topics {
		tc := kafka.TopicConfig{Topic: t, NumPartitions: partitions, ReplicationFactor: -1}
		for k, v := range configs {
			tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
		}
		req.Topics = append(req.Topics, tc)
	}
	res, err := c.client.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("%w: create topics: %v", ErrKafka, err)
	}
	for t, e := range res.Errors {
		if e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
			return fmt.Errorf("%w: create topic %s: %v", ErrKafka, t, e)
		}
	}
	return nil
}

// endOffsets returns the first and the end (high watermark) offset of every
// partition of topic, asking each partition's leader.
func (c *clients) endOffsets(ctx context.Context, topic string) (first, end map[int]int64, err error) {
	info, err := c.partitionInfo(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	first, end = map[int]int64{}, map[int]int64{}
	for _, p := range info[topic] {
		addr := net.JoinHostPort(p.Leader.Host, strconv.Itoa(p.Leader.Port))
		conn, err := c.dialer.DialLeader(ctx, "tcp", addr, topic, p.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: offsets of %s/%d: %v", ErrKafka, topic, p.ID, err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		f, l, err := conn.ReadOffsets()
		conn.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: offsets of %s/%d: %v", ErrKafka, topic, p.ID, err)
		}
		first[p.ID], end[p.ID] = f, l
	}
	return first, end, nil
}

// scanTopic reads every message of topic from the given per-partition start
// offsets (or the first offset, when absent or older) up to the high
// watermark measured at the call, calling fn for each. It is used at start
// to learn what was already published.
func (c *clients) scanTopic(ctx context.Context, topic string, from map[int]int64, fn func(kafka.Message) error) error {
	first, end, err := c.endOffsets(ctx, topic)
	if err != nil {
		return err
	}
	parts := slices.Sorted(maps.Keys(end))
	for _, p := range parts {
		start := first[p]
		if o, ok := from[p]; ok && o > start {
			start = o
		}
		if start >= end[p] {
			continue
		}
		if err := c.scanPartition(ctx, topic, p, start, end[p], fn); err != nil {
			return err
		}
	}
	return nil
}

func (c *clients) scanPartition(ctx context.Context, topic string, p int, start, end int64, fn func(kafka.Message) error) error {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   c.brokers,
		Topic:     topic,
		Partition: p,
		Dialer:    c.dialer,
		MinBytes:  1,
		MaxBytes:  16 << 20,
		MaxWait:   200 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(start); err != nil {
		return fmt.Errorf("%w: scan %s/%d: %v", ErrKafka, topic, p, err)
	}
	// A partition whose last records were removed (compaction of the tail
	// cannot happen, but aborted transactions can leave markers) may never
	// deliver offset end−1: stop when nothing arrives for quiet.
	const quiet = 10 * time.Second
	for r.Offset() < end {
		mctx, cancel := context.WithTimeout(ctx, quiet)
		m, err := r.ReadMessage(mctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return fmt.Errorf("%w: scan %s/%d: %v", ErrKafka, topic, p, err)
		}
		if m.Offset >= end {
			return nil
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}
