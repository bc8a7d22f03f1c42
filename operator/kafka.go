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
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

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
	tls       TLSConfig  // as configured, to name causes of TLS errors
	sasl      SASLConfig // as configured (the password is not read from it)
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
		tls:       k.TLS,
		sasl:      SASLConfig{Mechanism: k.SASL.Mechanism, Username: k.SASL.Username},
	}, nil
}

func (c *clients) close() { c.transport.CloseIdleConnections() }

// config builds the TLS configuration, or nil when TLS is off. The client
// certificate is read from its files at every handshake (connections are
// long-lived, so that is rare), so that a renewed certificate (cert-manager,
// a rotated Kubernetes Secret) is used by the next connection without a
// restart; it is also read once here, so that a bad file fails the start.
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
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			return nil, fmt.Errorf("%w: kafka.tls.cert_file/key_file: %v", ErrConfig, err)
		}
		certFile, keyFile := t.CertFile, t.KeyFile
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
			}
			return &cert, nil
		}
	}
	return cfg, nil
}

// readPassword reads a SASL password file (trailing newline ignored).
// Errors never include the file's content.
func readPassword(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: kafka.sasl.password_file: cannot read %s", ErrConfig, file)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// mechanism builds the SASL mechanism, or nil when SASL is off. With a
// password file the password is read again at every authentication, so
// that a rotated secret is used by the next connection without a restart.
// Errors never include the password.
func (s SASLConfig) mechanism() (sasl.Mechanism, error) {
	name := strings.ToLower(s.Mechanism)
	if name == "" {
		return nil, nil
	}
	var build func(pw string) (sasl.Mechanism, error)
	switch name {
	case "plain":
		build = func(pw string) (sasl.Mechanism, error) {
			return plain.Mechanism{Username: s.Username, Password: pw}, nil
		}
	case "scram-sha-256", "scram-sha-512":
		algo := scram.SHA256
		if name == "scram-sha-512" {
			algo = scram.SHA512
		}
		build = func(pw string) (sasl.Mechanism, error) {
			m, err := scram.Mechanism(algo, s.Username, pw)
			if err != nil {
				return nil, fmt.Errorf("%w: kafka.sasl: cannot set up %s", ErrConfig, name)
			}
			return m, nil
		}
	default:
		return nil, fmt.Errorf("%w: kafka.sasl.mechanism: %q is not plain, scram-sha-256 or scram-sha-512", ErrConfig, s.Mechanism)
	}
	if s.PasswordFile == "" {
		return build(s.Password)
	}
	pw, err := readPassword(s.PasswordFile)
	if err != nil {
		return nil, err
	}
	m, err := build(pw)
	if err != nil {
		return nil, err
	}
	return passwordFileMechanism{name: m.Name(), file: s.PasswordFile, build: build}, nil
}

// passwordFileMechanism is a SASL mechanism whose password is read from a
// file at every authentication.
type passwordFileMechanism struct {
	name  string
	file  string
	build func(pw string) (sasl.Mechanism, error)
}

// Name is the mechanism's name (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
func (m passwordFileMechanism) Name() string { return m.name }

// Start reads the password file and starts an authentication. A file
// that cannot be read now (it could be read at start) is a broker error
// to retry, not a configuration error that stops the operator: a secret
// being replaced may be missing for a moment.
func (m passwordFileMechanism) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	pw, err := readPassword(m.file)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka.sasl.password_file: cannot read %s", m.file)
	}
	mech, err := m.build(pw)
	if err != nil {
		return nil, nil, err
	}
	return mech.Start(ctx)
}

