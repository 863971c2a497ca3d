package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestClusterMigratedGroupCoordinatorFailover: two classic franz-go members
// (cooperative-sticky) share six partitions; a member on the KIP-848 path joins and
// the group becomes a consumer group with its classic members kept. The group's
// coordinator goes away while the group is mixed, under an acks=all load: killed
// (kill -9, subtest kill), stopped cleanly (SIGTERM, subtest stop: a controlled
// shutdown that hands its leaderships over before it exits) or stalled (SIGSTOP,
// subtest pause: fenced and its leaderships moved, then SIGCONT once another node
// coordinates the group, with the members' requests to it still unread). The new
// coordinator, which loads the classic members from their member records, keeps
// serving them: the same three members with the same types, no member fenced, every
// partition owned once, every record processed. The consumer-protocol member then leaves and the
// group goes back to the classic protocol with the two classic members. Through it
// all no partition is owned or processed by two members at once (their rebalance
// callbacks), and a record is processed twice only if it was in the uncommitted tail
// of a member that gave its partition up.
func TestClusterMigratedGroupCoordinatorFailover(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"kill", "stop", "pause"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			testMigratedGroupCoordinatorFailover(t, fault)
		})
	}
}

// testMigratedGroupCoordinatorFailover runs TestClusterMigratedGroupCoordinatorFailover
// on a cluster of its own, with the coordinator killed (fault "kill") or stopped
// cleanly ("stop"), then started again once another node coordinates the group, or
// stalled ("pause"), then let go on then.
func testMigratedGroupCoordinatorFailover(t *testing.T, fault string) {
	const topic, group, partitions = "migrate", "migrate-group", 6
	const classicSession = 3 * time.Second
	c, inv, l := startGroupFaultCluster(t, topic, partitions, 20*time.Second)
	led := &migrationLedger{owner: map[int32]string{}}
	logs := &fenceLog{}
	clientLog := newMemberLog(t, logs)
	classic := func(name string) *migrationMember {
		return startMigrationMember(t, c, led, name, group, topic, kgo.WithLogger(clientLog.as(name)),
			kgo.SessionTimeout(classicSession), kgo.HeartbeatInterval(100*time.Millisecond))
	}
	c0, c1 := classic("c0"), classic("c1")
	adm := kadm.NewClient(newNodeClient(t, c.Node(1).Addr).cl)
	waitShowing(t, "the classic group stable, c0 and c1 owning the six partitions", func() (bool, any) {
		v, err := describeClassic(adm, group, topic)
		return err == nil && v.balanced(partitions, c0.memberID(), c1.memberID()), describedAs(v, err)
	})
	testutil.WaitFor(t, 60*time.Second, func() bool { return led.processedCount() >= 60 }, "the classic group processing records")

	// Upgrade: a member on the KIP-848 path joins the classic group.
	n0 := startMigrationMember(t, c, led, "n0", group, topic, kgo.WithLogger(clientLog.as("n0")), kgo.ServerSideBalancer())
	want := func() map[string]int8 { return map[string]int8{c0.memberID(): 0, c1.memberID(): 0, n0.memberID(): 1} }
	describer := newNodeClient(t, c.Node(1).Addr)
	var before mixedView
	waitShowing(t, "a consumer group of c0, c1 (classic) and n0 (consumer), each with partitions", func() (bool, any) {
		var err error
		before, err = describeMixed(describer.cl, group, topic)
		return err == nil && before.stable(partitions, want()), describedAs(before, err)
	})
	// n0 owns partitions, so it commits after the fault: franz-go (v1.22) finds a new
	// coordinator for its ConsumerGroupHeartbeats only once another request of the
	// group (here the OffsetCommit) failed to reach the dead one, or once the node it
	// keeps dialing answers NOT_COORDINATOR. A KIP-848 member with nothing to commit
	// keeps heartbeating to the dead node until its session expires at the new
	// coordinator; the killed or stopped node is therefore started again (as a
	// supervisor would) once another node coordinates the group.
	t.Logf("mixed group before the fault: %v", before)
	// The members as they are now: a member fenced by the failover would join again
	// under a new member id (a classic one) or at epoch 0, and no longer match.
	members := maps.Clone(before.types)
	var classicIDs []string
	for id, typ := range members {
		if typ == 0 {
			classicIDs = append(classicIDs, id)
		}
	}

	coordinator := groupCoordinator(t, adm, group)
	faultAt := time.Now()
	switch fault {
	case "kill":
		c.Node(coordinator).Kill()
		t.Logf("kill -9 of node %d, the coordinator of %s", coordinator, group)
	case "stop":
		if err := c.Node(coordinator).Stop(); err != nil {
			t.Fatalf("SIGTERM of node %d, the coordinator of %s: %v\n%s", coordinator, group, err, c.Node(coordinator).Log())
		}
		if !hasLine(c.Node(coordinator).Log(), "controlled shutdown: the active controller moved every leadership away") {
			t.Fatalf("node %d exited before its leaderships moved: no controlled shutdown", coordinator)
		}
		t.Logf("controlled shutdown (SIGTERM) of node %d, the coordinator of %s, took %v", coordinator, group, time.Since(faultAt).Round(time.Millisecond))
	case "pause":
		c.Node(coordinator).Pause()
		t.Logf("SIGSTOP of node %d, the coordinator of %s", coordinator, group)
	default:
		t.Fatalf("unknown fault %q", fault)
	}
	survivor := clientExcept(t, c, coordinator)
	survivorAdm := kadm.NewClient(survivor.cl)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		next, err := tryGroupCoordinator(survivorAdm, group)
		return err == nil && next != coordinator
	}, "another coordinator")
	if fault == "pause" {
		c.Node(coordinator).Resume()
	} else {
		c.StartAgain(t, coordinator)
	}
	// A classic member whose heartbeats fail for long enough while no coordinator
	// answers gives its partitions up as lost (franz-go) and joins again with its
	// member id; the new coordinator must know it, at its epoch and with its
	// partitions.
	var after mixedView
	waitShowing(t, fmt.Sprintf("the new coordinator serving the same three members %v, each with partitions", members), func() (bool, any) {
		var err error
		after, err = describeMixed(survivor.cl, group, topic)
		return err == nil && after.stable(partitions, members), describedAs(after, err)
	})
	t.Logf("mixed group after the failover: %v", after)
	// The classic members must keep their sessions at the new coordinator, which
	// started them afresh when it loaded the group: the group holds for twice their
	// session timeout.
	described := 0
	for holdUntil := time.Now().Add(2 * classicSession); time.Now().Before(holdUntil); time.Sleep(100 * time.Millisecond) {
		v, err := describeMixed(survivor.cl, group, topic)
		if err != nil {
			continue // a describe that failed shows no change
		}
		if described++; !v.stable(partitions, members) {
			t.Fatalf("the group changed after the failover: %v", v)
		}
	}
	if described == 0 {
		t.Fatal("no ConsumerGroupDescribe answered while the group held after the failover")
	}
	for id, e := range before.epochs {
		if after.epochs[id] < e {
			t.Errorf("member %s had epoch %d before the %s, %d after", id, e, fault, after.epochs[id])
		}
	}
	l.waitAcks(t, 120, "records after the failover")
	ends := l.ackedEnds()
	testutil.WaitFor(t, 60*time.Second, func() bool { return led.processedBelow(ends) }, fmt.Sprintf("the mixed group processing every record acknowledged so far %v", ends))
	if errs := logs.since(faultAt); len(errs) > 0 {
		t.Errorf("members fenced after the %s: %d errors, first: %v", fault, len(errs), errs[:min(3, len(errs))])
	}

	// Downgrade: the consumer-protocol member leaves; only classic members are left.
	n0.stop(t)
	waitShowing(t, fmt.Sprintf("the classic group back, c0 and c1 %v owning the six partitions", classicIDs), func() (bool, any) {
		v, err := describeClassic(survivorAdm, group, topic)
		return err == nil && v.balanced(partitions, classicIDs...), describedAs(v, err)
	})
	if v, err := describeMixed(survivor.cl, group, topic); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("ConsumerGroupDescribe of the group gone back to classic: %v %v, want GROUP_ID_NOT_FOUND", v, err)
	}
	l.waitAcks(t, 120, "records after the downgrade")

	ends = l.stop(t).check(t, c, topic)
	testutil.WaitFor(t, 60*time.Second, func() bool { return led.processedBelow(ends) }, fmt.Sprintf("the classic group processing every record %v", ends))
	c0.stop(t)
	c1.stop(t)
	led.check(t, ends)
	inv.check()
}

