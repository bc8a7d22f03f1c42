// Command producer writes the smart-meter readings of the walkthrough in
// docs/getting-started.md to a Kafka topic, in real time: every meter sends
// one JSON reading per interval,
//
//	{"ts": 1700000000123, "meter": "m-0017", "region": "north", "tariff": "day", "kwh": 0.0423}
//
// which is what deploy/dpstream.example.yaml reads (with --format avro
// --registry URL: the same fields as Confluent-framed Avro with a
// registered schema, which deploy/dpstream.avro.yaml reads; avro.go).
// Messages are keyed by
// meter (one meter stays on one partition). It creates the topic if it is
// missing, with message.timestamp.type=LogAppendTime (dpstream closes
// windows by arrival time, which must come from the broker).
//
//	go run ./examples/producer --brokers 127.0.0.1:9092 --topic meter-readings
//	go run ./examples/producer --topic meter-readings.avro --format avro --registry http://127.0.0.1:8081/apis/ccompat/v7
//
// Stop it with Ctrl-C; --duration stops it after a while.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
)

// Reading is one event of the walkthrough.
type Reading struct {
	TS     int64   `json:"ts" avro:"ts"`         // event time, Unix ms
	Meter  string  `json:"meter" avro:"meter"`   // the privacy unit
	Region string  `json:"region" avro:"region"` // the group
	Tariff string  `json:"tariff" avro:"tariff"` // the histogram's category: day, night or weekend
	KWh    float64 `json:"kwh" avro:"kwh"`       // the value, in [0, 0.5] for a 15 s reading
}

// Options are the producer's settings (its flags).
type Options struct {
	Brokers    []string
	Topic      string
	Meters     int
	Regions    []string
	Interval   time.Duration // between two readings of one meter
	Duration   time.Duration // 0: until interrupted
	Partitions int           // of a topic created here
	Seed       uint64
	// Format is "json" (default) or "avro": Confluent-framed Avro with
	// the schema registered in Registry (avro.go).
	Format   string
	Registry string // the registry's Confluent-compatible base URL
}

// meter is one simulated meter.
type meter struct {
	id, region, tariff string
	phase              time.Duration // its readings are at phase + k·interval
	base               float64       // its typical kWh per reading
}

// meters returns the simulated meters: spread over the regions in turn,
// tariffs 60% day, 30% night, 10% weekend, readings spread evenly over
// the interval.
func meters(o Options) []meter {
	r := rand.New(rand.NewPCG(o.Seed, 12))
	out := make([]meter, o.Meters)
	for i := range out {
		t := "day"
		switch x := r.Float64(); {
		case x >= 0.9:
			t = "weekend"
		case x >= 0.6:
			t = "night"
		}
		out[i] = meter{
			id:     fmt.Sprintf("m-%04d", i),
			region: o.Regions[i%len(o.Regions)],
			tariff: t,
			phase:  time.Duration(r.Int64N(int64(o.Interval))),
			base:   0.05 + 0.25*r.Float64(),
		}
	}
	slices.SortFunc(out, func(a, b meter) int { return int(a.phase - b.phase) })
	return out
}

// Readings returns the readings due in (from, to], in time order: one per
// meter whose phase falls in it.
func Readings(o Options, ms []meter, from, to time.Time, r *rand.Rand) []Reading {
	var out []Reading
	iv := int64(o.Interval)
	for k := from.UnixNano() / iv; k*iv <= to.UnixNano(); k++ {
		for _, m := range ms {
			at := time.Unix(0, k*iv+int64(m.phase))
			if !at.After(from) || at.After(to) {
				continue
			}
			kwh := m.base * (0.5 + r.Float64())
			out = append(out, Reading{TS: at.UnixMilli(), Meter: m.id, Region: m.region, Tariff: m.tariff,
				KWh: float64(int64(kwh*1e4)) / 1e4})
		}
	}
	slices.SortStableFunc(out, func(a, b Reading) int { return int(a.TS - b.TS) })
	return out
}

// ensureTopic creates the topic with LogAppendTime timestamps if missing.
func ensureTopic(ctx context.Context, o Options) error {
	conn, err := (&kafka.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", o.Brokers[0])
	if err != nil {
		return err
	}
	defer conn.Close()
	ctl, err := conn.Controller()
	if err != nil {
		return err
	}
	cc, err := (&kafka.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", net.JoinHostPort(ctl.Host, strconv.Itoa(ctl.Port)))
	if err != nil {
		return err
	}
	defer cc.Close()
	err = cc.CreateTopics(kafka.TopicConfig{Topic: o.Topic, NumPartitions: o.Partitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "message.timestamp.type", ConfigValue: "LogAppendTime"}}})
	if errors.Is(err, kafka.TopicAlreadyExists) {
		return nil
	}
	return err
}

