package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// The environment of TestKafkaConnectPostgres: the Kafka Connect worker's
// REST URL (what deploy/connect/connect.sh start prints) and the
// PostgreSQL URL (what deploy/postgres/pg.sh start prints). deploy/test.sh
// starts both and sets them.
const (
	envConnect  = "DPSTREAM_TEST_CONNECT"
	envPostgres = "DPSTREAM_TEST_POSTGRES"
)

// TestKafkaConnectPostgres follows the walkthrough's Kafka Connect
// variant on the real components: `dpstream run` with the example
// configuration and output.format json with the Connect envelope (5 s
// windows, as TestKafkaWalkthrough), the example producer, then the
// Debezium JDBC sink connector on the Connect worker writing the output
// topic into a PostgreSQL table (upsert on the record key), queried with
// psql. Every JSON record of the run must be a row, with the key, window,
// aggregate, group, series, label, value, interval and scale of the
// decoded record (floats compared exactly: PostgreSQL prints a double in
// its shortest exact form, extra_float_digits 1). Nothing here is
// random beyond the noise, which is compared with itself: no false
// failures.
func TestKafkaConnectPostgres(t *testing.T) {
	t.Parallel() // waits on the broker mostly; own topics and groups (docs/development.md)
	brokers := kafkatest.Brokers(t)
	connect, pg := os.Getenv(envConnect), os.Getenv(envPostgres)
	if connect == "" || pg == "" {
		t.Skipf("%s and %s are not set: run deploy/connect/connect.sh start and deploy/postgres/pg.sh start and export them as the URLs they print; deploy/test.sh does both", envConnect, envPostgres)
	}
	w := newSinkWalk(t, "connect", brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// dpstream run (JSON releases in the Connect envelope) and the producer.
	recs := runForRecords(t, ctx, brokers, w.out, w.env,
		append(w.runArgs("dpstream.example.yaml"), "--set", "output.format=json", "--set", "output.connect_schema=true"),
		w.producerArgs(brokers))
	sinkAndCompare(t, connect, pg, w.id, w.out, w.table, recs)
}

// sinkWalk is what a walkthrough into PostgreSQL runs with: the built
// dpstream and producer, a fresh id (group, connector) and its input and
// output topics and table, and dpstream's environment (a fresh key, the
// brokers, no listener).
type sinkWalk struct {
	bin, prod, id, in, out, table string
	env                           []string
}

// newSinkWalk builds dpstream and the example producer and names the
// run's topics, group and table after prefix and a random suffix.
func newSinkWalk(t *testing.T, prefix string, brokers []string) sinkWalk {
	t.Helper()
	dir := t.TempDir()
	w := sinkWalk{bin: buildDpstream(t, dir), prod: filepath.Join(dir, "producer")}
	if out, err := exec.Command("go", "build", "-o", w.prod, "../../examples/producer").CombinedOutput(); err != nil {
		t.Fatalf("go build producer: %v\n%s", err, out)
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	w.id = prefix + "-" + hex.EncodeToString(rb[:])
	w.in, w.out, w.table = w.id+"-readings", w.id+"-releases", "releases_"+hex.EncodeToString(rb[:])
	var key [32]byte
	_, _ = rand.Read(key[:])
	w.env = append(os.Environ(), "DPSTREAM_KEY="+hex.EncodeToString(key[:]), "DPSTREAM_KAFKA_BROKERS="+strings.Join(brokers, ","),
		"DPSTREAM_OBSERVABILITY_LISTEN=")
	return w
}

// runArgs is `dpstream run` with the shipped configuration config
// (under deploy/) on the walk's topics and group, with 5 s windows (as
// TestKafkaWalkthrough: lateness and idle timeout shortened to match).
func (w sinkWalk) runArgs(config string) []string {
	return []string{w.bin, "run", "--config", filepath.Join("..", "..", "deploy", config),
		"--input-topics", w.in, "--output-topic", w.out, "--group-id", w.id,
		"--set", "windows.size=5s", "--set", "windows.allowed_lateness=1s", "--set", "windows.idle_timeout=2s"}
}

// producerArgs is the example producer on the walk's input topic for 12 s,
// a reading every 1.25 s per meter (4 per meter and 5 s window, as the
// walkthrough's 4 per 1 m window).
func (w sinkWalk) producerArgs(brokers []string) []string {
	return []string{w.prod, "--brokers", strings.Join(brokers, ","), "--topic", w.in, "--interval", "1.25s", "--duration", "12s"}
}

// runForRecords runs dpstream (runArgs) and the producer (producerArgs)
// until the output topic holds the JSON records of two windows, stops
// dpstream (SIGTERM, which drains) and returns every record of out.
func runForRecords(t *testing.T, ctx context.Context, brokers []string, out string, env, runArgs, producerArgs []string) map[string]schema.ReleaseRecord {
	t.Helper()
	run, logs := runWithProducer(t, ctx, env, runArgs, producerArgs)
	// Wait for releases of two windows, then drain dpstream.
	var recs map[string]schema.ReleaseRecord
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		time.Sleep(2 * time.Second)
		if recs = readRecords(t, ctx, brokers, out); windowsOf(recs) >= 2 {
			break
		}
	}
	_ = run.Process.Signal(syscall.SIGTERM)
	if err := run.Wait(); err != nil {
		t.Fatalf("dpstream run: %v\n%s", err, logs.String())
	}
	if recs = readRecords(t, ctx, brokers, out); windowsOf(recs) < 2 {
		t.Fatalf("%d JSON records of %d windows; dpstream log:\n%s", len(recs), windowsOf(recs), logs.String())
	}
	return recs
}

// sinkAndCompare creates the Debezium JDBC sink connector id-sink on the
// Connect worker at connect, writing the output topic out into table
// (upserted on "key") of the PostgreSQL at pg, waits until the table has
// a row per record, and checks that every row is one of recs with its
// key, window, aggregate, group, series, label, value type, value,
// interval, scale and spent budget. The connector and the table are
// removed at the end.
func sinkAndCompare(t *testing.T, connect, pg, id, out, table string, recs map[string]schema.ReleaseRecord) {
	t.Helper()
	pgURL, err := url.Parse(pg)
	if err != nil {
		t.Fatalf("%s: %v", envPostgres, err)
	}
	// The JDBC sink: the output topic into table, upserted on "key".
	name := id + "-sink"
	jdbcURL := "jdbc:postgresql://" + pgURL.Host + pgURL.Path
	connector(t, connect, http.MethodPut, "/connectors/"+name+"/config", map[string]string{
		"connector.class":        "io.debezium.connector.jdbc.JdbcSinkConnector",
		"tasks.max":              "1",
		"topics":                 out,
		"connection.url":         jdbcURL,
		"connection.username":    pgURL.User.Username(),
		"connection.password":    "",
		"insert.mode":            "upsert",
		"primary.key.mode":       "record_value",
		"primary.key.fields":     "key",
		"schema.evolution":       "basic",
		"collection.name.format": table,
	})
	defer connector(t, connect, http.MethodDelete, "/connectors/"+name, nil)
	defer psql(t, pg, "DROP TABLE IF EXISTS "+table)

	cols := "key, release_key, window_start_ms, window_end_ms, aggregate, group_region, series, label, value_type, value, ci_lo, ci_hi, scale, spent_epsilon"
	var rows [][]string
	for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		if rows = psqlRows(pg, "SELECT "+cols+" FROM "+table); len(rows) >= len(recs) {
			break
		}
	}
	if len(rows) != len(recs) {
		t.Fatalf("table %s has %d rows, the output topic %d records", table, len(rows), len(recs))
	}
	for _, row := range rows {
		r, ok := recs[row[0]]
		if !ok {
			t.Errorf("row %q is no record of the run", row[0])
			continue
		}
		want := []string{r.Key, r.ReleaseKey, strconv.FormatInt(r.WindowStart, 10), strconv.FormatInt(r.WindowEnd, 10),
			r.Aggregate, r.Group[0].Value, r.Series, r.Label, r.ValueType}
		for i, w := range want {
			if row[i] != w {
				t.Errorf("row %q column %d = %q, want %q", r.Key, i, row[i], w)
			}
		}
		for i, w := range []float64{r.Value, r.Lo, r.Hi, r.Scale, r.Spent.Epsilon} {
			if got, err := strconv.ParseFloat(row[len(want)+i], 64); err != nil || got != w {
				t.Errorf("row %q column %d = %q, want %v", r.Key, len(want)+i, row[len(want)+i], w)
			}
		}
	}
	t.Logf("%d JSON records of %d windows, all in table %s with equal values", len(recs), windowsOf(recs), table)
}

