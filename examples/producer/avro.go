package main

// avro.go is the producer's -format avro: each reading as an Avro record
// in the Confluent wire format (the byte 0, the schema id, 4 bytes big
// endian, the Avro binary record), with readingSchema registered in the
// schema registry under <topic>-value (TopicNameStrategy) once at start.
// This is what deploy/dpstream.avro.yaml reads (schema.format avro with
// schema.registry.url).

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
)

// readingSchema is the Avro writer schema of a Reading: its fields, with
// the event time in Unix ms.
const readingSchema = `{"type": "record", "name": "Reading", "namespace": "dpstream.example", "fields": [
 {"name": "ts", "type": "long"}, {"name": "meter", "type": "string"}, {"name": "region", "type": "string"},
 {"name": "tariff", "type": "string"}, {"name": "kwh", "type": "double"}]}`

// avroEncoder frames readings with the registered schema's id.
type avroEncoder struct {
	schema avro.Schema
	id     uint32
}

// registerReadings registers readingSchema under subject in the registry
// at base (its Confluent-compatible API, e.g.
// http://127.0.0.1:8081/apis/ccompat/v7) and returns the encoder. The
// registry gives an existing schema its existing id.
func registerReadings(ctx context.Context, base, subject string) (*avroEncoder, error) {
	s, err := avro.Parse(readingSchema)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]string{"schema": readingSchema})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		strings.TrimRight(base, "/")+"/subjects/"+url.PathEscape(subject)+"/versions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var r struct {
		ID uint32 `json:"id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.ID == 0 {
		return nil, fmt.Errorf("registering the reading schema under %s: status %d: %s", subject, resp.StatusCode, b)
	}
	return &avroEncoder{schema: s, id: r.ID}, nil
}

// encode returns rd as a framed Avro record.
func (e *avroEncoder) encode(rd Reading) ([]byte, error) {
	b, err := avro.Marshal(e.schema, rd)
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, e.id), b...), nil
}
