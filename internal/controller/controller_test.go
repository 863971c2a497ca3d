package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

func TestSingleNodeStartAndCreateTopic(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	if got := c.Leader(); got != 1 {
		t.Fatalf("Leader() = %d, want 1", got)
	}
	if got := c.Image().ClusterID(); got != "test-cluster" {
		t.Fatalf("cluster id = %q", got)
	}
	if b, ok := c.Image().Broker(1); !ok || b.Fenced || b.Endpoints[0].Port != 9093 || b.Epoch <= 0 {
		t.Fatalf("broker 1 = %+v, %v", b, ok)
	}

	res := c.CreateTopics(ctx(t), []CreateTopic{{
		Name: "orders", NumPartitions: 3, ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "1000"},
	}}, false)
	if len(res) != 1 || res[0].Err != nil {
		t.Fatalf("CreateTopics = %+v", res)
	}
	r := res[0]
	if r.Name != "orders" || r.ID.IsZero() || r.NumPartitions != 3 || r.ReplicationFactor != 1 {
		t.Fatalf("result = %+v", r)
	}
	// The image includes the topic as soon as CreateTopics returns.
	tp, ok := c.Image().Topic("orders")
	if !ok || tp.ID != r.ID || len(tp.Partitions) != 3 {
		t.Fatalf("topic = %+v, %v", tp, ok)
	}
	for i, p := range tp.Partitions {
		want := metadata.Partition{Partition: int32(i), Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("partition %d = %+v, want %+v", i, p, want)
		}
	}
	if !reflect.DeepEqual(tp.Configs, map[string]string{"retention.ms": "1000"}) {
		t.Fatalf("configs = %v", tp.Configs)
	}
}