// startGroupFaultCluster starts the three nodes of a group fault test (groups'
// timeouts short, KIP-848 members' session consumerSession, __consumer_offsets of
// three partitions) and creates topic, with replication factor 3, under an acks=all
// load of 20 records a second, 120 of them acknowledged.
func startGroupFaultCluster(t *testing.T, topic string, partitions int32, consumerSession time.Duration) (*testutil.Cluster, *invariants, *load) {
	t.Helper()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: append([]string{
		"min.insync.replicas=2",
		"group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=500",
		"group.consumer.min.heartbeat.interval.ms=50", "group.consumer.heartbeat.interval.ms=250",
		"group.consumer.min.session.timeout.ms=500", fmt.Sprintf("group.consumer.session.timeout.ms=%d", consumerSession.Milliseconds()),
		"offsets.topic.num.partitions=3",
	}, replicationOverrides...)})
	inv := watchInvariants(t, c)
	createTopic(t, newNodeClient(t, c.Node(1).Addr), topic, partitions, 3)
	l := startLoadAt(t, c, topic, 20)
	l.waitAcks(t, 120, "records before the consumers start")
	return c, inv, l
}

// newMemberLog is a memberLog sending member-epoch errors to fences, shown when t
// fails.
func newMemberLog(t *testing.T, fences *fenceLog) *memberLog {
	l := &memberLog{fences: fences}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the members' franz-go logs:\n%s", l)
		}
	})
	return l
}

