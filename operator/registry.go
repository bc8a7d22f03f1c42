package operator

// registry.go is the client of the Confluent-compatible schema registry
// that framed Avro input (schema.registry.url) reads its writer schemas
// from: one GET of /schemas/ids/{id} per schema id, cached by
// schema.Schemas. It is a small net/http client: the one endpoint needs
// no more, and no maintained registry client module is available to the
// build.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dpstream/dpstream/schema"
)

// Registry client limits.
const (
	// registryTimeout bounds one schema request (connect to body).
	registryTimeout = 10 * time.Second
	// registryAttempts is how often a failing request is tried before the
	// message is counted as unknown_schema (the id is tried again at its
	// next message); registryBackoff is the wait after the first failure,
	// doubled after each.
	registryAttempts = 3
	registryBackoff  = 250 * time.Millisecond
	// registryMaxBody caps a schema response (1 MiB): a writer schema is
	// a few KiB.
	registryMaxBody = 1 << 20
)

// registryClient fetches writer schemas by id.
type registryClient struct {
	base     string // the URL without a trailing slash
	user     string
	password func() (string, error)
	http     *http.Client
}

// newRegistryClient builds the client of r (validated).
func newRegistryClient(r schema.RegistryConfig) (*registryClient, error) {
	tc := TLSConfig(r.TLS)
	tc.Enabled = tc.Enabled || strings.HasPrefix(r.URL, "https:")
	tlsCfg, err := tc.config()
	if err != nil {
		return nil, fmt.Errorf("%w (schema.registry.tls)", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	c := &registryClient{base: strings.TrimRight(r.URL, "/"), user: r.Username, http: &http.Client{Transport: tr, Timeout: registryTimeout}}
	switch {
	case r.PasswordFile != "":
		file := r.PasswordFile
		if _, err := readPassword(file); err != nil {
			return nil, fmt.Errorf("%w (schema.registry.password_file)", err)
		}
		c.password = func() (string, error) { return readPassword(file) }
	default:
		pw := r.Password
		c.password = func() (string, error) { return pw, nil }
	}
	return c, nil
}

// schemaResponse is the body of GET /schemas/ids/{id}; schemaType is
// absent for Avro.
type schemaResponse struct {
	Schema     string `json:"schema"`
	SchemaType string `json:"schemaType"`
}

// fetch returns the Avro schema of id, trying registryAttempts times
// (schema.SchemaFetcher).
func (c *registryClient) fetch(id uint32) (string, error) {
	wait := registryBackoff
	var err error
	for attempt := 1; ; attempt++ {
		var s string
		s, err = c.get(id)
		if err == nil || errors.Is(err, schema.ErrUnknownSchema) || errors.Is(err, schema.ErrSchemaMismatch) || attempt == registryAttempts {
			return s, err
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// get runs one request for the schema of id.
func (c *registryClient) get(id uint32) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/schemas/ids/"+strconv.FormatUint(uint64(id), 10), nil)
	if err != nil {
		return "", fmt.Errorf("operator: schema registry: %w", err)
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json, application/json")
	if c.user != "" {
		pw, err := c.password()
		if err != nil {
			return "", err
		}
		req.SetBasicAuth(c.user, pw)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("operator: schema registry: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, registryMaxBody+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("operator: schema registry: reading schema %d: %w", id, err)
	case resp.StatusCode == http.StatusNotFound:
		return "", fmt.Errorf("%w: %d (registry status 404)", schema.ErrUnknownSchema, id)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("operator: schema registry: schema %d: status %d", id, resp.StatusCode)
	case len(body) > registryMaxBody:
		return "", fmt.Errorf("%w: schema %d is larger than %d bytes", schema.ErrSchemaMismatch, id, registryMaxBody)
	}
	var sr schemaResponse
	if err := json.Unmarshal(body, &sr); err != nil {
		return "", fmt.Errorf("operator: schema registry: schema %d: %w", id, err)
	}
	if sr.SchemaType != "" && sr.SchemaType != "AVRO" {
		return "", fmt.Errorf("%w: schema %d is %s, not Avro", schema.ErrSchemaMismatch, id, sr.SchemaType)
	}
	return sr.Schema, nil
}

// newSchemas returns the schema cache of framed Avro input, or nil for
// the other formats. A schema that cannot be used is logged at ERROR once
// per id, naming the missing fields and the id (never message content);
// a failed fetch at WARN, at each message of the id until one succeeds.
func (o *Operator) newSchemas() (*schema.Schemas, error) {
	sc := o.cfg.Schema
	if sc.Format != schema.FormatAvro || sc.Registry.URL == "" {
		return nil, nil
	}
	c, err := newRegistryClient(sc.Registry)
	if err != nil {
		return nil, err
	}
	report := func(id uint32, err error) {
		switch {
		case errors.Is(err, schema.ErrSchemaMismatch):
			o.log.Error("input schema does not fit the configuration; its messages are skipped as schema_mismatch", "schema_id", id, "err", err)
		case errors.Is(err, schema.ErrUnknownSchema):
			o.log.Error("input schema id not in the registry; its messages are skipped as unknown_schema", "schema_id", id, "err", err)
		default:
			o.log.Warn("schema registry failed; the message is skipped as unknown_schema", "schema_id", id, "err", err)
		}
	}
	return schema.NewSchemas(sc, c.fetch, report)
}

// newInputDecoder returns a decoder of the input (one per fetcher).
func (o *Operator) newInputDecoder() (*schema.Decoder, error) {
	if o.schemas != nil {
		return schema.NewFramedDecoder(o.cfg.Schema, o.schemas)
	}
	return schema.NewDecoder(o.cfg.Schema)
}
