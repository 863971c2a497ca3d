package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// unregisterBroker sends UnregisterBroker for id through one node and returns the
// answer's error code. REQUEST_TIMED_OUT (no active controller yet, after a kill) is
// retried, as clients retry it.
func unregisterBroker(t *testing.T, cl *nodeClient, id int32) int16 {
	t.Helper()
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	ctx := ctxT(t, 60*time.Second)
	for {
		r, err := cl.request(ctx, req)
		if err != nil {
			t.Fatalf("UnregisterBroker %d: %v", id, err)
		}
		resp := r.(*kmsg.UnregisterBrokerResponse)
		if resp.ErrorCode != kerr.RequestTimedOut.Code || ctx.Err() != nil {
			t.Logf("UnregisterBroker %d: %v %s", id, kerr.ErrorForCode(resp.ErrorCode), deref(resp.ErrorMessage))
			return resp.ErrorCode
		}
	}
}

// TestUnregisterDecommissionedBroker: under an acks=all load (replication factor 3,
// min.insync.replicas=2), node 3 is killed for good and unregistered at once, before
// its session expires (no fencing needed first). Neither DescribeCluster (fenced
// brokers included) nor Metadata lists it on the other nodes, its partitions are led
// by the others with it out of their ISRs, writes go on, and unregistering it again is
// BROKER_ID_NOT_REGISTERED. Started again with its node.id and data, it registers and
// its replicas rejoin the ISRs. Every acknowledged record is there at the end.
func TestUnregisterDecommissionedBroker(t *testing.T) {
	t.Parallel()
	const topic, partitions, victim = "decommissioned", 3, int32(3)
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{}, topic, partitions, 1000, "acknowledged records before the kill")
	cl := newNodeClient(t, c.Node(1).Addr)
	waitFullISR(t, cl, topic, partitions, 30*time.Second)

	c.Node(victim).Kill()
	killed := time.Now()
	if code := unregisterBroker(t, cl, victim); code != 0 {
		t.Fatalf("unregistering node %d: %v", victim, kerr.ErrorForCode(code))
	}
	t.Logf("node %d unregistered %.1f s after its kill", victim, time.Since(killed).Seconds())

	for _, id := range []int32{1, 2} {
		nc := newNodeClient(t, c.Node(id).Addr)
		testutil.WaitFor(t, 30*time.Second, func() bool {
			brokers, err := nc.describeCluster(ctxT(t, 5*time.Second), true)
			if err != nil {
				return false
			}
			_, listed := brokers[victim]
			return !listed && len(brokers) == 2
		}, fmt.Sprintf("node %d: DescribeCluster without node %d", id, victim))
		md, err := nc.metadata(ctxT(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if got := liveBrokers(md); !slices.Equal(got, []int32{1, 2}) {
			t.Fatalf("node %d: Metadata lists brokers %v, want [1 2]", id, got)
		}
		if got := configBrokers(t, nc); !slices.Equal(got, []string{"1", "2"}) {
			t.Fatalf("node %d: ListConfigResources lists brokers %v, want [1 2]", id, got)
		}
		for _, p := range partitionsOf(md, topic) {
			if p.Leader == victim || p.Leader < 0 || slices.Contains(p.ISR, victim) ||
				!slices.Contains(p.Replicas, victim) || !slices.Contains(p.OfflineReplicas, victim) {
				t.Fatalf("node %d: %s-%d leader %d, ISR %v, replicas %v, offline %v: want it led by 1 or 2, node %d an offline replica out of the ISR",
					id, topic, p.Partition, p.Leader, p.ISR, p.Replicas, p.OfflineReplicas, victim)
			}
		}
	}
	l.waitAcks(t, 1000, fmt.Sprintf("writes going on without node %d", victim))

	if code := unregisterBroker(t, cl, victim); code != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("unregistering node %d again: %v, want BROKER_ID_NOT_REGISTERED", victim, kerr.ErrorForCode(code))
	}

	c.StartAgain(t, victim)
	testutil.WaitFor(t, 30*time.Second, func() bool {
		brokers, err := cl.describeCluster(ctxT(t, 5*time.Second), true)
		fenced, listed := brokers[victim]
		return err == nil && listed && !fenced
	}, fmt.Sprintf("node %d registered and unfenced again", victim))
	if got := configBrokers(t, cl); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("ListConfigResources lists brokers %v once node %d is back, want [1 2 3]", got, victim)
	}
	waitFullISR(t, cl, topic, partitions, 60*time.Second)
	l.waitAcks(t, 500, fmt.Sprintf("writes with node %d back", victim))

	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// configBrokers is the BROKER resources ListConfigResources lists through cl, sorted.
func configBrokers(t *testing.T, cl *nodeClient) []string {
	t.Helper()
	req := kmsg.NewPtrListConfigResourcesRequest()
	req.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeBroker)}
	r, err := cl.request(ctxT(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("ListConfigResources: %v", err)
	}
	resp := r.(*kmsg.ListConfigResourcesResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ListConfigResources: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	var names []string
	for _, res := range resp.ConfigResources {
		names = append(names, res.Name)
	}
	slices.Sort(names)
	return names
}
