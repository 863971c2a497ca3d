package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// fenceLog is a franz-go logger that counts the member-epoch errors its client reports.
type fenceLog struct {
	mu     sync.Mutex
	errors []string
}

func (l *fenceLog) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *fenceLog) Log(_ kgo.LogLevel, msg string, kv ...any) {
	s := fmt.Sprint(append([]any{msg}, kv...)...)
	if strings.Contains(s, "FENCED_MEMBER_EPOCH") || strings.Contains(s, "UNKNOWN_MEMBER_ID") {
		l.mu.Lock()
		l.errors = append(l.errors, time.Now().Format("15:04:05.000")+" "+s)
		l.mu.Unlock()
	}
}

func (l *fenceLog) since(at time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.errors {
		if e[:12] >= at.Format("15:04:05.000") {
			out = append(out, e)
		}
	}
	return out
}

// describe848Members returns member id → (epoch, partitions of topic) as the
// coordinator shows them, and the group state.
func describe848Members(adm *kadm.Client, group, topic string) (map[string]int32, map[string][]int32, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return nil, nil, "", err
	}
	g := d[group]
	if g.Err != nil {
		return nil, nil, "", g.Err
	}
	epochs, parts := map[string]int32{}, map[string][]int32{}
	for _, m := range g.Members {
		epochs[m.MemberID] = m.MemberEpoch
		for p := range m.Assignment[topic] {
			parts[m.MemberID] = append(parts[m.MemberID], p)
		}
	}
	return epochs, parts, g.State, nil
}

// start848Cluster starts three nodes for the KIP-848 failover tests: min.insync.replicas
// 2, members heartbeating every 250 ms with sessions of sessionMs, three
// __consumer_offsets partitions.
func start848Cluster(t *testing.T, sessionMs int) *testutil.Cluster {
	t.Helper()
	return testutil.StartCluster(t, testutil.ClusterOptions{Overrides: append([]string{
		"min.insync.replicas=2",
		"group.consumer.min.heartbeat.interval.ms=50", "group.consumer.heartbeat.interval.ms=250",
		"group.consumer.min.session.timeout.ms=500", "group.consumer.session.timeout.ms=" + strconv.Itoa(sessionMs),
		"offsets.topic.num.partitions=3",
	}, replicationOverrides...)})
}

