package operator

// compat_gen_test.go writes the compatibility records of testdata/compat:
// state-topic records (a plain state record with its budget ledger and
// running totals, and one carrying a publication intent), the intent's
// chunks (two: the intent is larger than intentChunkBytes) and the
// partials topic's messages of one scale-out window (two input
// partitions, one partial of several chunks). They are written by the
// writers of the commit named in testdata/compat/GENERATED, and
// compat_test.go checks that the current readers still read them. Rewrite
// them only on purpose (a deliberate, documented format break):
//
//	go test ./operator -run '^TestCompatGenerate$' -args -update-compat

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

var updateCompat = flag.Bool("update-compat", false, "rewrite operator/testdata/compat with today's writers (see compat_gen_test.go)")

// compatDir holds the compatibility records.
const compatDir = "testdata/compat"

// compatGroups is the number of public groups of the state and intent
// records: 80 groups × 4 windows × 4 releases (count, sum and their
// running totals) of about 500 bytes each make an intent of two chunks
// (intentChunkBytes is 512 KiB).
const compatGroups = 80

// compatWindows is the number of windows of each of the two batches (the
// published one recorded in the state record, and the intent's).
const compatWindows = 4

// compatPartialPIDs are the input partitions of the scale-out window: the
// first writes one chunk, the second (compatBigUnits units) several.
var compatPartialPIDs = []int32{0, 3}

// compatBigUnits is the number of units (one event each) of the large
// partial: about 34 bytes per unit in the encoding (measured: 1,020,062
// bytes for 30,000 units), so that it needs two chunks of
// partialChunkBytes (512 KiB).
const compatBigUnits = 18_000

// compatSmallUnits is the number of units of the small partial.
const compatSmallUnits = 25

// compatRunningConfig is the configuration of the state and intent
// records: counts and sums with running totals over a horizon, laplace
// noise, compatGroups public groups.
func compatRunningConfig() Config {
	c := runningConfig("laplace")
	c.Privacy.PublicGroups = nil
	for _, g := range compatRegions() {
		c.Privacy.PublicGroups = append(c.Privacy.PublicGroups, []string{g})
	}
	return c
}

// compatRegions returns the compatGroups group values r00, r01, ….
func compatRegions() []string {
	out := make([]string, compatGroups)
	for i := range out {
		out[i] = fmt.Sprintf("r%02d", i)
	}
	return out
}

// compatScaleOutConfig is the configuration of the partials records:
// histograms, counts and sums, scale-out.
func compatScaleOutConfig() Config {
	c := stateTestConfig()
	c.Windows.Aggregates = []string{AggHistogram, AggCount, AggSum}
	c.Kafka.ScaleOut = true
	return c
}

// compatEvents returns the events of input partition pid in the
// scale-out window [testBase, testBase+testSize): n units with one event
// each, spread over the public groups, the histogram's buckets and values
// in [testLower, testUpper] (so no bound drops anything and the window's
// truth is plain counting: see compatTruth).
func compatEvents(pid int32, n, numBuckets int) []windows.Event {
	regions := []string{"east", "north", "south"}
	out := make([]windows.Event, n)
	for i := range out {
		ts := testBase + int64(i*7)%testSize.Milliseconds()
		out[i] = windows.Event{
			Partition: pid, Offset: int64(i), Time: ts, Arrival: ts,
			Unit:   fmt.Sprintf("p%d-u%05d", pid, i),
			Group:  schema.MakeGroup(regions[i%len(regions)]),
			Bucket: (i / len(regions)) % numBuckets,
			Value:  float64(i%9) + 0.5, HasValue: true,
		}
	}
	return out
}

// compatPartialEvents returns every input partition's events.
func compatPartialEvents(numBuckets int) map[int32][]windows.Event {
	return map[int32][]windows.Event{
		compatPartialPIDs[0]: compatEvents(compatPartialPIDs[0], compatSmallUnits, numBuckets),
		compatPartialPIDs[1]: compatEvents(compatPartialPIDs[1], compatBigUnits, numBuckets),
	}
}

