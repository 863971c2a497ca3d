package cluster

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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

	l := startLoad(t, c, topic)
	c.Node(2).Resume()
	c.Node(3).Resume()
	l.waitAcks(t, 3000, "records acknowledged after the quorum came back")
	l.stop(t).check(t, c, topic)
	inv.check()
}