// TestCluster848CoordinatorFailover: KIP-848 members (franz-go, server-side
// assignment) consume a topic under load; a fourth member joins just before the
// group's coordinator is killed (kill -9, then SIGSTOP for the next coordinator).
// The new coordinator knows every member with its epoch and partitions: no member is
// fenced, no partition is owned twice, the group stays Stable, and every produced
// record is processed.
func TestCluster848CoordinatorFailover(t *testing.T) {
	t.Parallel()
	const topic, group, partitions = "cg848", "cg848-group", 6
	c := start848Cluster(t, 20000)
	createTopic(t, newNodeClient(t, c.Node(1).Addr), topic, partitions, 3)
	l := startLoadAt(t, c, topic, 50)
	l.waitAcks(t, 300, "records before the consumers start")

	logs := &fenceLog{}
	var consumers []*groupConsumer
	for range 3 {
		consumers = append(consumers, startGroupConsumer(t, c, group, topic, kgo.ServerSideBalancer(), kgo.WithLogger(logs)))
	}
	var doubled []string
	stable := func(adm *kadm.Client, members ...int) func() bool {
		return func() bool {
			epochs, parts, state, err := describe848Members(adm, group, topic)
			if err != nil {
				return false
			}
			owned, twice := ownedOnce(parts)
			doubled = append(doubled, twice...)
			return state == "Stable" && slices.Contains(members, len(epochs)) && owned == partitions
		}
	}
	adm := kadm.NewClient(newNodeClient(t, c.Node(1).Addr).cl)
	testutil.WaitFor(t, 60*time.Second, stable(adm, 3), "three members owning the six partitions")

	for round, fault := range []string{"kill", "pause"} {
		coordinator := groupCoordinator(t, adm, group)
		if fault == "kill" {
			consumers = append(consumers, startGroupConsumer(t, c, group, topic, kgo.ServerSideBalancer(), kgo.WithLogger(&fenceLog{})))
			testutil.WaitFor(t, 30*time.Second, func() bool {
				epochs, _, _, err := describe848Members(adm, group, topic)
				return err == nil && len(epochs) == 4
			}, "the fourth member known to the coordinator")
		}
		before, beforeParts, _, err := describe848Members(adm, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		faultAt := time.Now()
		if fault == "kill" {
			c.Node(coordinator).Kill()
		} else {
			c.Node(coordinator).Pause()
		}
		t.Logf("round %d: %s of node %d, the coordinator; members before: %v %v", round, fault, coordinator, before, beforeParts)
		survivor := kadm.NewClient(clientExcept(t, c, coordinator).cl)
		testutil.WaitFor(t, 60*time.Second, func() bool {
			next, err := tryGroupCoordinator(survivor, group)
			return err == nil && next != coordinator
		}, "another coordinator")
		var after map[string]int32
		var afterParts map[string][]int32
		testutil.WaitFor(t, 60*time.Second, func() bool {
			var state string
			after, afterParts, state, err = describe848Members(survivor, group, topic)
			return err == nil && state != ""
		}, "the group described by the new coordinator")
		t.Logf("round %d: members after: %v %v", round, after, afterParts)
		for id, e := range before {
			if got, ok := after[id]; !ok || got < e {
				t.Errorf("round %d: member %s had epoch %d before the %s; after: %d (known %v)", round, id, e, fault, got, ok)
			}
		}
		// A member that owns no partition led by the dead node may keep heartbeating
		// to it (franz-go re-finds the coordinator only once another request of its
		// fails on that node); it is then fenced by its session timeout and rejoins.
		// Only the members that were stable before the fault are held to no fencing.
		testutil.WaitFor(t, 90*time.Second, stable(survivor, 3, 4), "the group stable after the failover")
		if errs := logs.since(faultAt); len(errs) > 0 {
			t.Errorf("round %d: members fenced after the %s: %d errors, first: %v", round, fault, len(errs), errs[:min(3, len(errs))])
		}
		if fault == "kill" {
			c.StartAgain(t, coordinator)
		} else {
			c.Node(coordinator).Resume()
		}
		adm = survivor
		l.waitAcks(t, 300, "records after the failover")
	}

	if len(doubled) > 0 {
		t.Errorf("ConsumerGroupDescribe showed partitions owned twice: %v", doubled[:min(5, len(doubled))])
	}
	checkGroupProcessedAll(t, c, adm, group, topic, l.stop(t), consumers, nil)
}

// TestCluster848FailoverWhileAssigning: the fault matrix's cells for the state KIP-1263
// adds. With the group's consumer.assignment.interval.ms at 5 s, a fourth and a fifth
// member join a stable group of three; the group waits for the interval to assign them
// (ConsumerGroupDescribe shows it Assigning, its epoch ahead of the assignment's), and
// its coordinator fails then: killed (kill -9), paused (SIGSTOP until the controller
// has fenced it and another node took the group; the members stay with the paused
// node until then, as franz-go retries a heartbeat that timed out in place) or
// stopped cleanly (SIGTERM). The next coordinator loads the group, with the time of
// its last assignment, and assigns the waiting joins; the old one comes back and the
// five settle. (Resumed by SIGCONT, the old coordinator takes the heartbeats its
// sockets held, computes the assignment due meanwhile and fails to commit it: the
// test logs that write's failure. Since the uniform assignor gives the same answer
// on both nodes, that cell cannot tell whether such an answer reached a member;
// internal/group's TestDueAssignmentAnsweredOnceCommitted holds that rule.) No
// partition is ever described owned twice or given to a member while
// another holds it (the members' callbacks), the three members that were stable are
// never fenced, and every produced record is processed.
func TestCluster848FailoverWhileAssigning(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"kill", "pause", "stop"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			testFailoverWhileAssigning(t, fault)
		})
	}
}

