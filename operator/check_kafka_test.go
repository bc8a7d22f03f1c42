package operator

import (
	"context"
	"strings"
	"testing"
)

// TestKafkaCheckSecure: Check over every listener of the security test
// broker (TLS, mutual TLS, SASL_SSL with SCRAM, SASL_PLAINTEXT) passes
// every check of a good configuration (the test topics have CreateTime:
// a warning, not a failure), and fails the connection, naming the cause
// and skipping the rest, with a wrong SASL password (which no line
// holds).
func TestKafkaCheckSecure(t *testing.T) {
	t.Parallel() // waits on the broker mostly; own topics and groups (docs/development.md)
	sb := secureBrokerInfo(t)
	sec := &secrets{}
	for i, l := range goodListeners() {
		t.Run(l.name, func(t *testing.T) {
			c, cl := listenerConfig(t, sb, l, "dpstream-check")
			createTopic(t, cl, c.Kafka.InputTopics[0], 1)
			secureProduce(t, cl, c.Kafka.InputTopics[0], secureStream(uint64(200+i), 1, 10, sec).messages(0, c.Windows.AllowedLateness))
			res := Check(context.Background(), c, CheckOptions{})
			var text strings.Builder
			for _, r := range res {
				text.WriteString(r.String() + "\n")
			}
			for _, r := range res {
				if r.Status == CheckFail || r.Status == CheckSkipped {
					t.Errorf("%s:\n%s", r, text.String())
				}
			}
			if !strings.Contains(text.String(), "ok    input shape: every configured field is present") {
				t.Errorf("no input-shape line:\n%s", text.String())
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		c := testConfig([]string{sb.SASLPlaintext}, "in", "out", "g")
		c.Kafka.SASL = SASLConfig{Mechanism: "plain", Username: sb.User, Password: "wrong-password-0f3a"}
		res := Check(context.Background(), c, CheckOptions{})
		if len(res) != 2 || res[0].Status != CheckFail || !strings.Contains(res[0].Detail, "SASL authentication failed") ||
			res[1].Status != CheckSkipped || strings.Contains(res[0].Detail, "wrong-password-0f3a") {
			t.Errorf("Check with a wrong password: %v", res)
		}
	})
}