// memberLog keeps the info-level logs of a test's franz-go clients, each line with
// its member's name, to show when the test fails; member-epoch errors also go to
// fences.
type memberLog struct {
	fences *fenceLog
	mu     sync.Mutex
	lines  []string
}

type namedLog struct {
	*memberLog
	name string
}

func (l *memberLog) as(name string) kgo.Logger { return namedLog{l, name} }

func (l namedLog) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l namedLog) Log(level kgo.LogLevel, msg string, kv ...any) {
	l.fences.Log(level, msg, kv...)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, time.Now().Format("15:04:05.000 ")+l.name+": "+msg+" "+fmt.Sprint(kv...))
}

func (l *memberLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitShowing waits up to a minute for cond, and fails the test with what cond last
// saw when it does not hold by then.
func waitShowing(t *testing.T, what string, cond func() (bool, any)) {
	t.Helper()
	var last any
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	t.Fatalf("timed out after 1m0s waiting for: %s; last seen: %v", what, last)
}

// describedAs is what a describe showed: the view, or why there was none.
func describedAs(v any, err error) any {
	if err != nil {
		return err
	}
	return v
}

// migrationMember is a franz-go group member that processes what it polls and commits
// it synchronously before it lets a rebalance go on (BlockRebalanceOnPoll), writing
// what it processes and its rebalance callbacks to a shared ledger. It commits a
// partition only under the member id it was assigned the partition under (see
// dropForeign).
type migrationMember struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu          sync.Mutex
	acked       map[int32]int64  // partition → highest commit the coordinator acknowledged
	assignedAs  map[int32]string // partition → the member id it was assigned under
	afterRevoke func(revoked []int32)
}

