package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/cli"
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
// would be refused too. Beside it a KIP-848 consumer group reads the input and
// commits, its coordinator moving between nodes of both builds. Ends with the
// history checks: every input record in the output once, read_committed; the group
// read every input record, its committed offsets reached the input's end and never
// went back.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	old := testutil.BuildSamsaAt(t, upgradeFrom)
	const n = 15000
	r := startEOSRun(t, testutil.ClusterOptions{Overrides: txnOverrides, Binary: old}, "upgrade", n, "a", "b")
	c, p := r.c, r.p
	start := time.Now()
	phase := func(what string) { t.Logf("%5.1fs %s (progress %d)", time.Since(start).Seconds(), what, p.Progress()) }
	const group = "upgrade-848"
	member := startGroupConsumer(t, c, group, p.In, kgo.ServerSideBalancer())
	committed := watchCommitted(t, c, group, p.In)

	ctrl := activeController(t, r.cl)
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
		if i == 0 {
			// samsa doctor tells the operator the upgrade is not finished, and where.
			f, ok := doctorFinding(t, c.Node(id).Addr, "mixed_builds")
			if !ok || !strings.Contains(f.Message, "WriteTxnMarkers up to v2 on broker "+fmt.Sprint(id)) ||
				!strings.Contains(f.Fix, fmt.Sprintf("brokers %d, %d", min(order[1], order[2]), max(order[1], order[2]))) {
				t.Errorf("samsa doctor with node %d upgraded: mixed_builds %+v (found %v), want it naming the other two brokers", id, f, ok)
			}
		}
	}
	r.finish(t)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		acked, _ := member.ackedCommits()
		sum := int64(0)
		for _, next := range acked {
			sum += next
		}
		return sum == n
	}, "the KIP-848 group to commit the input's end")
	problems := append(member.stop(t), committed.stop()...)
	member.mu.Lock()
	read := 0
	for _, offsets := range member.processed {
		read += len(offsets)
	}
	member.mu.Unlock()
	if read != n {
		problems = append(problems, fmt.Sprintf("the KIP-848 group read %d distinct input records of %d", read, n))
	}
	for _, problem := range problems {
		t.Error(problem)
	}
	if f, ok := doctorFinding(t, c.Node(1).Addr, "mixed_builds"); ok {
		t.Errorf("samsa doctor after the upgrade still finds mixed builds: %+v", f)
	}
}

// doctorFinding runs `samsa doctor --window 0 -o json` against addr and returns its
// finding of code, if any.
func doctorFinding(t *testing.T, addr, code string) (cli.Finding, bool) {
	t.Helper()
	out, err := exec.Command(testutil.SamsaBinary(t), "-b", addr, "doctor", "--window", "0", "-o", "json").Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 3) { // 3: findings
		t.Fatalf("samsa doctor: %v\n%s", err, out)
	}
	var report struct {
		Findings []cli.Finding `json:"findings"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("samsa doctor -o json: %v\n%s", err, out)
	}
	for _, f := range report.Findings {
		if f.Code == code {
			return f, true
		}
	}
	return cli.Finding{}, false
}
