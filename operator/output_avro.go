package operator

// output_avro.go is output.format avro: the release records of
// schema.AvroReleases, Confluent-framed with the id of their writer
// schema, which Run registers once at start in the schema registry
// (output.registry, defaulting to schema.registry) under the subject
// <output topic>-value (TopicNameStrategy), so that Connect's
// AvroConverter, ksqlDB/Flink SQL and any Confluent-compatible consumer
// read releases without dpstream code. The schema is fixed by the
// group-by fields, and the registry gives the same schema the same id, so
// a replayed window's records are byte-identical. The subject's
// compatibility is set to BACKWARD when the registry reports none for it
// (a later release schema only adds fields with defaults); a level
// already set is left alone.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/dpstream/dpstream/schema"
)

// ErrRegistry is the error of a schema registry that refuses the release
// schema (an incompatible schema, bad credentials): Run returns it at
// start.
var ErrRegistry = errors.New("operator: schema registry")

// releaseCompatibility is the compatibility level dpstream sets for the
// release subject when it has none: new schemas read old records.
const releaseCompatibility = "BACKWARD"

// avroOutput is what the Avro release records need: the encoder and the
// registered id of its schema.
type avroOutput struct {
	enc *schema.AvroReleases
	id  uint32
}

// releaseSubject is the registry subject of the release schema
// (TopicNameStrategy).
func (k KafkaConfig) releaseSubject() string { return k.OutputTopic + "-value" }

// startRegistries binds the input's registry client to Run's ctx
// (requests in flight end with Run) and, with output.format avro,
// registers the release schema. stop says Run must return err: nil when
// ctx ended meanwhile, else the refusal.
func (o *Operator) startRegistries(ctx context.Context) (stop bool, err error) {
	if o.registry != nil {
		o.registry.ctx.Store(&ctx)
	}
	if o.cfg.Output.Format != FormatAvro {
		return false, nil
	}
	if err := o.registerReleaseSchema(ctx); err != nil {
		if ctx.Err() != nil {
			o.log.Info("stopped before the release schema was registered")
			return true, nil
		}
		o.health.set(false, "refused to start: see the log")
		return true, err
	}
	return false, nil
}

// registerReleaseSchema registers the release schema and sets o.avroOut;
// a failure to ask the registry is retried with the Kafka backoff until
// ctx ends (then it returns ctx's error), a refusal is an error wrapping
// ErrRegistry.
func (o *Operator) registerReleaseSchema(ctx context.Context) error {
	enc, err := schema.NewAvroReleases(o.cfg.Schema.GroupBy)
	if err != nil {
		return err // validated: never here
	}
	c, err := newReleaseRegistryClient(o.cfg)
	if err != nil {
		return err
	}
	c.ctx.Store(&ctx)
	subject := o.cfg.Kafka.releaseSubject()
	backoff := o.cfg.Kafka.RetryBackoff
	for {
		id, level, set, err := c.registerRelease(subject, enc.Schema())
		switch {
		case err == nil:
			o.avroOut = &avroOutput{enc: enc, id: id}
			o.log.Info("release schema registered", "url", c.shown, "subject", subject, "schema_id", id,
				"compatibility", level, "compatibility_set", set)
			return nil
		case !errors.Is(err, schema.ErrRegistryUnavailable):
			return err
		}
		o.m.registryErrors.Inc()
		o.log.Warn("cannot register the release schema; retrying", "url", c.shown, "subject", subject, "err", err, "backoff", backoff)
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, o.cfg.Kafka.RetryBackoffMax)
	}
}

// newReleaseRegistryClient returns the client of the registry of the
// release schema: output.registry, defaulting to schema.registry.
func newReleaseRegistryClient(cfg Config) (*registryClient, error) {
	key := "output.registry"
	if cfg.Output.Registry.URL == "" {
		key = "schema.registry"
	}
	return newRegistryClient(cfg.Output.registry(cfg.Schema), key)
}

// registerRelease registers schemaJSON under subject (POST
// /subjects/{subject}/versions: the same schema gets its existing id) and
// then the subject's compatibility: the level the registry reports for
// it (GET /config/{subject}), or, when it reports none (404), sets
// releaseCompatibility (PUT /config/{subject}) and says so (set).
func (c *registryClient) registerRelease(subject, schemaJSON string) (id uint32, level string, set bool, err error) {
	path := "/subjects/" + url.PathEscape(subject)
	body, _ := json.Marshal(map[string]string{"schema": schemaJSON})
	status, resp, err := c.call(http.MethodPost, path+"/versions", body)
	if err != nil {
		return 0, "", false, err
	}
	if err := c.answer("registering the release schema under "+subject, status, resp); err != nil {
		return 0, "", false, err
	}
	var r struct {
		ID uint32 `json:"id"`
	}
	if json.Unmarshal(resp, &r) != nil || r.ID == 0 {
		return 0, "", false, c.unavailable("registering under %s: no schema id in the answer", subject)
	}
	status, resp, err = c.call(http.MethodGet, "/config/"+url.PathEscape(subject), nil)
	if err != nil {
		return 0, "", false, err
	}
	if status == http.StatusNotFound {
		body, _ := json.Marshal(map[string]string{"compatibility": releaseCompatibility})
		if status, resp, err = c.call(http.MethodPut, "/config/"+url.PathEscape(subject), body); err != nil {
			return 0, "", false, err
		}
		if err := c.answer("setting the compatibility of "+subject, status, resp); err != nil {
			return 0, "", false, err
		}
		return r.ID, releaseCompatibility, true, nil
	}
	if err := c.answer("reading the compatibility of "+subject, status, resp); err != nil {
		return 0, "", false, err
	}
	var cfg struct {
		Level string `json:"compatibilityLevel"`
	}
	_ = json.Unmarshal(resp, &cfg)
	return r.ID, cfg.Level, false, nil
}

// answer classifies a registry status: nil for 200, a failure to ask
// (retried) for 5xx and 429, else a refusal wrapping ErrRegistry with the
// registry's message (about the schema or the credentials, never data).
func (c *registryClient) answer(what string, status int, body []byte) error {
	switch {
	case status == http.StatusOK:
		return nil
	case status >= 500 || status == http.StatusTooManyRequests:
		return c.unavailable("%s: status %d", what, status)
	}
	var e registryError
	_ = json.Unmarshal(body, &e)
	hint := ""
	switch status {
	case http.StatusConflict:
		hint = ": the schema is not compatible with the subject's earlier versions (a change of schema.group_by? see docs/formats.md, Avro releases)"
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = ": check output.registry.username and the password"
	}
	return fmt.Errorf("%w %s: %s: status %d, error code %d %q%s", ErrRegistry, c.shown, what, status, e.Code, e.Message, hint)
}