func TestCreateTopicsDefaultsAndPlacement(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.DefaultNumPartitions = 6
	o.DefaultReplicationFactor = 2
	c := startController(t, o)
	for _, id := range []int32{1, 2, 3} {
		register(t, c, id)
	}
	res := c.CreateTopics(ctx(t), []CreateTopic{{Name: "d", NumPartitions: -1, ReplicationFactor: -1}}, false)
	if res[0].Err != nil || res[0].NumPartitions != 6 || res[0].ReplicationFactor != 2 {
		t.Fatalf("result = %+v", res[0])
	}
	tp, _ := c.Image().Topic("d")
	leaders := map[int32]int{}
	for _, p := range tp.Partitions {
		if len(p.Replicas) != 2 || p.Replicas[0] == p.Replicas[1] {
			t.Fatalf("replicas = %v", p.Replicas)
		}
		if p.Leader != p.Replicas[0] || !reflect.DeepEqual(p.ISR, p.Replicas) {
			t.Fatalf("partition = %+v", p)
		}
		leaders[p.Leader]++
	}
	// Round-robin: 6 partitions over 3 brokers, two leaders each.
	if !reflect.DeepEqual(leaders, map[int32]int{1: 2, 2: 2, 3: 2}) {
		t.Fatalf("leaders = %v", leaders)
	}

	res = c.CreateTopics(ctx(t), []CreateTopic{{Name: "m", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: map[int32][]int32{0: {3, 1}, 1: {2}}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	tp, _ = c.Image().Topic("m")
	if !reflect.DeepEqual(tp.Partitions[0].Replicas, []int32{3, 1}) || tp.Partitions[0].Leader != 3 || tp.Partitions[1].Leader != 2 {
		t.Fatalf("manual assignment = %+v", tp.Partitions)
	}
}

func TestCreateTopicsValidation(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1, 2)
	if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "exists.here", NumPartitions: 1, ReplicationFactor: 1}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	long := string(slices.Repeat([]byte{'a'}, 250))
	tests := []struct {
		name  string
		topic CreateTopic
		want  error
	}{
		{"empty name", CreateTopic{Name: "", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{"dot", CreateTopic{Name: ".", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{"dot dot", CreateTopic{Name: "..", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{"too long", CreateTopic{Name: long, NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{"bad char", CreateTopic{Name: "a/b", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{"space", CreateTopic{Name: "a b", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{"reserved", CreateTopic{Name: "__cluster_metadata", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{"exists", CreateTopic{Name: "exists.here", NumPartitions: 1, ReplicationFactor: 1}, ErrTopicExists},
		{"collides", CreateTopic{Name: "exists_here", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{"zero partitions", CreateTopic{Name: "t", NumPartitions: 0, ReplicationFactor: 1}, ErrInvalidPartitions},
		{"negative partitions", CreateTopic{Name: "t", NumPartitions: -2, ReplicationFactor: 1}, ErrInvalidPartitions},
		{"too many partitions", CreateTopic{Name: "t", NumPartitions: maxNewPartitions + 1, ReplicationFactor: 1}, ErrPolicyViolation},
		{"zero replication", CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 0}, ErrInvalidReplicationFactor},
		{"replication above brokers", CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 3}, ErrInvalidReplicationFactor},
		{"bad config value", CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "soon"}}, ErrInvalidConfig},
		{"unknown config", CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"nope": "1"}}, ErrInvalidConfig},
		{"assignment and count", CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {1}}}, ErrInvalidRequest},
		{"assignment gap", CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {1}, 2: {1}}}, ErrInvalidReplicaAssignment},
		{"assignment unknown broker", CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {7}}}, ErrInvalidReplicaAssignment},
		{"assignment duplicate broker", CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {1, 1}}}, ErrInvalidReplicaAssignment},
		{"assignment empty", CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {}}}, ErrInvalidReplicaAssignment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.Image().Offset()
			for _, validateOnly := range []bool{true, false} {
				res := c.CreateTopics(ctx(t), []CreateTopic{tt.topic}, validateOnly)
				if !errors.Is(res[0].Err, tt.want) {
					t.Fatalf("validateOnly=%v: err = %v, want %v", validateOnly, res[0].Err, tt.want)
				}
				if res[0].NumPartitions != -1 || res[0].ReplicationFactor != -1 {
					t.Fatalf("failed result = %+v", res[0])
				}
			}
			if c.Image().Offset() != before {
				t.Fatal("a failed CreateTopics wrote to the metadata log")
			}
		})
	}
	t.Run("config error names the config", func(t *testing.T) {
		res := c.CreateTopics(ctx(t), []CreateTopic{{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "x"}}}, false)
		if msg := res[0].Err.Error(); !strings.Contains(msg, "retention.ms") {
			t.Fatalf("message %q does not name the config", msg)
		}
	})
}

// TestCreateTopicsPartitionsPerRequest: the partitions of all the topics of one
// request count toward the bound, and past it the whole request is refused.
func TestCreateTopicsPartitionsPerRequest(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	half := int32(maxNewPartitions/2 + 1)
	res := c.CreateTopics(ctx(t), []CreateTopic{
		{Name: "small", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "big1", NumPartitions: half, ReplicationFactor: 1},
		{Name: "big2", NumPartitions: -1, ReplicationFactor: -1, Assignments: assignOneBroker(int(half))},
	}, false)
	for _, r := range res {
		if !errors.Is(r.Err, ErrPolicyViolation) || !strings.Contains(r.Err.Error(), fmt.Sprint(2*half+1)) {
			t.Errorf("%s: %v, want a policy violation naming %d partitions", r.Name, r.Err, 2*half+1)
		}
	}
	if n := len(c.Image().Topics()); n != 0 {
		t.Fatalf("%d topics created by a refused request", n)
	}
	if res := c.CreateTopics(ctx(t), []CreateTopic{{Name: "big1", NumPartitions: half, ReplicationFactor: 1}}, false); res[0].Err != nil {
		t.Fatalf("one topic within the bound: %v", res[0].Err)
	}
}

