package operator

// check_registry.go is the output-registry part of Check: with
// output.format avro, whether the registry of the release schema
// (output.registry, defaulting to schema.registry) answers, and whether
// the subject <output topic>-value would accept the release schema, so
// that a start that would wait for the registry, or be refused, shows
// before it.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/dpstream/dpstream/schema"
)

// checkOutputRegistry checks the registry of the release schema with
// output.format avro (nothing otherwise): GET /subjects (it answers, the
// credentials are accepted), then POST
// /compatibility/subjects/{subject}/versions/latest (the subject's latest
// version, if there is one, accepts the release schema). It registers
// nothing and changes no setting.
func checkOutputRegistry(ctx context.Context, cfg Config) []CheckResult {
	if cfg.Output.Format != FormatAvro {
		return nil
	}
	const name = "output registry"
	enc, err := schema.NewAvroReleases(cfg.Schema.GroupBy)
	if err != nil {
		return []CheckResult{{CheckFail, name, err.Error()}} // validated: never here
	}
	c, err := newReleaseRegistryClient(cfg)
	if err != nil {
		return []CheckResult{{CheckFail, name, err.Error()}}
	}
	c.ctx.Store(&ctx)
	subject := cfg.Kafka.releaseSubject()
	status, body, err := c.call(http.MethodGet, "/subjects", nil)
	if err == nil {
		err = c.answer("listing the subjects", status, body)
	}
	if err != nil {
		return []CheckResult{{CheckFail, name, registryCheckText(err) + "; " + subject + " not checked"}}
	}
	req, _ := json.Marshal(map[string]string{"schema": enc.Schema()})
	status, body, err = c.call(http.MethodPost, "/compatibility/subjects/"+url.PathEscape(subject)+"/versions/latest", req)
	var rerr registryError
	switch {
	case err != nil:
		return []CheckResult{{CheckFail, name, registryCheckText(err)}}
	case status == http.StatusNotFound && json.Unmarshal(body, &rerr) == nil &&
		(rerr.Code == registrySubjectNotFound || rerr.Code == registryVersionNotFound):
		return []CheckResult{{CheckOK, name, c.shown + " answers; subject " + subject +
			" does not exist yet: dpstream registers the release schema under it at start"}}
	}
	if err := c.answer("checking the compatibility of the release schema with "+subject, status, body); err != nil {
		return []CheckResult{{CheckFail, name, registryCheckText(err)}}
	}
	var r struct {
		Compatible *bool `json:"is_compatible"`
	}
	switch {
	case json.Unmarshal(body, &r) != nil || r.Compatible == nil:
		return []CheckResult{{CheckWarn, name, c.shown + " answers, but its compatibility check of " + subject +
			" has no is_compatible: not checked (the registration at start tells)"}}
	case !*r.Compatible:
		return []CheckResult{{CheckFail, name, "subject " + subject + " does not accept the release schema (not compatible with its latest version): " +
			"dpstream would refuse to start (a change of schema.group_by? see docs/formats.md, Avro releases)"}}
	}
	return []CheckResult{{CheckOK, name, c.shown + " answers; subject " + subject + " accepts the release schema (compatible with its latest version)"}}
}

// registryCheckText is err's text, saying for a failure to ask that the
// operator would wait at start.
func registryCheckText(err error) string {
	if errors.Is(err, schema.ErrRegistryUnavailable) {
		return "cannot reach the registry (dpstream would wait at start, retrying, and publish nothing): " + err.Error()
	}
	return err.Error()
}
