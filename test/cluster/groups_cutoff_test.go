package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// memberLinks are one client's own proxies to the brokers, by broker address: a test
// cuts that client off from one node, and no other client.
type memberLinks map[string]*testutil.Proxy

func newMemberLinks(t *testing.T, c *testutil.Cluster) memberLinks {
	links := memberLinks{}
	for _, addr := range c.BrokerAddrs() {
		links[addr] = testutil.StartProxy(t, addr)
	}
	return links
}

// dial is the client's kgo.Dialer: a broker's address goes to the client's proxy to it.
func (l memberLinks) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if p, ok := l[host]; ok {
		host = p.Addr
	}
	var d net.Dialer
	return d.DialContext(ctx, network, host)
}

// TestClusterGroupMemberCutOff: one member of a group — classic, or on the KIP-848
// path — is cut off from the group's coordinator (its own proxy to that node
// blackholes) just as a fourth member joins, so that the rebalance the join starts
// must go on without it: its revocations cannot reach the coordinator. The coordinator
// drops it when its session expires and gives its partitions to the others. When the
// link passes again, what the member sent meanwhile arrives: its commits are refused
// (its generation or epoch is gone), it is fenced, and it joins again. Throughout, no
// partition is owned by two members (the rebalance callbacks' ledger and the
// coordinator's describe), committed offsets never go back, and every acknowledged
// record is processed.
func TestClusterGroupMemberCutOff(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			testGroupMemberCutOff(t, protocol)
		})
	}
}

func testGroupMemberCutOff(t *testing.T, protocol string) {
	const topic, group, partitions = "cutoff", "cutoff-group", 6
	const session = 3 * time.Second
	c, inv, l := startGroupFaultCluster(t, topic, partitions, session)
	led := &migrationLedger{owner: map[int32]string{}}
	clientLog := newMemberLog(t, &fenceLog{})
	start := func(name string, opts ...kgo.Opt) *migrationMember {
		opts = append(opts, kgo.WithLogger(clientLog.as(name)))
		if protocol == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer())
		} else {
			opts = append(opts, kgo.SessionTimeout(session), kgo.RebalanceTimeout(2*session), kgo.HeartbeatInterval(100*time.Millisecond))
		}
		return startMigrationMember(t, c, led, name, group, topic, opts...)
	}
	links := newMemberLinks(t, c)
	a := start("a", kgo.Dialer(links.dial))
	b, c2 := start("b"), start("c")
	adm := kadm.NewClient(newNodeClient(t, c.Node(1).Addr).cl)
	describer := newNodeClient(t, c.Node(1).Addr)
	// stableOf waits for a Stable group of exactly members, every partition owned by
	// one of them, as the coordinator describes it; it fails the test if a describe
	// ever shows a partition owned twice.
	stableOf := func(what string, members ...*migrationMember) {
		t.Helper()
		waitShowing(t, what, func() (bool, any) {
			ids := make([]string, len(members))
			for i, m := range members {
				ids[i] = m.memberID()
			}
			var owners map[string][]int32
			var ok bool
			var seen any
			if protocol == "consumer" {
				want := map[string]int8{}
				for _, id := range ids {
					want[id] = 1
				}
				v, err := describeMixed(describer.cl, group, topic)
				owners, ok, seen = v.parts, err == nil && v.stable(partitions, want), describedAs(v, err)
			} else {
				v, err := describeClassic(adm, group, topic)
				owners, ok, seen = v.members, err == nil && v.balanced(partitions, ids...), describedAs(v, err)
			}
			owner := map[int32]string{}
			for id, ps := range owners {
				for _, p := range ps {
					if other, dup := owner[p]; dup {
						t.Errorf("the coordinator describes partition %d owned by %s and %s: %v", p, other, id, seen)
					}
					owner[p] = id
				}
			}
			return ok, seen
		})
	}
	stableOf("a, b and c owning the six partitions", a, b, c2)
	testutil.WaitFor(t, 60*time.Second, func() bool { return led.processedCount() >= 60 }, "the group processing records")
	watch := watchCommitted(t, c, group, topic)

	coordinator := groupCoordinator(t, adm, group)
	aID, aGeneration := a.cl.GroupMetadata()
	link := links[c.Node(coordinator).Addr]
	led.cutOff(a)
	link.Blackhole()
	cutAt := time.Now()
	t.Logf("member a (%s, generation %d) cut off from node %d, the coordinator; d joins", aID, aGeneration, coordinator)
	d := start("d")
	stableOf("b, c and d owning the six partitions, a dropped", b, c2, d)
	t.Logf("a dropped and its partitions given to the others %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	// A commit in a's name, as it may send one while cut off (its member id and
	// generation or epoch from before), through a client that is not: refused, since
	// the coordinator no longer knows a. Offset 0 would take the partition's committed
	// offset back.
	if code := commitAs(t, describer.cl, group, topic, aID, aGeneration); code != kerr.UnknownMemberID.Code {
		t.Errorf("a commit in the name of a, dropped from the group, was answered %v; want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
	l.waitAcks(t, 60, "records while a is cut off")

	link.Pass()
	healAt := time.Now()
	stableOf("a back in the group beside b, c and d", a, b, c2, d)
	t.Logf("a (%s before the cut, %s now) back %v after the link passed", aID, a.memberID(), time.Since(healAt).Round(time.Millisecond))
	if fences := clientLog.fencedSince("a", cutAt); len(fences) == 0 {
		t.Errorf("member a came back without being fenced (no FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID after the cut)")
	}
	for _, name := range []string{"b", "c", "d"} {
		if fences := clientLog.fencedSince(name, cutAt); len(fences) > 0 {
			t.Errorf("member %s, never cut off, was fenced: %v", name, fences[:min(3, len(fences))])
		}
	}

	l.waitAcks(t, 60, "records after a is back")
	ends := l.stop(t).check(t, c, topic)
	testutil.WaitFor(t, 60*time.Second, func() bool { return led.processedBelow(ends) }, fmt.Sprintf("the group processing every record %v", ends))
	for _, m := range []*migrationMember{a, b, c2, d} {
		m.stop(t)
	}
	led.check(t, ends)
	for _, p := range watch.stop() {
		t.Error(p)
	}
	inv.check()
}

// fencedSince returns the lines member name logged since at that name a member-epoch
// error (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
func (l *memberLog) fencedSince(name string, at time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	since := at.Format("15:04:05.000")
	for _, line := range l.lines {
		stamp, rest, _ := strings.Cut(line, " ")
		if stamp >= since && strings.HasPrefix(rest, name+": ") &&
			(strings.Contains(rest, "FENCED_MEMBER_EPOCH") || strings.Contains(rest, "UNKNOWN_MEMBER_ID")) {
			out = append(out, line)
		}
	}
	return out
}

// commitAs commits offset 0 of topic's partition 0 into group in the name of member
// (at generation, the member epoch on the KIP-848 path) through cl, and returns the
// partition's error code.
func commitAs(t *testing.T, cl *kgo.Client, group, topic, member string, generation int32) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, generation
	topics, err := kadm.NewClient(cl).ListTopics(ctxT(t, 10*time.Second), topic)
	if err != nil || topics[topic].Err != nil {
		t.Fatalf("topic %s not described: %v %v", topic, err, topics[topic].Err)
	}
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topics[topic].ID // by name up to v9, by id from v10
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatalf("OffsetCommit in the name of %s: %v", member, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("OffsetCommit in the name of %s answered %d topics", member, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}
