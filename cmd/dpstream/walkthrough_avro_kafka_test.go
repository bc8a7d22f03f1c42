package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/dpstream/dpstream/operator/kafkatest"
)

// envRegistry names the schema registry's Confluent-compatible URL (what
// deploy/registry/registry.sh start prints; deploy/test.sh sets it).
const envRegistry = "DPSTREAM_TEST_REGISTRY"

// avroMinCount is the least count a region must show in some released
// window for the test to accept that the Avro events were decoded: a
// window the 12 s producer covers wholly has 1000 readings per region,
// a partly covered one hundreds, one with nothing decoded 0 plus noise.
// The count's noise is discrete Laplace of scale about 10 (the plan of
// deploy/dpstream.avro.yaml): exceeding 200 has probability about
// e^-20 ≈ 2e-9 per value, the false-pass rate; a false failure needs every
// published window of a region to fall 800 below its truth, probability
// below 1e-30.
const avroMinCount = 200

// TestKafkaAvroWalkthrough follows docs/walkthrough-avro.md on the real
// components: the example producer with --format avro --registry (the
// readings as Confluent-framed Avro, their schema registered under
// <topic>-value), `dpstream run` with the shipped deploy/dpstream.avro.yaml
// (Avro input with the registry, JSON releases in the Connect envelope;
// the test's topics, group and registry URL substituted, 5 s windows as
// TestKafkaConnectPostgres), the Debezium JDBC sink into PostgreSQL, psql.
// Every JSON record of the run must be a row with equal values
// (sinkAndCompare), and every region's count must show the Avro events
// were decoded (avroMinCount). About 40 s.
func TestKafkaAvroWalkthrough(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	registry, connect, pg := os.Getenv(envRegistry), os.Getenv(envConnect), os.Getenv(envPostgres)
	if registry == "" || connect == "" || pg == "" {
		t.Skipf("%s, %s and %s are not set: run deploy/registry/registry.sh start, deploy/connect/connect.sh start and deploy/postgres/pg.sh start and export them as the URLs they print; deploy/test.sh does all three",
			envRegistry, envConnect, envPostgres)
	}
	w := newSinkWalk(t, "avrowalk", brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	recs := runForRecords(t, ctx, brokers, w.out, w.env,
		append(w.runArgs("dpstream.avro.yaml"), "--set", "schema.registry.url="+registry),
		append(w.producerArgs(brokers), "--format", "avro", "--registry", registry))
	maxCount := map[string]float64{}
	for _, r := range recs {
		if r.Aggregate == "count" {
			maxCount[r.Group[0].Value] = max(maxCount[r.Group[0].Value], r.Value)
		}
	}
	for _, region := range []string{"north", "south", "east", "west"} {
		if maxCount[region] < avroMinCount {
			t.Errorf("region %s: largest released count %v, want at least %d (were the Avro readings decoded?)", region, maxCount[region], avroMinCount)
		}
	}
	t.Logf("largest released count per region: %v", maxCount)
	sinkAndCompare(t, connect, pg, w.id, w.out, w.table, recs)
}