// setAfterRevoke makes f run at the end of m's OnPartitionsRevoked callback, after
// the ledger saw the revocation, with the partitions of the topic revoked (none when
// franz-go calls the callback at the end of a session that lost nothing).
func (m *migrationMember) setAfterRevoke(f func(revoked []int32)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.afterRevoke = f
}

func startMigrationMember(t *testing.T, c *testutil.Cluster, led *migrationLedger, name, group, topic string, opts ...kgo.Opt) *migrationMember {
	t.Helper()
	m := &migrationMember{name: name, done: make(chan struct{}), acked: map[int32]int64{}, assignedAs: map[int32]string{}}
	assign := func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
		led.acquire(name, ps[topic])
		id, _ := cl.GroupMetadata()
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range ps[topic] {
			m.assignedAs[p] = id
		}
	}
	release := func(how string, ps []int32) (after func([]int32)) {
		led.release(m, how, ps)
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range ps {
			delete(m.assignedAs, p)
		}
		return m.afterRevoke
	}
	revoke := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
		if after := release("revoked", ps[topic]); after != nil {
			after(ps[topic])
		}
	}
	lose := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { release("lost", ps[topic]) }
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.BrokerAddrs()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(assign),
		kgo.OnPartitionsRevoked(revoke),
		kgo.OnPartitionsLost(lose),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.run(ctx, led, topic)
	return m
}

func (m *migrationMember) run(ctx context.Context, led *migrationLedger, topic string) {
	defer close(m.done)
	commitCtx := kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		if dropped := m.dropForeign(req); len(dropped) > 0 {
			led.note("%s: commit of partitions %v not sent: assigned under another member id than %s", m.name, dropped, req.MemberID)
		}
		if len(req.Topics) == 0 {
			return errForeignCommit
		}
		return nil
	})
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		next := map[int32]kgo.EpochOffset{}
		fs.EachRecord(func(r *kgo.Record) {
			led.process(m.name, r.Partition, r.Offset)
			next[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		if len(next) > 0 {
			m.cl.CommitOffsetsSync(commitCtx, map[string]map[int32]kgo.EpochOffset{topic: next},
				func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
					if err != nil {
						led.note("%s: commit of %v failed: %v", m.name, next, err)
						return
					}
					for _, t := range resp.Topics {
						for _, p := range t.Partitions {
							if p.ErrorCode != 0 {
								led.note("%s: commit of partition %d at %d failed: %v", m.name, p.Partition, next[p.Partition].Offset, kerr.ErrorForCode(p.ErrorCode))
								continue
							}
							m.mu.Lock() // never held with the ledger's mutex: release takes that one first
							m.acked[p.Partition] = max(m.acked[p.Partition], next[p.Partition].Offset)
							m.mu.Unlock()
						}
					}
				})
		}
		m.cl.AllowRebalance()
	}
}

// errForeignCommit: a commit of partitions none of which the member was assigned under
// the member id it commits as.
var errForeignCommit = errors.New("no partition of the commit assigned under the committing member id")

// dropForeign takes out of req, just before franz-go sends it, the partitions m was
// not assigned under req's member id, and returns them. franz-go, answered
// UNKNOWN_MEMBER_ID on a JoinGroup (a member the coordinator dropped while it could
// not reach it), joins again under a new member id without calling OnPartitionsLost:
// it goes on fetching its old partitions until the new generation's assignment
// revokes them, and a commit it held back during the join goes out under the new
// member id, which the coordinator accepts as Kafka does (a classic commit is checked
// against the member and its generation, not against the assignment). Sent, such a
// commit could take a partition's committed offset back below what its new owner
// committed; an application must not send it, so this one does not.
func (m *migrationMember) dropForeign(req *kmsg.OffsetCommitRequest) []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var dropped []int32
	topics := req.Topics[:0]
	for _, t := range req.Topics {
		parts := t.Partitions[:0]
		for _, p := range t.Partitions {
			if m.assignedAs[p.Partition] == req.MemberID {
				parts = append(parts, p)
			} else {
				dropped = append(dropped, p.Partition)
			}
		}
		if t.Partitions = parts; len(parts) > 0 {
			topics = append(topics, t)
		}
	}
	req.Topics = topics
	return dropped
}