func testFailoverWhileAssigning(t *testing.T, fault string) {
	const topic, group, partitions = "assigning848", "assigning848-group", 6
	c := start848Cluster(t, 20000)
	cl := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, cl, topic, partitions, 3)
	setShareGroupConfig(t, c, cl, group, "consumer.assignment.interval.ms", "5000")
	l := startLoadAt(t, c, topic, 50)
	l.waitAcks(t, 300, "records before the consumers start")

	// The members' rebalance callbacks and what they process go to a ledger, which
	// fails the test if a partition is given to one member while another holds it (as
	// an assignment answered by a coordinator that could not commit it would be).
	led := &migrationLedger{owner: map[int32]string{}}
	clientLog := newMemberLog(t, &fenceLog{})
	var members []*migrationMember
	start := func(name string) {
		members = append(members, startMigrationMember(t, c, led, name, group, topic, kgo.ServerSideBalancer(), kgo.WithLogger(clientLog.as(name))))
	}
	for _, name := range []string{"a", "b", "c"} {
		start(name)
	}
	var doubled []string
	// view returns how many members the group has, the partitions they own, and the
	// fewest one of them owns.
	view := func(adm *kadm.Client) (members, owned, fewest int, state string, ok bool) {
		epochs, parts, state, err := describe848Members(adm, group, topic)
		if err != nil {
			return 0, 0, 0, "", false
		}
		fewest = partitions
		for id := range epochs {
			fewest = min(fewest, len(parts[id]))
		}
		owned, twice := ownedOnce(parts)
		doubled = append(doubled, twice...)
		return len(epochs), owned, fewest, state, true
	}
	adm := kadm.NewClient(cl.cl)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		n, owned, fewest, state, ok := view(adm)
		return ok && n == 3 && owned == partitions && fewest == 2 && state == "Stable"
	}, "three members owning the six partitions")

	start("d")
	start("e")
	testutil.WaitFor(t, 30*time.Second, func() bool {
		n, _, _, state, ok := view(adm)
		return ok && n == 5 && state == "Assigning"
	}, "the group waiting for the interval to assign the fifth member")
	coordinator := groupCoordinator(t, adm, group)
	faultAt := time.Now()
	survivor := failCoordinator(t, c, group, coordinator, fault)
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last described: %s", last)
		}
	}()
	describeLast := func() {
		epochs, parts, state, _ := describe848Members(survivor, group, topic)
		last = fmt.Sprintf("%s: %v %v", state, epochs, parts)
	}
	// The new coordinator assigns the waiting joins once the interval has passed,
	// at a heartbeat of one of the three (the two that wait own no partition, so
	// franz-go goes on heartbeating to the dead node: nothing else of theirs fails
	// there to make it look for the coordinator again).
	testutil.WaitFor(t, 30*time.Second, func() bool {
		describeLast()
		n, _, _, state, ok := view(survivor)
		return ok && n == 5 && state != "Assigning"
	}, "the new coordinator assigning the five members")
	t.Logf("the new coordinator assigned the five %v after the %s: %s", time.Since(faultAt).Round(time.Millisecond), fault, last)
	// Back, the old coordinator answers the two that wait NOT_COORDINATOR: they find
	// the new coordinator (joining again if their sessions ended meanwhile).
	restoreCoordinator(t, c, coordinator, fault)
	testutil.WaitFor(t, 90*time.Second, func() bool {
		describeLast()
		n, owned, fewest, state, ok := view(survivor)
		return ok && n == 5 && owned == partitions && fewest >= 1 && state == "Stable"
	}, "five members owning the six partitions, each at least one")
	for _, m := range members[:3] {
		if errs := clientLog.fencedSince(m.name, faultAt); len(errs) > 0 {
			t.Errorf("member %s, stable before the %s, was fenced after it: %v", m.name, fault, errs[:min(3, len(errs))])
		}
	}
	if len(doubled) > 0 {
		t.Errorf("ConsumerGroupDescribe showed partitions owned twice: %v", doubled[:min(5, len(doubled))])
	}
	l.waitAcks(t, 300, "records after the failover")
	ends := l.stop(t).check(t, c, topic)
	testutil.WaitFor(t, 60*time.Second, func() bool { return led.processedBelow(ends) }, fmt.Sprintf("the group processing every record %v", ends))
	for _, m := range members {
		m.stop(t)
	}
	led.check(t, ends)
	if fault == "pause" {
		if line := coordinatorLine(c.Node(coordinator).Log(), "append to __consumer_offsets failed", ""); line != "" {
			t.Logf("node %d, resumed: %s", coordinator, line)
		}
	}
}

