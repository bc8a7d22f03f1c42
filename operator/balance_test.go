package operator

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestShares(t *testing.T) {
	for _, c := range []struct {
		n, k int
		want []int
	}{
		{8, 1, []int{8}},
		{8, 2, []int{3, 5}}, // 8·1/3 = 2.67, 8·2/3 = 5.33: the larger remainder gets the 8th partition
		{8, 3, []int{2, 3, 3}},
		{4, 3, []int{1, 2, 1}}, // remainders 4/5, 3/5, 3/5: the first two get one more
		{1, 3, []int{0, 1, 0}},
		{0, 2, []int{0, 0}},
		{12, 4, []int{2, 4, 3, 3}}, // 12/7 and 24/7 ×3: remainders 5, 3, 3, 3 (sevenths)
	} {
		got := shares(c.n, c.k)
		if !slices.Equal(got, c.want) {
			t.Errorf("shares(%d, %d) = %v, want %v", c.n, c.k, got, c.want)
		}
		sum := 0
		for _, q := range got {
			sum += q
		}
		if sum != c.n {
			t.Errorf("shares(%d, %d) hands out %d", c.n, c.k, sum)
		}
	}
}

// TestBalancers: the input group gives every partition to exactly one
// member, the member with the smallest token the smaller share, and the
// merge group elects that member; the result does not depend on the
// order in which members and partitions are listed (every member computes
// the same, whichever is the group's leader), and members without a token
// (another client) come last.
func TestBalancers(t *testing.T) {
	var parts []kafka.Partition
	for _, topic := range []string{"b", "a"} {
		for id := range 5 {
			parts = append(parts, kafka.Partition{Topic: topic, ID: id})
		}
	}
	tokens := [][]byte{newBalancerToken(), newBalancerToken(), newBalancerToken()}
	members := []kafka.GroupMember{
		{ID: "m-2", UserData: tokens[0]},
		{ID: "m-0", UserData: tokens[1]},
		{ID: "m-1", UserData: tokens[2]},
		{ID: "m-foreign", UserData: []byte("range user data")},
	}
	lowest := members[0]
	for _, m := range members[:3] {
		if bytes.Compare(m.UserData, lowest.UserData) < 0 {
			lowest = m
		}
	}
	in := inputBalancer{tokenData{tokens[0]}}.AssignGroups(members, parts)
	counts := map[string]int{}
	seen := map[string]int{}
	for id, ts := range in {
		for topic, ps := range ts {
			for _, p := range ps {
				seen[fmt.Sprint(topic, p)]++
				counts[id]++
			}
		}
	}
	if len(seen) != len(parts) {
		t.Errorf("%d of %d partitions assigned", len(seen), len(parts))
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("partition %s assigned %d times", p, n)
		}
	}
	// 10 partitions, weights 1, 2, 2, 2 (the member without a token
	// last): 10/7 → 1 (remainder 3/7), 20/7 → 2 (remainder 6/7, so one
	// more each).
	for id, n := range counts {
		want := 3
		if id == lowest.ID {
			want = 1
		}
		if n != want {
			t.Errorf("member %s got %d partitions, want %d (the merger is %s)", id, n, want, lowest.ID)
		}
	}
	if counts["m-foreign"] != 3 {
		t.Errorf("the member without a token got %d partitions: %v", counts["m-foreign"], counts)
	}
	// Every member but the merger gets partitions of both topics.
	for id, ts := range in {
		if id != lowest.ID && (len(ts["a"]) == 0 || len(ts["b"]) == 0) {
			t.Errorf("member %s got partitions of one topic only: %v", id, ts)
		}
	}

	merge := mergeBalancer{tokenData{tokens[1]}}.AssignGroups(members, []kafka.Partition{{Topic: "p", ID: 0}})
	for id, ts := range merge {
		if want := id == lowest.ID; (len(ts["p"]) == 1) != want {
			t.Errorf("merge group: member %s got %v (the merger is %s)", id, ts, lowest.ID)
		}
	}

	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		ms, ps := slices.Clone(members), slices.Clone(parts)
		r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		if got := (inputBalancer{}).AssignGroups(ms, ps); !reflect.DeepEqual(got, in) {
			t.Fatalf("another order of members and partitions gives another assignment:\n%v\n%v", got, in)
		}
		if got := (mergeBalancer{}).AssignGroups(ms, []kafka.Partition{{Topic: "p", ID: 0}}); !reflect.DeepEqual(got, merge) {
			t.Fatalf("merge group: another order gives another assignment")
		}
	}

	one := inputBalancer{}.AssignGroups(members[:1], parts)
	if n := len(one["m-2"]["a"]) + len(one["m-2"]["b"]); n != len(parts) {
		t.Errorf("a lone member got %d of %d partitions", n, len(parts))
	}
}
