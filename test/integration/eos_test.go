package integration

import (
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// eosBrokerOverrides let the pipeline's members use a 2 s session timeout, so that a
// killed member's partitions move on quickly, and abort a transaction a killed member
// left open within a second of its timeout.
var eosBrokerOverrides = []string{"group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"}

// TestExactlyOncePipelineSurvivesKills: a consume-transform-produce pipeline of three
// processes (franz-go's GroupTransactSession), its members killed with kill -9 in the
// middle of the stream and restarted, writes every input record to its output exactly
// once as read_committed consumers see it.
func TestExactlyOncePipelineSurvivesKills(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, eosBrokerOverrides...)
	adm := newAdmin(t, b)
	p := testutil.NewEOSPipeline(t, []string{b.Addr}, "eos")
	createTopic(t, adm, p.In, 4, nil)
	createTopic(t, adm, p.Out, 4, nil)
	const n = 6000
	for _, name := range []string{"a", "b", "c"} {
		p.Start(name)
	}
	fed := p.Feed(newClient(t, b), n, 0, 60*time.Second)
	for i, name := range []string{"b", "c", "b", "a"} {
		p.WaitProgress(int64((i+1)*n/6), 90*time.Second)
		p.Restart(name)
	}
	if err := <-fed; err != nil {
		p.Fatalf("producing the input: %v", err)
	}
	p.WaitCaughtUp(adm, 90*time.Second)
	p.StopAll()
	p.WaitSettled(adm, 60*time.Second)
	testutil.CheckExactlyOnce(t, testutil.ReadAll(t, []string{b.Addr}, p.Out, true, 30*time.Second), n)
}
