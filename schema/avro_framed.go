package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"sync"
)

// This file is Avro in the Confluent wire format: a message is the magic
// byte 0, the writer schema's id in a schema registry (4 bytes, big
// endian) and the Avro binary record. Schemas are fetched by id once per
// Schemas (one per deployment, shared by its decoders), bound to the
// configured paths and cached; a schema that lacks a configured field is
// reported once, naming the field and the id, and its messages are
// counted as schema_mismatch.

// avroMagic is the first byte of a Confluent-framed message (the wire
// format's version, 0), followed by avroIDLen bytes of schema id.
const (
	avroMagic  = 0
	avroIDLen  = 4
	avroHeader = 1 + avroIDLen
)

// maxSchemaIDs caps the distinct schema ids a Schemas fetches: messages
// with arbitrary ids must not make the registry answer billions of
// requests nor the cache grow without bound. Past it, new ids are
// unknown_schema (and reported); 4096 is far beyond the versions of one
// topic's schema.
const maxSchemaIDs = 4096

// errTooManyIDs is reported for an id met after maxSchemaIDs others.
var errTooManyIDs = fmt.Errorf("%w: more than %d distinct schema ids", ErrUnknownSchema, maxSchemaIDs)

// ErrUnknownSchema is what a SchemaFetcher returns (wrapped) for an id the
// registry does not have; the id's messages are then unknown_schema.
var ErrUnknownSchema = errors.New("schema: unknown schema id")

// SchemaFetcher returns the Avro writer schema (its JSON) registered under
// id, or an error: wrapping ErrUnknownSchema when the registry does not
// have the id (a definite answer: its messages are unknown_schema),
// ErrSchemaMismatch when the schema is not Avro, else a failure to ask
// the registry (best wrapping ErrRegistryUnavailable): the message is then
// not decoded (Decode returns ErrRegistryUnavailable) and the id is asked
// again at the next try.
type SchemaFetcher func(id uint32) (string, error)

// RegistryConfig is the Confluent-compatible schema registry of framed
// Avro input. It is operational (not part of what shapes a release).
type RegistryConfig struct {
	// URL is the registry's base URL, http or https, e.g.
	// http://127.0.0.1:8081/apis/ccompat/v7; schemas are read from
	// URL/schemas/ids/{id}.
	URL string `mapstructure:"url"`
	// Username and Password enable HTTP basic authentication; prefer
	// PasswordFile or the DPSTREAM_SCHEMA_REGISTRY_PASSWORD environment
	// variable to a password in a file under version control.
	Username     string `mapstructure:"username"`
	Password     string `mapstructure:"password"`
	PasswordFile string `mapstructure:"password_file"`
	// TLS configures an https registry as kafka.tls does the brokers.
	TLS RegistryTLS `mapstructure:"tls"`
}

// RegistryTLS configures TLS to the registry; its fields mean what those
// of kafka.tls mean. An https URL uses TLS; Enabled needs one.
type RegistryTLS struct {
	Enabled            bool   `mapstructure:"enabled"`
	CAFile             string `mapstructure:"ca_file"`
	CertFile           string `mapstructure:"cert_file"`
	KeyFile            string `mapstructure:"key_file"`
	ServerName         string `mapstructure:"server_name"`
	InsecureSkipVerify bool   `mapstructure:"insecure_skip_verify"`
}

// validateRegistry checks the registry settings against the format.
func (c Config) validateRegistry(p *problems, d Config) {
	r := c.Registry
	if r.URL == "" {
		if r != (RegistryConfig{}) {
			p.bad("registry settings are set but registry.url is not")
		}
		return
	}
	if d.Format != FormatAvro {
		p.bad("registry.url is set but format is not avro")
	}
	if c.AvroSchema != "" {
		p.bad("set one of avro_schema (plain Avro) and registry.url (framed Avro)")
	}
	for _, s := range r.Problems() {
		p.bad("%s", s)
	}
}

// Problems returns what is wrong with r's own settings (a URL that is
// not http or https, TLS without https, two passwords, a password without
// a user), one line each naming the setting relative to the block
// ("registry.url …"); nil when nothing is. An empty URL is not checked.
func (r RegistryConfig) Problems() []string {
	var out []string
	if r.URL == "" {
		return nil
	}
	u, err := url.Parse(r.URL)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		out = append(out, "registry.url is not an http or https URL")
	case r.TLS.Enabled && u.Scheme != "https":
		out = append(out, "registry.tls.enabled needs an https registry.url")
	}
	if r.Password != "" && r.PasswordFile != "" {
		out = append(out, "set one of registry.password and registry.password_file")
	}
	if (r.Password != "" || r.PasswordFile != "") && r.Username == "" {
		out = append(out, "registry.password is set but registry.username is not")
	}
	return out
}

