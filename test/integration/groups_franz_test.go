package integration

// Consumer groups driven by franz-go's kgo group consumer (issue 3, "Tests with real
// clients"). Each test runs its own broker and may run in parallel with the others.

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

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// kgoMember is one kgo group member with its rebalance callbacks recorded.
type kgoMember struct {
	name string
	cl   *kgo.Client
	ks   *killSwitch

	mu       sync.Mutex
	owned    map[int32]bool
	assigned [][]int32 // partitions of each OnPartitionsAssigned call
	revoked  [][]int32 // partitions of each OnPartitionsRevoked call
	lost     [][]int32 // partitions of each OnPartitionsLost call

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// newKgoMember creates a group member of group consuming topic; run starts its loop.
// hooks, if set, is told about every assignment change (under no lock of the member).
func newKgoMember(t *testing.T, b *testutil.Broker, name, group, topic string, hooks *ownership, opts ...kgo.Opt) *kgoMember {
	t.Helper()
	m := &kgoMember{name: name, ks: &killSwitch{}, owned: map[int32]bool{}, done: make(chan struct{})}
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(b.Addr),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.Dialer(m.ks.DialContext),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			got := slices.Sorted(slices.Values(ps[topic]))
			m.mu.Lock()
			m.assigned = append(m.assigned, got)
			for _, p := range got {
				m.owned[p] = true
			}
			m.mu.Unlock()
			hooks.acquire(name, got)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			got := slices.Sorted(slices.Values(ps[topic]))
			m.mu.Lock()
			m.revoked = append(m.revoked, got)
			for _, p := range got {
				delete(m.owned, p)
			}
			m.mu.Unlock()
			hooks.release(name, got)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			got := slices.Sorted(slices.Values(ps[topic]))
			m.mu.Lock()
			m.lost = append(m.lost, got)
			for _, p := range got {
				delete(m.owned, p)
			}
			m.mu.Unlock()
			hooks.release(name, got)
		}),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	t.Cleanup(m.close)
	return m
}

// run starts the member's poll loop; it ends when the member is closed.
func (m *kgoMember) run(loop func(ctx context.Context, cl *kgo.Client)) *kgoMember {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		// A member with BlockRebalanceOnPoll must allow rebalances before it can leave.
		defer m.cl.AllowRebalance()
		loop(ctx, m.cl)
	}()
	return m
}

// close stops the loop and closes the client (a normal close: kgo leaves the group
// unless it has an instance id).
func (m *kgoMember) close() {
	m.closeOnce.Do(func() {
		if m.cancel != nil {
			m.cancel()
			<-m.done
		}
		m.cl.Close()
	})
}

func (m *kgoMember) memberID() string {
	id, _ := m.cl.GroupMetadata()
	return id
}

func (m *kgoMember) generation() int32 {
	_, gen := m.cl.GroupMetadata()
	return gen
}

func (m *kgoMember) ownedSorted() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.owned))
}

func (m *kgoMember) callbacks() (assigned, revoked, lost [][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.assigned), slices.Clone(m.revoked), slices.Clone(m.lost)
}

// autoLoop polls and records every record in led; offsets are autocommitted.
func autoLoop(name string, led *ledger) func(ctx context.Context, cl *kgo.Client) {
	return func(ctx context.Context, cl *kgo.Client) {
		for {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				led.add(seen{Member: name, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			})
		}
	}
}

