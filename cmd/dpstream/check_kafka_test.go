package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/internal/demo"
	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/operator/kafkatest"
)

// brokerHasTopic reports whether the broker knows topic, asking for every
// topic's metadata (a request naming no topic creates none).
func brokerHasTopic(t *testing.T, brokers []string, topic string) bool {
	t.Helper()
	conn, err := (&kafka.Dialer{Timeout: 10 * time.Second}).Dial("tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	ps, err := conn.ReadPartitions()
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(ps, func(p kafka.Partition) bool { return p.Topic == topic })
}

// meterTopic creates an input topic of two partitions holding n readings
// of the example config's schema (ts, meter, region, tariff, kwh, and an
// extra field), JSON.
func meterTopic(t *testing.T, brokers []string, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := "dpstream-check-in-" + demo.RandomID()
	if err := demo.CreateTopic(ctx, brokers, topic, 2); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint(i)), Value: fmt.Appendf(nil,
			`{"ts":%d,"meter":"m-%d","region":"north","tariff":"day","kwh":0.25,"fw":"1.2"}`, time.Now().UnixMilli(), i%20)})
	}
	for err := w.WriteMessages(ctx, msgs...); err != nil; err = w.WriteMessages(ctx, msgs...) {
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // a new topic may be unknown to the writer for a moment
	}
	return topic
}

// TestKafkaCheck: dpstream check on the development broker (which
// creates topics on metadata requests). A good config: every line ok or
// warn (the test topic has CreateTime), "check ok", the output and state
// topics not created by the check. A misspelt group-by field and a
// misspelt input topic: FAIL lines naming them, exit non-zero, and the
// misspelt topic still does not exist. The output holds field names only:
// no value, no unit id.
func TestKafkaCheck(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	t.Setenv("DPSTREAM_KEY", strings.Repeat("ab", 32))
	in := meterTopic(t, brokers, 60)
	out := "dpstream-check-out-" + demo.RandomID()
	base := []string{"check", "--config", exampleConfig, "--brokers", strings.Join(brokers, ","), "--output-topic", out,
		"--group-id", "dpstream-check-" + demo.RandomID()}

	got, err := runCLI(t, append(base, "--input-topics", in)...)
	if err != nil {
		t.Fatalf("check of a good config: %v\n%s", err, got)
	}
	for _, want := range []string{
		"config ok\n", "ok    connect: ", `ok    input topic "` + in + `": exists, 2 partitions`,
		`warn  input topic "` + in + `" timestamps: message.timestamp.type=CreateTime`,
		`ok    output topic "` + out + `": does not exist yet; dpstream will create it`,
		`ok    state topic "` + out + `.state": does not exist yet`,
		`ok    consumer group "`, `ok    input shape: every configured field is present`,
		`fields seen (in at least half of the sampled records): "fw", "kwh", "meter", "region", "tariff", "ts"`, "\ncheck ok\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("good config: output lacks %q:\n%s", want, got)
		}
	}
	for _, leak := range []string{"m-1", "north", "0.25", "1.2"} {
		if strings.Contains(got, leak) {
			t.Errorf("the output holds the value %q:\n%s", leak, got)
		}
	}
	for _, topic := range []string{out, out + ".state"} {
		if brokerHasTopic(t, brokers, topic) {
			t.Errorf("check created %s", topic)
		}
	}

	missing := in + "-typo"
	got, err = runCLI(t, append(base, "--input-topics", in+","+missing, "--set", "schema.group_by=regoin")...)
	if !errors.Is(err, operator.ErrCheckFailed) {
		t.Errorf("misspelt config: err = %v, want ErrCheckFailed\n%s", err, got)
	}
	for _, want := range []string{
		`FAIL  input topic "` + missing + `": operator: kafka: topic does not exist: "` + missing + `"`,
		`FAIL  input field "regoin" (group_by): absent in every sampled record`, `"region"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("misspelt config: output lacks %q:\n%s", want, got)
		}
	}
	if brokerHasTopic(t, brokers, missing) {
		t.Errorf("check created the misspelt input topic %s", missing)
	}
}
