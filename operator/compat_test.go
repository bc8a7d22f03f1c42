package operator

// compat_test.go: records written by an earlier commit (testdata/compat,
// see compat_gen_test.go and testdata/compat/GENERATED) are read by
// today's readers, field by field. A failure here means a deployment
// upgraded to this code would misread its own state topic or the partials
// of instances still running the older code: change the readers, not the
// records, unless the format break is deliberate and documented.

import (
	"bytes"
	"compress/gzip"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// readCompat returns a compatibility record's content (gunzipped for a
// name ending in .gz).
func readCompat(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(compatDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(name, ".gz") {
		return b
	}
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if b, err = io.ReadAll(z); err != nil {
		t.Fatal(err)
	}
	return b
}

// The pinned facts of the records (written by compatFiles with testKey).
const (
	compatHorizonStart = testBase             // 2024-01-01T00:00:00Z: the horizon and the deployment's origin
	compatHorizonEnd   = testBase + 30*10_000 // runningTestWindows windows of testSize
	compatClosed       = testBase + 4*10_000  // after the first compatWindows windows
	compatIntentEnd    = testBase + 8*10_000  // after the intent's compatWindows windows
	compatDigest       = "80625137f591dac8b893c8bd06d432c5b78ba9dd275c8205596888a84f87d084"
	compatBudgetID     = "bc0cd690ee8b6df256c2a1ab2840fefc"
	compatIntentSHA256 = "da4e2428b5a1a0500ece4748f8bf2a2aa0b1692b6ca3770e69621a5c04cc4b18"
)

// checkCompatLedger compares a pinned ledger with the expected one (the
// plan's laplace/discrete-laplace spend through `through`).
func checkCompatLedger(t *testing.T, l *ledgerRecord, through int64, spent float64) {
	t.Helper()
	want := ledgerRecord{Start: compatHorizonStart, End: compatHorizonEnd, Size: 10_000,
		Total: schema.Budget{Epsilon: 20, Delta: 1e-6}, Budget: compatBudgetID,
		SegStart: compatHorizonStart, Through: through, Spent: schema.Budget{Epsilon: spent, Delta: 1e-6}}
	if l == nil || *l != want {
		t.Errorf("ledger %+v, want %+v", l, want)
	}
}

// checkCompatRunning compares two pinned running totals and the record's
// span and size.
func checkCompatRunning(t *testing.T, r *runningRecord, through int64, windows int64, count, sum float64, slack float64) {
	t.Helper()
	if r == nil {
		t.Fatal("no running record")
	}
	if r.Start != compatHorizonStart || r.Through != through || len(r.Totals) != 2*compatGroups {
		t.Errorf("running record [%d, %d) with %d totals, want [%d, %d) with %d", r.Start, r.Through, len(r.Totals),
			compatHorizonStart, through, 2*compatGroups)
	}
	c := r.Totals[runningKey(AggCount, schema.MakeGroup("r07"))]
	wantC := runningTotal{Value: count, Windows: windows,
		Noise: []runningNoise{{Mechanism: "discrete-laplace", Scale: 6.3625221911522, Variance: 80.79691625191579, N: windows}}}
	if c == nil || c.Value != wantC.Value || c.Windows != wantC.Windows || c.Slack != 0 || !slices.Equal(c.Noise, wantC.Noise) {
		t.Errorf("running count of r07: %+v, want %+v", c, wantC)
	}
	s := r.Totals[runningKey(AggSum, schema.MakeGroup("r42"))]
	wantS := runningTotal{Value: sum, Windows: windows, Slack: slack,
		Noise: []runningNoise{{Mechanism: "laplace", Scale: 63.62528663444468, Variance: 8096.354198630489, N: windows}}}
	if s == nil || s.Value != wantS.Value || s.Windows != wantS.Windows || s.Slack != wantS.Slack || !slices.Equal(s.Noise, wantS.Noise) {
		t.Errorf("running sum of r42: %+v, want %+v", s, wantS)
	}
}

// TestCompatStateRecord: the pinned state record (with its budget ledger
// and running totals) decodes to what was written, and encodes back to the
// same bytes (no field lost or renamed).
func TestCompatStateRecord(t *testing.T) {
	b := readCompat(t, "state.json")
	s, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 2 || s.ClosedThrough != compatClosed || s.Origin != compatHorizonStart || s.Digest != compatDigest || s.Pending != nil {
		t.Errorf("state record v%d closed through %d, origin %d, digest %s, pending %v",
			s.Version, s.ClosedThrough, s.Origin, s.Digest, s.Pending)
	}
	if len(s.OutputOffsets) != 1 || s.OutputOffsets["0"] != 640 {
		t.Errorf("output offsets %v, want partition 0 at 640", s.OutputOffsets)
	}
	checkCompatLedger(t, s.Ledger, compatClosed, 3.771900454291502)
	checkCompatRunning(t, s.Running, compatClosed, 4, 118, -148.91384887695312, 0.0001220703125)
	again, err := encodeState(*s, map[int]int64{0: 640})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Errorf("the decoded record encodes to other bytes:\n%s\nwant\n%s", again, b)
	}
}

// TestCompatLedgerSameConfiguration: the configuration that wrote the
// pinned ledger continues it (its budget id is unchanged), so that an
// upgrade does not take the same configuration for a changed one.
func TestCompatLedgerSameConfiguration(t *testing.T) {
	s, err := decodeState(readCompat(t, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := testPlan(t, compatRunningConfig())
	if id := p.budgetID(); id != compatBudgetID {
		t.Errorf("budget id %s, the pinned ledger has %s", id, compatBudgetID)
	}
	if got, err := p.reconcile(s.Ledger, s.ClosedThrough); err != nil || got != s.Ledger {
		t.Errorf("reconcile: %+v, %v; want the pinned ledger unchanged", got, err)
	}
	if p.digest != compatDigest {
		t.Errorf("release digest %s, the pinned record has %s", p.digest, compatDigest)
	}
}

// compatIntentChunks reads the pinned intent's chunks by index.
func compatIntentChunks(t testing.TB) map[int][]byte {
	return map[int][]byte{0: readCompat(t, "intent.0.bin.gz"), 1: readCompat(t, "intent.1.bin.gz")}
}

// TestCompatIntent: the pinned state record with a publication intent of
// two chunks decodes, the intent's messages are reassembled and match the
// recorded count and digest, each is a release whose key is its own, and
// the messages re-encode to the same chunks.
func TestCompatIntent(t *testing.T) {
	b := readCompat(t, "state_pending.json")
	s, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.ClosedThrough != compatClosed || s.Origin != compatHorizonStart || s.Digest != compatDigest {
		t.Errorf("state record closed through %d, origin %d, digest %s", s.ClosedThrough, s.Origin, s.Digest)
	}
	in := s.Pending
	if in == nil {
		t.Fatal("no intent")
	}
	if in.Through != compatIntentEnd || in.Chunks != 2 || in.Messages != 640 || in.SHA256 != compatIntentSHA256 || in.Digest != compatDigest {
		t.Errorf("intent through %d, %d chunks, %d messages, sha256 %s, digest %s", in.Through, in.Chunks, in.Messages, in.SHA256, in.Digest)
	}
	checkCompatLedger(t, in.Ledger, compatIntentEnd, 7.51013565032191)
	checkCompatRunning(t, in.Running, compatIntentEnd, 8, 222, 155.9512939453125, 0.000244140625)
	if again, err := encodeState(*s, map[int]int64{0: 640}); err != nil || !bytes.Equal(again, b) {
		t.Errorf("the decoded record encodes to other bytes (err %v)", err)
	}

	chunks := compatIntentChunks(t)
	if len(chunks[0]) != intentChunkBytes || len(chunks[1]) != 449_630 {
		t.Errorf("chunks of %d and %d bytes", len(chunks[0]), len(chunks[1]))
	}
	msgs, err := readIntent(in, chunks)
	if err != nil {
		t.Fatal(err)
	}
	perAgg := map[string]int{}
	for i, m := range msgs {
		r, err := schema.DecodeRelease(m.Value)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if r.Key() != string(m.Key) || r.WindowStart < compatClosed || r.WindowEnd > compatIntentEnd || r.Instance != "test-instance" {
			t.Errorf("message %d: key %q, release %s [%d, %d) of %s", i, m.Key, r.Key(), r.WindowStart, r.WindowEnd, r.Instance)
		}
		perAgg[r.Aggregate]++
	}
	if perAgg[AggCount] != 320 || perAgg[AggSum] != 320 {
		t.Errorf("releases per aggregate %v, want 320 counts and 320 sums", perAgg)
	}
	first, err := schema.DecodeRelease(msgs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if string(msgs[0].Key) != "test/2024-01-01T00:00:40.000Z|count|r00" || first.WindowStart != compatClosed ||
		len(first.Series) != 2 || first.Series[0].Mechanism != "discrete-laplace" || !slices.Equal(first.Series[0].Ints, []int64{30}) ||
		first.Series[1].Name != "running" || !slices.Equal(first.Series[1].Ints, []int64{116}) || first.Series[1].Windows != 5 {
		t.Errorf("first message %q: %+v", msgs[0].Key, first)
	}
	again, sum := encodeIntent(msgs)
	if sum != in.SHA256 || len(again) != 2 || !bytes.Equal(again[0], chunks[0]) || !bytes.Equal(again[1], chunks[1]) {
		t.Errorf("the messages re-encode to %d chunks with sha256 %s", len(again), sum)
	}
}

// compatPartialsTopic returns the pinned partials topic's messages.
func compatPartialsTopic(t testing.TB) []kafka.Message {
	msgs, err := parseFramed(readCompat(t, "partials.bin.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestCompatPartialChunks: the pinned dpp2 messages decode to their
// window, input partition, chunk index and count, with the key stage 1
// gives them.
func TestCompatPartialChunks(t *testing.T) {
	msgs := compatPartialsTopic(t)
	want := []struct {
		key      string
		pid      int32
		index, n int
		bytes    int
	}{
		{"1704067200000/0", 0, 0, 1, 910},
		{"1704067200000/3", 3, 0, 2, partialChunkBytes},
		{"1704067200000/3", 3, 1, 2, 87_774},
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	for i, w := range want {
		if !bytes.HasPrefix(msgs[i].Value, []byte("dpp2")) {
			t.Errorf("message %d: no dpp2 magic", i)
		}
		c, err := decodePartialChunk(msgs[i].Value)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if string(msgs[i].Key) != w.key || c.id.start != testBase || c.id.pid != w.pid || c.index != w.index || c.n != w.n || len(c.data) != w.bytes {
			t.Errorf("message %d: key %q, window %d, partition %d, chunk %d of %d, %d bytes; want %+v",
				i, msgs[i].Key, c.id.start, c.id.pid, c.index, c.n, len(c.data), w)
		}
	}
}

// TestCompatPartialsMACOldScheme pins the partials MAC as of commit
// 4870909 (format "dpp2"): HMAC-SHA256 under the key HMAC-SHA256(noise
// key, "dpstream/partials-mac/v1"), over varint(window start) ‖
// varint(input partition) ‖ the partial's whole encoding, stored in every
// chunk's header. It is spelled out here independently of partialMAC.
// The binding did change on purpose (issue 18 §2, format "dpp3"): the
// reader accepts these dpp2 messages under the old key only for windows
// that start before the state record's partials_bound_from (the windows in
// flight at an upgrade), and rejects them after it (errPartialV2).
func TestCompatPartialsMACOldScheme(t *testing.T) {
	msgs := compatPartialsTopic(t)
	key := testKey()
	k := hmac.New(sha256.New, key[:])
	k.Write([]byte("dpstream/partials-mac/v1"))
	macKey := k.Sum(nil)
	whole := map[int32][]byte{}
	sums := map[int32][]byte{}
	for _, m := range msgs {
		c, err := decodePartialChunk(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		whole[c.id.pid] = append(whole[c.id.pid], c.data...)
		sums[c.id.pid] = c.id.sum[:]
	}
	wantHex := map[int32]string{
		0: "a69c00601fc89bf8b35df473b65e3a08e1d53e65f126fdbb8b2bb11d60dbfc4e",
		3: "65a1826092046250d321e8d5628a0855886154459232ad1ce24d1952634121d8",
	}
	for pid, b := range whole {
		m := hmac.New(sha256.New, macKey)
		m.Write(binary.AppendVarint(binary.AppendVarint(nil, testBase), int64(pid)))
		m.Write(b)
		if got := m.Sum(nil); !hmac.Equal(got, sums[pid]) || hex.EncodeToString(got) != wantHex[pid] {
			t.Errorf("partition %d: stored MAC %x, old-scheme MAC %x, pinned %s", pid, sums[pid], got, wantHex[pid])
		}
	}
	// The assembler accepts them as format version 2, whatever the order
	// of the chunks, for windows before the upgrade cutoff ...
	slices.Reverse(msgs)
	bound := partialMACKey(key, partialBinding{})
	got, err := assembleWith(newAssembler(bound, partialMACKeyV2(key), testBase+1), msgs)
	if err != nil || len(got) != 2 {
		t.Fatalf("assembled %d partials, err %v", len(got), err)
	}
	// ... and rejects them from the cutoff on.
	if _, err := assembleWith(newAssembler(bound, partialMACKeyV2(key), testBase), msgs); !errors.Is(err, errPartialV2) {
		t.Fatalf("dpp2 partials at the cutoff: err %v, want errPartialV2", err)
	}
}

// TestCompatPartialsContent: the pinned partials reassemble, decode
// (windows.Partial), and merge into the window of their events: per
// group, the units, events, histogram and sum of compatEvents.
func TestCompatPartialsContent(t *testing.T) {
	msgs := compatPartialsTopic(t)
	a := newAssembler(partialMACKey(testKey(), partialBinding{}), partialMACKeyV2(testKey()), testBase+1)
	var parts []windows.Partial
	for i, m := range msgs {
		c, err := decodePartialChunk(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := a.add(c, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			continue
		}
		var p windows.Partial
		if err := p.UnmarshalBinary(b); err != nil {
			t.Fatalf("partition %d: %v", c.id.pid, err)
		}
		if p.Start != testBase || !slices.Equal(p.Partitions, []int32{c.id.pid}) {
			t.Errorf("partial of window %d, partitions %v, in a message of partition %d", p.Start, p.Partitions, c.id.pid)
		}
		parts = append(parts, p)
	}
	if len(parts) != 2 || parts[0].Units() != compatSmallUnits || parts[1].Units() != compatBigUnits {
		t.Fatalf("%d partials", len(parts))
	}
	cfg := compatScaleOutConfig()
	dec, err := schema.NewDecoder(cfg.Schema)
	if err != nil {
		t.Fatal(err)
	}
	win, err := windows.MergePartials(windowsConfig(cfg, dec.NumBuckets()), seedFromKey(testKey()), parts)
	if err != nil {
		t.Fatal(err)
	}
	if win.Start != testBase || win.End != testBase+testSize.Milliseconds() {
		t.Errorf("window [%d, %d)", win.Start, win.End)
	}
	// The truth, counted from the events: one event per unit, within every
	// bound, so nothing is dropped.
	type truth struct {
		n    int64
		hist []int64
		sum  float64
	}
	want := map[string]*truth{}
	for _, evs := range compatPartialEvents(dec.NumBuckets()) {
		for _, e := range evs {
			w := want[e.Group]
			if w == nil {
				w = &truth{hist: make([]int64, dec.NumBuckets())}
				want[e.Group] = w
			}
			w.n++
			w.hist[e.Bucket]++
			w.sum += e.Value
		}
	}
	if len(win.Groups) != len(want) {
		t.Errorf("%d groups, want %d", len(win.Groups), len(want))
	}
	for _, g := range win.Groups {
		w := want[g.Key]
		if w == nil {
			t.Errorf("unexpected group %q", g.Key)
			continue
		}
		if g.Units != w.n || g.Count != w.n || g.Values != w.n || !slices.Equal(g.Histogram, w.hist) || g.Sum != w.sum {
			t.Errorf("group %q: units %d, count %d, values %d, histogram %v, sum %v; want %d events, histogram %v, sum %v",
				g.Key, g.Units, g.Count, g.Values, g.Histogram, g.Sum, w.n, w.hist, w.sum)
		}
	}
}
