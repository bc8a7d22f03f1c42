package operator

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// TestKafkaMisspeltGroupBy: with schema.group_by naming a field the input
// does not have ("regoin" for "region"), every event is skipped; the
// operator, run in-process on the real broker, reports it: /readyz
// answers 503 naming the field and the fields the records carry, and an
// ERROR line names the field. Before the input-shape check it was ready
// and published noise for every public group. The log holds no unit id
// (scanLogs).
func TestKafkaMisspeltGroupBy(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	in, out := uniqueName("dpstream-regoin-in"), uniqueName("dpstream-regoin-out")
	createTopic(t, cl, in, 2)
	s := genStream(21, 4, 200) // about 1600 records, more than shapeBlock
	if len(s.events) <= shapeBlock {
		t.Fatalf("the stream has %d events, want more than %d", len(s.events), shapeBlock)
	}
	c := testConfig(brokers, in, out, uniqueName("dpstream-regoin"))
	c.Kafka.CreateTopics = true
	c.Observability.Listen = "127.0.0.1:0"
	c.Schema.GroupBy = []string{"regoin"}
	produce(t, brokers, in, s.messages(0, c.Windows.AllowedLateness))
	op, _, sink := newLoggedTestOperator(t, c)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- op.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	addr := op.MetricsAddr(ctx)
	want := `input shape: field "regoin" (group_by) absent from more than 99% of the last 1000 decoded records; fields seen: "cat", "extra", "region", "ts", "user", "v"`
	var code int
	var body string
	// A bound for a failing test, not a timing assertion.
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if code, body, err = readyz(addr); err == nil && code == http.StatusServiceUnavailable && strings.Contains(body, want) {
			break
		}
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
		t.Fatalf("/readyz = %d %q; want 503 with %q", code, body, want)
	}
	var errLine bool
	for _, l := range strings.Split(sink.String(), "\n") {
		errLine = errLine || (strings.Contains(l, "level=ERROR") && strings.Contains(l, "field=regoin") && strings.Contains(l, "config=group_by"))
	}
	if !errLine {
		t.Errorf("no ERROR line names the field regoin; log:\n%s", sink.String())
	}
}