// TestCluster848StaticMemberAcrossFailover: a static member (group.instance.id) closes
// — leaving for a while, epoch -2 — then the coordinator is killed; the member's next
// incarnation, through the new coordinator, gets its partitions back without a new
// assignment, and nobody else held them meanwhile. Every record is processed.
func TestCluster848StaticMemberAcrossFailover(t *testing.T) {
	t.Parallel()
	const topic, group, partitions = "static848", "static848-group", 4
	c := start848Cluster(t, 30000)
	createTopic(t, newNodeClient(t, c.Node(1).Addr), topic, partitions, 3)
	l := startLoadAt(t, c, topic, 50)
	l.waitAcks(t, 200, "records before the consumers start")
	a := startGroupConsumer(t, c, group, topic, kgo.ServerSideBalancer(), kgo.InstanceID("inst-a"))
	b := startGroupConsumer(t, c, group, topic, kgo.ServerSideBalancer(), kgo.InstanceID("inst-b"))
	adm := kadm.NewClient(newNodeClient(t, c.Node(1).Addr).cl)
	var epochs map[string]int32
	var parts map[string][]int32
	testutil.WaitFor(t, 60*time.Second, func() bool {
		var state string
		var err error
		epochs, parts, state, err = describe848Members(adm, group, topic)
		return err == nil && state == "Stable" && len(parts) == 2 && len(parts[a.memberID()]) == 2 && len(parts[b.memberID()]) == 2
	}, "two static members with two partitions each")
	aID := a.memberID()
	kept := slices.Sorted(slices.Values(parts[aID]))
	for _, p := range a.stop(t) {
		t.Error(p)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		e, _, _, err := describe848Members(adm, group, topic)
		return err == nil && e[aID] == -2
	}, "a away (epoch -2)")

	coordinator := groupCoordinator(t, adm, group)
	c.Node(coordinator).Kill()
	t.Logf("a (%s, partitions %v, epoch %d) away; kill -9 of node %d, the coordinator", aID, kept, epochs[aID], coordinator)
	survivor := kadm.NewClient(clientExcept(t, c, coordinator).cl)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		next, err := tryGroupCoordinator(survivor, group)
		return err == nil && next != coordinator
	}, "another coordinator")
	time.Sleep(time.Second) // b heartbeats to the new coordinator: it must not take a's partitions
	if _, p, _, err := describe848Members(survivor, group, topic); err == nil {
		for _, q := range p[b.memberID()] {
			if slices.Contains(kept, q) {
				t.Errorf("b got partition %d of static member a while a was away: %v", q, p)
			}
		}
	}
	a2 := startGroupConsumer(t, c, group, topic, kgo.ServerSideBalancer(), kgo.InstanceID("inst-a"))
	testutil.WaitFor(t, 60*time.Second, func() bool {
		e, p, state, err := describe848Members(survivor, group, topic)
		id := a2.memberID()
		return err == nil && state == "Stable" && id != "" && len(e) == 2 && slices.Equal(slices.Sorted(slices.Values(p[id])), kept)
	}, "a's next incarnation back with its partitions")
	e, _, _, _ := describe848Members(survivor, group, topic)
	if got := e[a2.memberID()]; got != epochs[aID] {
		t.Errorf("a's next incarnation has epoch %d; a had %d (a static member's return is no new assignment)", got, epochs[aID])
	}
	l.waitAcks(t, 200, "records after the failover")
	checkGroupProcessedAll(t, c, survivor, group, topic, l.stop(t), []*groupConsumer{b, a2}, []*groupConsumer{a})
}

