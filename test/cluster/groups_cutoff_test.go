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
// heartbeats, never arrive. consumer-revoked is the same cut on the KIP-848 path: the
// heartbeat reporting the revocation never arrives, so the coordinator, as Kafka's
// (CurrentAssignmentBuilder), holds the revoked partitions as the member's, pending
// revocation, and must not give them to their new owner until it drops the member;
// no describe may show another member with them while it is in the group.
// consumer-reported cuts the member just after the coordinator took that report (a
// describe shows it at the new epoch without the revoked partitions): the revoked
// partitions go to their new owner at once, while the member is still in the group,
// and only its others wait for its session to expire. Either way the coordinator
// drops it when its session expires and gives its partitions to the others. When the
// link passes again, what the member sent meanwhile arrives: its commits are refused
// (its generation or epoch is gone), it is fenced, and it joins again. Throughout, no
// partition is owned by two members (the rebalance callbacks' ledger and the
// coordinator's describe), committed offsets never go back, and every acknowledged
// record is processed.
func TestClusterGroupMemberCutOff(t *testing.T) {
	t.Parallel()
	for _, cell := range []struct {
		name, protocol string
		at             cutPoint
	}{
		{"classic", "classic", cutBeforeJoin},
		{"consumer", "consumer", cutBeforeJoin},
		{"classic-second-round", "classic", cutAfterRevoke},
		{"consumer-revoked", "consumer", cutAfterRevoke},
		{"consumer-reported", "consumer", cutAfterReport},
	} {
		t.Run(cell.name, func(t *testing.T) {
			t.Parallel()
			testGroupMemberCutOff(t, cell.protocol, cell.at)
		})
	}
}

// cutPoint is where a cell of TestClusterGroupMemberCutOff cuts its member off from
// the group's coordinator.
type cutPoint int

const (
	// cutBeforeJoin: a, just before d joins.
	cutBeforeJoin cutPoint = iota
	// cutAfterRevoke: the first of a, b and c whose OnPartitionsRevoked gives a
	// partition up once d is started, at the end of that callback: it revoked, but what
	// it sends next (the classic second-round JoinGroup, the KIP-848 heartbeat reporting
	// the revocation) never arrives.
	cutAfterRevoke
	// cutAfterReport (KIP-848): that member, once the coordinator took the heartbeat
	// reporting the revocation: a describe shows the member at a later epoch than the
	// one it revoked at, without the revoked partitions. (Its current assignment alone
	// does not tell: Kafka's describe leaves partitions pending revocation out of it as
	// soon as the coordinator asks for them.)
	cutAfterReport
)