// ackedCommit is the highest commit of partition the coordinator acknowledged to m.
func (m *migrationMember) ackedCommit(partition int32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acked[partition]
}

func (m *migrationMember) memberID() string {
	id, _ := m.cl.GroupMetadata()
	return id
}

// stop ends the poll loop and closes the client, which leaves the group (its
// partitions are revoked through the callback).
func (m *migrationMember) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("member %s did not stop", m.name)
	}
	m.cl.Close()
}

// migrationLedger is the history of a group's members, in the order it happened:
// what each processed, and the partitions their rebalance callbacks gave and took.
type migrationLedger struct {
	mu         sync.Mutex
	events     []ledgerEvent
	owner      map[int32]string            // partition → member owning it, by the callbacks
	cut        map[string]*migrationMember // members cut off from the coordinator (cutOff)
	violations []string
	notes      []string // failed commits and partitions released, shown when a record was processed twice
}

func (l *migrationLedger) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

// notesSoFar is what the ledger noted so far (failed commits, partitions given and
// taken), a line each.
func (l *migrationLedger) notesSoFar() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.notes, "\n")
}

type ledgerEvent struct {
	member    string
	released  bool // a release (revoked or lost); otherwise a record processed
	partition int32
	offset    int64 // the record's offset, or the member's acknowledged commit when it released
}

// cutOff marks m as cut off from the group's coordinator, which may then drop it
// without its knowing and give its partitions to others while it still reads them:
// Kafka fences such a member's commits, not its reads. Until m is assigned partitions
// again (it joined again), a partition of m's assigned to another member is taken
// from m (a release at m's acknowledged commit), and m's reads of partitions no longer
// its own count as processing, not as violations.
func (l *migrationLedger) cutOff(m *migrationMember) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut == nil {
		l.cut = map[string]*migrationMember{}
	}
	l.cut[m.name] = m
}

func (l *migrationLedger) acquire(member string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(ps) > 0 {
		l.notes = append(l.notes, time.Now().Format("15:04:05.000 ")+fmt.Sprintf("%s: partitions %v assigned", member, ps))
		delete(l.cut, member)
	}
	for _, p := range ps {
		if cur, ok := l.owner[p]; ok && cur != member {
			if m := l.cut[cur]; m != nil {
				l.notes = append(l.notes, time.Now().Format("15:04:05.000 ")+fmt.Sprintf("%s: partition %d taken while it is cut off", cur, p))
				l.events = append(l.events, ledgerEvent{member: cur, released: true, partition: p, offset: m.ackedCommit(p)})
			} else {
				l.violations = append(l.violations, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, member, cur))
			}
		}
		l.owner[p] = member
	}
}

func (l *migrationLedger) release(m *migrationMember, how string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(ps) > 0 {
		l.notes = append(l.notes, time.Now().Format("15:04:05.000 ")+fmt.Sprintf("%s: partitions %v %s", m.name, ps, how))
	}
	for _, p := range ps {
		if l.owner[p] == m.name {
			delete(l.owner, p)
		}
		l.events = append(l.events, ledgerEvent{member: m.name, released: true, partition: p, offset: m.ackedCommit(p)})
	}
}

// process records a record processed. A member may process a partition whose
// assignment callback has not run yet (franz-go starts fetching it alongside), but
// never one another member owns.
func (l *migrationLedger) process(member string, p int32, o int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.owner[p]; ok && cur != member && l.cut[member] == nil {
		l.violations = append(l.violations, fmt.Sprintf("%s processed partition %d offset %d while %s owns it", member, p, o, cur))
	}
	l.events = append(l.events, ledgerEvent{member: member, partition: p, offset: o})
}

// owns reports whether the members' callbacks have given each partition of owners
// (member name → partitions) to that member.
func (l *migrationLedger) owns(owners map[string][]int32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, ps := range owners {
		for _, p := range ps {
			if l.owner[p] != name {
				return false
			}
		}
	}
	return true
}

