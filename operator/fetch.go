package operator

// fetch.go is the fetch/decode stage of the input topology: one fetcher
// per assigned input partition reads the partition from its leader,
// decodes every record into an item and hands the items over, a chunk at
// a time, to the generation's loop (generation.go), which feeds them to
// the window-and-bound stage (core.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
)

// fetchMaxWait is how long a fetch waits at the broker for new data.
const fetchMaxWait = 250 * time.Millisecond

// itemChunk is the most items a fetcher hands over at once (see readBatch):
// large enough that the channel costs nothing per item, small enough
// (about 300 KiB) that a chunk is reused from itemPool rather than
// allocated in fresh pages.
const itemChunk = 1024

// itemPool holds empty chunks of capacity itemChunk.
var itemPool = sync.Pool{New: func() any { s := make([]item, 0, itemChunk); return &s }}

// getItems returns an empty chunk.
func getItems() []item { return (*itemPool.Get().(*[]item))[:0] }

// putItems returns a chunk that has been consumed. It is cleared first:
// nothing of one fetch (message bytes, decoded strings) stays reachable
// through the pool, and a reused item starts as a fresh one.
func putItems(s []item) {
	if cap(s) != itemChunk {
		return
	}
	s = s[:itemChunk]
	clear(s)
	s = s[:0]
	itemPool.Put(&s)
}

// decode fills it.ev and it.reason from it.m with dec, and on failure
// it.absent and it.wrong (the input shape). It returns true, leaving it
// undecided, when the message's schema could not be fetched from the
// registry: decode it again later (registry_outage.go).
func decode(dec *schema.Decoder, it *item) (blocked bool) {
	if err := dec.Decode(it.m.Value, &it.ev); err != nil {
		if errors.Is(err, schema.ErrRegistryUnavailable) {
			return true
		}
		it.reason = schema.ReasonOf(err)
		if it.reason == schema.ReasonNone {
			it.reason = schema.ReasonMalformed
		}
		it.absent, it.wrong = dec.Shape()
	}
	return false
}

// fetcher reads one input partition from pa.Offset and sends its decoded
// messages, one fetched batch at a time, to out until its context ends.
// It talks to the partition's leader directly (kafka-go's Reader hands
// messages over one at a time through channels, which costs more than the
// whole pipeline behind it); broker errors are retried with backoff, a
// lost leader is looked up again.
type fetcher struct {
	o     *Operator
	cl    *clients
	dec   *schema.Decoder
	topic string
	pa    kafka.PartitionAssignment
	out   chan<- []item

	offset  int64         // the next offset to read; < 0: FirstOffset or LastOffset
	backoff time.Duration // the current retry backoff
	conn    *kafka.Conn   // to the partition's leader; nil: look it up again
	blocked bool          // waiting for the schema registry (registry_outage.go)
}

// fetch runs a fetcher of one partition until ctx ends.
func (o *Operator) fetch(ctx context.Context, cl *clients, topic string, pa kafka.PartitionAssignment, out chan<- []item) {
	dec, err := o.newInputDecoder()
	if err != nil { // validated in New; never here
		o.log.Error("decoder", "err", err)
		return
	}
	f := &fetcher{o: o, cl: cl, dec: dec, topic: topic, pa: pa, out: out, offset: pa.Offset, backoff: o.cfg.Kafka.RetryBackoff}
	defer func() {
		if f.conn != nil {
			f.conn.Close()
		}
		f.unblock()
	}()
	for ctx.Err() == nil && f.step(ctx) {
	}
}

// fail counts and logs a failed broker operation, drops the connection
// and waits the backoff; false when ctx ended (the fetcher stops).
func (f *fetcher) fail(ctx context.Context, op string, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	f.o.m.brokerErrors.WithLabelValues(op).Inc()
	f.o.log.Warn("fetch failed; retrying", "op", op, "topic", f.topic, "partition", f.pa.ID, "err", err, "backoff", f.backoff)
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
	if !sleep(ctx, f.backoff) {
		return false
	}
	f.backoff = min(2*f.backoff, f.o.cfg.Kafka.RetryBackoffMax)
	return true
}

// connect dials the partition's leader and, without a committed offset,
// resolves the start offset. On failure it returns the failed operation's
// name (for fail).
func (f *fetcher) connect(ctx context.Context) (string, error) {
	info, err := f.cl.partitionInfo(ctx, f.topic)
	if err != nil {
		return "fetch_metadata", err
	}
	var part kafka.Partition
	for _, p := range info[f.topic] {
		if p.ID == f.pa.ID {
			part = p
		}
	}
	if part.Leader.Host == "" {
		return "fetch_metadata", fmt.Errorf("%w: topic %s/%d: no leader", ErrKafka, f.topic, f.pa.ID)
	}
	// DialPartition, not DialLeader: DialLeader asks for metadata in a way
	// that lets the broker create a missing topic (see topicMetadata).
	addr := net.JoinHostPort(part.Leader.Host, strconv.Itoa(part.Leader.Port))
	f.conn, err = f.cl.dialer.DialPartition(ctx, "tcp", addr, part)
	if err != nil {
		return "fetch_connect", err
	}
	if f.offset < 0 { // FirstOffset or LastOffset: no committed offset
		_ = f.conn.SetDeadline(time.Now().Add(30 * time.Second))
		first, last, err := f.conn.ReadOffsets()
		_ = f.conn.SetDeadline(time.Time{})
		if err != nil {
			return "fetch_offsets", err
		}
		f.offset = first
		if f.pa.Offset == kafka.LastOffset {
			f.offset = last
		}
	}
	return "", nil
}