func assignOneBroker(n int) map[int32][]int32 {
	m := make(map[int32][]int32, n)
	for p := range n {
		m[int32(p)] = []int32{1}
	}
	return m
}

func TestCreateTopicsBatch(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	res := c.CreateTopics(ctx(t), []CreateTopic{
		{Name: "a", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "dup", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "bad/", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "dup", NumPartitions: 2, ReplicationFactor: 1},
		{Name: "x.y", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "x_y", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "b", NumPartitions: 2, ReplicationFactor: 1},
	}, false)
	wantErr := []error{nil, ErrInvalidRequest, ErrInvalidTopic, ErrInvalidRequest, nil, ErrInvalidTopic, nil}
	for i, r := range res {
		if (wantErr[i] == nil) != (r.Err == nil) || (wantErr[i] != nil && !errors.Is(r.Err, wantErr[i])) {
			t.Errorf("result %d (%s): err = %v, want %v", i, r.Name, r.Err, wantErr[i])
		}
	}
	var names []string
	for _, tp := range c.Image().Topics() {
		names = append(names, tp.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "x.y"}) {
		t.Fatalf("topics = %v", names)
	}
}

func TestCreateTopicsValidateOnly(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	before := c.Image().Offset()
	res := c.CreateTopics(ctx(t), []CreateTopic{{Name: "v", NumPartitions: 4, ReplicationFactor: 1}}, true)
	if res[0].Err != nil || res[0].NumPartitions != 4 || res[0].ReplicationFactor != 1 {
		t.Fatalf("result = %+v", res[0])
	}
	if _, ok := c.Image().Topic("v"); ok || c.Image().Offset() != before {
		t.Fatal("validateOnly created the topic")
	}
}

func TestConcurrentCreateTopicsSameName(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	const n = 8
	var wg sync.WaitGroup
	results := make([]TopicResult, n)
	for i := range n {
		wg.Go(func() {
			results[i] = c.CreateTopics(context.Background(), []CreateTopic{{Name: "race", NumPartitions: int32(i + 1), ReplicationFactor: 1}}, false)[0]
		})
	}
	wg.Wait()
	var winner *TopicResult
	for i := range results {
		switch err := results[i].Err; {
		case err == nil:
			if winner != nil {
				t.Fatalf("two CreateTopics succeeded: %+v and %+v", *winner, results[i])
			}
			winner = &results[i]
		case !errors.Is(err, ErrTopicExists):
			t.Fatalf("loser err = %v, want ErrTopicExists", err)
		}
	}
	if winner == nil {
		t.Fatal("no CreateTopics succeeded")
	}
	tp, _ := c.Image().Topic("race")
	if tp.ID != winner.ID || int32(len(tp.Partitions)) != winner.NumPartitions {
		t.Fatalf("image topic %+v does not match the winner %+v", tp, winner)
	}
}

func TestDeleteTopics(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	res := c.CreateTopics(ctx(t), []CreateTopic{
		{Name: "a", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "b", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "c", NumPartitions: 1, ReplicationFactor: 1},
	}, false)
	idB := res[1].ID
	del := c.DeleteTopics(ctx(t), []string{"a", "nope"}, []metadata.TopicID{idB, {9}})
	if len(del) != 4 {
		t.Fatalf("results = %+v", del)
	}
	if del[0].Err != nil || del[0].Name != "a" || del[0].ID != res[0].ID {
		t.Errorf("a: %+v", del[0])
	}
	if !errors.Is(del[1].Err, ErrUnknownTopic) {
		t.Errorf("nope: %+v", del[1])
	}
	if del[2].Err != nil || del[2].Name != "b" || del[2].ID != idB {
		t.Errorf("b: %+v", del[2])
	}
	if !errors.Is(del[3].Err, ErrUnknownTopicID) {
		t.Errorf("unknown id: %+v", del[3])
	}
	if ts := c.Image().Topics(); len(ts) != 1 || ts[0].Name != "c" {
		t.Fatalf("topics left = %v", ts)
	}
	// Same topic twice (by name and id) is refused, and nothing is deleted.
	del = c.DeleteTopics(ctx(t), []string{"c"}, []metadata.TopicID{res[2].ID})
	if !errors.Is(del[0].Err, ErrInvalidRequest) || !errors.Is(del[1].Err, ErrInvalidRequest) {
		t.Fatalf("duplicate delete = %+v", del)
	}
	// A deleted name can be created again, with a new id.
	again := c.CreateTopics(ctx(t), []CreateTopic{{Name: "a", NumPartitions: 2, ReplicationFactor: 1}}, false)
	if again[0].Err != nil || again[0].ID == res[0].ID {
		t.Fatalf("recreate = %+v", again[0])
	}
}

