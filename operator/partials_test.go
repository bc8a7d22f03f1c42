package operator

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/privacy/rng"
)

// assemble feeds msgs to a new assembler with macKey (format version 3
// only) and returns the completed partials' encodings, or the first error.
func assemble(macKey []byte, msgs []kafka.Message) ([][]byte, error) {
	return assembleWith(newAssembler(macKey, nil, math.MinInt64), msgs)
}

// assembleWith is assemble with a given assembler.
func assembleWith(a *assembler, msgs []kafka.Message) ([][]byte, error) {
	var out [][]byte
	for i, m := range msgs {
		c, err := decodePartialChunk(m.Value)
		if err != nil {
			return nil, err
		}
		b, _, err := a.add(c, int64(i))
		if err != nil {
			return nil, err
		}
		if b != nil {
			out = append(out, b)
		}
	}
	return out, nil
}

// TestPartialChunksRoundTrip: a partial larger than a chunk is split and
// reassembled to the same bytes, whatever the order of its chunks.
func TestPartialChunksRoundTrip(t *testing.T) {
	mk := partialMACKey(testKey(), testBinding())
	b := bytes.Repeat([]byte("partial-state "), 2*partialChunkBytes/14+3)
	msgs := partialMessages("p", mk, 60_000, 3, b)
	if len(msgs) != 3 {
		t.Fatalf("%d chunks for %d bytes, want 3", len(msgs), len(b))
	}
	msgs[0], msgs[2] = msgs[2], msgs[0]
	got, err := assemble(mk, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !bytes.Equal(got[0], b) {
		t.Fatalf("reassembled %d partials, want the original one", len(got))
	}
}

// TestPartialMACRejectsForgeries: stage 2 accepts a partial only with the
// MAC of the deployment's key over its window, input partition and bytes.
// A writer without the key — who could compute the plain SHA-256 that
// format version 1 carried — cannot get its own partial state merged, nor
// relabel a genuine partial as another window's or partition's.
func TestPartialMACRejectsForgeries(t *testing.T) {
	mk := partialMACKey(testKey(), testBinding())
	genuine := []byte("the partial state of window 60000, input partition 3")

	// Signed with another key.
	var other rng.Key
	other[0] = 1
	if _, err := assemble(mk, partialMessages("p", partialMACKey(other, testBinding()), 60_000, 3, genuine)); !errors.Is(err, errPartialMessage) {
		t.Errorf("a partial under another key: err %v, want errPartialMessage", err)
	}

	// Forged: bytes of the attacker's choice with their SHA-256 in place of
	// the MAC (version 1's integrity check, which anyone can compute).
	forged := []byte("a partial state of the attacker's choice")
	sum := sha256.Sum256(forged)
	v := append([]byte(nil), partialMagic...)
	v = binary.AppendVarint(v, 60_000)
	v = binary.AppendVarint(v, 3)
	v = append(v, sum[:]...)
	v = binary.AppendUvarint(v, 0)
	v = binary.AppendUvarint(v, 1)
	v = append(v, forged...)
	if _, err := assemble(mk, []kafka.Message{{Value: v}}); !errors.Is(err, errPartialMessage) {
		t.Errorf("a forged partial with a SHA-256: err %v, want errPartialMessage", err)
	}

	// Relabelled: the genuine message with another window or partition in
	// its header.
	for _, h := range []struct {
		start int64
		pid   int64
	}{{120_000, 3}, {60_000, 2}} {
		m := partialMessages("p", mk, 60_000, 3, genuine)[0]
		c, err := decodePartialChunk(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		w := append([]byte(nil), partialMagic...)
		w = binary.AppendVarint(w, h.start)
		w = binary.AppendVarint(w, h.pid)
		w = append(w, c.id.sum[:]...)
		w = binary.AppendUvarint(w, 0)
		w = binary.AppendUvarint(w, 1)
		w = append(w, c.data...)
		if _, err := assemble(mk, []kafka.Message{{Value: w}}); !errors.Is(err, errPartialMessage) {
			t.Errorf("the genuine partial relabelled as window %d, partition %d: err %v, want errPartialMessage", h.start, h.pid, err)
		}
	}

	// The genuine one passes.
	if got, err := assemble(mk, partialMessages("p", mk, 60_000, 3, genuine)); err != nil || len(got) != 1 {
		t.Errorf("the genuine partial: %d assembled, err %v", len(got), err)
	}
}

// testBinding is a deployment's partials binding for the unit tests.
func testBinding() partialBinding {
	return partialBindingOf(stateTestConfig().Kafka, "digest-of-the-configuration")
}

// TestPartialMACBindsDeployment: a partial written by another deployment
// under the same key — another release namespace, configuration digest,
// input topics or partials topic — is rejected as not this deployment's
// (errPartialMAC), and each bound field changes the MAC key; the input
// topics' order does not (they are sorted), and fields cannot run into
// each other (length prefixes). Before the binding, the MAC key depended
// on the noise key alone, so all of these were accepted ("the first
// complete partial wins": a replayed partial replaced a partition's data).
func TestPartialMACBindsDeployment(t *testing.T) {
	k := testKey()
	base := testBinding()
	mine := partialMACKey(k, base)
	genuine := []byte("the partial state of window 60000, input partition 3")
	if got, err := assemble(mine, partialMessages("p", mine, 60_000, 3, genuine)); err != nil || len(got) != 1 {
		t.Fatalf("this deployment's own partial: %d assembled, err %v", len(got), err)
	}
	others := map[string]func(*partialBinding){
		"namespace":       func(b *partialBinding) { b.namespace = "staging" },
		"digest":          func(b *partialBinding) { b.digest = "digest-of-another-configuration" },
		"one more topic":  func(b *partialBinding) { b.inputTopics = append(b.inputTopics, "in2") },
		"other topic":     func(b *partialBinding) { b.inputTopics = []string{"in-staging"} },
		"partials topic":  func(b *partialBinding) { b.partialsTopic = "out.partials-staging" },
		"shifted fields":  func(b *partialBinding) { b.namespace, b.digest = b.namespace+b.digest[:1], b.digest[1:] },
		"topic into next": func(b *partialBinding) { b.inputTopics, b.partialsTopic = []string{"in" + b.partialsTopic}, "" },
	}
	seen := map[string]string{string(mine): "base"}
	for name, change := range others {
		b := testBinding()
		b.inputTopics = append([]string(nil), b.inputTopics...)
		change(&b)
		theirs := partialMACKey(k, b)
		if prev, dup := seen[string(theirs)]; dup {
			t.Errorf("%s: the same MAC key as %s", name, prev)
		}
		seen[string(theirs)] = name
		replayed := partialMessages("p", theirs, 60_000, 3, genuine)
		if _, err := assemble(mine, replayed); !errors.Is(err, errPartialMAC) {
			t.Errorf("a partial of a deployment with another %s, same key: err %v, want errPartialMAC", name, err)
		}
	}
	c := stateTestConfig()
	c.Kafka.InputTopics = []string{"b", "a"}
	d := stateTestConfig()
	d.Kafka.InputTopics = []string{"a", "b"}
	if !bytes.Equal(partialMACKey(k, partialBindingOf(c.Kafka, "x")), partialMACKey(k, partialBindingOf(d.Kafka, "x"))) {
		t.Error("the input topics' order changes the MAC key")
	}
}

// TestPartialV2OnlyBeforeCutoff: partials of the previous format (dpp2,
// MAC key bound to nothing but the noise key) are read for windows that
// started before the upgrade cutoff only; after it they are rejected
// (errPartialV2) before they are even collected. Under another key they
// fail the MAC as before.
func TestPartialV2OnlyBeforeCutoff(t *testing.T) {
	k := testKey()
	mine, v2 := partialMACKey(k, testBinding()), partialMACKeyV2(k)
	const cutoff = 120_000
	b := []byte("a partial written before the upgrade")
	newAsm := func() *assembler { return newAssembler(mine, v2, cutoff) }
	if got, err := assembleWith(newAsm(), partialMessagesMagic(partialMagicV2, "p", v2, 60_000, 3, b)); err != nil || len(got) != 1 {
		t.Errorf("dpp2 before the cutoff: %d assembled, err %v", len(got), err)
	}
	a := newAsm()
	if _, err := assembleWith(a, partialMessagesMagic(partialMagicV2, "p", v2, cutoff, 3, b)); !errors.Is(err, errPartialV2) {
		t.Errorf("dpp2 at the cutoff: err %v, want errPartialV2", err)
	}
	if len(a.parts) != 0 {
		t.Errorf("a rejected dpp2 chunk was kept (%d partials collecting)", len(a.parts))
	}
	var other rng.Key
	other[0] = 1
	if _, err := assembleWith(newAsm(), partialMessagesMagic(partialMagicV2, "p", partialMACKeyV2(other), 60_000, 3, b)); !errors.Is(err, errPartialMAC) {
		t.Errorf("dpp2 under another key: err %v, want errPartialMAC", err)
	}
	// A dpp3 partial's MAC is not valid as dpp2 (nor the reverse): the
	// version is part of the partial's identity.
	m := partialMessages("p", mine, 60_000, 3, b)[0]
	m.Value = append(append([]byte(nil), partialMagicV2...), m.Value[len(partialMagic):]...)
	if _, err := assembleWith(newAsm(), []kafka.Message{m}); !errors.Is(err, errPartialMAC) {
		t.Errorf("a dpp3 partial relabelled dpp2: err %v, want errPartialMAC", err)
	}
}

// TestPartialPreviousBinding: after a configuration change, partials
// written under the deployment's previous binding (as the state record
// says) are accepted for the windows before the cutoff only; another
// deployment's are not; with the same configuration there is no previous
// binding.
func TestPartialPreviousBinding(t *testing.T) {
	k := testKey()
	c := stateTestConfig()
	c.Kafka.ScaleOut = true
	cur := partialBindingOf(c.Kafka, "digest-now")
	op, err := New(c, WithKey(k))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recovered{digest: "digest-now", deployment: op.deployment("")}
	if _, ok := previousBinding(rec, cur); ok {
		t.Error("same configuration: a previous binding")
	}
	rec.digest = "digest-before"
	pb, ok := previousBinding(rec, cur)
	if !ok || pb.digest != "digest-before" || pb.namespace != cur.namespace || pb.partialsTopic != cur.partialsTopic {
		t.Fatalf("previous binding %+v, %v", pb, ok)
	}
	const cutoff = 120_000
	a := func() *assembler {
		a := newAssembler(partialMACKey(k, cur), partialMACKeyV2(k), math.MinInt64)
		a.prevKey, a.prevBefore = partialMACKey(k, pb), cutoff
		return a
	}
	b := []byte("a partial written before the configuration change")
	if got, err := assembleWith(a(), partialMessages("p", partialMACKey(k, pb), 60_000, 3, b)); err != nil || len(got) != 1 {
		t.Errorf("previous binding before the cutoff: %d assembled, err %v", len(got), err)
	}
	if _, err := assembleWith(a(), partialMessages("p", partialMACKey(k, pb), cutoff, 3, b)); !errors.Is(err, errPartialMAC) {
		t.Errorf("previous binding at the cutoff: err %v, want errPartialMAC", err)
	}
	other := pb
	other.namespace = "staging"
	if _, err := assembleWith(a(), partialMessages("p", partialMACKey(k, other), 60_000, 3, b)); !errors.Is(err, errPartialMAC) {
		t.Errorf("another deployment before the cutoff: err %v, want errPartialMAC", err)
	}
}
