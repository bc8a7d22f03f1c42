package operator

// balance.go assigns partitions in the two consumer groups of a scale-out
// deployment (KafkaConfig.ScaleOut) so that the instance that merges
// (stage 2) reads fewer input partitions (stage 1) than the others: stage 2
// runs on one instance at a time, and with equal shares of the input that
// instance is the slowest and sets the pace of the whole deployment.
//
// Both groups elect the same instance without talking to each other: every
// instance joins both with the same random token in its member metadata,
// the merge group gives the partials topic to the member with the smallest
// token, and the input group gives that member a smaller share. When the
// two groups have the same members (always, once the instances have
// joined), the merging instance is the one with the smaller share; while
// they differ (an instance joining or leaving), the shares are merely
// uneven for a generation. Correctness never depends on it: any
// assignment of the input partitions is correct (stage 2 waits for every
// partition's partial), only the speed does.

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"slices"

	"github.com/segmentio/kafka-go"
)

// mergerWeight is the merging instance's share of the input partitions
// relative to another instance's (1 of 2: half). Measured with
// BenchmarkKafkaThroughput (cmd/dpstream, 2026-11-24, 8 partitions, every
// unit on every partition): stage 2 cost about 3.6 s of CPU against
// 7.8 s for stage 1 on half of the partitions, i.e. about as much as 1.8
// input partitions; with 2 instances the weights 1:2 give the merger 3
// partitions of 8 and the other 5 (3 + 1.8 ≈ 4.8 against 5 partitions'
// worth of work) instead of 4 and 4 (5.8 against 4).
const (
	mergerWeight = 1
	memberWeight = 2
)

// balancerTokenMagic starts the member metadata (user data) of dpstream's
// balancers, version 1.
var balancerTokenMagic = []byte("dpsb1")

// newBalancerToken returns a random token for one Operator: 16 bytes from
// the system's cryptographic generator (a collision between two instances
// has probability about 2⁻¹²⁸ and would only make both groups pick by
// member id instead).
func newBalancerToken() []byte {
	t := make([]byte, 16)
	_, _ = rand.Read(t) // never fails (crypto/rand.Read panics rather than return an error)
	return append(append([]byte(nil), balancerTokenMagic...), t...)
}

// member is a group member with its token (nil: foreign or no metadata;
// such members sort after every member with a token).
type member struct {
	id    string
	token []byte
}

// byToken returns members sorted by token, then by member id.
func byToken(ms []kafka.GroupMember) []member {
	out := make([]member, 0, len(ms))
	for _, m := range ms {
		var tok []byte
		if bytes.HasPrefix(m.UserData, balancerTokenMagic) {
			tok = m.UserData
		}
		out = append(out, member{m.ID, tok})
	}
	slices.SortFunc(out, func(a, b member) int {
		switch {
		case a.token == nil && b.token != nil:
			return 1
		case a.token != nil && b.token == nil:
			return -1
		}
		return cmp.Or(bytes.Compare(a.token, b.token), cmp.Compare(a.id, b.id))
	})
	return out
}

// tokenData is the member metadata both balancers send: the instance's
// token.
type tokenData struct{ token []byte }

// UserData is the instance's token.
func (t tokenData) UserData() ([]byte, error) { return t.token, nil }

// inputBalancer assigns the input partitions (stage 1): the member with the
// smallest token, the one the merge group elects, gets mergerWeight
// shares, every other member memberWeight.
type inputBalancer struct{ tokenData }

// ProtocolName names the assignment strategy in the group protocol.
func (inputBalancer) ProtocolName() string { return "dpstream-input-v1" }

// AssignGroups gives every partition to one member: quotas in proportion
// to the weights (largest remainder, ties to the earlier member), handed
// out round-robin over the partitions sorted by topic and id so that
// every member gets partitions of every topic.
func (inputBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	ms := byToken(members)
	out := kafka.GroupMemberAssignments{}
	if len(ms) == 0 {
		return out
	}
	for _, m := range ms {
		out[m.id] = map[string][]int{}
	}
	ps := slices.Clone(partitions)
	slices.SortFunc(ps, func(a, b kafka.Partition) int { return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.ID, b.ID)) })
	ps = slices.CompactFunc(ps, func(a, b kafka.Partition) bool { return a.Topic == b.Topic && a.ID == b.ID })
	quota := shares(len(ps), len(ms))
	i := 0
	for _, p := range ps {
		for quota[i] == 0 {
			i = (i + 1) % len(ms)
		}
		out[ms[i].id][p.Topic] = append(out[ms[i].id][p.Topic], p.ID)
		quota[i]--
		i = (i + 1) % len(ms)
	}
	return out
}

// shares splits n partitions over k ≥ 1 members, the first with weight
// mergerWeight and the others memberWeight, by largest remainder (ties to
// the earlier member). With one member it gets everything.
func shares(n, k int) []int {
	w := make([]int, k)
	total := 0
	for i := range w {
		w[i] = memberWeight
		if i == 0 && k > 1 {
			w[i] = mergerWeight
		}
		total += w[i]
	}
	q := make([]int, k)
	left := n
	for i := range q {
		q[i] = n * w[i] / total
		left -= q[i]
	}
	order := make([]int, k)
	for i := range order {
		order[i] = i
	}
	// Remainders n·w mod total, largest first; stable keeps ties in member order.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(n*w[b]%total, n*w[a]%total) })
	for _, i := range order[:left] {
		q[i]++
	}
	return q
}

// mergeBalancer assigns the partials topic (stage 2): every partition to
// the member with the smallest token, the one the input group gives the
// smaller share.
type mergeBalancer struct{ tokenData }

// ProtocolName names the assignment strategy in the group protocol.
func (mergeBalancer) ProtocolName() string { return "dpstream-merge-v1" }

// AssignGroups gives every partition to the first member by token.
func (mergeBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	ms := byToken(members)
	out := kafka.GroupMemberAssignments{}
	for _, m := range ms {
		out[m.id] = map[string][]int{}
	}
	if len(ms) == 0 {
		return out
	}
	for _, p := range partitions {
		if !slices.Contains(out[ms[0].id][p.Topic], p.ID) {
			out[ms[0].id][p.Topic] = append(out[ms[0].id][p.Topic], p.ID)
		}
	}
	return out
}