func TestCreatePartitions(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1, 2)
	if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "p", NumPartitions: 2, ReplicationFactor: 2}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	tests := []struct {
		name       string
		topic      string
		count      int32
		assignment [][]int32
		want       error
	}{
		{"unknown topic", "nope", 3, nil, ErrUnknownTopic},
		{"same count", "p", 2, nil, ErrInvalidPartitions},
		{"fewer", "p", 1, nil, ErrInvalidPartitions},
		{"assignment count mismatch", "p", 4, [][]int32{{1, 2}}, ErrInvalidReplicaAssignment},
		{"assignment replication mismatch", "p", 3, [][]int32{{1}}, ErrInvalidReplicaAssignment},
		{"assignment unknown broker", "p", 3, [][]int32{{1, 5}}, ErrInvalidReplicaAssignment},
		{"too many", "p", 2 + maxNewPartitions + 1, nil, ErrInvalidPartitions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.CreatePartitions(ctx(t), tt.topic, tt.count, tt.assignment, false); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if err := c.CreatePartitions(ctx(t), "p", 5, nil, true); err != nil {
		t.Fatal(err)
	}
	if tp, _ := c.Image().Topic("p"); len(tp.Partitions) != 2 {
		t.Fatal("validateOnly added partitions")
	}
	if err := c.CreatePartitions(ctx(t), "p", 4, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := c.CreatePartitions(ctx(t), "p", 5, [][]int32{{2, 1}}, false); err != nil {
		t.Fatal(err)
	}
	tp, _ := c.Image().Topic("p")
	if len(tp.Partitions) != 5 {
		t.Fatalf("partitions = %d", len(tp.Partitions))
	}
	for i, p := range tp.Partitions {
		if p.Partition != int32(i) || len(p.Replicas) != 2 || p.Leader != p.Replicas[0] {
			t.Errorf("partition %d = %+v", i, p)
		}
	}
	if !reflect.DeepEqual(tp.Partitions[4].Replicas, []int32{2, 1}) {
		t.Fatalf("manual partition = %+v", tp.Partitions[4])
	}
}

func TestAlterConfigs(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "cfg", NumPartitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "100", "segment.bytes": "1024"}}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	configs := func() map[string]string { tp, _ := c.Image().Topic("cfg"); return tp.Configs }
	steps := []struct {
		name         string
		ops          []ConfigOp
		replaceAll   bool
		validateOnly bool
		wantErr      error
		want         map[string]string
	}{
		{name: "set", ops: []ConfigOp{{Name: "retention.ms", Value: ptr("200")}},
			want: map[string]string{"retention.ms": "200", "segment.bytes": "1024"}},
		{name: "delete", ops: []ConfigOp{{Name: "segment.bytes", Op: OpDelete}},
			want: map[string]string{"retention.ms": "200"}},
		{name: "append", ops: []ConfigOp{{Name: "cleanup.policy", Value: ptr("delete"), Op: OpAppend}},
			want: map[string]string{"retention.ms": "200", "cleanup.policy": "delete"}},
		{name: "append again", ops: []ConfigOp{{Name: "cleanup.policy", Value: ptr("compact,delete"), Op: OpAppend}},
			want: map[string]string{"retention.ms": "200", "cleanup.policy": "delete,compact"}},
		{name: "subtract", ops: []ConfigOp{{Name: "cleanup.policy", Value: ptr("delete"), Op: OpSubtract}},
			want: map[string]string{"retention.ms": "200", "cleanup.policy": "compact"}},
		{name: "append to a non-list", ops: []ConfigOp{{Name: "retention.ms", Value: ptr("5"), Op: OpAppend}}, wantErr: ErrInvalidConfig,
			want: map[string]string{"retention.ms": "200", "cleanup.policy": "compact"}},
		{name: "subtract from an unknown config", ops: []ConfigOp{{Name: "no.such", Value: ptr("5"), Op: OpSubtract}}, wantErr: ErrInvalidConfig,
			want: map[string]string{"retention.ms": "200", "cleanup.policy": "compact"}},
		{name: "invalid value", ops: []ConfigOp{{Name: "retention.ms", Value: ptr("x")}}, wantErr: ErrInvalidConfig,
			want: map[string]string{"retention.ms": "200", "cleanup.policy": "compact"}},
		{name: "duplicate op", ops: []ConfigOp{{Name: "retention.ms", Value: ptr("1")}, {Name: "retention.ms", Op: OpDelete}}, wantErr: ErrInvalidRequest,
			want: map[string]string{"retention.ms": "200", "cleanup.policy": "compact"}},
		{name: "validate only", ops: []ConfigOp{{Name: "retention.ms", Value: ptr("5")}}, validateOnly: true,
			want: map[string]string{"retention.ms": "200", "cleanup.policy": "compact"}},
		{name: "replace all", ops: []ConfigOp{{Name: "segment.bytes", Value: ptr("2048")}}, replaceAll: true,
			want: map[string]string{"segment.bytes": "2048"}},
	}
	for _, s := range steps {
		err := c.AlterConfigs(ctx(t), metadata.ResourceTopic, "cfg", s.ops, s.replaceAll, s.validateOnly)
		if s.wantErr == nil && err != nil || s.wantErr != nil && !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.wantErr)
		}
		if got := configs(); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: configs = %v, want %v", s.name, got, s.want)
		}
	}

	if err := c.AlterConfigs(ctx(t), metadata.ResourceTopic, "nope", []ConfigOp{{Name: "retention.ms", Value: ptr("1")}}, false, false); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	if err := c.AlterConfigs(ctx(t), 3, "x", nil, false, false); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("bad resource type: %v", err)
	}
	if err := c.AlterConfigs(ctx(t), metadata.ResourceBroker, "", []ConfigOp{{Name: "log.retention.ms", Value: ptr("9")}}, false, false); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterConfigs(ctx(t), metadata.ResourceBroker, "1", []ConfigOp{{Name: "x", Value: ptr("y")}}, false, false); err != nil {
		t.Fatal(err)
	}
	if got := c.Image().BrokerConfigs(""); !reflect.DeepEqual(got, map[string]string{"log.retention.ms": "9"}) {
		t.Fatalf("cluster configs = %v", got)
	}
	if got := c.Image().BrokerConfigs("1"); !reflect.DeepEqual(got, map[string]string{"x": "y"}) {
		t.Fatalf("broker 1 configs = %v", got)
	}
	if err := c.AlterConfigs(ctx(t), metadata.ResourceBroker, "", []ConfigOp{{Name: "log.retention.ms", Value: ptr("9"), Op: OpAppend}}, false, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("APPEND to a broker property that is not a list: %v", err)
	}
	if err := c.AlterConfigs(ctx(t), metadata.ResourceBroker, "", []ConfigOp{{Name: "log.dirs", Value: ptr("/x"), Op: OpAppend}}, false, true); err != nil {
		t.Fatalf("APPEND to a list broker property: %v", err)
	}
	if err := c.AlterConfigs(ctx(t), metadata.ResourceGroup, "g", []ConfigOp{{Name: "share.auto.offset.reset", Value: ptr("earliest"), Op: OpAppend}}, false, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("APPEND to a group config: %v", err)
	}
	if err := c.AlterConfigs(ctx(t), metadata.ResourceBroker, "abc", nil, false, false); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("bad broker name: %v", err)
	}
}

