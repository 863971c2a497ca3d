package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
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
// blackholes) as a fourth member joins. In classic and consumer the cut comes just
// before the join, so that the rebalance the join starts must go on without the
// member: its revocations cannot reach the coordinator. In classic-second-round it
// comes between the two rounds of the cooperative rebalance: the member that gives a
// partition up to the newcomer is cut at the end of its OnPartitionsRevoked, so it
// revoked (the ledger saw it) but its JoinGroup for the second round, and its
// heartbeats, never arrive. Either way the coordinator drops it when its session
// expires and gives its partitions to the others. When the link passes again, what
// the member sent meanwhile arrives: its commits are refused (its generation or epoch
// is gone), it is fenced, and it joins again. Throughout, no partition is owned by two
// members (the rebalance callbacks' ledger and the coordinator's describe), committed
// offsets never go back, and every acknowledged record is processed.
func TestClusterGroupMemberCutOff(t *testing.T) {
	t.Parallel()
	for _, cell := range []struct {
		name, protocol string
		afterRevoke    bool
	}{
		{"classic", "classic", false},
		{"consumer", "consumer", false},
		{"classic-second-round", "classic", true},
	} {
		t.Run(cell.name, func(t *testing.T) {
			t.Parallel()
			testGroupMemberCutOff(t, cell.protocol, cell.afterRevoke)
		})
	}
}

// testGroupMemberCutOff runs a cell of TestClusterGroupMemberCutOff. a, b and c each
// reach the brokers through proxies of their own. Without afterRevoke, a is cut off
// before d joins; with it, the first of a, b and c whose OnPartitionsRevoked gives a
// partition up once d is started is cut off at the end of that callback (with six
// partitions over three members, a fourth takes one from one of them; which one is up
// to the sticky balancer, so each of them may be the one cut).
func testGroupMemberCutOff(t *testing.T, protocol string, afterRevoke bool) {
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
	links := map[string]memberLinks{}
	startLinked := func(name string) *migrationMember {
		links[name] = newMemberLinks(t, c)
		return start(name, kgo.Dialer(links[name].dial))
	}
	a, b, c2 := startLinked("a"), startLinked("b"), startLinked("c")
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
	coordinatorAddr := c.Node(coordinator).Addr
	// cut is the member cut off: its member id and generation (or epoch) then, what it
	// had just revoked, and when.
	type cut struct {
		m          *migrationMember
		id         string
		generation int32
		revoked    []int32
		at         time.Time
	}
	cuts := make(chan cut, 1)
	cutOff := func(m *migrationMember, revoked []int32) {
		id, generation := m.cl.GroupMetadata()
		led.cutOff(m)
		links[m.name][coordinatorAddr].Blackhole()
		cuts <- cut{m, id, generation, revoked, time.Now()}
	}
	if afterRevoke {
		var armed atomic.Bool
		armed.Store(true)
		for _, m := range []*migrationMember{a, b, c2} {
			m.setAfterRevoke(func(revoked []int32) {
				if len(revoked) > 0 && armed.CompareAndSwap(true, false) {
					cutOff(m, revoked)
				}
			})
		}
	} else {
		cutOff(a, nil)
	}
	d := start("d")
	var x cut
	select {
	case x = <-cuts:
	case <-time.After(time.Minute):
		t.Fatalf("none of a, b and c gave a partition up within a minute of d's start, so none was cut off; the rebalance callbacks:\n%s", led.notesSoFar())
	}
	if afterRevoke {
		t.Logf("member %s (%s, generation %d) cut off from node %d, the coordinator, as it revoked %v for d", x.m.name, x.id, x.generation, coordinator, x.revoked)
	} else {
		t.Logf("member %s (%s, generation %d) cut off from node %d, the coordinator; d joins", x.m.name, x.id, x.generation, coordinator)
	}
	others := []*migrationMember{d}
	for _, m := range []*migrationMember{a, b, c2} {
		if m != x.m {
			others = append(others, m)
		}
	}
	stableOf(fmt.Sprintf("%s owning the six partitions, %s dropped", memberNames(others), x.m.name), others...)
	t.Logf("%s dropped and its partitions given to the others %v after the cut", x.m.name, time.Since(x.at).Round(time.Millisecond))
	// A commit in the cut member's name, as it may send one while cut off (its member
	// id and generation or epoch from before), through a client that is not: refused,
	// since the coordinator no longer knows it. Offset 0 would take the partition's
	// committed offset back.
	if code := commitAs(t, describer.cl, group, topic, x.id, x.generation); code != kerr.UnknownMemberID.Code {
		t.Errorf("a commit in the name of %s, dropped from the group, was answered %v; want UNKNOWN_MEMBER_ID", x.m.name, kerr.ErrorForCode(code))
	}
	l.waitAcks(t, 60, "records while "+x.m.name+" is cut off")

	links[x.m.name][coordinatorAddr].Pass()
	healAt := time.Now()
	stableOf(fmt.Sprintf("%s back in the group beside %s", x.m.name, memberNames(others)), a, b, c2, d)
	t.Logf("%s (%s before the cut, %s now) back %v after the link passed", x.m.name, x.id, x.m.memberID(), time.Since(healAt).Round(time.Millisecond))
	if fences := clientLog.fencedSince(x.m.name, x.at); len(fences) == 0 {
		t.Errorf("member %s came back without being fenced (no FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID after the cut)", x.m.name)
	}
	for _, m := range others {
		if fences := clientLog.fencedSince(m.name, x.at); len(fences) > 0 {
			t.Errorf("member %s, never cut off, was fenced: %v", m.name, fences[:min(3, len(fences))])
		}
	}

	l.waitAcks(t, 60, "records after "+x.m.name+" is back")
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

// memberNames is "a, b and c" for members a, b and c.
func memberNames(members []*migrationMember) string {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.name
	}
	slices.Sort(names)
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// fencedSince returns the lines member name logged since at that name a member-epoch
// error (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID; franz-go logs the latter as
// UnknownMemberID when a JoinGroup returns it).
func (l *memberLog) fencedSince(name string, at time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	since := at.Format("15:04:05.000")
	for _, line := range l.lines {
		stamp, rest, _ := strings.Cut(line, " ")
		if stamp >= since && strings.HasPrefix(rest, name+": ") &&
			(strings.Contains(rest, "FENCED_MEMBER_EPOCH") || strings.Contains(rest, "UNKNOWN_MEMBER_ID") ||
				strings.Contains(rest, "join returned UnknownMemberID")) {
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