// framed reports whether c reads framed Avro (with a registry).
func (c Config) framed() bool { return c.Format == FormatAvro && c.Registry.URL != "" }

// schemaEntry is what one schema id decodes with: a plan, or the reason
// its messages are skipped.
type schemaEntry struct {
	plan   *avroPlan
	reason Reason
}

// Schemas is the cache of the writer schemas of framed Avro input, shared
// by the decoders of one configuration; it is safe for concurrent use.
type Schemas struct {
	fetch  SchemaFetcher
	report func(id uint32, err error)
	tmpl   *Decoder // binds schemas to the configured paths

	mu   sync.Mutex
	byID map[uint32]schemaEntry
}

// NewSchemas returns the schema cache of cfg (framed Avro): fetch reads a
// schema by id, report is called once per id whose schema cannot be used
// (it lacks a configured field, is not a record or does not parse: an
// error wrapping ErrSchemaMismatch naming the fields; not in the registry:
// ErrUnknownSchema) and after every failed fetch (then the message is
// not decoded and the id is fetched again at the next try).
func NewSchemas(cfg Config, fetch SchemaFetcher, report func(id uint32, err error)) (*Schemas, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.withDefaults().framed() {
		return nil, fmt.Errorf("%w: schemas need format avro with registry.url", ErrInvalidConfig)
	}
	return &Schemas{fetch: fetch, report: report, tmpl: newDecoder(cfg.withDefaults()), byID: map[uint32]schemaEntry{}}, nil
}

// entry returns the entry of id, fetching and binding its schema at the
// first message of the id. The lock is held during the fetch, so that an
// id is fetched and reported once however many decoders meet it.
func (s *Schemas) entry(id uint32) schemaEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		return e
	}
	if len(s.byID) >= maxSchemaIDs {
		if len(s.byID) == maxSchemaIDs {
			s.report(id, errTooManyIDs)
			s.byID[id] = schemaEntry{reason: ReasonUnknownSchema} // reported once
		}
		return schemaEntry{reason: ReasonUnknownSchema}
	}
	text, err := s.fetch(id)
	switch {
	case errors.Is(err, ErrSchemaMismatch): // say, not an Avro schema
		s.report(id, err)
		s.byID[id] = schemaEntry{reason: ReasonSchemaMismatch}
		return s.byID[id]
	case errors.Is(err, ErrUnknownSchema):
		s.report(id, err)
		s.byID[id] = schemaEntry{reason: ReasonUnknownSchema}
		return s.byID[id]
	case err != nil: // not cached: asked again at the next try
		s.report(id, err)
		return schemaEntry{reason: reasonUnavailable}
	}
	e := schemaEntry{reason: ReasonSchemaMismatch}
	t, err := parseAvro(text)
	if err == nil {
		e.plan, err = s.tmpl.bindAvro(t)
	} else {
		err = fmt.Errorf("%w: %w", ErrSchemaMismatch, err)
	}
	if err != nil {
		s.report(id, err)
	} else {
		e.reason = ReasonNone
	}
	s.byID[id] = e
	return e
}

// NewFramedDecoder returns a Decoder of framed Avro input whose schemas
// come from s (NewSchemas of the same cfg).
func NewFramedDecoder(cfg Config, s *Schemas) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := newDecoder(cfg.withDefaults())
	if !d.cfg.framed() || s == nil {
		return nil, fmt.Errorf("%w: a framed decoder needs format avro, registry.url and schemas", ErrInvalidConfig)
	}
	d.schemas, d.byID = s, map[uint32]schemaEntry{}
	return d, nil
}

// scanFramed reads a framed Avro message.
func (d *Decoder) scanFramed(msg []byte) Reason {
	if d.schemas == nil || len(msg) < avroHeader || msg[0] != avroMagic {
		return ReasonUnknownSchema
	}
	id := binary.BigEndian.Uint32(msg[1:avroHeader])
	e, ok := d.byID[id]
	if !ok {
		e = d.schemas.entry(id)
		if e.plan != nil || e.reason == ReasonSchemaMismatch {
			d.byID[id] = e // final; unknown ids are asked again (the cache answers), unavailable ones fetched again
		}
	}
	if e.plan == nil {
		return e.reason
	}
	return d.scanAvro(e.plan, msg, avroHeader)
}
