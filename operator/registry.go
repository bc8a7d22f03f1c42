package operator

// registry.go is the client of the Confluent-compatible schema registry
// that framed Avro and Protobuf input (schema.registry.url) reads its
// writer schemas from: one GET of /schemas/ids/{id} per schema id, cached
// by schema.Schemas, and for a Protobuf schema that imports other files
// one GET of /subjects/{subject}/versions/{version} per reference. It is
// a small net/http client: the two endpoints need no more, and no
// maintained registry client module is available to the build.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	// registryMaxRefs caps the references of one schema, counted over
	// every level (a .proto file's imports and theirs): a schema with
	// more is not used (schema_mismatch). 64 is far beyond the imports of
	// an event's message type.
	registryMaxRefs = 64
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

// schemaResponse is the body of GET /schemas/ids/{id} and of
// GET /subjects/{subject}/versions/{version}; schemaType is absent for
// Avro.
type schemaResponse struct {
	Schema     string            `json:"schema"`
	SchemaType string            `json:"schemaType"`
	References []schemaReference `json:"references"`
}

// schemaReference is a schema's reference to another: the import name
// (for Protobuf, the path in an import statement) and the subject
// version registered under it.
type schemaReference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// fetch returns the schema of id with its references resolved, trying
// each request registryAttempts times (schema.SchemaFetcher).
func (c *registryClient) fetch(id uint32) (schema.RegisteredSchema, error) {
	sr, err := c.retry("/schemas/ids/"+strconv.FormatUint(uint64(id), 10), fmt.Sprintf("schema %d", id))
	if err != nil {
		return schema.RegisteredSchema{}, err
	}
	rs := schema.RegisteredSchema{Type: sr.SchemaType, Schema: sr.Schema}
	if len(sr.References) > 0 {
		rs.References = map[string]string{}
		if err := c.resolve(id, sr.References, rs.References); err != nil {
			return schema.RegisteredSchema{}, err
		}
	}
	return rs, nil
}

// resolve fetches the referenced schemas into files by import name,
// and theirs, up to registryMaxRefs in all. A reference the registry
// does not have makes the schema of id a mismatch (it cannot compile).
func (c *registryClient) resolve(id uint32, refs []schemaReference, files map[string]string) error {
	for _, ref := range refs {
		if _, done := files[ref.Name]; done {
			continue
		}
		if len(files) >= registryMaxRefs {
			return fmt.Errorf("%w: schema %d has more than %d references", schema.ErrSchemaMismatch, id, registryMaxRefs)
		}
		what := fmt.Sprintf("reference %q of schema %d", ref.Name, id)
		sr, err := c.retry("/subjects/"+url.PathEscape(ref.Subject)+"/versions/"+strconv.Itoa(ref.Version), what)
		if errors.Is(err, schema.ErrUnknownSchema) {
			return fmt.Errorf("%w: %s (subject %q version %d) is not in the registry", schema.ErrSchemaMismatch, what, ref.Subject, ref.Version)
		}
		if err != nil {
			return err
		}
		files[ref.Name] = sr.Schema
		if err := c.resolve(id, sr.References, files); err != nil {
			return err
		}
	}
	return nil
}

// retry runs get, trying registryAttempts times while the registry fails
// (not when it answers that it does not have what is asked).
func (c *registryClient) retry(path, what string) (schemaResponse, error) {
	wait := registryBackoff
	for attempt := 1; ; attempt++ {
		sr, err := c.get(path, what)
		if err == nil || errors.Is(err, schema.ErrUnknownSchema) || errors.Is(err, schema.ErrSchemaMismatch) || attempt == registryAttempts {
			return sr, err
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// get runs one request for the schema at path (under the base URL),
// named what in errors.
func (c *registryClient) get(path, what string) (schemaResponse, error) {
	var sr schemaResponse
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return sr, fmt.Errorf("operator: schema registry: %w", err)
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json, application/json")
	if c.user != "" {
		pw, err := c.password()
		if err != nil {
			return sr, err
		}
		req.SetBasicAuth(c.user, pw)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return sr, fmt.Errorf("operator: schema registry: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, registryMaxBody+1))
	switch {
	case err != nil:
		return sr, fmt.Errorf("operator: schema registry: reading %s: %w", what, err)
	case resp.StatusCode == http.StatusNotFound:
		return sr, fmt.Errorf("%w: %s (registry status 404)", schema.ErrUnknownSchema, what)
	case resp.StatusCode != http.StatusOK:
		return sr, fmt.Errorf("operator: schema registry: %s: status %d", what, resp.StatusCode)
	case len(body) > registryMaxBody:
		return sr, fmt.Errorf("%w: %s is larger than %d bytes", schema.ErrSchemaMismatch, what, registryMaxBody)
	}
	if err := json.Unmarshal(body, &sr); err != nil {
		return sr, fmt.Errorf("operator: schema registry: %s: %w", what, err)
	}
	return sr, nil
}

// newSchemas returns the schema cache of framed Avro or Protobuf input,
// or nil for the other formats. A schema that cannot be used is logged at ERROR once
// per id, naming the missing fields and the id (never message content);
// a failed fetch at WARN, at each message of the id until one succeeds.
func (o *Operator) newSchemas() (*schema.Schemas, error) {
	sc := o.cfg.Schema
	if sc.Registry.URL == "" { // validated: format avro or protobuf

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
