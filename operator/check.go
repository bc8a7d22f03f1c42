package operator

// check.go is what `dpstream check` does after validating the
// configuration: it connects to the brokers as the operator would (TLS,
// SASL), checks the topics without creating any, the consumer group's
// offsets, the input topics' timestamp type, and samples the input's
// shape (field names only, as the operator's input-shape check).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// CheckStatus is the outcome of one check.
type CheckStatus string

// The outcomes of a check.
const (
	// CheckOK: the check passed.
	CheckOK CheckStatus = "ok"
	// CheckWarn: it passed, with something the operator should know.
	CheckWarn CheckStatus = "warn"
	// CheckFail: the operator would not work as configured.
	CheckFail CheckStatus = "FAIL"
	// CheckSkipped: not checked (a check it depends on failed, or it
	// cannot be checked without side effects).
	CheckSkipped CheckStatus = "skip"
)

// CheckResult is the outcome of one check of Check.
type CheckResult struct {
	// Status is the outcome.
	Status CheckStatus
	// Name says what was checked ("connect", "input topic \"x\"").
	Name string
	// Detail says what was found, and for a failure what to change.
	Detail string
}

// String is "STATUS  NAME: DETAIL".
func (r CheckResult) String() string { return fmt.Sprintf("%-4s  %s: %s", r.Status, r.Name, r.Detail) }

// CheckOptions are the settings of Check.
type CheckOptions struct {
	// Timeout bounds the whole check (default DefaultCheckTimeout).
	Timeout time.Duration
	// Sample is the most input records read for the shape check
	// (default shapeBlock), the latest ones of each partition.
	Sample int
}

// DefaultCheckTimeout is Check's default time limit: a healthy broker
// answers every request in milliseconds; 30 s tolerates a loaded one,
// and covers the 10 s connection timeout of an unreachable broker.
const DefaultCheckTimeout = 30 * time.Second

// ErrCheckFailed is returned by Check's callers when a check failed.
var ErrCheckFailed = errors.New("operator: check failed")

// Check connects to the brokers of cfg (a valid configuration) and
// checks, without creating anything or writing a record: the connection
// (TLS, SASL), that the input topics exist, that the output, state,
// partials and dead-letter topics exist or may be created (a create
// request that only validates), that the consumer group's offsets can be
// read, the input topics' message.timestamp.type, and the shape of the
// latest input records (field names only); with output.format avro, the
// registry of the release schema (checkOutputRegistry). A failed
// connection skips the checks of the brokers.
func Check(ctx context.Context, cfg Config, opts CheckOptions) []CheckResult {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultCheckTimeout
	}
	if opts.Sample <= 0 {
		opts.Sample = shapeBlock
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	k := cfg.Kafka
	cl, err := newClients(k)
	if err != nil {
		return []CheckResult{{CheckFail, "connect", err.Error()}}
	}
	defer cl.close()
	if err := cl.check(ctx); err != nil {
		return append([]CheckResult{{CheckFail, "connect", timeoutText(ctx, err, opts.Timeout)},
			{CheckSkipped, "topics, group, input shape", "not checked: no connection"}}, checkOutputRegistry(ctx, cfg)...)
	}
	out := []CheckResult{{CheckOK, "connect", fmt.Sprintf("%s (TLS %s, SASL %s)",
		strings.Join(k.Brokers, ","), onOff(k.TLS.Enabled), orOff(k.SASL.Mechanism))}}
	inputs, res := checkInputs(ctx, cl, k, opts.Timeout)
	out = append(out, res...)
	out = append(out, checkOwnTopics(ctx, cl, k, opts.Timeout)...)
	if len(inputs) > 0 {
		out = append(out, checkGroup(ctx, cl, k.GroupID, inputs, opts.Timeout))
		out = append(out, checkShape(ctx, cl, cfg, inputs, opts.Sample)...)
	}
	return append(out, checkOutputRegistry(ctx, cfg)...)
}

// timeoutText is err's text, or a sentence naming the timeout when ctx
// ended.
func timeoutText(ctx context.Context, err error, timeout time.Duration) string {
	if ctx.Err() != nil {
		return fmt.Sprintf("no answer within %v (--timeout): %v", timeout, err)
	}
	return err.Error()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return s
}

// checkInputs checks that each input topic exists (without creating it)
// and its timestamp type; it returns the partitions of the topics that
// exist.
func checkInputs(ctx context.Context, cl *clients, k KafkaConfig, timeout time.Duration) (map[string][]kafka.Partition, []CheckResult) {
	var out []CheckResult
	found := map[string][]kafka.Partition{}
	for _, t := range k.InputTopics {
		name := "input topic " + strconv.Quote(t)
		info, err := cl.partitionInfo(ctx, t)
		if err != nil {
			out = append(out, CheckResult{CheckFail, name, timeoutText(ctx, err, timeout)})
			continue
		}
		found[t] = info[t]
		out = append(out, CheckResult{CheckOK, name, fmt.Sprintf("exists, %d partitions", len(info[t]))})
	}
	if len(found) == 0 {
		return nil, out
	}
	var topics []string
	for _, t := range k.InputTopics {
		if _, ok := found[t]; ok {
			topics = append(topics, t)
		}
	}
	types, err := cl.timestampTypes(ctx, topics...)
	if err != nil {
		return found, append(out, CheckResult{CheckWarn, "input timestamp type", "cannot read message.timestamp.type (DescribeConfigs): " + err.Error()})
	}
	for _, t := range topics {
		name := "input topic " + strconv.Quote(t) + " timestamps"
		switch tt := types[t]; tt {
		case "LogAppendTime":
			out = append(out, CheckResult{CheckOK, name, "message.timestamp.type=LogAppendTime: arrival times come from the broker"})
		default:
			out = append(out, CheckResult{CheckWarn, name, "message.timestamp.type=" + tt + ": arrival times (lateness, window closing) come from the producers, " +
				"which the privacy units must not control; prefer LogAppendTime (docs/operations.md)"})
		}
	}
	return found, out
}