// commitLoop polls at most batch records at a time, records them in led, then commits
// them synchronously before polling again ("commit after processing").
func commitLoop(t *testing.T, name string, led *ledger, batch int) func(ctx context.Context, cl *kgo.Client) {
	return func(ctx context.Context, cl *kgo.Client) {
		for {
			fs := cl.PollRecords(ctx, batch)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			recs := fs.Records()
			for _, r := range recs {
				led.add(seen{Member: name, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			}
			if len(recs) > 0 {
				if err := cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
					t.Logf("%s: commit: %v", name, err)
				}
			}
			cl.AllowRebalance() // for members with BlockRebalanceOnPoll
		}
	}
}

// kgoByID maps the broker's member ids to kgo members.
func kgoByID(ms []*kgoMember) map[string]*kgoMember {
	out := map[string]*kgoMember{}
	for _, m := range ms {
		if id := m.memberID(); id != "" {
			out[id] = m
		}
	}
	return out
}

// TestGroupsFranzGroupOfFour: four kgo members on three partitions: each partition has
// exactly one owner and one member is idle; when an owner is killed (its connections
// cut, no LeaveGroup), its partition moves to the idle member after the session
// timeout and consumption continues there.
func TestGroupsFranzGroupOfFour(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "four", "four-franz"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	var ms []*kgoMember
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("m%d", i)
		m := newKgoMember(t, b, name, group, topic, nil,
			kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
		ms = append(ms, m.run(autoLoop(name, led)))
	}
	v := waitGroup(t, adm, group, topic, 30*time.Second, "4 members sharing 3 partitions", func(v groupView) bool { return v.balanced(4, 3) })
	idle := v.idle()
	if len(idle) != 1 {
		t.Fatalf("want exactly one idle member, got %v", v)
	}
	// The clients' own view (rebalance callbacks) agrees with the broker's.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		byID := kgoByID(ms)
		if len(byID) != 4 {
			return false
		}
		for id, ps := range v.Members {
			if m := byID[id]; m == nil || !slices.Equal(m.ownedSorted(), ps) {
				return false
			}
		}
		return true
	}, "every member's callbacks to report the assignment DescribeGroups shows: "+v.String())
	byID := kgoByID(ms)

	first := produceSpread(t, b, topic, "a", 3, 20)
	testutil.WaitFor(t, 20*time.Second, func() bool { return led.distinct() == 60 }, "the group to read the first 60 records")
	readByOwners(t, led, "", func(p int32) string { return byID[v.owner(p)].name })
	checkAll(t, first, led.all(), nil)

	// Kill the owner of partition 0.
	victimID := v.owner(0)
	victim := byID[victimID]
	victim.ks.Kill()
	v2 := waitStickyMove(t, adm, group, topic, v, victimID, idle[0])

	checkReadAfterKill(t, b, led, topic, func(p int32) string { return byID[v2.owner(p)].name })
}

// TestGroupsFranzFanOut: two groups on one topic each read every record once.
func TestGroupsFranzFanOut(t *testing.T) {
	t.Parallel()
	runFanOut(t, func(b *testutil.Broker, name, group, topic string, led *ledger) {
		newKgoMember(t, b, name, group, topic, nil, kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(200*time.Millisecond)).
			run(autoLoop(name, led))
	})
}