// testGroupMemberCutOff runs a cell of TestClusterGroupMemberCutOff. a, b and c each
// reach the brokers through proxies of their own and are cut off at the cutPoint
// (with six partitions over three members, a fourth takes one or two from them; which
// is up to the balancer, so each of a, b and c may be the one cut).
func testGroupMemberCutOff(t *testing.T, protocol string, at cutPoint) {
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
	// observe, once set, sees every ConsumerGroupDescribe stableOf makes.
	var observe func(v mixedView)
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
				if err == nil && observe != nil {
					observe(v)
				}
			} else {
				v, err := describeClassic(adm, group, topic)
				owners, ok, seen = v.members, err == nil && v.balanced(partitions, ids...), describedAs(v, err)
			}
			owner := map[int32]string{}
			byName := map[string][]int32{}
			for id, ps := range owners {
				for _, p := range ps {
					if other, dup := owner[p]; dup {
						t.Errorf("the coordinator describes partition %d owned by %s and %s: %v", p, other, id, seen)
					}
					owner[p] = id
				}
				for i, m := range members {
					if ids[i] == id {
						byName[m.name] = ps
					}
				}
			}
			// Stable once the members' own callbacks agree: a member's assignment
			// callback runs after the coordinator shows the assignment.
			return ok && led.owns(byName), seen
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
	// revocation is a member's first revocation for d: what, under which member id and
	// at which generation or epoch.
	type revocation struct {
		m       *migrationMember
		id      string
		epoch   int32
		revoked []int32
	}
	revocations := make(chan revocation, 1)
	if at == cutBeforeJoin {
		cutOff(a, nil)
	} else {
		var armed atomic.Bool
		armed.Store(true)
		for _, m := range []*migrationMember{a, b, c2} {
			m.setAfterRevoke(func(revoked []int32) {
				if len(revoked) == 0 || !armed.CompareAndSwap(true, false) {
					return
				}
				if at == cutAfterRevoke {
					cutOff(m, revoked)
					return
				}
				id, epoch := m.cl.GroupMetadata()
				revocations <- revocation{m, id, epoch, slices.Clone(revoked)}
			})
		}
	}
	d := start("d")
	if at == cutAfterReport {
		var r revocation
		select {
		case r = <-revocations:
		case <-time.After(time.Minute):
			t.Fatalf("none of a, b and c gave a partition up within a minute of d's start; the rebalance callbacks:\n%s", led.notesSoFar())
		}
		waitShowing(t, fmt.Sprintf("the coordinator taking %s's report that it revoked %v at epoch %d", r.m.name, r.revoked, r.epoch), func() (bool, any) {
			v, err := describeMixed(describer.cl, group, topic)
			_, in := v.types[r.id]
			return err == nil && in && v.epochs[r.id] > r.epoch && !overlaps(v.parts[r.id], r.revoked), describedAs(v, err)
		})
		cutOff(r.m, r.revoked)
	}
	var x cut
	select {
	case x = <-cuts:
	case <-time.After(time.Minute):
		t.Fatalf("none of a, b and c gave a partition up within a minute of d's start, so none was cut off; the rebalance callbacks:\n%s", led.notesSoFar())
	}
	switch at {
	case cutBeforeJoin:
		t.Logf("member %s (%s, generation %d) cut off from node %d, the coordinator; d joins", x.m.name, x.id, x.generation, coordinator)
	case cutAfterRevoke:
		t.Logf("member %s (%s, generation %d) cut off from node %d, the coordinator, as it revoked %v for d", x.m.name, x.id, x.generation, coordinator, x.revoked)
	case cutAfterReport:
		t.Logf("member %s (%s, epoch %d) cut off from node %d, the coordinator, once it took the report that %v were revoked for d", x.m.name, x.id, x.generation, coordinator, x.revoked)
	}
	if protocol == "consumer" && at != cutBeforeJoin {
		observe = handoverCheck(t, x.m.name, x.id, x.revoked, at)
	}
	others := []*migrationMember{d}
	for _, m := range []*migrationMember{a, b, c2} {
		if m != x.m {
			others = append(others, m)
		}
	}
	stableOf(fmt.Sprintf("%s owning the six partitions, %s dropped", memberNames(others), x.m.name), others...)
	t.Logf("%s dropped and its partitions given to the others %v after the cut", x.m.name, time.Since(x.at).Round(time.Millisecond))
	if observe != nil {
		observe(mixedView{}) // x is no longer in the group: the check's verdict, if not given yet
		observe = nil
	}
	if protocol == "consumer" {
		if line := coordinatorLine(c.Node(coordinator).Log(), "consumer group member fenced", x.id); line != "" {
			t.Logf("node %d: %s", coordinator, line)
		}
	}
	// A commit in the cut member's name, as it may send one while cut off (its member
	// id and generation or epoch from before), through a client that is not: refused,
	// since the coordinator no longer knows it (Kafka's ConsumerGroup.validateOffsetCommit
	// looks the member up before it compares epochs, so a dropped member's commit is
	// UNKNOWN_MEMBER_ID whatever its epoch). Offset 0 would take the partition's
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

// handoverCheck returns the check of the describes made while member name (id), cut
// off once it revoked the partitions revoked, is still in the group; a view without
// the member gives the verdict. After cutAfterRevoke the coordinator never had the
// member's report, so no other member may be described with a revoked partition
// (Kafka's CurrentAssignmentBuilder: a partition pending revocation still has its
// owner's epoch, and a member whose target holds it waits, UNRELEASED_PARTITIONS,
// until the owner reports it gone or is fenced); some describe must show one waiting
// for it (in its target, not yet assigned). After cutAfterReport the coordinator had
// the report, so some describe must show a revoked partition assigned to its new
// owner while the member is still in the group.
func handoverCheck(t *testing.T, name, id string, revoked []int32, at cutPoint) func(v mixedView) {
	waiting, given, done := 0, 0, false
	return func(v mixedView) {
		t.Helper()
		if done {
			return
		}
		if _, in := v.types[id]; !in {
			done = true
			switch {
			case at == cutAfterRevoke && waiting == 0:
				t.Errorf("no describe showed a member waiting for %v (in its target, not assigned) while %s, which revoked them but whose report never arrived, was in the group", revoked, name)
			case at == cutAfterReport && given == 0:
				t.Errorf("no describe showed %v assigned to their new owner while %s, whose report that it revoked them the coordinator had, was in the group: the coordinator held them until it dropped %s", revoked, name, name)
			default:
				t.Logf("while %s was in the group, %d describes showed %v waiting for their new owner, %d assigned to it", name, waiting, revoked, given)
			}
			return
		}
		for other := range v.types {
			switch ps := v.parts[other]; {
			case other == id:
			case overlaps(ps, revoked):
				if given++; at == cutAfterRevoke && given == 1 {
					t.Errorf("the coordinator describes %s with %v, revoked by %s, whose report of it never arrived, while %s is still in the group: %v", other, ps, name, name, v)
				}
			case overlaps(v.targets[other], revoked):
				waiting++
			}
		}
	}
}

// overlaps reports whether a and b have a partition in common.
func overlaps(a, b []int32) bool {
	return slices.ContainsFunc(a, func(p int32) bool { return slices.Contains(b, p) })
}

// coordinatorLine is the first line of a node's log with msg that names member.
func coordinatorLine(log, msg, member string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, msg) && strings.Contains(line, member) {
			return strings.TrimSpace(line)
		}
	}
	return ""
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
