package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// BenchmarkUnavailability measures how long a partition cannot take acks=all writes
// when its leader dies (kill -9) and when it shuts down in a controlled way (SIGTERM):
// a producer writes one record every 2 ms to the partition and the longest gap between
// two acknowledgements after the fault is the unavailability. It reports both in ms
// (broker.session.timeout.ms is 4000 here, as in the other cluster tests):
//
//	go test -run '^$' -bench Unavailability -benchtime 1x ./test/cluster
func BenchmarkUnavailability(b *testing.B) {
	for range b.N {
		c := testutil.StartCluster(b, testutil.ClusterOptions{Overrides: append([]string{"min.insync.replicas=2"}, replicationOverrides...)})
		admin := newNodeClient(b, c.Node(1).Addr)
		const topic = "availability"
		createTopic(b, admin, topic, 3, 3)
		for _, fault := range []string{"kill-9", "controlled-shutdown"} {
			gap := measureGap(b, c, topic, func(victim int32) {
				if fault == "kill-9" {
					c.Node(victim).Kill()
				} else if err := c.Node(victim).Stop(); err != nil {
					b.Fatalf("SIGTERM node %d: %v", victim, err)
				}
			})
			b.ReportMetric(float64(gap.Milliseconds()), "ms-unavailable-"+fault)
		}
	}
}

// measureGap writes to a partition of topic led by a node other than the active
// controller (so that the controller's own failover is not measured), applies fault to
// that leader, waits for writes to go on, starts the node again and returns the
// longest time without an acknowledgement.
func measureGap(b *testing.B, c *testutil.Cluster, topic string, fault func(victim int32)) time.Duration {
	b.Helper()
	var victim, partition int32 = -1, -1
	clients := map[int32]*nodeClient{}
	for _, n := range c.Nodes() {
		clients[n.ID] = newNodeClient(b, n.Addr)
	}
	testutil.WaitFor(b, 60*time.Second, func() bool {
		ctrl := activeController(b, clients[1])
		for _, nc := range clients {
			md, err := nc.metadata(ctxT(b, 5*time.Second))
			if err != nil {
				continue
			}
			for _, p := range partitionsOf(md, topic) {
				if p.Leader >= 0 && p.Leader != ctrl && len(p.ISR) == 3 {
					victim, partition = p.Leader, p.Partition
					return true
				}
			}
		}
		electPreferred(b, clients[1], topic) // spread the leaderships again after a restart
		return false
	}, "a partition led by a node other than the active controller, with a full ISR")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	var acks []time.Time
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			<-tick.C
			cl.Produce(ctx, &kgo.Record{Partition: partition, Value: []byte("x")}, func(_ *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acks = append(acks, time.Now())
					mu.Unlock()
				}
			})
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	testutil.WaitFor(b, 30*time.Second, func() bool { return count() > 500 }, "writes before the fault")
	faultAt := time.Now()
	fault(victim)
	before := count()
	testutil.WaitFor(b, 60*time.Second, func() bool { return count() > before+500 }, "writes after the fault")
	cancel()
	<-done
	c.StartAgain(b, victim)
	mu.Lock()
	defer mu.Unlock()
	var gap time.Duration
	for i := 1; i < len(acks); i++ {
		if acks[i].After(faultAt) && acks[i].Sub(acks[i-1]) > gap {
			gap = acks[i].Sub(acks[i-1])
		}
	}
	return gap
}

// electPreferred asks for a preferred leader election of every partition of topic.
func electPreferred(b *testing.B, cl *nodeClient, topic string) {
	req := kmsg.NewPtrElectLeadersRequest()
	req.SetVersion(2)
	req.TimeoutMillis = 10_000
	t := kmsg.NewElectLeadersRequestTopic()
	t.Topic, t.Partitions = topic, []int32{0, 1, 2}
	req.Topics = append(req.Topics, t)
	_, _ = cl.request(ctxT(b, 15*time.Second), req)
}
