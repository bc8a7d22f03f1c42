package operator

// output.go is the release format of the output topic (output.format):
// the msgpack release messages, or the JSON release records of
// schema.ReleaseRecords (one per released value, optionally in the Kafka
// Connect envelope), and how a record read back from the output topic is
// recognised as one of this operator's releases (state.go, intent.go).

import (
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
)

// The release formats of output.format.
const (
	// FormatMsgpack: one msgpack release message per release (window ×
	// aggregate × group), keyed by the release key (the default).
	FormatMsgpack = "msgpack"
	// FormatJSON: one flat JSON record per released value, keyed by
	// schema.ValueKey.
	FormatJSON = "json"
)

// OutputConfig says how releases are written to the output topic. It does
// not change a release's values (nor the digest that keys the noise): the
// same window gives the same values in every format.
type OutputConfig struct {
	// Format is FormatMsgpack (default) or FormatJSON.
	Format string `mapstructure:"format"`
	// ConnectSchema (json only) wraps each record in the Kafka Connect
	// envelope {"schema": …, "payload": …} that Connect's JsonConverter
	// reads with schemas.enable=true.
	ConnectSchema bool `mapstructure:"connect_schema"`
}

func (o OutputConfig) check(p *problems) {
	switch o.Format {
	case FormatMsgpack:
		if o.ConnectSchema {
			p.addf("output.connect_schema: needs output.format json")
		}
	case FormatJSON:
	default:
		p.addf("output.format: %q is not msgpack or json", o.Format)
	}
}

// messages returns the output-topic messages of the release r (encoded
// as msgpack in value, its release key key): that one message, or with
// FormatJSON one record per value; each carries the Kafka timestamp at.
func (o OutputConfig) messages(topic, key string, value []byte, r *schema.Release, at time.Time) ([]kafka.Message, error) {
	if o.Format != FormatJSON {
		return []kafka.Message{{Topic: topic, Key: []byte(key), Value: value, Time: at}}, nil
	}
	recs, err := schema.ReleaseRecords(r, schema.JSONOptions{ConnectSchema: o.ConnectSchema})
	if err != nil {
		return nil, fmt.Errorf("operator: encoding release %s as JSON: %w", r.Aggregate, err)
	}
	msgs := make([]kafka.Message, len(recs))
	for i, rec := range recs {
		msgs[i] = kafka.Message{Topic: topic, Key: []byte(rec.Key), Value: rec.Value, Time: at}
	}
	return msgs, nil
}

// readBack is what the operator needs of a release read back from the
// output topic.
type readBack struct {
	releaseID, releaseKey string
	windowEnd             int64
}

// readRelease recognises a message of the output topic as one of a
// release's: a msgpack release message whose key is its release key, or a
// JSON release record whose key is its value key, in either format
// whatever output.format says now (a deployment may have changed it). ok
// is false for anything else.
func readRelease(key, value []byte) (rb readBack, ok bool) {
	if r, err := schema.DecodeRelease(value); err == nil {
		return readBack{r.ReleaseID, r.Key(), r.WindowEnd}, r.Key() == string(key)
	}
	if r, err := schema.DecodeReleaseRecord(value); err == nil {
		return readBack{r.ReleaseID, r.ReleaseKey, r.WindowEnd}, r.Key == string(key)
	}
	return readBack{}, false
}