func (l *migrationLedger) processedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if !e.released {
			n++
		}
	}
	return n
}

// processedBelow reports whether every offset below ends[p] was processed.
func (l *migrationLedger) processedBelow(ends map[int32]int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[int32]map[int64]bool{}
	for _, e := range l.events {
		if !e.released {
			if seen[e.partition] == nil {
				seen[e.partition] = map[int64]bool{}
			}
			seen[e.partition][e.offset] = true
		}
	}
	for p, end := range ends {
		for o := range end {
			if !seen[p][o] {
				return false
			}
		}
	}
	return true
}

// check holds the ledger to at-least-once processing of the offsets below ends: each
// processed, by one member at a time; within a member's hold of a partition in log
// order; twice only when a member gave the partition up before its commit of that
// record was acknowledged (the uncommitted tail another member reads again).
func (l *migrationLedger) check(t *testing.T, ends map[int32]int64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	problems := slices.Clone(l.violations)
	type key struct {
		member    string
		partition int32
	}
	last := map[key]int64{}
	count := map[int32]map[int64]int{}
	by := map[int32]map[int64][]string{} // who processed an offset, in order
	tail := map[int32]map[int64]bool{}   // offsets of an uncommitted tail, by partition
	pending := map[key][]int64{}         // offsets processed since the member last released the partition
	for _, e := range l.events {
		k := key{e.member, e.partition}
		if e.released {
			for _, o := range pending[k] {
				if o >= e.offset {
					if tail[e.partition] == nil {
						tail[e.partition] = map[int64]bool{}
					}
					tail[e.partition][o] = true
				}
			}
			delete(pending, k)
			delete(last, k)
			continue
		}
		if prev, ok := last[k]; ok && e.offset <= prev {
			problems = append(problems, fmt.Sprintf("%s processed partition %d offset %d after %d", e.member, e.partition, e.offset, prev))
		}
		last[k] = e.offset
		pending[k] = append(pending[k], e.offset)
		if count[e.partition] == nil {
			count[e.partition] = map[int64]int{}
			by[e.partition] = map[int64][]string{}
		}
		count[e.partition][e.offset]++
		by[e.partition][e.offset] = append(by[e.partition][e.offset], e.member)
	}
	var duplicates []string
	for p, end := range ends {
		for o := range end {
			switch n := count[p][o]; {
			case n == 0:
				problems = append(problems, fmt.Sprintf("partition %d offset %d never processed (end %d)", p, o, end))
			case n > 1 && !tail[p][o]:
				problems = append(problems, fmt.Sprintf("partition %d offset %d processed by %v, not in an uncommitted tail", p, o, by[p][o]))
			case n > 1:
				duplicates = append(duplicates, fmt.Sprintf("%d-%d by %v", p, o, by[p][o]))
			}
		}
	}
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("… and %d more", len(problems)-20))
	}
	if len(problems) > 0 || len(duplicates) > 0 {
		t.Logf("group members' commits that failed and rebalance callbacks:\n%s", strings.Join(l.notes, "\n"))
	}
	if len(problems) > 0 {
		t.Fatalf("group ledger check failed:\n%s", strings.Join(problems, "\n"))
	}
	total := int64(0)
	for _, end := range ends {
		total += end
	}
	slices.Sort(duplicates)
	t.Logf("group ledger check: %d records processed (%d events), %d processed again from an uncommitted tail %v",
		total, len(l.events), len(duplicates), duplicates[:min(5, len(duplicates))])
}

// ackedEnds returns, per partition, one past the highest offset acknowledged so far.
func (l *load) ackedEnds() map[int32]int64 {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	ends := map[int32]int64{}
	for _, a := range l.h.acked {
		ends[a.partition] = max(ends[a.partition], a.offset+1)
	}
	return ends
}

