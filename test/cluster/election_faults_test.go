package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// quorumState returns a node's role in the metadata quorum as its metrics say
// (samsa_metadata_quorum_state: leader, follower, candidate, pre-candidate,
// observer), "" when they cannot be read.
func quorumState(n *testutil.Node) string {
	families, err := scrape(n)
	if err != nil {
		return ""
	}
	for _, m := range families["samsa_metadata_quorum_state"].GetMetric() {
		if m.GetGauge().GetValue() == 1 {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" {
					return l.GetValue()
				}
			}
		}
	}
	return ""
}

// waitElecting waits until node is trying to become the active controller (a
// candidate or pre-candidate): the election it cannot finish alone is under way.
func waitElecting(t *testing.T, c *testutil.Cluster, node int32) {
	t.Helper()
	var state string
	testutil.WaitFor(t, 30*time.Second, func() bool {
		state = quorumState(c.Node(node))
		return state == "candidate" || state == "pre-candidate"
	}, fmt.Sprintf("node %d standing for election (last state %q)", node, state))
	t.Logf("node %d is a %s", node, state)
}

// waitNewController waits until a node other than old is the active controller, as
// node asks, and returns it.
func waitNewController(t *testing.T, c *testutil.Cluster, ask, old int32) int32 {
	t.Helper()
	cl := newNodeClient(t, c.Node(ask).Addr)
	var leader int32
	testutil.WaitFor(t, 60*time.Second, func() bool {
		p, err := cl.quorum(ctxT(t, 2*time.Second))
		leader = p.LeaderID
		return err == nil && leader >= 0 && leader != old
	}, fmt.Sprintf("a controller other than %d elected", old))
	return leader
}

// others returns the node ids of c other than except, in order.
func others(c *testutil.Cluster, except int32) []int32 {
	var out []int32
	for _, n := range c.Nodes() {
		if n.ID != except {
			out = append(out, n.ID)
		}
	}
	slices.Sort(out)
	return out
}

// TestFaultsMidElection puts faults into the metadata quorum while it is electing a
// controller, under an acks=all load: the active controller is killed and, before
// the survivors have elected another, a second voter is stalled (SIGSTOP) so that
// the third stands for election alone and cannot win. Then, in that state:
//
//   - crash: the standing candidate is killed with kill -9, the stalled voter
//     resumes and the killed one starts again; the two elect a controller.
//   - cut-off: the standing candidate's links are cut (it keeps running, in an
//     election of its own), the stalled voter resumes and stands alone too; the
//     links heal and the two elect a controller.
//
// Each round ends with the killed controller back and every replica in sync; the
// test ends with every acknowledged record present once, in order, at its offset,
// and no metadata invariant broken (one leader per partition epoch, leaders in the
// ISR).
//
// The crash cell is how a follower that never fetched again was found: the new
// controller, not yet counting a dead broker's session out, moves leaderships to it;
// restarted, that broker leads in its first metadata for a moment (assigning the
// epoch at its log end, appending nothing), then follows. Its fetches named that
// epoch, which the leader never had; the leader answered each with a divergence
// ending at the follower's log end, a truncation there was a no-op that kept the
// epoch, and the partition's ISR stayed short for good. The follower now drops the
// epoch (storage.Log.TruncateTo, as Kafka's; see
// replica.TestFollowerDropsAnEpochItLedWithoutAppending).
func TestFaultsMidElection(t *testing.T) {
	t.Parallel()
	const topic, partitions = "elections", 3
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{Metrics: true, ProxyControllerLinks: true}, topic, partitions, 1000, "acknowledged records before the first fault")

	for _, cell := range []string{"crash", "cut-off"} {
		ctrl := activeController(t, newNodeClient(t, c.Node(1).Addr))
		rest := others(c, ctrl)
		stalled, candidate := rest[0], rest[1]
		fault := time.Now()
		c.Node(ctrl).Kill()
		c.Node(stalled).Pause()
		t.Logf("%s: active controller %d killed, node %d stalled", cell, ctrl, stalled)
		waitElecting(t, c, candidate)

		switch cell {
		case "crash":
			c.Node(candidate).Kill()
			c.Node(stalled).Resume()
			waitElecting(t, c, stalled)
			c.StartAgain(t, candidate)
		case "cut-off":
			c.Isolate(candidate)
			c.Node(stalled).Resume()
			waitElecting(t, c, stalled)
			if s := quorumState(c.Node(candidate)); s != "candidate" && s != "pre-candidate" {
				t.Fatalf("cut-off: node %d, alone behind its cut links, is a %q; want it still standing for election", candidate, s)
			}
			c.Heal(candidate)
		}
		next := waitNewController(t, c, stalled, ctrl)
		t.Logf("%s: node %d became the active controller %v after the first fault", cell, next, time.Since(fault).Round(time.Millisecond))
		l.waitAcks(t, 1000, cell+": writes going on with the new controller")

		c.StartAgain(t, ctrl)
		waitFullISR(t, newNodeClient(t, c.Node(next).Addr), topic, partitions, 60*time.Second)
		logUnavailability(t, l, cell+" mid-election", fault, []int32{0, 1, 2})
		l.waitAcks(t, 500, cell+": writes with every node back")
	}
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}