// Run produces until ctx ends or o.Duration has passed, and returns the
// number of readings written.
func Run(ctx context.Context, o Options, log func(string)) (int, error) {
	if err := ensureTopic(ctx, o); err != nil {
		return 0, fmt.Errorf("producer: creating topic %s on %s: %w", o.Topic, strings.Join(o.Brokers, ","), err)
	}
	encode := func(rd Reading) ([]byte, error) { return json.Marshal(rd) }
	if o.Format == "avro" {
		enc, err := registerReadings(ctx, o.Registry, o.Topic+"-value")
		if err != nil {
			return 0, fmt.Errorf("producer: %w", err)
		}
		encode = enc.encode
	}
	w := &kafka.Writer{Addr: kafka.TCP(o.Brokers...), Topic: o.Topic, Balancer: kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 10 * time.Millisecond}
	defer w.Close()
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	ms := meters(o)
	r := rand.New(rand.NewPCG(o.Seed, 34))
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last, sent, lastLog := time.Now(), 0, time.Now()
	for {
		select {
		case <-ctx.Done():
			return sent, nil
		case now := <-tick.C:
			rs := Readings(o, ms, last, now, r)
			last = now
			if len(rs) == 0 {
				continue
			}
			msgs := make([]kafka.Message, len(rs))
			for i, rd := range rs {
				b, err := encode(rd)
				if err != nil {
					return sent, fmt.Errorf("producer: encoding a reading: %w", err)
				}
				msgs[i] = kafka.Message{Key: []byte(rd.Meter), Value: b}
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				if ctx.Err() != nil {
					return sent, nil
				}
				return sent, fmt.Errorf("producer: writing to %s: %w", o.Topic, err)
			}
			sent += len(rs)
			if now.Sub(lastLog) >= 10*time.Second {
				log(fmt.Sprintf("%d readings sent to %s", sent, o.Topic))
				lastLog = now
			}
		}
	}
}

func main() {
	var o Options
	var brokers, regions string
	flag.StringVar(&brokers, "brokers", "127.0.0.1:9092", "Kafka bootstrap brokers, comma-separated")
	flag.StringVar(&o.Topic, "topic", "meter-readings", "topic to write (created with LogAppendTime timestamps if missing)")
	flag.IntVar(&o.Meters, "meters", 1000, "number of meters (privacy units)")
	flag.StringVar(&regions, "regions", "north,south,east,west", "regions (groups), comma-separated; meters are spread evenly")
	flag.DurationVar(&o.Interval, "interval", 15*time.Second, "time between two readings of one meter")
	flag.DurationVar(&o.Duration, "duration", 0, "stop after this long (0: run until Ctrl-C)")
	flag.IntVar(&o.Partitions, "partitions", 4, "partitions of the topic if it is created")
	flag.Uint64Var(&o.Seed, "seed", 1, "random seed of the simulated meters")
	flag.StringVar(&o.Format, "format", "json", "json, or avro: Confluent-framed Avro with the schema registered in --registry under <topic>-value")
	flag.StringVar(&o.Registry, "registry", "", "the schema registry's Confluent-compatible URL (with --format avro), e.g. http://127.0.0.1:8081/apis/ccompat/v7")
	flag.Parse()
	o.Brokers = strings.Split(brokers, ",")
	o.Regions = strings.Split(regions, ",")
	if o.Meters < 1 || len(o.Regions) == 0 || o.Interval <= 0 || o.Partitions < 1 {
		fmt.Fprintln(os.Stderr, "producer: --meters, --interval and --partitions must be positive")
		os.Exit(2)
	}
	if (o.Format != "json" && o.Format != "avro") || (o.Format == "avro") != (o.Registry != "") {
		fmt.Fprintln(os.Stderr, "producer: --format is json or avro; avro needs --registry, json takes none")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "producer: %d meters in %d regions, one reading every %s each, to %s on %s\n",
		o.Meters, len(o.Regions), o.Interval, o.Topic, brokers)
	n, err := Run(ctx, o, func(s string) { fmt.Fprintln(os.Stderr, "producer: "+s) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "producer: stopped after %d readings\n", n)
}