// classicView is what DescribeGroups shows of a classic group: its state and each
// member's partitions of one topic.
type classicView struct {
	state, protocolType string
	members             map[string][]int32
}

func describeClassic(adm *kadm.Client, group, topic string) (classicView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return classicView{}, err
	}
	g := d[group]
	if g.Err != nil {
		return classicView{}, g.Err
	}
	v := classicView{state: g.State, protocolType: g.ProtocolType, members: map[string][]int32{}}
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return classicView{}, fmt.Errorf("member %s: no consumer assignment", m.MemberID)
		}
		v.members[m.MemberID] = nil
		for _, at := range a.Topics {
			if at.Topic == topic {
				v.members[m.MemberID] = append(v.members[m.MemberID], at.Partitions...)
			}
		}
	}
	return v, nil
}

// balanced: a Stable classic group of exactly the given members, each owning some of
// the partitions and every partition owned once.
func (v classicView) balanced(partitions int, ids ...string) bool {
	if v.state != "Stable" || v.protocolType != "consumer" || len(v.members) != len(ids) {
		return false
	}
	owned := map[int32]int{}
	for _, id := range ids {
		ps, ok := v.members[id]
		if !ok || id == "" || len(ps) == 0 {
			return false
		}
		for _, p := range ps {
			owned[p]++
		}
	}
	for p := range int32(partitions) {
		if owned[p] != 1 {
			return false
		}
	}
	return len(owned) == partitions
}

// mixedView is what ConsumerGroupDescribe shows of a consumer group: its state and,
// per member, its type (0 classic, 1 consumer protocol), epoch, partitions (its current
// assignment, which leaves out partitions pending revocation, as in Kafka) and target
// partitions.
type mixedView struct {
	state   string
	types   map[string]int8
	epochs  map[string]int32
	parts   map[string][]int32
	targets map[string][]int32
}

func (v mixedView) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", v.state)
	for _, id := range slices.Sorted(maps.Keys(v.types)) {
		fmt.Fprintf(&b, " %s(type %d, epoch %d, %v)", id, v.types[id], v.epochs[id], v.parts[id])
	}
	return b.String()
}

// describeMixed sends ConsumerGroupDescribe (v1, which has the member type) through cl
// to the group's coordinator.
func describeMixed(cl *kgo.Client, group, topic string) (mixedView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return mixedView{}, err
	}
	if len(resp.Groups) != 1 {
		return mixedView{}, fmt.Errorf("ConsumerGroupDescribe answered %d groups", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return mixedView{}, err
	}
	if resp.Version < 1 {
		return mixedView{}, fmt.Errorf("ConsumerGroupDescribe answered in v%d, without member types", resp.Version)
	}
	v := mixedView{state: g.State, types: map[string]int8{}, epochs: map[string]int32{}, parts: map[string][]int32{}, targets: map[string][]int32{}}
	for _, m := range g.Members {
		v.types[m.MemberID] = m.MemberType
		v.epochs[m.MemberID] = m.MemberEpoch
		for _, at := range m.Assignment.TopicPartitions {
			if at.Topic == topic {
				v.parts[m.MemberID] = append(v.parts[m.MemberID], at.Partitions...)
			}
		}
		for _, at := range m.TargetAssignment.TopicPartitions {
			if at.Topic == topic {
				v.targets[m.MemberID] = append(v.targets[m.MemberID], at.Partitions...)
			}
		}
	}
	return v, nil
}

// stable: a Stable consumer group of exactly the members of want with their types,
// each owning some of the partitions and every partition owned once.
func (v mixedView) stable(partitions int, want map[string]int8) bool {
	if v.state != "Stable" || !maps.Equal(v.types, want) {
		return false
	}
	owned := map[int32]int{}
	for id := range want {
		if id == "" || len(v.parts[id]) == 0 {
			return false
		}
		for _, p := range v.parts[id] {
			owned[p]++
		}
	}
	for p := range int32(partitions) {
		if owned[p] != 1 {
			return false
		}
	}
	return len(owned) == partitions
}
