package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"sync"
)

// This file is the Confluent wire format of Avro and Protobuf input: a
// message is the magic byte 0, the writer schema's id in a schema
// registry (4 bytes, big endian), for Protobuf the message indexes
// (protobuf_framed.go), and the binary record or message. Schemas are
// fetched by id once per Schemas (one per deployment, shared by its
// decoders), bound to the configured paths and cached; a schema that
// lacks a configured field is reported once, naming the field and the
// id, and its messages are counted as schema_mismatch.

// framedMagic is the first byte of a Confluent-framed message (the wire
// format's version, 0), followed by framedIDLen bytes of schema id.
const (
	framedMagic  = 0
	framedIDLen  = 4
	framedHeader = 1 + framedIDLen
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

// RegisteredSchema is a writer schema as a registry holds it.
type RegisteredSchema struct {
	// Type is the registry's schemaType: "AVRO" (also when empty),
	// "PROTOBUF" or another the decoders do not read ("JSON").
	Type string
	// Schema is the text: an Avro schema's JSON, a .proto file.
	Schema string
	// References are the files a Protobuf schema imports (transitively),
	// by import name: the registry's references, resolved.
	References map[string]string
}

// Registry schema types.
const (
	schemaTypeAvro     = "AVRO"
	schemaTypeProtobuf = "PROTOBUF"
)

// SchemaFetcher returns the writer schema registered under id, or an
// error: wrapping ErrUnknownSchema when the registry does not have the
// id (a definite answer: its messages are unknown_schema),
// ErrSchemaMismatch when the schema cannot be used (say, a reference
// that cannot be resolved), else a failure to ask the registry (best
// wrapping ErrRegistryUnavailable): the message is then not decoded
// (Decode returns ErrRegistryUnavailable) and the id is asked again at
// the next try.
type SchemaFetcher func(id uint32) (RegisteredSchema, error)

// RegistryConfig is the Confluent-compatible schema registry of framed
// Avro or Protobuf input. It is operational (not part of what shapes a release).
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
	if d.Format != FormatAvro && d.Format != FormatProtobuf {
		p.bad("registry.url is set but format is not avro or protobuf")
	}
	if c.AvroSchema != "" {
		p.bad("set one of avro_schema (plain Avro) and registry.url (framed Avro)")
	}
	if c.ProtobufSchema != "" || c.ProtobufMessage != "" {
		p.bad("set protobuf_schema and protobuf_message (plain Protobuf) or registry.url (framed Protobuf: the message indexes of each message name its type), not both")
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

// framed reports whether c reads framed Avro or Protobuf (with a
// registry).
func (c Config) framed() bool {
	return (c.Format == FormatAvro || c.Format == FormatProtobuf) && c.Registry.URL != ""
}

// schemaEntry is what one schema id decodes with: an Avro plan, a
// Protobuf file (whose messages are bound as the message indexes name
// them), or the reason its messages are skipped.
type schemaEntry struct {
	plan  *avroPlan
	proto *pbSchema
	// root is the Avro writer record, also when it does not fit the
	// configuration (Keys lists its field names).
	root   *avroType
	reason Reason
}

// Schemas is the cache of the writer schemas of framed Avro or Protobuf
// input, shared by the decoders of one configuration; it is safe for
// concurrent use.
type Schemas struct {
	fetch  SchemaFetcher
	report func(id uint32, err error)
	tmpl   *Decoder // binds schemas to the configured paths

	mu   sync.Mutex
	byID map[uint32]schemaEntry
}

// NewSchemas returns the schema cache of cfg (framed Avro or Protobuf):
// fetch reads a schema by id, report is called once per id whose schema
// cannot be used (of another type than the format, lacking a configured
// field, not a record or not parsing: an error wrapping ErrSchemaMismatch
// naming the fields — for Protobuf once per id and message type; not in
// the registry: ErrUnknownSchema) and after every failed fetch (then the
// message is not decoded and the id is fetched again at the next try).
func NewSchemas(cfg Config, fetch SchemaFetcher, report func(id uint32, err error)) (*Schemas, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.withDefaults().framed() {
		return nil, fmt.Errorf("%w: schemas need format avro or protobuf with registry.url", ErrInvalidConfig)
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
	rs, err := s.fetch(id)
	switch {
	case errors.Is(err, ErrSchemaMismatch): // say, a reference not resolved
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
	e, err := s.bind(rs)
	if err != nil {
		s.report(id, err)
		e = schemaEntry{root: e.root, reason: ReasonSchemaMismatch}
	}
	s.byID[id] = e
	return e
}

// bind binds a fetched schema to the configured paths: an Avro schema at
// once, a Protobuf file once compiled (its messages at their first use).
func (s *Schemas) bind(rs RegisteredSchema) (schemaEntry, error) {
	typ := rs.Type
	if typ == "" {
		typ = schemaTypeAvro
	}
	if s.tmpl.cfg.Format == FormatProtobuf {
		if typ != schemaTypeProtobuf {
			return schemaEntry{}, fmt.Errorf("%w: the schema is %s, not Protobuf", ErrSchemaMismatch, typ)
		}
		fd, err := compileProto(rs.Schema, rs.References)
		if err != nil {
			return schemaEntry{}, fmt.Errorf("%w: %w", ErrSchemaMismatch, err)
		}
		return schemaEntry{proto: &pbSchema{file: fd, bound: map[string]pbBound{}}}, nil
	}
	if typ != schemaTypeAvro {
		return schemaEntry{}, fmt.Errorf("%w: the schema is %s, not Avro", ErrSchemaMismatch, typ)
	}
	t, err := parseAvro(rs.Schema)
	if err != nil {
		return schemaEntry{}, fmt.Errorf("%w: %w", ErrSchemaMismatch, err)
	}
	plan, err := s.tmpl.bindAvro(t)
	if err != nil {
		return schemaEntry{root: t}, err // the root still lists its field names (Keys)
	}
	return schemaEntry{plan: plan, root: t}, nil
}

// NewFramedDecoder returns a Decoder of framed Avro or Protobuf input
// whose schemas come from s (NewSchemas of the same cfg).
func NewFramedDecoder(cfg Config, s *Schemas) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := newDecoder(cfg.withDefaults())
	if !d.cfg.framed() || s == nil {
		return nil, fmt.Errorf("%w: a framed decoder needs format avro or protobuf, registry.url and schemas", ErrInvalidConfig)
	}
	d.schemas, d.byID = s, map[uint32]schemaEntry{}
	return d, nil
}

// scanFramed reads a framed Avro or Protobuf message.
func (d *Decoder) scanFramed(msg []byte) Reason {
	if d.schemas == nil || len(msg) < framedHeader || msg[0] != framedMagic {
		return ReasonUnknownSchema
	}
	id := binary.BigEndian.Uint32(msg[1:framedHeader])
	e, ok := d.byID[id]
	if !ok {
		e = d.schemas.entry(id)
		if e.plan != nil || e.proto != nil || e.reason == ReasonSchemaMismatch {
			d.byID[id] = e // final; unknown ids are asked again (the cache answers), unavailable ones fetched again
		}
	}
	switch {
	case e.proto != nil:
		return d.scanFramedProto(id, e.proto, msg[framedHeader:])
	case e.plan == nil:
		return e.reason
	}
	return d.scanAvro(e.plan, msg, framedHeader)
}
