package operator

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestDeploymentCheck: a recorded identity with another output topic or
// group refuses the start, naming the field and both values; another
// cluster id, namespace, input topics or partials topic only warn; a
// record without an identity (earlier versions) or with the same one is
// accepted silently.
func TestDeploymentCheck(t *testing.T) {
	c := stateTestConfig()
	c.Kafka.ScaleOut = true
	var logs bytes.Buffer
	op, err := New(c, WithKey(testKey()), WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	op.identity = op.deployment("cluster-a")
	same := *op.identity
	cases := []struct {
		name   string
		change func(*deploymentRecord)
		refuse string // "": warn only
		warn   string
	}{
		{"output topic", func(d *deploymentRecord) { d.OutputTopic = "out-prod" }, "kafka.output_topic", ""},
		{"group", func(d *deploymentRecord) { d.GroupID = "g-prod" }, "kafka.group_id", ""},
		{"cluster", func(d *deploymentRecord) { d.ClusterID = "cluster-old" }, "", "another Kafka cluster"},
		{"namespace", func(d *deploymentRecord) { d.Namespace = "old" }, "", "kafka.release_namespace"},
		{"input topics", func(d *deploymentRecord) { d.InputTopics = []string{"in", "in2"} }, "", "kafka.input_topics"},
		{"partials topic", func(d *deploymentRecord) { d.PartialsTopic = "p-old" }, "", "kafka.partials_topic"},
		{"same", func(*deploymentRecord) {}, "", ""},
	}
	for _, tc := range cases {
		logs.Reset()
		d := same
		d.InputTopics = append([]string(nil), same.InputTopics...)
		tc.change(&d)
		err := op.checkDeployment(&recovered{deployment: &d})
		switch {
		case tc.refuse != "":
			if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), tc.refuse) || !strings.HasPrefix(err.Error(), "operator: ") {
				t.Errorf("%s: err %v, want a refusal naming %s", tc.name, err, tc.refuse)
			}
		case err != nil:
			t.Errorf("%s: err %v, want a warning only", tc.name, err)
		case tc.warn == "" && logs.Len() > 0:
			t.Errorf("%s: unexpected log %s", tc.name, logs.String())
		case tc.warn != "" && !strings.Contains(logs.String(), tc.warn):
			t.Errorf("%s: log %q does not warn about %s", tc.name, logs.String(), tc.warn)
		}
	}
	// A record of an earlier version: no identity, read as before.
	s, err := decodeState([]byte(`{"v":2,"closed_through":60000,"output_offsets":{"0":3},"origin":60000,"digest":"d"}`))
	if err != nil || s.Deployment != nil || s.PartialsBoundFrom != 0 || s.ClosedThrough != 60000 {
		t.Fatalf("earlier record: %+v, %v", s, err)
	}
	if err := op.checkDeployment(&recovered{deployment: s.Deployment}); err != nil {
		t.Errorf("earlier record without an identity: %v", err)
	}
}