// TestGroupsFranzResumeAfterKill: a member commits after processing each small batch,
// processes one more batch and is killed before committing it. A new member of the
// group starts exactly at the committed offsets; nothing is lost and only the
// uncommitted batch is processed twice.
func TestGroupsFranzResumeAfterKill(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "resume", "resume-franz"
	createTopic(t, adm, topic, 3, nil)
	produced := produceSpread(t, b, topic, "r", 3, 100)

	led := newLedger(t)
	tail := map[string]bool{}      // processed by the first member, never committed
	committed := map[int32]int64{} // what the first member committed
	killed := make(chan struct{})
	first := newKgoMember(t, b, "first", group, topic, nil, kgo.DisableAutoCommit(),
		kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
	first.run(func(ctx context.Context, cl *kgo.Client) {
		defer close(killed)
		processed := 0
		for ctx.Err() == nil {
			recs := cl.PollRecords(ctx, 7).Records()
			for _, r := range recs {
				led.add(seen{Member: "first", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			}
			processed += len(recs)
			if processed >= 120 {
				// Mid-stream: this batch is processed but its commit never happens.
				for _, r := range recs {
					tail[string(r.Value)] = true
				}
				first.ks.Kill()
				return
			}
			if len(recs) == 0 {
				continue
			}
			if err := cl.CommitRecords(ctx, recs...); err != nil {
				t.Errorf("commit: %v", err)
				return
			}
			for _, r := range recs {
				committed[r.Partition] = r.Offset + 1
			}
		}
	})
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("first member did not process 120 records in 30s")
	}
	if t.Failed() {
		return
	}
	if len(tail) == 0 {
		t.Fatal("the killed member had no uncommitted tail")
	}
	if got := committedOffsets(t, adm, group, topic); !maps.Equal(got, committed) {
		t.Fatalf("broker has committed offsets %v, the member committed %v", got, committed)
	}

	second := newKgoMember(t, b, "second", group, topic, nil, kgo.DisableAutoCommit(),
		kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
	second.run(commitLoop(t, "second", led, 50))
	waitDrained(t, adm, group, topic, 30*time.Second)

	checkResumed(t, produced, committed, tail, led.byMember()["second"])
	checkAll(t, produced, led.all(), tail)
}

// TestGroupsFranzBrokerRestart: committed offsets and the group listing survive a clean
// restart and a kill -9 of the broker, and a member started afterwards resumes at the
// committed offsets.
func TestGroupsFranzBrokerRestart(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t, "offsets.topic.num.partitions=50") // Kafka's default: 50 partitions to reload
	adm := newAdmin(t, b)
	const topic, group = "persist", "persist-franz"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	batches := []map[int32][]string{produceSpread(t, b, topic, "x", 3, 30)}
	m := newKgoMember(t, b, "one", group, topic, nil, kgo.DisableAutoCommit(), kgo.SessionTimeout(10*time.Second))
	m.run(commitLoop(t, "one", led, 20))
	waitDrained(t, adm, group, topic, 30*time.Second)
	m.close() // leaves: the group is Empty but keeps its offsets
	want := map[int32]int64{0: 30, 1: 30, 2: 30}

	check := func(when string) {
		t.Helper()
		adm := newAdmin(t, b)
		listed, err := adm.ListGroups(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatalf("%s: list groups: %v", when, err)
		}
		if _, ok := listed[group]; !ok {
			t.Fatalf("%s: group %s not listed (have %v)", when, group, listed.Groups())
		}
		if got := committedOffsets(t, adm, group, topic); !maps.Equal(got, want) {
			t.Fatalf("%s: committed offsets %v, want %v", when, got, want)
		}
	}
	check("before restart")
	b.Restart(t)
	check("after clean restart")

	batches = append(batches, produceSpread(t, b, topic, "y", 3, 10))
	m2 := newKgoMember(t, b, "two", group, topic, nil, kgo.DisableAutoCommit(), kgo.SessionTimeout(10*time.Second))
	m2.run(commitLoop(t, "two", led, 20))
	waitDrained(t, newAdmin(t, b), group, topic, 30*time.Second)
	m2.close()
	want = map[int32]int64{0: 40, 1: 40, 2: 40}
	b.Kill()
	b.StartAgain(t)
	check("after kill -9")

	for _, s := range led.byMember()["two"] {
		if !strings.HasPrefix(s.Value, "y-") {
			t.Fatalf("member started after the restart re-read %s (offset %d): committed offsets not used", s.Value, s.Offset)
		}
	}
	all := map[int32][]string{}
	for _, batch := range batches {
		for p, vs := range batch {
			all[p] = append(all[p], vs...)
		}
	}
	checkAll(t, all, led.all(), nil)
}

// TestGroupsFranzStaticRollingRestart: three static members (group.instance.id) are
// restarted one by one; the broker hands each new incarnation its predecessor's
// assignment without a rebalance: the generation never changes, the other members get
// no rebalance callback, no partition has two owners and every record is processed
// exactly once.
func TestGroupsFranzStaticRollingRestart(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "static", "static-franz"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	owners := &ownership{}
	start := func(i, incarnation int) *kgoMember {
		name := fmt.Sprintf("s%d.%d", i, incarnation)
		// The range balancer orders static members by instance id, so the plan a
		// restarted leader recomputes is the one the group has. (With cooperative-sticky
		// the plan depends on the owned partitions in each member's last JoinGroup, which
		// a restarted member sends empty; a restarted leader then computes a different
		// plan and kgo deliberately forces a rebalance, KIP-814 - against Kafka too.)
		m := newKgoMember(t, b, name, group, topic, owners, kgo.Balancers(kgo.RangeBalancer()), kgo.InstanceID(fmt.Sprintf("s%d", i)), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(20*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
		return m.run(commitLoop(t, name, led, 50))
	}
	members := []*kgoMember{start(0, 0), start(1, 0), start(2, 0)}
	v := waitGroup(t, adm, group, topic, 30*time.Second, "3 static members sharing 3 partitions", func(v groupView) bool { return v.balanced(3, 3) })
	testutil.WaitFor(t, 10*time.Second, func() bool {
		for _, m := range members {
			if len(m.ownedSorted()) != 1 {
				return false
			}
		}
		return true
	}, "every member's callbacks to report its partition")
	gen := members[0].generation()
	for _, m := range members {
		if g := m.generation(); g != gen {
			t.Fatalf("members disagree on the generation: %d and %d", gen, g)
		}
	}
	calls := func(m *kgoMember) int {
		a, r, l := m.callbacks()
		return len(a) + len(r) + len(l)
	}
	base := map[*kgoMember]int{}
	for _, m := range members {
		base[m] = calls(m)
	}
	instancePartitions := map[string][]int32{}
	for id, ps := range v.Members {
		instancePartitions[v.Instance[id]] = ps
	}

	var produced []map[int32][]string
	total := 0
	produceAndDrain := func(prefix string) {
		t.Helper()
		produced = append(produced, produceSpread(t, b, topic, prefix, 3, 20))
		total += 60
		testutil.WaitFor(t, 20*time.Second, func() bool { return led.distinct() == total }, fmt.Sprintf("the group to process %d records", total))
		// and to commit them: a rolling restart stops members after their last commit.
		waitDrained(t, adm, group, topic, 20*time.Second)
	}
	produceAndDrain("before")

	for i := range members {
		old := members[i]
		oldID := old.memberID()
		old.close() // static: no LeaveGroup
		owners.releaseAll(old.name)
		// The member is still in the group: closing a static member is no rebalance.
		if v := waitGroup(t, adm, group, topic, 5*time.Second, "the group to stay as it was", func(v groupView) bool { return v.balanced(3, 3) }); v.Instance[oldID] == "" {
			t.Fatalf("static member s%d left the group on close: %v", i, v)
		}
		members[i] = start(i, 1)
		instance := fmt.Sprintf("s%d", i)
		testutil.WaitFor(t, 20*time.Second, func() bool { return len(members[i].ownedSorted()) == 1 }, "the restarted member to get its assignment")
		nv := waitGroup(t, adm, group, topic, 10*time.Second, "the new incarnation in the group", func(v groupView) bool {
			_, oldThere := v.Members[oldID]
			return v.balanced(3, 3) && !oldThere
		})
		for id, ps := range nv.Members {
			if want := instancePartitions[nv.Instance[id]]; !slices.Equal(ps, want) {
				t.Fatalf("after restarting %s, instance %s has %v, had %v", instance, nv.Instance[id], ps, want)
			}
		}
		if got := members[i].ownedSorted(); !slices.Equal(got, instancePartitions[instance]) {
			t.Fatalf("restarted %s was assigned %v, had %v", instance, got, instancePartitions[instance])
		}
		if a, r, l := members[i].callbacks(); len(a) != 1 || len(r) != 0 || len(l) != 0 {
			t.Fatalf("restarted %s saw assigned %v revoked %v lost %v: want one assignment and nothing else", instance, a, r, l)
		}
		base[members[i]] = 1
		for _, m := range members {
			if g := m.generation(); g != gen {
				t.Fatalf("after restarting %s, %s is in generation %d, was %d: the restart caused a rebalance", instance, m.name, g, gen)
			}
			if n := calls(m); n != base[m] {
				a, r, l := m.callbacks()
				t.Fatalf("after restarting %s, %s had new rebalance callbacks (assigned %v revoked %v lost %v)", instance, m.name, a, r, l)
			}
		}
		produceAndDrain(fmt.Sprintf("after%d", i))
	}
	owners.check(t)
	checkAll(t, mergeProduced(produced), led.all(), nil)
}

// TestGroupsFranzSlowProcessingEvicted: a member (BlockRebalanceOnPoll, like Java's
// poll loop) whose processing of a large batch outlasts the rebalance timeout is
// removed from the group when another member joins; the group rebalances without it
// and its late commit is refused. Back with small batches it rejoins and the group
// drains the topic.
func TestGroupsFranzSlowProcessingEvicted(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "slow", "slow-franz"
	createTopic(t, adm, topic, 3, nil)
	produced := produceSpread(t, b, topic, "s", 3, 40)

	led := newLedger(t)
	opts := []kgo.Opt{kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.RebalanceTimeout(2 * time.Second), kgo.SessionTimeout(20 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond)}
	polled := make(chan struct{})
	release := make(chan struct{})
	lateCommit := make(chan error, 1)
	bigBatch := map[string]bool{}
	slow := newKgoMember(t, b, "slow", group, topic, nil, opts...)
	slow.run(func(ctx context.Context, cl *kgo.Client) {
		// One large batch whose processing lasts until the member has been evicted.
		var recs []*kgo.Record
		for len(recs) == 0 && ctx.Err() == nil {
			recs = cl.PollRecords(ctx, 100).Records()
		}
		if ctx.Err() != nil {
			return
		}
		for _, r := range recs {
			led.add(seen{Member: "slow", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			bigBatch[string(r.Value)] = true
		}
		close(polled)
		select {
		case <-release:
		case <-ctx.Done():
			return
		}
		lateCommit <- cl.CommitRecords(ctx, recs...)
	})
	select {
	case <-polled:
	case <-time.After(30 * time.Second):
		t.Fatal("slow member polled nothing in 30s")
	}
	slowID := slow.memberID()

	other := newKgoMember(t, b, "other", group, topic, nil, opts...)
	other.run(commitLoop(t, "other", led, 5))
	// other's JoinGroup starts a rebalance that the blocked member never answers.
	waitGroup(t, adm, group, topic, 30*time.Second, "the slow member to be evicted and the other to own everything", func(v groupView) bool {
		_, slowThere := v.Members[slowID]
		return !slowThere && v.balanced(1, 3)
	})
	close(release)
	if err := <-lateCommit; !errors.Is(err, kerr.UnknownMemberID) && !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("commit after eviction: got %v, want UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION", err)
	}
	// The consumer is restarted with a smaller batch (max.poll.records), as an operator
	// would: its processing now fits the rebalance timeout. (Going on with the same kgo
	// client is not sound: records it buffered before the eviction can be polled and
	// committed under its new member id, rewinding the other member's commits - the
	// hazard the BlockRebalanceOnPoll documentation describes.)
	slow.close()
	newKgoMember(t, b, "slow-again", group, topic, nil, opts...).run(commitLoop(t, "slow-again", led, 5))
	joined := waitGroup(t, adm, group, topic, 30*time.Second, "the restarted member to join", func(v groupView) bool { return v.balanced(2, 3) })
	more := produceSpread(t, b, topic, "t", 3, 40)
	waitDrained(t, adm, group, topic, 30*time.Second)
	if v, err := describe(ctxT(t, 5*time.Second), adm, group, topic); err != nil || !maps.EqualFunc(v.Members, joined.Members, slices.Equal) {
		t.Fatalf("group changed while draining with small batches: %v -> %v (%v)", joined, v, err)
	}
	again := 0
	for _, s := range led.byMember()["slow-again"] {
		if strings.HasPrefix(s.Value, "t-") {
			again++
		}
	}
	if again == 0 {
		t.Fatal("the restarted member processed none of the second wave")
	}
	for p, vs := range more {
		produced[p] = append(produced[p], vs...)
	}
	checkAll(t, produced, led.all(), bigBatch)
}

// TestGroupsFranzCooperativeSticky: with the cooperative-sticky balancer, a member
// joining a group of two takes partitions from the others and nothing else moves: the
// existing members get revoke callbacks only for the partitions the newcomer takes
// and never lose the rest. While the rebalance is in progress (held open by member b,
// which is busy with a batch and blocks rebalancing), member a keeps consuming all of
// its partitions - what an eager protocol could not do.
func TestGroupsFranzCooperativeSticky(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "coop", "coop-franz"
	createTopic(t, adm, topic, 6, nil)

	led := newLedger(t)
	owners := &ownership{}
	opts := []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.SessionTimeout(20 * time.Second),
		kgo.RebalanceTimeout(20 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond)}
	a := newKgoMember(t, b, "a", group, topic, owners, opts...).run(autoLoop("a", led))
	hold, held, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	bm := newKgoMember(t, b, "b", group, topic, owners, append(opts, kgo.BlockRebalanceOnPoll())...).run(func(ctx context.Context, cl *kgo.Client) {
		holding := false
		for {
			fs := cl.PollRecords(ctx, 100)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				led.add(seen{Member: "b", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			})
			select {
			case <-hold:
				if !holding && len(fs.Records()) > 0 {
					holding = true
					close(held)
					select {
					case <-release:
					case <-ctx.Done():
						return
					}
				}
			default:
			}
			cl.AllowRebalance()
		}
	})
	waitGroup(t, adm, group, topic, 30*time.Second, "2 members sharing 6 partitions", func(v groupView) bool { return v.balanced(2, 6) })
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(a.ownedSorted()) == 3 && len(bm.ownedSorted()) == 3 }, "a and b to own 3 partitions each")
	before := map[*kgoMember][]int32{a: a.ownedSorted(), bm: bm.ownedSorted()}
	type counts struct{ assigned, revoked, lost int }
	baseline := map[*kgoMember]counts{}
	for m := range before {
		as, rs, ls := m.callbacks()
		baseline[m] = counts{len(as), len(rs), len(ls)}
	}
	produceSpread(t, b, topic, "one", 6, 10)
	testutil.WaitFor(t, 20*time.Second, func() bool { return led.distinct() == 60 }, "the first 60 records")

	// b takes one more batch and sits on it, so the coming rebalance cannot complete.
	close(hold)
	pc := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, pc, &kgo.Record{Partition: before[bm][0], Value: []byte("held")})
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("b did not poll the held record")
	}

	c := newKgoMember(t, b, "c", group, topic, owners, opts...).run(autoLoop("c", led))
	waitGroup(t, adm, group, topic, 20*time.Second, "c's join to start a rebalance", func(v groupView) bool { return v.State == "PreparingRebalance" })
	var during []*kgo.Record
	for _, p := range before[a] {
		for i := 0; i < 5; i++ {
			during = append(during, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("during-p%d-%d", p, i))})
		}
	}
	produceSync(t, pc, during...)
	testutil.WaitFor(t, 20*time.Second, func() bool {
		n := 0
		for _, s := range led.byMember()["a"] {
			if strings.HasPrefix(s.Value, "during-") {
				n++
			}
		}
		return n == len(during)
	}, "a to consume all its partitions while the rebalance is in progress")
	if v, err := describe(ctxT(t, 5*time.Second), adm, group, topic); err != nil || v.State != "PreparingRebalance" {
		t.Fatalf("the rebalance was expected to still be in progress (b holds it): %v %v", v, err)
	}
	close(release)

	waitGroup(t, adm, group, topic, 30*time.Second, "3 members sharing 6 partitions", func(v groupView) bool { return v.balanced(3, 6) })
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(c.ownedSorted()) == 2 }, "c to own 2 partitions")
	taken := c.ownedSorted()
	for m, had := range before {
		now := m.ownedSorted()
		assigned, revoked, lost := m.callbacks()
		assigned, revoked, lost = assigned[baseline[m].assigned:], revoked[baseline[m].revoked:], lost[baseline[m].lost:]
		if len(lost) != 0 {
			t.Fatalf("%s lost partitions %v", m.name, lost)
		}
		for _, as := range assigned {
			if len(as) != 0 {
				t.Fatalf("%s was assigned %v after c joined; it should only give partitions away", m.name, as)
			}
		}
		var gave []int32
		for _, r := range revoked {
			gave = append(gave, r...)
		}
		slices.Sort(gave)
		for _, p := range gave {
			if !slices.Contains(taken, p) {
				t.Fatalf("%s had partition %d revoked, but c did not take it (c has %v)", m.name, p, taken)
			}
		}
		kept := slices.DeleteFunc(slices.Clone(had), func(p int32) bool { return slices.Contains(gave, p) })
		if !slices.Equal(now, kept) || len(now) != 2 {
			t.Fatalf("%s had %v, gave away %v, now owns %v", m.name, had, gave, now)
		}
	}
	owners.check(t)
	produceSpread(t, b, topic, "two", 6, 10)
	want := 60 + 1 + len(during) + 60
	testutil.WaitFor(t, 20*time.Second, func() bool { return led.distinct() == want }, fmt.Sprintf("all %d records", want))
}