// readRecords decodes every message of topic as a JSON release record,
// failing on any that does not decode or whose key differs.
func readRecords(t *testing.T, ctx context.Context, brokers []string, topic string) map[string]schema.ReleaseRecord {
	t.Helper()
	msgs, err := snapshotTopic(ctx, brokers, topic)
	if err != nil {
		return nil // the output topic may not exist yet
	}
	recs := map[string]schema.ReleaseRecord{}
	for _, m := range msgs {
		r, err := schema.DecodeReleaseRecord(m.Value)
		if err != nil || r.Key != string(m.Key) {
			t.Fatalf("output message %q: not a JSON release record with its key (%v)", m.Key, err)
		}
		recs[r.Key] = r
	}
	return recs
}

// windowsOf returns the number of windows recs hold.
func windowsOf(recs map[string]schema.ReleaseRecord) int {
	ws := map[int64]bool{}
	for _, r := range recs {
		ws[r.WindowStart] = true
	}
	return len(ws)
}

// connector sends a request to the Connect worker's REST API (body as
// JSON unless nil) and fails unless it succeeds.
func connector(t *testing.T, base, method, path string, body any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(base, "/")+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("Connect %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var msg bytes.Buffer
	_, _ = msg.ReadFrom(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("Connect %s %s: %s: %s", method, path, resp.Status, msg.String())
	}
}

// psql runs one SQL statement against the server at pg.
func psql(t *testing.T, pg, sql string) {
	t.Helper()
	if out, err := exec.Command("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", pg, "-c", sql).CombinedOutput(); err != nil {
		t.Errorf("psql %q: %v\n%s", sql, err, out)
	}
}

// psqlRows runs a query against the server at pg and returns its rows,
// columns split at tabs (none when the query fails, e.g. while the table
// does not exist yet).
func psqlRows(pg, sql string) [][]string {
	out, err := exec.Command("psql", "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-d", pg, "-c", sql).Output()
	if err != nil {
		return nil
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line != "" {
			rows = append(rows, strings.Split(line, "\t"))
		}
	}
	return rows
}