// step connects if needed and runs one fetch; false when the fetcher must
// stop (ctx ended).
func (f *fetcher) step(ctx context.Context) bool {
	if !f.blocked && f.o.registryHeld.Load() > 0 {
		return f.hold(ctx)
	}
	if f.conn == nil {
		if op, err := f.connect(ctx); err != nil {
			return f.fail(ctx, op, err)
		}
	}
	if _, err := f.conn.Seek(f.offset, kafka.SeekAbsolute); err != nil {
		return f.fail(ctx, "fetch_seek", err)
	}
	records, ok, err := f.readBatch(ctx)
	if !ok {
		return false
	}
	switch {
	case err == nil:
	case errors.Is(err, errRegistryBlocked):
		return f.waitRegistry(ctx)
	case errors.Is(err, kafka.OffsetOutOfRange):
		// The committed offset is gone (retention): start from the
		// earliest data still there. Events lost to retention are
		// simply absent from their windows.
		f.o.log.Warn("offset out of range; restarting from the earliest offset", "topic", f.topic, "partition", f.pa.ID)
		f.offset = kafka.FirstOffset
		f.conn.Close()
		f.conn = nil
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && records == 0 {
			return true // no data within the wait: fetch again
		}
		return f.fail(ctx, "fetch", err)
	}
	return true
}

// readBatch runs one fetch from f.offset and hands its decoded messages
// over in chunks of itemChunk, followed by a caught-up marker when the
// fetch read the partition to its end. It returns the number of records
// read and the fetch's error; ok is false when ctx ended during a
// hand-over.
func (f *fetcher) readBatch(ctx context.Context) (records int, ok bool, err error) {
	_ = f.conn.SetReadDeadline(time.Now().Add(fetchMaxWait + 10*time.Second))
	issued := f.o.now() // before the broker takes the high watermark below
	batch := f.conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 8 << 20, MaxWait: fetchMaxWait})
	hwm := batch.HighWaterMark()
	msgs := getItems()
	var rerr error
	blocked := false
	for {
		m, err := batch.ReadMessage()
		if err != nil {
			rerr = err
			break
		}
		if m.Offset < f.offset {
			continue
		}
		// The arrival time: the broker's timestamp, which kafka-go
		// does not report for LogAppendTime batches.
		if t, ok := logAppendTime(batch); ok {
			m.Time = t
		}
		m.Topic, m.Partition, m.HighWaterMark = f.topic, f.pa.ID, hwm
		msgs = append(msgs, item{m: m})
		it := &msgs[len(msgs)-1]
		if blocked = decode(f.dec, it); blocked {
			// Stop at it: f.offset stays, no later message is read.
			msgs[len(msgs)-1] = item{}
			msgs = msgs[:len(msgs)-1]
			break
		}
		f.unblock()
		f.offset = m.Offset + 1
		records++
		if len(msgs) == itemChunk {
			// Hand over a full chunk: a fetch of MaxBytes holds tens of
			// thousands of records, and one growing slice of them cost
			// a fifth of the CPU (copies into fresh pages).
			select {
			case f.out <- msgs:
			case <-ctx.Done():
				batch.Close()
				return records, false, nil
			}
			msgs = getItems()
		}
	}
	end := max(f.offset, batch.Offset()) // past compacted records at the end of the batch
	cerr := batch.Close()
	// An empty fetch ends with RequestTimedOut (nothing within
	// MaxWait), and its high watermark is valid.
	complete := func(err error) bool {
		return err == nil || errors.Is(err, io.EOF) || errors.Is(err, kafka.RequestTimedOut)
	}
	if !blocked && complete(cerr) && complete(rerr) && end >= hwm {
		// Read to the end: every later record is appended after the
		// fetch was issued. The marker follows this fetch's messages,
		// so the loop sees it after them (see core.caughtUp).
		msgs = append(msgs, item{m: kafka.Message{Topic: f.topic, Partition: f.pa.ID, Offset: end, HighWaterMark: hwm}, caughtUp: issued})
	}
	if records > 0 || len(msgs) > 0 {
		f.backoff = f.o.cfg.Kafka.RetryBackoff
	}
	if len(msgs) > 0 {
		select {
		case f.out <- msgs:
		case <-ctx.Done():
			return records, false, nil
		}
	} else {
		putItems(msgs)
	}
	err = cerr
	if err == nil && rerr != nil && !errors.Is(rerr, io.EOF) {
		err = rerr
	}
	if blocked { // the batch was left unread: whatever Close said, wait for the registry
		err = errRegistryBlocked
	}
	return records, true, err
}