// TestGroupsFranzMemberSurvivesBrokerRestart: members that keep running while the
// broker restarts find their group reloaded from __consumer_offsets with its members:
// they are still known by their member ids, resume at the committed offsets and
// process every record once. (kgo ends its group session when a
// heartbeat cannot reach the broker and rejoins with its member id, so the generation
// may move on: that is the client's choice, and Kafka would answer the same way.)
func TestGroupsFranzMemberSurvivesBrokerRestart(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "live", "live-franz"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	var ms []*kgoMember
	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("m%d", i)
		m := newKgoMember(t, b, name, group, topic, nil, kgo.DisableAutoCommit(),
			kgo.SessionTimeout(20*time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
		ms = append(ms, m.run(commitLoop(t, name, led, 20)))
	}
	v := waitGroup(t, adm, group, topic, 30*time.Second, "2 members sharing 3 partitions", func(v groupView) bool { return v.balanced(2, 3) })
	ids := map[*kgoMember]string{}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		byID := kgoByID(ms)
		for id, ps := range v.Members {
			m := byID[id]
			if m == nil || !slices.Equal(m.ownedSorted(), ps) {
				return false
			}
			ids[m] = id
		}
		return true
	}, "the members' callbacks to match DescribeGroups")
	produced := produceSpread(t, b, topic, "before", 3, 20)
	waitDrained(t, adm, group, topic, 20*time.Second)

	b.Restart(t)
	adm = newAdmin(t, b)
	// The same members; kgo rejoins reporting no owned partitions (it dropped them when
	// its session ended), so the balancer may hand the partitions out differently.
	// Wait until the members' own view (callbacks) matches the broker's again, so that
	// the next records are not consumed across a rebalance still in progress.
	waitGroup(t, adm, group, topic, 20*time.Second, "the group to be Stable with the same members, as they see it", func(nv groupView) bool {
		if !nv.balanced(2, 3) || !maps.EqualFunc(nv.Members, v.Members, func([]int32, []int32) bool { return true }) {
			return false
		}
		for m, id := range ids {
			if m.memberID() != id || !slices.Equal(m.ownedSorted(), nv.Members[id]) {
				return false
			}
		}
		return true
	})
	for p, vs := range produceSpread(t, b, topic, "after", 3, 20) {
		produced[p] = append(produced[p], vs...)
	}
	waitDrained(t, adm, group, topic, 30*time.Second)
	for m, id := range ids {
		if got := m.memberID(); got != id {
			t.Fatalf("%s: member id %s after the restart, was %s: the group's members were not reloaded", m.name, got, id)
		}
	}
	checkAll(t, produced, led.all(), nil)
}