// failCoordinator applies fault — "kill" (kill -9), "pause" (SIGSTOP) or "stop"
// (SIGTERM) — to node coordinator, group's coordinator, waits until another node
// coordinates the group, and returns an admin client of a node that was not faulted.
// A paused node is resumed then: it still holds the groups as they were, and its
// sockets hold what their members sent it meanwhile (franz-go retries a heartbeat that
// timed out on the same coordinator), none of which it may act on. A killed or stopped
// node stays down until restoreCoordinator.
func failCoordinator(t *testing.T, c *testutil.Cluster, group string, coordinator int32, fault string) *kadm.Client {
	t.Helper()
	switch fault {
	case "kill":
		c.Node(coordinator).Kill()
	case "pause":
		c.Node(coordinator).Pause()
	case "stop":
		if err := c.Node(coordinator).Stop(); err != nil {
			t.Errorf("node %d, stopped cleanly: %v", coordinator, err)
		}
	default:
		t.Fatalf("unknown fault %q", fault)
	}
	t.Logf("%s of node %d, group %s's coordinator", fault, coordinator, group)
	survivor := kadm.NewClient(clientExcept(t, c, coordinator).cl)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		next, err := tryGroupCoordinator(survivor, group)
		return err == nil && next != coordinator
	}, "another coordinator")
	if fault == "pause" {
		c.Node(coordinator).Resume()
	}
	return survivor
}

// restoreCoordinator starts again a node failCoordinator killed or stopped (a paused
// one runs again already).
func restoreCoordinator(t *testing.T, c *testutil.Cluster, coordinator int32, fault string) {
	t.Helper()
	if fault != "pause" {
		c.StartAgain(t, coordinator)
	}
}

// ownedOnce counts the partitions parts (member id → partitions) assigns and lists
// those it gives two members.
func ownedOnce(parts map[string][]int32) (owned int, twice []string) {
	owners := map[int32]string{}
	for id, ps := range parts {
		for _, p := range ps {
			if other, dup := owners[p]; dup {
				twice = append(twice, fmt.Sprintf("partition %d owned by %s and %s", p, other, id))
			}
			owners[p] = id
		}
		owned += len(ps)
	}
	return owned, twice
}

// checkGroupProcessedAll ends a group test: the group has committed every partition's
// end, the running consumers stop cleanly, the history holds each acknowledged record
// once, in order, at its offset, and every offset below a partition's end was processed
// by one of the consumers, running or stopped before.
func checkGroupProcessedAll(t *testing.T, c *testutil.Cluster, adm *kadm.Client, group, topic string, h *history, running, stopped []*groupConsumer) {
	t.Helper()
	ends := map[int32]int64{}
	testutil.WaitFor(t, 60*time.Second, func() bool {
		o, err := adm.ListEndOffsets(ctxT(t, 5*time.Second), topic)
		if err != nil || o.Error() != nil {
			return false
		}
		o.Each(func(lo kadm.ListedOffset) { ends[lo.Partition] = lo.Offset })
		return true
	}, "end offsets")
	testutil.WaitFor(t, 90*time.Second, func() bool {
		resp, err := adm.FetchOffsets(ctxT(t, 5*time.Second), group)
		if err != nil {
			return false
		}
		for p, end := range ends {
			if o, ok := resp.Lookup(topic, p); !ok || o.At < end {
				return false
			}
		}
		return true
	}, "the group committing every partition's end")
	for _, gc := range running {
		for _, p := range gc.stop(t) {
			t.Error(p)
		}
	}
	processed := map[int32]map[int64]bool{}
	for _, gc := range append(slices.Clone(running), stopped...) {
		gc.mu.Lock()
		for p, offs := range gc.processed {
			if processed[p] == nil {
				processed[p] = map[int64]bool{}
			}
			for o := range offs {
				processed[p][o] = true
			}
		}
		gc.mu.Unlock()
	}
	got := h.check(t, c, topic)
	for p, end := range got {
		for o := int64(0); o < end; o++ {
			if !processed[p][o] {
				t.Errorf("%s-%d offset %d never processed (end %d)", topic, p, o, end)
				break
			}
		}
	}
}

// memberID is the member id the client has from the coordinator ("" before).
func (g *groupConsumer) memberID() string {
	id, _ := g.cl.GroupMetadata()
	return id
}
