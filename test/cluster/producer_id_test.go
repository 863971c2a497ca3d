package cluster

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestInitProducerIDWithoutQuorum: a broker with no producer id at hand and no
// controller quorum to ask for more answers InitProducerId COORDINATOR_LOAD_IN_PROGRESS,
// which clients retry, instead of holding the request until the controller answers —
// a held request is one a broker shutting down cuts off unanswered, and franz-go then
// fails the records that wait for the producer id. An idempotent producer that starts
// during the outage delivers every record once the quorum is back.
func TestInitProducerIDWithoutQuorum(t *testing.T) {
	t.Parallel()
	const topic = "pid-outage"
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: append([]string{"min.insync.replicas=2"}, replicationOverrides...)})
	inv := watchInvariants(t, c)
	node1 := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, node1, topic, 3, 3)

	// Node 1 has handed out no producer id yet, so it holds no block of them.
	c.Node(2).Pause()
	c.Node(3).Pause()
	resp, err := node1.request(ctxT(t, 20*time.Second), kmsg.NewPtrInitProducerIDRequest())
	if err != nil {
		t.Fatalf("InitProducerId to node 1 with nodes 2 and 3 stopped: %v; want an answer", err)
	}
	if r := resp.(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("InitProducerId with no quorum: %v, producer id %d; want COORDINATOR_LOAD_IN_PROGRESS",
			kerr.ErrorForCode(r.ErrorCode), r.ProducerID)
	}

	// Seeded with node 1 alone, so that the load's first metadata request does not
	// wait out a stopped node (5 s a try) and the outage stays short.
	l := startLoad(t, c, topic, kgo.SeedBrokers(c.Node(1).Addr))
	c.Node(2).Resume()
	c.Node(3).Resume()
	waitAcksAfterOutage(t, l, 3000, 2*time.Minute)
	l.stop(t).check(t, c, topic)
	inv.check()
}

// waitAcksAfterOutage waits up to d for the load to have n acknowledged records, and
// fails with what each partition has and the load's last produce error.
func waitAcksAfterOutage(t *testing.T, l *load, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for l.acks() < n {
		if time.Now().After(deadline) {
			l.h.mu.Lock()
			perPartition := map[int32]int{}
			for p, values := range l.h.order {
				perPartition[p] = len(values)
			}
			failed, lastErr := len(l.h.failed), l.h.lastErr
			l.h.mu.Unlock()
			t.Fatalf("%v after the nodes resumed, %d records acknowledged, want %d: by partition %v; %d failed, the last with %v",
				d, l.acks(), n, perPartition, failed, lastErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
