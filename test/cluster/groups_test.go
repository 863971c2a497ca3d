package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestClusterConsumerGroup: a KIP-848 consumer group on a three-node cluster. The
// group's coordinator is the leader of its __consumer_offsets partition, wherever that
// is; three members bootstrapped through different nodes share six partitions led by
// the three nodes, each partition owned by one member, and read every record once.
func TestClusterConsumerGroup(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: []string{
		"group.consumer.min.heartbeat.interval.ms=50", "group.consumer.heartbeat.interval.ms=200",
		"group.consumer.min.session.timeout.ms=500", "group.consumer.session.timeout.ms=3000",
		"offsets.topic.num.partitions=6",
	}})
	addrs := c.BrokerAddrs()
	createTopic(t, newNodeClient(t, addrs[0]), "cg", 6, 3)

	var mu sync.Mutex
	seen := map[string]int{}
	for i, addr := range addrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("cg-group"), kgo.ServerSideBalancer(),
			kgo.ConsumeTopics("cg"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		t.Cleanup(func() { cancel(); <-done; cl.Close() })
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					mu.Unlock()
				})
			}
		}()
		t.Logf("member %d bootstrapped through %s", i, addr)
	}
	adm := kadm.NewClient(newNodeClient(t, addrs[1]).cl)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		d, err := adm.DescribeConsumerGroups(ctxT(t, 5*time.Second), "cg-group")
		if err != nil || d["cg-group"].Err != nil {
			return false
		}
		g := d["cg-group"]
		owners := map[int32]int{}
		for _, m := range g.Members {
			for p := range m.Assignment["cg"] {
				owners[p]++
			}
		}
		if g.State != "Stable" || len(g.Members) != 3 || len(owners) != 6 {
			return false
		}
		for _, n := range owners {
			if n != 1 {
				return false
			}
		}
		return true
	}, "three members owning the six partitions once each")

	producer, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("cg"))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var want []string
	for i := range 300 {
		v := fmt.Sprintf("cg-%04d", i)
		want = append(want, v)
		if err := producer.ProduceSync(ctxT(t, 10*time.Second), kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == len(want)
	}, "every record read")
	mu.Lock()
	defer mu.Unlock()
	for _, v := range want {
		if seen[v] != 1 {
			t.Fatalf("record %s read %d times", v, seen[v])
		}
	}
}
