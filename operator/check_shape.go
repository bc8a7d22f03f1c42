package operator

// check_shape.go is the input-shape part of Check: it reads the latest
// records of the input topics and reports, by configured field name
// only, which fields they lack, with the field names they carry.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
)

// checkShape reads up to sample of the latest records of the input
// topics (spread evenly over their partitions) and reports each
// configured field that was absent or of the wrong type in every record
// read (FAIL: a misspelt or missing field; every event would be skipped)
// or in some of them (warn: those events would be skipped), with the key
// names at least half of the records carry. It prints no value and no
// count of records.
func checkShape(ctx context.Context, cl *clients, cfg Config, inputs map[string][]kafka.Partition, sample int) []CheckResult {
	var schemaProblems []CheckResult // framed Avro: writer schemas that do not fit, or the registry
	var unavailable error            // the last failure to ask the registry
	dec, err := shapeDecoder(cfg, func(id uint32, err error) {
		if errors.Is(err, schema.ErrRegistryUnavailable) {
			unavailable = err
			return
		}
		schemaProblems = append(schemaProblems, CheckResult{CheckFail, "input schema id " + strconv.FormatUint(uint64(id), 10), err.Error()})
	})
	if err != nil { // validated by the caller
		return []CheckResult{{CheckFail, "input shape", err.Error()}}
	}
	fields := dec.Fields()
	if len(fields) > schema.ShapeFields {
		fields = fields[:schema.ShapeFields]
	}
	parts := 0
	for _, ps := range inputs {
		parts += len(ps)
	}
	per := int64((sample + parts - 1) / parts)
	var (
		n           int
		badAll      = ^uint64(0)
		badAny      uint64
		absentAll   = ^uint64(0)
		wrongAll    = ^uint64(0)
		tally       = map[string]int{}
		readFailure error
	)
	for _, t := range cfg.Kafka.InputTopics {
		for _, p := range inputs[t] {
			err := cl.readLatest(ctx, p, per, func(msg []byte) {
				var e schema.Event
				if err := dec.Decode(msg, &e); errors.Is(err, schema.ErrRegistryUnavailable) {
					return // not sampled: its schema is unknown (reported)
				}
				a, w := dec.Shape()
				n++
				badAll &= a | w
				absentAll &= a
				wrongAll &= w
				badAny |= a | w
				tallyNames(dec, tally, msg) // after Shape: Keys may decode again
			})
			if err != nil && readFailure == nil {
				readFailure = fmt.Errorf("%s/%d: %w", t, p.ID, err)
			}
		}
	}
	if readFailure != nil {
		return []CheckResult{{CheckFail, "input read", "cannot read the input (the principal needs Read on the input topics): " + readFailure.Error()}}
	}
	if unavailable != nil {
		schemaProblems = append(schemaProblems, CheckResult{CheckFail, "schema registry", "cannot fetch the input's writer schemas (the running operator waits for the registry, skipping nothing): " + unavailable.Error()})
	}
	if len(schemaProblems) > 0 {
		return schemaProblems
	}
	if n == 0 {
		return []CheckResult{{CheckWarn, "input shape", "the input topics hold no records to sample; the running operator checks every record it decodes"}}
	}
	seen := "fields seen (in at least half of the sampled records): " + nameList(tally, n/2)
	var out []CheckResult
	for i, f := range fields {
		bit := uint64(1) << i
		name := "input field " + strconv.Quote(f.Name) + " (" + strings.Join(f.Roles, ",") + ")"
		what := "absent or of the wrong type"
		switch {
		case absentAll&bit != 0:
			what = "absent"
		case wrongAll&bit != 0:
			what = "of the wrong type"
		}
		switch {
		case badAll&bit != 0:
			out = append(out, CheckResult{CheckFail, name, what + " in every sampled record: every event would be skipped; " + seen})
		case badAny&bit != 0:
			out = append(out, CheckResult{CheckWarn, name, "absent or of the wrong type in some sampled records: those events are skipped"})
		}
	}
	if len(out) == 0 {
		out = append(out, CheckResult{CheckOK, "input shape", "every configured field is present, with a type its role accepts, in every sampled record; " + seen})
	}
	return out
}

// shapeDecoder returns the decoder of the input shape check: for framed
// Avro or Protobuf one whose schemas come from schema.registry (report is
// told of each id whose schema cannot be used and of each failed fetch).
func shapeDecoder(cfg Config, report func(id uint32, err error)) (*schema.Decoder, error) {
	sc := cfg.Schema
	if sc.Registry.URL == "" { // validated: set only with format avro or protobuf
		return schema.NewDecoder(sc)
	}
	c, err := newRegistryClient(sc.Registry, "schema.registry")
	if err != nil {
		return nil, err
	}
	s, err := schema.NewSchemas(sc, c.fetch, report)
	if err != nil {
		return nil, err
	}
	return schema.NewFramedDecoder(sc, s)
}

// readLatest calls fn with the value of each of the latest (at most) n
// records of partition p, in offset order, reading from its leader.
func (c *clients) readLatest(ctx context.Context, p kafka.Partition, n int64, fn func([]byte)) error {
	addr := net.JoinHostPort(p.Leader.Host, strconv.Itoa(p.Leader.Port))
	conn, err := c.dialer.DialPartition(ctx, "tcp", addr, p) // not DialLeader: see topicMetadata
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	first, end, err := conn.ReadOffsets()
	if err != nil {
		return err
	}
	offset := max(first, end-n)
	for offset < end {
		if _, err := conn.Seek(offset, kafka.SeekAbsolute); err != nil {
			return err
		}
		batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 250 * time.Millisecond})
		from := offset
		for offset < end {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			if m.Offset >= offset {
				fn(m.Value)
				offset = m.Offset + 1
			}
		}
		err := batch.Close()
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, kafka.RequestTimedOut) {
			return err
		}
		if offset == from {
			return nil // nothing more to read (compacted or aborted records at the end)
		}
	}
	return nil
}
