package operator

// registry.go is the client of the Confluent-compatible schema registry
// that framed Avro and Protobuf input (schema.registry.url) reads its
// writer schemas from: one GET of /schemas/ids/{id} per schema id, cached
// by schema.Schemas, and for a Protobuf schema that imports other files
// one GET of /subjects/{subject}/versions/{version} per reference. It is
// a small net/http client: the two endpoints need no more, and no
// maintained registry client module is available to the build. The
// registration of the Avro release schema (output_avro.go) uses it too.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
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
	// registryMaxRefs caps the references of one schema, counted over
	// every level (a .proto file's imports and theirs): a schema with
	// more is not used (schema_mismatch). 64 is far beyond the imports of
	// an event's message type.
	registryMaxRefs = 64
)

// The Confluent error codes of a definite "not found" (with status 404):
// the only answers that skip a message as unknown_schema (or, for a
// reference, schema_mismatch). A 404 without one of them (say, a
// registry URL with a wrong path) is a failure to ask, which blocks the
// partition.
const (
	registrySubjectNotFound = 40401 // GET /subjects/{subject}/versions/{version}: no such subject
	registryVersionNotFound = 40402 // … no such version
	registryNoSchema        = 40403 // GET /schemas/ids/{id}: no such schema
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

// fetch returns the schema of id with its references resolved
// (schema.SchemaFetcher): one request each, a failure to ask wrapping
// schema.ErrRegistryUnavailable (the fetcher waits and asks again).
func (c *registryClient) fetch(id uint32) (schema.RegisteredSchema, error) {
	sr, err := c.get("/schemas/ids/"+strconv.FormatUint(uint64(id), 10), fmt.Sprintf("schema %d", id), registryNoSchema)
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
		sr, err := c.get("/subjects/"+url.PathEscape(ref.Subject)+"/versions/"+strconv.Itoa(ref.Version), what,
			registrySubjectNotFound, registryVersionNotFound)
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

// get runs one request for the schema at path (under the base URL), named
// what in errors: a 404 with one of the error codes notFound wraps
// schema.ErrUnknownSchema, any other failure is a failure to ask.
func (c *registryClient) get(path, what string, notFound ...int) (schemaResponse, error) {
	var sr schemaResponse
	status, body, err := c.call(http.MethodGet, path, nil)
	var rerr registryError
	switch {
	case err != nil:
		return sr, err
	case status == http.StatusNotFound && json.Unmarshal(body, &rerr) == nil && slices.Contains(notFound, rerr.Code):
		return sr, fmt.Errorf("%w: %s (registry status 404, error code %d)", schema.ErrUnknownSchema, what, rerr.Code)
	case status != http.StatusOK:
		return sr, c.unavailable("%s: status %d", what, status)
	case len(body) > registryMaxBody:
		return sr, fmt.Errorf("%w: %s is larger than %d bytes", schema.ErrSchemaMismatch, what, registryMaxBody)
	}
	if err := json.Unmarshal(body, &sr); err != nil {
		return sr, c.unavailable("%s: %w", what, err)
	}
	return sr, nil
}

// newSchemas returns the schema cache of framed Avro or Protobuf input,
// or nil for the other formats. A schema that cannot be used is logged at
// ERROR once per id, naming the missing fields and the id (never message
// content); a failure to ask the registry at WARN once per outage
// (registry_outage.go).
func (o *Operator) newSchemas() (*schema.Schemas, error) {
	sc := o.cfg.Schema
	if sc.Registry.URL == "" { // validated: format avro or protobuf

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
	fetch := func(id uint32) (schema.RegisteredSchema, error) {
		rs, err := c.fetch(id)
		o.registryAnswered(c, err)
		return rs, err
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