// partitionInfo returns the partitions of each topic, from a metadata
// request that never creates a topic (topicMetadata). A missing topic is
// an error that names it (ErrTopicMissing).
func (c *clients) partitionInfo(ctx context.Context, topics ...string) (map[string][]kafka.Partition, error) {
	res, err := c.topicMetadata(ctx, topics)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]kafka.Partition, len(topics))
	var missing []string
	for _, t := range res.Topics {
		switch {
		case errors.Is(t.Error, kafka.UnknownTopicOrPartition):
			missing = append(missing, strconv.Quote(t.Name))
			continue
		case errors.Is(t.Error, kafka.TopicAuthorizationFailed):
			return nil, fmt.Errorf("%w: topic %q: not authorized to describe it (the principal needs the Describe ACL on the topic)", ErrKafka, t.Name)
		case t.Error != nil:
			return nil, fmt.Errorf("%w: topic %q: %v", ErrKafka, t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			if p.Error != nil {
				return nil, fmt.Errorf("%w: topic %s/%d: %v", ErrKafka, p.Topic, p.ID, p.Error)
			}
			out[t.Name] = append(out[t.Name], p)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("%w: %s (dpstream never creates input topics; it creates the state and partials topics, "+
			"and the output and dead-letter topics with kafka.create_topics)", ErrTopicMissing, strings.Join(missing, ", "))
	}
	for _, t := range topics {
		if len(out[t]) == 0 {
			return nil, fmt.Errorf("%w: %q has no partitions", ErrTopicMissing, t)
		}
		slices.SortFunc(out[t], func(a, b kafka.Partition) int { return a.ID - b.ID })
	}
	return out, nil
}

// topicMetadata asks the brokers for the metadata of topics without ever
// creating one. kafka-go's Conn.ReadPartitions (and so Dialer.DialLeader,
// LookupPartition and the consumer group's leader) sends metadata requests
// that let a broker with auto.create.topics.enable=true create a missing
// topic: a misspelt input topic would then exist, empty, and be consumed.
// A Transport sends metadata requests (version ≥ 4) with
// AllowAutoTopicCreation false, but answers later ones from a cache that
// does not see topics other clients created since; so each call uses a
// fresh Transport whose first metadata request asks for exactly these
// topics. Errors talking to the brokers are classified by check.
func (c *clients) topicMetadata(ctx context.Context, topics []string) (*kafka.MetadataResponse, error) {
	if len(topics) == 0 { // a nil list would ask for every topic
		return &kafka.MetadataResponse{}, nil
	}
	t := &kafka.Transport{
		ClientID:       c.dialer.ClientID,
		DialTimeout:    c.dialer.Timeout,
		TLS:            c.dialer.TLS,
		SASL:           c.dialer.SASLMechanism,
		MetadataTopics: slices.Clone(topics),
	}
	defer t.CloseIdleConnections()
	if _, ok := ctx.Deadline(); !ok {
		// As check: a metadata answer takes milliseconds; 30 s
		// tolerates a loaded broker.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	cl := &kafka.Client{Addr: kafka.TCP(c.brokers...), Transport: t}
	res, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err == nil {
		return res, nil
	}
	if ctx.Err() == nil {
		if cerr := c.check(ctx); cerr != nil && ctx.Err() == nil {
			return nil, cerr
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%w: metadata: %v", ErrKafka, err)
}

// joinErrors joins the errors of several brokers: as they are when each
// is a *BrokerError (their text names the broker and the cause), wrapped
// in ErrKafka and op otherwise.
func joinErrors(op string, errs []error) error {
	for _, err := range errs {
		var be *BrokerError
		if !errors.As(err, &be) {
			return fmt.Errorf("%w: %s: %w", ErrKafka, op, errors.Join(errs...))
		}
	}
	return errors.Join(errs...)
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
		return c.explain(ctx, "create topics", err)
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
		conn, err := c.dialer.DialPartition(ctx, "tcp", addr, p) // not DialLeader: see topicMetadata
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

// kafka-go (v0.4.51) reports a record's timestamp as the batch's first
// timestamp plus the record's delta: the producer's CreateTime. On a topic
// with message.timestamp.type=LogAppendTime the broker leaves those as the
// producer sent them and writes its own time into the batch header
// (MaxTimestamp, with attribute bit 3 set); the Kafka protocol says
// consumers must then use that for every record of the batch, as the Java
// client and librdkafka do. kafka-go reads the header but does not expose
// it, so logAppendTime reads it from the Batch's unexported fields, at
// offsets found once by reflection (with every field's type checked) and
// read through unsafe pointers (≈ 7 ns a record, against ≈ 90 ns through
// reflect.Value, on the test machine). TestLogAppendTimeLayout fails if
// an upgrade of kafka-go moves the fields; then the broker test
// TestKafkaLogAppendTime says whether the new version reports
// LogAppendTime itself.

// batchLayout holds the byte offsets of the fields logAppendTime reads:
// Batch.msgs (*messageSetReader), its embedded *readerStack, the stack's
// current header, and in the header magic (int8), v2.attributes (int16)
// and v2.lastTimestamp (int64, the batch's MaxTimestamp). ok is false when
// the layout is not the expected one.
type batchLayout struct {
	msgs, stack, header, magic, attrs, maxTS uintptr
	ok                                       bool
}

// batchHeaderLayout is the layout of kafka.Batch, found at package
// initialisation (a package variable, not a sync.Once: logAppendTime runs
// for every record).
var batchHeaderLayout = findBatchLayout()

// findBatchLayout finds the layout of kafka.Batch by reflection.
func findBatchLayout() (l batchLayout) {
	field := func(t reflect.Type, name string, kind reflect.Kind) (reflect.StructField, bool) {
		if t.Kind() != reflect.Struct {
			return reflect.StructField{}, false
		}
		f, ok := t.FieldByName(name)
		if !ok || len(f.Index) != 1 || f.Type.Kind() != kind {
			return reflect.StructField{}, false
		}
		return f, true
	}
	msgs, ok := field(reflect.TypeFor[kafka.Batch](), "msgs", reflect.Pointer)
	if !ok {
		return l
	}
	stack, ok := field(msgs.Type.Elem(), "readerStack", reflect.Pointer)
	if !ok {
		return l
	}
	header, ok := field(stack.Type.Elem(), "header", reflect.Struct)
	if !ok {
		return l
	}
	magic, ok := field(header.Type, "magic", reflect.Int8)
	if !ok {
		return l
	}
	v2, ok := field(header.Type, "v2", reflect.Struct)
	if !ok {
		return l
	}
	attrs, ok := field(v2.Type, "attributes", reflect.Int16)
	if !ok {
		return l
	}
	maxTS, ok := field(v2.Type, "lastTimestamp", reflect.Int64)
	if !ok {
		return l
	}
	return batchLayout{msgs: msgs.Offset, stack: stack.Offset, header: header.Offset,
		magic: magic.Offset, attrs: v2.Offset + attrs.Offset, maxTS: v2.Offset + maxTS.Offset, ok: true}
}

// logAppendTimeFlag is attribute bit 3 of a v2 record batch: the batch's
// timestamps are LogAppendTime (Kafka protocol, "Record Batch").
const logAppendTimeFlag = 0x08

// logAppendTime returns the LogAppendTime of the record batch the message
// just read from b belongs to, and false when that batch has CreateTime
// (or is not a v2 batch, or the layout is unknown: then the message's own
// timestamp stands). b must not be read concurrently.
func logAppendTime(b *kafka.Batch) (time.Time, bool) {
	l := &batchHeaderLayout
	if !l.ok {
		return time.Time{}, false
	}
	msgs := *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(b), l.msgs))
	if msgs == nil {
		return time.Time{}, false
	}
	stack := *(*unsafe.Pointer)(unsafe.Add(msgs, l.stack))
	if stack == nil {
		return time.Time{}, false
	}
	h := unsafe.Add(stack, l.header)
	if *(*int8)(unsafe.Add(h, l.magic)) != 2 || *(*int16)(unsafe.Add(h, l.attrs))&logAppendTimeFlag == 0 {
		return time.Time{}, false
	}
	ts := *(*int64)(unsafe.Add(h, l.maxTS))
	if ts <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ts).UTC(), true
}

// timestampTypes returns message.timestamp.type of each topic
// ("CreateTime" or "LogAppendTime"), as the brokers describe it.
func (c *clients) timestampTypes(ctx context.Context, topics ...string) (map[string]string, error) {
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: t, ConfigNames: []string{"message.timestamp.type"},
		})
	}
	res, err := c.client.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, c.explain(ctx, "describe configs", err)
	}
	out := map[string]string{}
	for _, r := range res.Resources {
		if r.Error != nil {
			return nil, fmt.Errorf("%w: describe configs of %s: %v", ErrKafka, r.ResourceName, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "message.timestamp.type" {
				out[r.ResourceName] = e.ConfigValue
			}
		}
	}
	return out, nil
}