// checkOwnTopics checks the topics the operator writes: each exists, or
// a create request that only validates says the operator may create it
// (the state and partials topics always; the output and dead-letter
// topics with kafka.create_topics). Write access is not checked: a test
// record would be visible to the topics' readers.
func checkOwnTopics(ctx context.Context, cl *clients, k KafkaConfig, timeout time.Duration) []CheckResult {
	type own struct {
		role, topic string
		create      bool
	}
	topics := []own{{"output", k.OutputTopic, k.CreateTopics}, {"state", k.stateTopic(), true}}
	if k.ScaleOut {
		topics = append(topics, own{"partials", k.partialsTopic(), true})
	}
	if k.DeadLetterTopic != "" {
		topics = append(topics, own{"dead-letter", k.DeadLetterTopic, k.CreateTopics})
	}
	var out []CheckResult
	for _, o := range topics {
		name := o.role + " topic " + strconv.Quote(o.topic)
		_, err := cl.partitionInfo(ctx, o.topic)
		switch {
		case err == nil:
			out = append(out, CheckResult{CheckOK, name, "exists (write access is checked at the first write: a test record would be visible to its readers)"})
		case !errors.Is(err, ErrTopicMissing):
			out = append(out, CheckResult{CheckFail, name, timeoutText(ctx, err, timeout)})
		case !o.create:
			out = append(out, CheckResult{CheckFail, name, "does not exist, and kafka.create_topics is off: create it, or set kafka.create_topics"})
		default:
			if err := cl.validateCreate(ctx, o.topic); err != nil {
				out = append(out, CheckResult{CheckFail, name, "does not exist, and may not be created: " + err.Error()})
			} else {
				out = append(out, CheckResult{CheckOK, name, "does not exist yet; dpstream will create it (a create request that only validates succeeded)"})
			}
		}
	}
	return out
}

// validateWait bounds a create request that only validates. kafka-go's
// Transport, after a successful CreateTopics answer, waits until the
// topics appear in its metadata — never, when nothing was created — and
// then returns the answer when its context ends: so the answer of a
// successful validation arrives after validateWait. A broker answers in
// milliseconds; 2 s tolerates a loaded one.
const validateWait = 2 * time.Second

// validateCreate asks the controller whether topic could be created
// (CreateTopics with validate_only: nothing is created), which checks
// the Create ACL.
func (c *clients) validateCreate(ctx context.Context, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, validateWait)
	defer cancel()
	res, err := c.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics:       []kafka.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: -1}},
		ValidateOnly: true,
	})
	if err != nil {
		return c.explain(ctx, "create topics (validate only)", err)
	}
	if e := res.Errors[topic]; e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
		return fmt.Errorf("%w: create topic %s: %v", ErrKafka, topic, e)
	}
	return nil
}

// checkGroup reads the consumer group's committed offsets of the input
// partitions (OffsetFetch: the Describe ACL on the group; nothing is
// committed or joined).
func checkGroup(ctx context.Context, cl *clients, group string, inputs map[string][]kafka.Partition, timeout time.Duration) CheckResult {
	name := "consumer group " + strconv.Quote(group)
	req := &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{}}
	for t, ps := range inputs {
		for _, p := range ps {
			req.Topics[t] = append(req.Topics[t], p.ID)
		}
	}
	var err error
	for {
		err = offsetFetchError(cl.client.OffsetFetch(ctx, req))
		// A group's coordinator can be moving or loading (on a fresh
		// cluster, __consumer_offsets is created by this very request):
		// retriable, so ask again until the timeout.
		if !errors.Is(err, kafka.NotCoordinatorForGroup) && !errors.Is(err, kafka.GroupCoordinatorNotAvailable) &&
			!errors.Is(err, kafka.GroupLoadInProgress) || !sleep(ctx, coordinatorRetry) {
			break
		}
	}
	if err != nil {
		return CheckResult{CheckFail, name, "cannot read its offsets (the principal needs Read on the group): " + timeoutText(ctx, err, timeout)}
	}
	return CheckResult{CheckOK, name, "its committed offsets can be read"}
}

// coordinatorRetry is the pause before asking again for a group's offsets
// when its coordinator is not ready (a quarter second: a coordinator
// loads in well under a second on a small cluster; the check's --timeout
// bounds the whole).
const coordinatorRetry = 250 * time.Millisecond

// offsetFetchError is the first error of an OffsetFetch answer: the
// request's, the response's, or a partition's.
func offsetFetchError(res *kafka.OffsetFetchResponse, err error) error {
	if err == nil {
		err = res.Error
	}
	for _, ps := range resTopics(res) {
		for _, p := range ps {
			if err == nil && p.Error != nil {
				err = p.Error
			}
		}
	}
	return err
}

// resTopics is res.Topics, nil when res is nil.
func resTopics(res *kafka.OffsetFetchResponse) map[string][]kafka.OffsetFetchPartition {
	if res == nil {
		return nil
	}
	return res.Topics
}
