package console

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestConsoleCluster: against three nodes the Overview lists three brokers and the
// active controller, and counts the partitions a killed broker leaves
// under-replicated.
func TestConsoleCluster(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{})
	srv := startConsole(t, c.BrokerAddrs(), 5*time.Second)
	br := newBrowser(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctxFor(t, 30*time.Second), 3, 3, nil, "replicated"); err != nil {
		t.Fatalf("create: %v (%s)", err, resp.ErrMessage)
	}

	br.open(t, srv.URL(), `[data-testid="broker-count"]`)
	if got := br.text(t, `[data-testid="broker-count"]`); got != "3" {
		t.Errorf("broker-count = %q, want 3", got)
	}
	controller, err := strconv.Atoi(br.text(t, `[data-testid="controller"]`))
	if err != nil || controller < 1 || controller > 3 {
		t.Errorf("controller = %d (%v), want a node id of 1-3", controller, err)
	}
	roles := br.texts(t, `[data-testid="brokers"] tbody td:last-child`)
	if slices.Index(roles, "active controller") != controller-1 {
		t.Errorf("roles %q: want broker %d marked the active controller", roles, controller)
	}
	br.screenshot(t, "overview-3-nodes")

	// Kill a broker that is not the controller: its replicas leave the ISRs once it
	// is fenced, and the Overview counts the partitions under-replicated.
	victim := int32(controller%3 + 1)
	c.Node(victim).Kill()
	br.waitText(t, `[data-testid="under-replicated"]`, 30*time.Second, func(s string) bool {
		if s == "0" {
			br.run(t, "reload", chromedp.Reload())
		}
		return s != "0" && s != ""
	}, fmt.Sprintf("under-replicated partitions after broker %d died", victim))
	br.screenshot(t, "overview-node-down")
	br.checkProblems(t)
}