// checkTimestampTypes logs, once per input topic, a warning when the
// topic's record timestamps are CreateTime: the arrival times that decide
// lateness and close windows then come from the producers, and a privacy
// unit that can set them (a device producing directly) can again move
// other units' events out of a release. It never fails the start: a
// trusted producer that stamps records at send time is a valid setup
// (WithTrustedCreateTime: the caller is that producer, and it is silent).
func (o *Operator) checkTimestampTypes(ctx context.Context, cl *clients) {
	if !batchHeaderLayout.ok {
		o.log.Error("this build's kafka-go does not expose LogAppendTime record timestamps: arrival times are the producers' timestamps on every topic; " +
			"they must be set by a trusted producer (see TestLogAppendTimeLayout)")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	types, err := cl.timestampTypes(ctx, o.cfg.Kafka.InputTopics...)
	if err != nil {
		o.log.Warn("could not read the input topics' message.timestamp.type; record timestamps (arrival times) must come from the broker "+
			"(LogAppendTime) or a trusted producer", "err", err)
		return
	}
	for _, t := range o.cfg.Kafka.InputTopics {
		switch tt := types[t]; tt {
		case "LogAppendTime":
		case "CreateTime":
			if o.trustedCreateTime {
				continue
			}
			o.log.Warn("input topic has message.timestamp.type=CreateTime: record timestamps, which dpstream uses as arrival times "+
				"to decide lateness and to close windows, come from the producers. They must be set at send time by a producer the "+
				"privacy units do not control; otherwise one unit's timestamps can drop other units' events. "+
				"Prefer message.timestamp.type=LogAppendTime on the input topics", "topic", t)
		default:
			o.log.Warn("input topic's message.timestamp.type is unknown; record timestamps (arrival times) must come from the broker "+
				"(LogAppendTime) or a trusted producer", "topic", t, "message_timestamp_type", tt)
		}
	}
}

// clusterID returns the Kafka cluster id the brokers report ("" when the
// broker does not say), asking for the metadata of topic only.
func (c *clients) clusterID(ctx context.Context, topic string) (string, error) {
	res, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return "", fmt.Errorf("%w: cluster metadata: %v", ErrKafka, err)
	}
	return res.ClusterID, nil
}
