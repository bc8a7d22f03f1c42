package operator

// registry.go is the client of the Confluent-compatible schema registry
// that framed Avro input (schema.registry.url) reads its writer schemas
// from: one GET of /schemas/ids/{id} per schema id, cached by
// schema.Schemas. It is a small net/http client: the one endpoint needs
// no more, and no maintained registry client module is available to the
// build.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dpstream/dpstream/schema"
)

// Registry client limits.
const (
	// registryTimeout bounds one schema request (connect to body). A
	// failed request is not retried here: the fetcher that met the id
	// waits with the Kafka retry backoff and decodes the message again
	// (registry_outage.go).
	registryTimeout = 10 * time.Second
	// registryMaxBody caps a schema response (1 MiB): a writer schema is
	// a few KiB.
	registryMaxBody = 1 << 20
	// registryNoSchema is the Confluent error code of "schema not found"
	// (GET /schemas/ids/{id}): the only answer that skips a message as
	// unknown_schema. A 404 without it (say, a registry URL with a wrong
	// path) is a failure to ask, which blocks the partition.
	registryNoSchema = 40403
)

// registryClient fetches writer schemas by id.
type registryClient struct {
	base     string // the URL without a trailing slash
	shown    string // base with any password in it redacted, for logs
	user     string
	password func() (string, error)
	http     *http.Client
	// ctx, once Run set it, ends every request in flight when Run ends
	// (shutdown stays prompt while a request hangs).
	ctx atomic.Pointer[context.Context]
}

// newRegistryClient builds the client of r (validated), whose settings are
// under key (schema.registry or output.registry) for errors.
func newRegistryClient(r schema.RegistryConfig, key string) (*registryClient, error) {
	tc := TLSConfig(r.TLS)
	tc.Enabled = tc.Enabled || strings.HasPrefix(r.URL, "https:")
	tlsCfg, err := tc.config()
	if err != nil {
		return nil, fmt.Errorf("%w (%s.tls)", err, key)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	base := strings.TrimRight(r.URL, "/")
	shown := base
	if u, err := url.Parse(base); err == nil {
		shown = u.Redacted()
	}
	c := &registryClient{base: base, shown: shown, user: r.Username, http: &http.Client{Transport: tr, Timeout: registryTimeout}}
	switch {
	case r.PasswordFile != "":
		file := r.PasswordFile
		if _, err := readPassword(file); err != nil {
			return nil, fmt.Errorf("%w (%s.password_file)", err, key)
		}
		c.password = func() (string, error) { return readPassword(file) }
	default:
		pw := r.Password
		c.password = func() (string, error) { return pw, nil }
	}
	return c, nil
}

// context returns the context requests run in: Run's, once set.
func (c *registryClient) context() context.Context {
	if p := c.ctx.Load(); p != nil {
		return *p
	}
	return context.Background()
}

// schemaResponse is the body of GET /schemas/ids/{id}; schemaType is
// absent for Avro.
type schemaResponse struct {
	Schema     string `json:"schema"`
	SchemaType string `json:"schemaType"`
}

// registryError is the body of a registry's error answer.
type registryError struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

// unavailable is a failure to ask the registry (a transport error, a
// timeout, a status that answers nothing): it wraps
// schema.ErrRegistryUnavailable and names the registry.
func (c *registryClient) unavailable(format string, a ...any) error {
	return fmt.Errorf("operator: registry %s: "+format+" (%w)", append(append([]any{c.shown}, a...), schema.ErrRegistryUnavailable)...)
}

// call runs one request (path below the base URL, body JSON or nil) and
// returns the status and the body (at most registryMaxBody+1 bytes). The
// error is a failure to ask (unavailable); a status is the caller's.
func (c *registryClient) call(method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(c.context(), registryTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, c.unavailable("%w", err)
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json, application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	if c.user != "" {
		pw, err := c.password()
		if err != nil {
			return 0, nil, c.unavailable("%w", err)
		}
		req.SetBasicAuth(c.user, pw)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, c.unavailable("%w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, registryMaxBody+1))
	if err != nil {
		return 0, nil, c.unavailable("%s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

// fetch runs one request for the schema of id (schema.SchemaFetcher). A
// failure to ask (transport, timeout, a status other than 200 and the
// definite 404) wraps schema.ErrRegistryUnavailable.
func (c *registryClient) fetch(id uint32) (string, error) {
	status, body, err := c.call(http.MethodGet, "/schemas/ids/"+strconv.FormatUint(uint64(id), 10), nil)
	var rerr registryError
	switch {
	case err != nil:
		return "", err
	case status == http.StatusNotFound && json.Unmarshal(body, &rerr) == nil && rerr.Code == registryNoSchema:
		return "", fmt.Errorf("%w: %d (registry status 404, error code %d)", schema.ErrUnknownSchema, id, registryNoSchema)
	case status != http.StatusOK:
		return "", c.unavailable("schema %d: status %d", id, status)
	case len(body) > registryMaxBody:
		return "", fmt.Errorf("%w: schema %d is larger than %d bytes", schema.ErrSchemaMismatch, id, registryMaxBody)
	}
	var sr schemaResponse
	if err := json.Unmarshal(body, &sr); err != nil {
		return "", c.unavailable("schema %d: %w", id, err)
	}
	if sr.SchemaType != "" && sr.SchemaType != "AVRO" {
		return "", fmt.Errorf("%w: schema %d is %s, not Avro", schema.ErrSchemaMismatch, id, sr.SchemaType)
	}
	return sr.Schema, nil
}

// newSchemas returns the schema cache of framed Avro input, or nil for
// the other formats. A schema that cannot be used is logged at ERROR once
// per id, naming the missing fields and the id (never message content); a
// failure to ask the registry at WARN once per outage
// (registryOutage).
func (o *Operator) newSchemas() (*schema.Schemas, error) {
	sc := o.cfg.Schema
	if sc.Format != schema.FormatAvro || sc.Registry.URL == "" {
		return nil, nil
	}
	c, err := newRegistryClient(sc.Registry, "schema.registry")
	if err != nil {
		return nil, err
	}
	o.registry = c
	report := func(id uint32, err error) {
		switch {
		case errors.Is(err, schema.ErrSchemaMismatch):
			o.log.Error("input schema does not fit the configuration; its messages are skipped as schema_mismatch", "schema_id", id, "err", err)
		case errors.Is(err, schema.ErrUnknownSchema):
			o.log.Error("input schema id not in the registry; its messages are skipped as unknown_schema", "schema_id", id, "err", err)
		default: // a failure to ask: fetch below
		}
	}
	fetch := func(id uint32) (string, error) {
		s, err := c.fetch(id)
		o.registryAnswered(c, err)
		return s, err
	}
	return schema.NewSchemas(sc, fetch, report)
}

// newInputDecoder returns a decoder of the input (one per fetcher).
func (o *Operator) newInputDecoder() (*schema.Decoder, error) {
	if o.schemas != nil {
		return schema.NewFramedDecoder(o.cfg.Schema, o.schemas)
	}
	return schema.NewDecoder(o.cfg.Schema)
}