// compatFiles builds the compatibility records with today's writers: file
// name → content (names ending in .gz are stored gzipped).
func compatFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	o, err := New(compatRunningConfig(), WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := o.plan.horizonOf(testBase)
	var groups []string
	for _, g := range compatRegions() {
		groups = append(groups, schema.MakeGroup(g))
	}
	ws := truthWindows(rand.New(rand.NewPCG(19, 1)), hs, o.plan.size, 2*compatWindows, groups)
	batch := func(ws []windows.Window, l *ledgerRecord, run *runningRecord) ([]kafka.Message, *ledgerRecord, *runningRecord) {
		var msgs []kafka.Message
		for i := range ws {
			out, _, _, err := o.plan.releaseWindowAt(&ws[i], o.key, o.cfg.Kafka.namespace(), o.instance, nil, l)
			if err != nil {
				t.Fatal(err)
			}
			if out, run, err = o.plan.addRunning(out, run, &ws[i]); err != nil {
				t.Fatal(err)
			}
			for _, m := range out {
				msgs = append(msgs, kafka.Message{Key: []byte(m.key), Value: m.value})
			}
			l = o.plan.advance(l, ws[i].Start, ws[i].End)
		}
		return msgs, l, run
	}
	first, l, run := batch(ws[:compatWindows], nil, nil)
	end := map[int]int64{0: int64(len(first))}
	final := stateRecord{ClosedThrough: ws[compatWindows-1].End, Origin: hs, Digest: o.plan.digest, Ledger: l, Running: run}
	if files["state.json"], err = encodeState(final, end); err != nil {
		t.Fatal(err)
	}
	second, l2, run2 := batch(ws[compatWindows:], l, run)
	chunks, sum := encodeIntent(second)
	in := intentRecord{Through: ws[2*compatWindows-1].End, Ledger: l2, Digest: o.plan.digest, Running: run2,
		Chunks: len(chunks), Messages: len(second), SHA256: sum}
	pending := final
	pending.Pending = &in
	if files["state_pending.json"], err = encodeState(pending, end); err != nil {
		t.Fatal(err)
	}
	for i, c := range chunks {
		files[fmt.Sprintf("intent.%d.bin.gz", i)] = c
	}
	files["partials.bin.gz"] = appendFramed(nil, compatPartialMessages(t)) // the intent's framing
	return files
}

// compatPartialMessages returns the partials topic's messages of the
// scale-out window at testBase: one partial per input partition, as stage
// 1 writes them (publishPartials), in partition order.
func compatPartialMessages(t *testing.T) []kafka.Message {
	t.Helper()
	cfg := compatScaleOutConfig()
	dec, err := schema.NewDecoder(cfg.Schema)
	if err != nil {
		t.Fatal(err)
	}
	wcfg := windowsConfig(cfg, dec.NumBuckets())
	var msgs []kafka.Message
	evs := compatPartialEvents(dec.NumBuckets())
	for _, pid := range compatPartialPIDs {
		agg, err := windows.New(wcfg, seedFromKey(testKey()))
		if err != nil {
			t.Fatal(err)
		}
		if err := agg.EmitFrom(testBase); err != nil {
			t.Fatal(err)
		}
		agg.AssignPartitions(pid)
		for _, e := range evs[pid] {
			if s, _ := agg.Add(e); s != windows.Accepted {
				t.Fatalf("event %d of partition %d: status %v", e.Offset, pid, s)
			}
		}
		end := testBase + testSize.Milliseconds()
		if err := agg.Advance(pid, end+cfg.Windows.AllowedLateness.Milliseconds()); err != nil {
			t.Fatal(err)
		}
		ps := agg.PollPartials(1)
		if len(ps) != 1 || ps[0].Start != testBase {
			t.Fatalf("partition %d: %d partials, want the window at %d", pid, len(ps), testBase)
		}
		b, err := ps[0].MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, partialMessagesMagic(partialMagicV2, cfg.Kafka.partialsTopic(), partialMACKeyV2(testKey()), ps[0].Start, pid, b)...)
	}
	return msgs
}

// TestCompatGenerate rewrites testdata/compat with -update-compat (and
// skips without it).
func TestCompatGenerate(t *testing.T) {
	if !*updateCompat {
		t.Skip("rewrites testdata/compat only with -update-compat")
	}
	if err := os.MkdirAll(compatDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range compatFiles(t) {
		if strings.HasSuffix(name, ".gz") {
			var z bytes.Buffer
			w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
			w.Write(b)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			b = z.Bytes()
		}
		if err := os.WriteFile(filepath.Join(compatDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	dirty, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "..").Output()
	if err != nil {
		t.Fatal(err)
	}
	note := "These records were written by the writers of commit " + strings.TrimSpace(string(head)) +
		" (go test ./operator -run '^TestCompatGenerate$' -args -update-compat).\n"
	if len(dirty) > 0 {
		note += "Uncommitted changes to tracked files at the time:\n" + string(dirty)
	}
	if err := os.WriteFile(filepath.Join(compatDir, "GENERATED"), []byte(note), 0o644); err != nil {
		t.Fatal(err)
	}
}