// TestGroupsFranzStaticFenced: a second live member with the same group.instance.id
// takes the instance over; the first one is fenced (FENCED_INSTANCE_ID surfaces from
// its poll and it loses its partitions), and the group keeps one member for the
// instance, consuming everything.
func TestGroupsFranzStaticFenced(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "fenced", "fenced-franz"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	fenced := make(chan error, 1)
	fencedLoop := func(name string) func(ctx context.Context, cl *kgo.Client) {
		return func(ctx context.Context, cl *kgo.Client) {
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				for _, e := range fs.Errors() {
					if errors.Is(e.Err, kerr.FencedInstanceID) {
						select {
						case fenced <- e.Err:
						default:
						}
						return // like a Java consumer: fenced is fatal
					}
				}
				fs.EachRecord(func(r *kgo.Record) {
					led.add(seen{Member: name, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
				})
			}
		}
	}
	opts := []kgo.Opt{kgo.InstanceID("only"), kgo.SessionTimeout(20 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond)}
	first := newKgoMember(t, b, "first", group, topic, nil, opts...).run(fencedLoop("first"))
	v := waitGroup(t, adm, group, topic, 30*time.Second, "the first member to own everything", func(v groupView) bool { return v.balanced(1, 3) })
	firstID := first.memberID()
	if v.Instance[firstID] != "only" {
		t.Fatalf("first member %s not described with its instance id: %v", firstID, v)
	}

	second := newKgoMember(t, b, "second", group, topic, nil, opts...).run(fencedLoop("second"))
	select {
	case err := <-fenced:
		t.Logf("first member: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the first member was not fenced within 20s")
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		_, _, lost := first.callbacks()
		return len(lost) > 0
	}, "the fenced member to lose its partitions")
	first.close()
	nv := waitGroup(t, adm, group, topic, 20*time.Second, "the second member to own everything", func(nv groupView) bool {
		_, firstThere := nv.Members[firstID]
		return nv.balanced(1, 3) && !firstThere
	})
	if id := second.memberID(); nv.Instance[id] != "only" {
		t.Fatalf("second member %s is not the instance's member: %v", id, nv)
	}
	produced := produceSpread(t, b, topic, "x", 3, 20)
	testutil.WaitFor(t, 20*time.Second, func() bool {
		n := 0
		for _, s := range led.byMember()["second"] {
			if strings.HasPrefix(s.Value, "x-") {
				n++
			}
		}
		return n == 60
	}, "the second member to consume the new records")
	var got []seen
	for _, s := range led.all() {
		if strings.HasPrefix(s.Value, "x-") {
			got = append(got, s)
		}
	}
	checkAll(t, produced, got, nil)
}