func TestAllocateProducerIDs(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	first, err := c.AllocateProducerIDs(ctx(t), 1000)
	if err != nil || first != 0 {
		t.Fatalf("first block = %d, %v", first, err)
	}
	second, err := c.AllocateProducerIDs(ctx(t), 10)
	if err != nil || second != 1000 {
		t.Fatalf("second block = %d, %v", second, err)
	}
	if c.Image().NextProducerID() != 1010 {
		t.Fatalf("next = %d", c.Image().NextProducerID())
	}
	if _, err := c.AllocateProducerIDs(ctx(t), 0); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("count 0: %v", err)
	}
}

func TestSubscribe(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	var mu sync.Mutex
	var seen []*metadata.Image
	var sawTopic bool
	c.Subscribe(func(prev, next *metadata.Image) {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) > 0 && seen[len(seen)-1] != prev {
			t.Errorf("callback prev is not the previous callback's next")
		}
		if prev.Offset() >= next.Offset() {
			t.Errorf("offsets not increasing: %d then %d", prev.Offset(), next.Offset())
		}
		seen = append(seen, next)
		if _, ok := next.Topic("s"); ok {
			sawTopic = true
		}
	})
	if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "s", NumPartitions: 1, ReplicationFactor: 1}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	mu.Lock()
	ok := sawTopic
	mu.Unlock()
	if !ok {
		t.Fatal("subscriber had not seen the topic when CreateTopics returned")
	}
	if _, err := c.AllocateProducerIDs(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if last := seen[len(seen)-1]; last != c.Image() {
		t.Fatalf("last callback image (offset %d) is not Image() (offset %d)", last.Offset(), c.Image().Offset())
	}
}

