package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// upgradeFrom is the build a rolling upgrade starts from: the last one before this
// repository raised two versions its nodes send each other, WriteTxnMarkers v2
// (KIP-1228) and BrokerRegistration v4. It serves WriteTxnMarkers up to v1 and
// BrokerRegistration up to v3.
const upgradeFrom = "2f1dfe0fb5a82bc1afed9b02075a8c095fe52ed2"

// TestRollingUpgrade upgrades a three-node cluster from the build upgradeFrom to
// this tree's, one node at a time (SIGTERM, the new binary on the same data, the
// node back in every ISR before the next), with the exactly-once pipeline running
// throughout; the active controller is upgraded last, so that upgraded brokers
// register with a controller of the older build, and transaction coordinators of
// the new build write markers to partitions led by nodes of the older one. Nodes
// ask each other's versions when they connect and send those two requests at the
// older node's version (peer.Options.Downgrade); without that, the first upgraded
// node could not register (its BrokerRegistration v4 is refused) and its markers
// would be refused too. Ends with the history check: every input record in the
// output once, read_committed, and every node's data intact.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	old := testutil.BuildSamsaAt(t, upgradeFrom)
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: txnOverrides, Binary: old})
	inv := watchInvariants(t, c)
	cl := newNodeClient(t, c.Node(1).Addr)
	p := testutil.NewEOSPipeline(t, c.BrokerAddrs(), "upgrade")
	createTopic(t, cl, p.In, 3, 3)
	createTopic(t, cl, p.Out, 3, 3)
	const n = 15000
	for _, name := range []string{"a", "b"} {
		p.Start(name)
	}
	in, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.RecordDeliveryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	fed := p.Feed(in, n, time.Second, 60*time.Second)
	start := time.Now()
	phase := func(what string) { t.Logf("%5.1fs %s (progress %d)", time.Since(start).Seconds(), what, p.Progress()) }

	ctrl := activeController(t, cl)
	order := []int32{}
	for _, node := range c.Nodes() {
		if node.ID != ctrl {
			order = append(order, node.ID)
		}
	}
	order = append(order, ctrl)
	newBin := testutil.SamsaBinary(t)
	for i, id := range order {
		p.WaitProgress(int64((i+1)*n/5), 120*time.Second)
		if err := c.Node(id).Stop(); err != nil {
			t.Fatalf("stopping node %d of the older build: %v", id, err)
		}
		phase(fmt.Sprintf("node %d stopped", id))
		c.UseBinary(id, newBin)
		c.StartAgain(t, id) // waits until the node is ready: registered and unfenced
		survivor := clientExcept(t, c, id)
		waitFullISR(t, survivor, p.In, 3, 60*time.Second)
		waitFullISR(t, survivor, p.Out, 3, 60*time.Second)
		phase(fmt.Sprintf("node %d runs this build, back in every ISR", id))
	}
	if err := <-fed; err != nil {
		p.Fatalf("producing the input: %v", err)
	}
	phase("input written")
	p.WaitCaughtUp(kadm.NewClient(in), 120*time.Second)
	p.StopAll()
	p.WaitSettled(kadm.NewClient(in), 60*time.Second)
	out := testutil.ReadAll(t, c.BrokerAddrs(), p.Out, true, 60*time.Second)
	testutil.CheckExactlyOnce(t, out, n)
	inv.check()
}
