package demo

import (
	"slices"
	"time"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/operator/keyfile"
	"github.com/dpstream/dpstream/schema"
)

// Partitions is the number of input partitions the demo creates: more
// than one, so that the per-partition watermarks matter, and few, so the
// demo stays small.
const Partitions = 2

// InProcessKafka is the Kafka section of an operator that runs against an
// in-process broker (the demo's, a benchmark's): brokers, one input topic,
// the output topic, group (also the release namespace) and instance (also
// the client id), topics created as needed, commits every 500 ms, short
// retry backoffs (100 ms doubling to 2 s), and the smallest session
// timeout Kafka accepts by default (group.min.session.timeout.ms = 6000).
func InProcessKafka(brokers []string, input, output, group, instance string) operator.KafkaConfig {
	k := operator.Default().Kafka
	k.Brokers = brokers
	k.InputTopics = []string{input}
	k.OutputTopic = output
	k.GroupID = group
	k.ReleaseNamespace = group
	k.Instance = instance
	k.ClientID = instance
	k.CreateTopics = true
	k.CommitInterval = 500 * time.Millisecond
	k.RetryBackoff = 100 * time.Millisecond
	k.RetryBackoffMax = 2 * time.Second
	k.SessionTimeout = 6 * time.Second
	return k
}

// OperatorConfig is the operator configuration of a demo run: the
// stream's schema, windows and bounds, the budget and mechanism of o, and
// the given brokers, input and output topics and consumer group (also the
// release namespace).
func OperatorConfig(o Options, brokers []string, input, output, group string) operator.Config {
	c := operator.Default()
	// The namespace is unique per run: a fixed --key-file with another
	// seed must never reuse release ids (equal ids carry equal noise).
	c.Kafka = InProcessKafka(brokers, input, output, group, "dpstream-demo")
	c.Schema = schema.Config{
		Format:     schema.FormatAuto,
		TimeField:  synthTimeField,
		TimeFormat: schema.TimeUnixMillis,
		UnitField:  synthUnitField,
		GroupBy:    []string{synthRegionField},
		Histogram:  &schema.Histogram{Field: synthStatusField, Categories: synthStatuses},
		ValueField: synthValueField, Lower: synthLower, Upper: synthUpper,
	}
	c.Windows.Size = WindowSize
	c.Windows.AllowedLateness = Lateness
	// The synthetic stream's first window: releases start there.
	c.Windows.Start = time.UnixMilli(streamBase).UTC().Format(time.RFC3339)
	// Windows close by the records' arrival times (the stream ends with a
	// closing reading on every partition); a partition read to its end is
	// advanced to the demo's clock (demoClock) minus this.
	c.Windows.IdleTimeout = 10 * time.Second
	c.Windows.Aggregates = slices.Clone(AggregateOrder)
	c.Windows.Running = true // running count and sum since the first window (running.go)
	// A 16-ary tree of depth 2: 256 leaves of 1.17 Wh over [0, 300] Wh.
	// The default depth 4 resolves far finer than a demo window's few
	// hundred readings per region can use, for twice the noise levels.
	c.Windows.QuantileBranching, c.Windows.QuantileDepth = 16, 2
	c.Windows.Quantiles = []float64{0.5, 0.9, 0.99}
	c.Bounds = operator.BoundsConfig{MaxGroups: synthBounds.MaxGroups, MaxBuckets: synthBounds.MaxBuckets,
		MaxPerBucket: synthBounds.MaxPerBucket, MaxValues: synthBounds.MaxValues}
	c.Privacy.Epsilon, c.Privacy.Delta = o.Epsilon, o.Delta
	c.Privacy.Mechanism = o.Mechanism
	c.Privacy.PublicGroups = nil
	for _, r := range Regions {
		c.Privacy.PublicGroups = append(c.Privacy.PublicGroups, []string{r})
	}
	c.Privacy.KeyFile, c.Privacy.KeyEnv = "", keyfile.Env // the key is passed with operator.WithKey
	c.Observability.Listen = ""
	c.Observability.LogLevel = o.LogLevel
	c.Observability.LogFormat = "text"
	// The demo's summary reads the exact input counters (synthetic data,
	// printed next to the truth anyway).
	c.Observability.SensitiveMetrics = true
	return c
}

// AggregateOrder is the display order of the aggregates.
var AggregateOrder = []string{operator.AggCount, operator.AggHistogram, operator.AggSum, operator.AggMean,
	operator.AggUnits, operator.AggVariance, operator.AggQuantiles}