func TestClosedController(t *testing.T) {
	c, err := New(testOptions(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.AllocateProducerIDs(ctx(t), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "x", NumPartitions: 1, ReplicationFactor: 1}}, false); !errors.Is(r[0].Err, ErrClosed) {
		t.Fatalf("after Close: %v", r[0].Err)
	}
	if c.Leader() != -1 {
		t.Fatalf("leader after close = %d", c.Leader())
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"no dir":               {NodeID: 1},
		"negative node":        {Dir: t.TempDir(), NodeID: -1},
		"not a voter":          {Dir: t.TempDir(), NodeID: 1, Voters: map[int32]string{2: "h:1"}},
		"quorum, no transport": {Dir: t.TempDir(), NodeID: 1, Voters: map[int32]string{1: "h:1", 2: "h:2"}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func TestNotController(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.Voters = map[int32]string{1: "h:1", 2: "h:2", 3: "h:3"}
	o.Transport = dropTransport{}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Start(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start without a quorum: %v", err)
	}
	if c.Leader() != -1 {
		t.Fatalf("leader = %d", c.Leader())
	}
	if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "x", NumPartitions: 1, ReplicationFactor: 1}}, false); !errors.Is(r[0].Err, ErrNotController) {
		t.Fatalf("CreateTopics: %v", r[0].Err)
	}
	if _, err := c.AllocateProducerIDs(ctx(t), 1); !errors.Is(err, ErrNotController) {
		t.Fatalf("AllocateProducerIDs: %v", err)
	}
}

type dropTransport struct{}

func (dropTransport) Send([]*pb.Message) {}

// countingClock is the real clock, counting scheduled callbacks (Raft ticks).
type countingClock struct {
	clock.Real
	ticks atomic.Int64
}

func (c *countingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.ticks.Add(1)
	return c.Real.AfterFunc(d, f)
}

