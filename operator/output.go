package operator

// output.go is the release format of the output topic (output.format):
// the msgpack release messages, or the JSON release records of
// schema.ReleaseRecords (one per released value, optionally in the Kafka
// Connect envelope), or the same records in Avro (output_avro.go), and how a record read back from the output topic is
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
	// FormatAvro: the JSON format's records in Avro, Confluent-framed,
	// with the writer schema registered in the schema registry under
	// <output topic>-value (output_avro.go).
	FormatAvro = "avro"
)

// OutputConfig says how releases are written to the output topic. It does
// not change a release's values (nor the digest that keys the noise): the
// same window gives the same values in every format.
type OutputConfig struct {
	// Format is FormatMsgpack (default), FormatJSON or FormatAvro.
	Format string `mapstructure:"format"`
	// ConnectSchema (json only) wraps each record in the Kafka Connect
	// envelope {"schema": …, "payload": …} that Connect's JsonConverter
	// reads with schemas.enable=true.
	ConnectSchema bool `mapstructure:"connect_schema"`
	// Registry (avro only) is the schema registry the release schema is
	// registered in; without a URL, schema.registry's settings (all of
	// them) are used. Operational, like schema.registry.
	Registry schema.RegistryConfig `mapstructure:"registry"`
}

// registry returns the registry of Avro releases: Registry, or the
// input's when Registry has no URL.
func (o OutputConfig) registry(sc schema.Config) schema.RegistryConfig {
	if o.Registry.URL != "" {
		return o.Registry
	}
	return sc.Registry
}

func (o OutputConfig) check(p *problems, sc schema.Config) {
	if o.ConnectSchema && o.Format != FormatJSON {
		p.addf("output.connect_schema: needs output.format json")
	}
	switch o.Format {
	case FormatMsgpack, FormatJSON:
		if o.Registry != (schema.RegistryConfig{}) {
			p.addf("output.registry: needs output.format avro")
		}
	case FormatAvro:
		switch {
		case o.Registry.URL == "" && o.Registry != (schema.RegistryConfig{}):
			p.addf("output.registry settings are set but output.registry.url is not")
		case o.registry(sc).URL == "":
			p.addf("output.format avro: needs output.registry.url (or schema.registry.url): the release schema is registered there")
		}
		for _, s := range o.Registry.Problems() {
			p.addf("output.%s", s)
		}
		if _, err := schema.NewAvroReleases(sc.GroupBy); err != nil {
			p.addf("output.format avro: %v", err)
		}
	default:
		p.addf("output.format: %q is not msgpack, json or avro", o.Format)
	}
}

// messages returns the output-topic messages of the release r (encoded
// as msgpack in value, its release key key): that one message, or with
// FormatJSON one record per value, or with FormatAvro (av: the encoder
// and the registered schema's id) one framed Avro record per value; each
// carries the Kafka timestamp at.
func (o OutputConfig) messages(topic, key string, value []byte, r *schema.Release, at time.Time, av *avroOutput) ([]kafka.Message, error) {
	var recs []schema.Record
	var err error
	switch {
	case o.Format == FormatJSON:
		recs, err = schema.ReleaseRecords(r, schema.JSONOptions{ConnectSchema: o.ConnectSchema})
	case o.Format == FormatAvro && av != nil:
		recs, err = av.enc.Records(r, av.id)
	case o.Format == FormatAvro:
		return nil, fmt.Errorf("operator: release %s: the Avro release schema is not registered", r.Aggregate)
	default:
		return []kafka.Message{{Topic: topic, Key: []byte(key), Value: value, Time: at}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("operator: encoding release %s as %s: %w", r.Aggregate, o.Format, err)
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
// JSON or Avro release record whose key is its value key, in any format
// whatever output.format says now (a deployment may have changed it). ok
// is false for anything else.
func readRelease(key, value []byte) (rb readBack, ok bool) {
	if r, err := schema.DecodeRelease(value); err == nil {
		return readBack{r.ReleaseID, r.Key(), r.WindowEnd}, r.Key() == string(key)
	}
	if r, err := schema.DecodeReleaseRecord(value); err == nil {
		return readBack{r.ReleaseID, r.ReleaseKey, r.WindowEnd}, r.Key == string(key)
	}
	if r, err := schema.DecodeReleaseAvroHead(value); err == nil {
		return readBack{r.ReleaseID, r.ReleaseKey, r.WindowEnd}, r.Key == string(key)
	}
	return readBack{}, false
}