func TestSingleNodeKeepsLeadershipAcrossElectionTimeouts(t *testing.T) {
	o := testOptions(t, t.TempDir())
	clk := &countingClock{}
	o.Clock = clk
	o.TickInterval = time.Millisecond
	o.ElectionTimeout = 10 * time.Millisecond // 10 ticks
	c := startController(t, o)
	register(t, c, 1)
	waitFor(t, "several election timeouts", func() bool { return clk.ticks.Load() > 5*10 })
	if c.Leader() != 1 {
		t.Fatalf("leader = %d", c.Leader())
	}
	if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "still", NumPartitions: 1, ReplicationFactor: 1}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
}

// TestCreateTopicsCommitsTheRequestInOneEntry: the topics one CreateTopics creates
// (or one DeleteTopics deletes) go in one metadata log entry, committed or lost
// together, as Kafka's ReplicationControlManager.createTopics (and deleteTopics)
// returns ControllerResult.atomicOf. One
// entry per topic let a leadership move in the middle commit some and answer the
// others NOT_CONTROLLER; the Java admin client and franz-go then send the whole
// request again and are answered TOPIC_ALREADY_EXISTS for topics they created.
func TestCreateTopicsCommitsTheRequestInOneEntry(t *testing.T) {
	c := startSingle(t, t.TempDir(), 1)
	before := c.Image().Offset()
	res := c.CreateTopics(ctx(t), []CreateTopic{
		{Name: "one", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "bad/name", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "two", NumPartitions: 2, ReplicationFactor: 1},
		{Name: "three", NumPartitions: 3, ReplicationFactor: 1},
	}, false)
	for _, r := range res {
		if (r.Err != nil) != (r.Name == "bad/name") {
			t.Fatalf("%s: %v", r.Name, r.Err)
		}
	}
	img := c.Image()
	for _, name := range []string{"one", "two", "three"} {
		if _, ok := img.Topic(name); !ok {
			t.Fatalf("topic %s not created", name)
		}
	}
	if entries := img.Offset() - before; entries != 1 {
		t.Fatalf("the request's topics took %d metadata log entries, want 1", entries)
	}

	// DeleteTopics likewise (ReplicationControlManager.deleteTopics: atomicOf).
	before = img.Offset()
	for _, r := range c.DeleteTopics(ctx(t), []string{"one", "two", "three"}, nil) {
		if r.Err != nil {
			t.Fatalf("delete %s: %v", r.Name, r.Err)
		}
	}
	if entries := c.Image().Offset() - before; entries != 1 {
		t.Fatalf("deleting the request's topics took %d metadata log entries, want 1", entries)
	}
}

// TestUncleanAllowedFollowsDynamicBrokerConfigs: a topic without its own
// unclean.leader.election.enable takes this controller node's dynamic config, else the
// cluster-wide dynamic default, else the static property, as Kafka's controller does
// (it read the static property only, so kafka-configs.sh --entity-default had no effect).
func TestUncleanAllowedFollowsDynamicBrokerConfigs(t *testing.T) {
	c := startSingle(t, t.TempDir())
	const name = "unclean.leader.election.enable"
	topic := &metadata.Topic{Name: "t", Configs: map[string]string{}}
	set := func(resource, value string) {
		t.Helper()
		if err := c.AlterConfigs(ctx(t), metadata.ResourceBroker, resource, []ConfigOp{{Name: name, Value: ptr(value)}}, false, false); err != nil {
			t.Fatal(err)
		}
	}
	if c.uncleanAllowed(topic) {
		t.Fatal("allowed with the static default false")
	}
	set("", "true")
	if !c.uncleanAllowed(topic) {
		t.Error("not allowed with the cluster default true")
	}
	set("1", "false")
	if c.uncleanAllowed(topic) {
		t.Error("allowed with node 1's false over the cluster default true")
	}
	topic.Configs[name] = "true"
	if !c.uncleanAllowed(topic) {
		t.Error("not allowed with the topic's true")
	}
}
