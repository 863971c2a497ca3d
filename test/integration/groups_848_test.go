package integration

// KIP-848 consumer groups driven by franz-go with server-side assignment
// (kgo.ServerSideBalancer): members join, leave, are killed (connections cut, no
// leave) and come back as static members; every test checks that a partition is
// owned by one member at a time from two sides — the members' own rebalance callbacks
// and the coordinator's ConsumerGroupDescribe, sampled throughout — and that every
// record was processed.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// start848Broker starts a broker whose consumer-protocol timeouts suit tests: a
// member is removed 3 s after its last heartbeat; members heartbeat every 200 ms.
func start848Broker(t *testing.T, extra ...string) *testutil.Broker {
	t.Helper()
	return startGroupBroker(t, append([]string{
		"group.consumer.min.session.timeout.ms=500",
		"group.consumer.session.timeout.ms=3000",
		"group.consumer.min.heartbeat.interval.ms=50",
		"group.consumer.heartbeat.interval.ms=200",
	}, extra...)...)
}

// new848Member is a kgo member on the KIP-848 path.
func new848Member(t *testing.T, b *testutil.Broker, name, group, topic string, hooks *ownership, opts ...kgo.Opt) *kgoMember {
	t.Helper()
	return newKgoMember(t, b, name, group, topic, hooks, append([]kgo.Opt{kgo.ServerSideBalancer(), kgo.DisableAutoCommit()}, opts...)...)
}

// view848 is a consumer group as ConsumerGroupDescribe shows it, for one topic.
type view848 struct {
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Members         map[string][]int32 // member id -> current assignment of the topic
	Epochs          map[string]int32
}

func describe848(ctx context.Context, adm *kadm.Client, group, topic string) (view848, error) {
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return view848{}, err
	}
	g, ok := described[group]
	if !ok {
		return view848{}, fmt.Errorf("group %s not described", group)
	}
	if g.Err != nil {
		return view848{}, g.Err
	}
	v := view848{State: g.State, Epoch: g.Epoch, AssignmentEpoch: g.AssignmentEpoch, Members: map[string][]int32{}, Epochs: map[string]int32{}}
	for _, m := range g.Members {
		v.Members[m.MemberID] = slices.Sorted(maps.Keys(m.Assignment[topic]))
		v.Epochs[m.MemberID] = m.MemberEpoch
	}
	return v, nil
}

// doubled lists the partitions the view shows in two members' assignments.
func (v view848) doubled() []string {
	owner := map[int32]string{}
	var out []string
	for m, ps := range v.Members {
		for _, p := range ps {
			if o, ok := owner[p]; ok {
				out = append(out, fmt.Sprintf("partition %d held by %s and %s", p, o, m))
			}
			owner[p] = m
		}
	}
	return out
}

func (v view848) balanced(members int, partitions int32) bool {
	if v.State != "Stable" || len(v.Members) != members {
		return false
	}
	n := 0
	for _, ps := range v.Members {
		n += len(ps)
	}
	return n == int(partitions) && len(v.doubled()) == 0
}

func (v view848) String() string {
	var parts []string
	for m, ps := range v.Members {
		parts = append(parts, fmt.Sprintf("%s@%d=%v", m, v.Epochs[m], ps))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%s epoch %d %s", v.State, v.Epoch, strings.Join(parts, " "))
}

// watch848 samples ConsumerGroupDescribe until the test ends and records every view
// that shows a partition assigned to two members at once.
type watch848 struct {
	mu         sync.Mutex
	last       view848
	samples    int
	violations []string
}

func startWatch848(t *testing.T, adm *kadm.Client, group, topic string) *watch848 {
	w := &watch848{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			v, err := describe848(rctx, adm, group, topic)
			rcancel()
			if err == nil {
				w.mu.Lock()
				w.last = v
				w.samples++
				for _, d := range v.doubled() {
					w.violations = append(w.violations, d+" in "+v.String())
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *watch848) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.samples == 0 {
		t.Fatal("ConsumerGroupDescribe never answered")
	}
	if len(w.violations) > 0 {
		t.Fatalf("ConsumerGroupDescribe showed partitions owned twice (%d of %d samples): %s", len(w.violations), w.samples, strings.Join(w.violations[:min(5, len(w.violations))], "; "))
	}
}

func wait848(t *testing.T, adm *kadm.Client, group, topic string, timeout time.Duration, what string, cond func(view848) bool) view848 {
	t.Helper()
	return waitDescribed(t, group, timeout, what, func(ctx context.Context) (view848, error) {
		return describe848(ctx, adm, group, topic)
	}, cond)
}

// TestGroups848FranzChurn: three members share six partitions; a fourth joins, one
// leaves, one is killed. Throughout, no partition is owned twice (callbacks and
// ConsumerGroupDescribe), the members that stay keep partitions they were not asked
// to give up, and every record is processed (twice only if a departed member had
// processed it without committing).
func TestGroups848FranzChurn(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	const topic, group = "churn848", "churn848-franz"
	createTopic(t, adm, topic, 6, nil)
	produced := []map[int32][]string{produceSpread(t, b, topic, "a", 6, 50)}
	watch := startWatch848(t, adm, group, topic)

	led := newLedger(t)
	hooks := &ownership{}
	members := map[string]*kgoMember{}
	start := func(name string) {
		members[name] = new848Member(t, b, name, group, topic, hooks).run(commitLoop(t, name, led, 20))
	}
	for _, name := range []string{"m0", "m1", "m2"} {
		start(name)
	}
	v := wait848(t, adm, group, topic, 30*time.Second, "3 members on 6 partitions", func(v view848) bool { return v.balanced(3, 6) })

	start("m3")
	v2 := wait848(t, adm, group, topic, 30*time.Second, "4 members on 6 partitions", func(v view848) bool { return v.balanced(4, 6) })
	// Incremental: a member keeps every partition it still has a share of.
	for id, ps := range v2.Members {
		if before, ok := v.Members[id]; ok {
			for _, p := range ps {
				if !slices.Contains(before, p) {
					t.Errorf("member %s gained partition %d when a member joined (had %v, has %v)", id, p, before, ps)
				}
			}
		}
	}

	produced = append(produced, produceSpread(t, b, topic, "b", 6, 30))
	members["m0"].close() // leaves the group (epoch -1)
	hooks.releaseAll("m0")
	wait848(t, adm, group, topic, 30*time.Second, "3 members after a leave", func(v view848) bool { return v.balanced(3, 6) })

	members["m1"].ks.Kill() // no leave: removed when its session expires
	hooks.releaseAll("m1")
	wait848(t, adm, group, topic, 30*time.Second, "2 members after a kill", func(v view848) bool { return v.balanced(2, 6) })
	produced = append(produced, produceSpread(t, b, topic, "c", 6, 30))
	all := mergeProduced(produced)
	waitProcessedAll(t, led, all)

	hooks.check(t)
	watch.check(t)
	departed := led.processedBy("m0", "m1")
	checkAll(t, all, led.all(), departed)
}

// TestGroups848FranzStaticRestart: a static member that closes (leaving with epoch -2)
// keeps its partitions while it is away — nobody else gets them — and its next
// incarnation, with the same instance id, gets them back without a new assignment.
func TestGroups848FranzStaticRestart(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	const topic, group = "static848", "static848-franz"
	createTopic(t, adm, topic, 4, nil)
	watch := startWatch848(t, adm, group, topic)
	led := newLedger(t)
	hooks := &ownership{}
	a := new848Member(t, b, "a", group, topic, hooks, kgo.InstanceID("inst-a")).run(commitLoop(t, "a", led, 20))
	new848Member(t, b, "b", group, topic, hooks, kgo.InstanceID("inst-b")).run(commitLoop(t, "b", led, 20))
	v := wait848(t, adm, group, topic, 30*time.Second, "2 static members on 4 partitions", func(v view848) bool { return v.balanced(2, 4) })
	aID := a.memberID()
	kept := v.Members[aID]
	epoch := v.Epoch

	a.close()
	hooks.releaseAll("a")
	away := wait848(t, adm, group, topic, 10*time.Second, "a's static leave", func(v view848) bool { return v.Epochs[aID] == -2 })
	if !slices.Equal(away.Members[aID], kept) {
		t.Fatalf("a static member away lost its partitions: had %v, now %v", kept, away.Members[aID])
	}
	time.Sleep(500 * time.Millisecond) // a few heartbeats of b: it must not take a's partitions
	if v := wait848(t, adm, group, topic, 5*time.Second, "the group", func(view848) bool { return true }); v.Epoch != epoch || !slices.Equal(v.Members[aID], kept) {
		t.Fatalf("while a is away: %v (epoch was %d, a had %v)", v, epoch, kept)
	}

	a2 := new848Member(t, b, "a2", group, topic, hooks, kgo.InstanceID("inst-a")).run(commitLoop(t, "a2", led, 20))
	back := wait848(t, adm, group, topic, 30*time.Second, "a's return", func(v view848) bool {
		id := a2.memberID()
		return id != "" && id != aID && slices.Equal(v.Members[id], kept) && v.balanced(2, 4)
	})
	if back.Epoch != epoch {
		t.Fatalf("the group epoch moved from %d to %d for a static member's return", epoch, back.Epoch)
	}
	hooks.check(t)
	watch.check(t)
}

// TestGroups848FranzRegex: a member subscribed by regular expression (resolved by the
// coordinator) is assigned a matching topic created after it joined, and only
// matching topics.
func TestGroups848FranzRegex(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	const group = "regex848-franz"
	createTopic(t, adm, "re848-orders", 2, nil)
	createTopic(t, adm, "other848", 2, nil)
	led := newLedger(t)
	m := newKgoMember(t, b, "m", group, "", nil, kgo.ServerSideBalancer(), kgo.ConsumeRegex(), kgo.ConsumeTopics("^re848-.*"))
	m.run(autoLoop("m", led))
	wait848(t, adm, group, "re848-orders", 30*time.Second, "re848-orders assigned", func(v view848) bool { return v.balanced(1, 2) })

	createTopic(t, adm, "re848-payments", 3, nil)
	wait848(t, adm, group, "re848-payments", 30*time.Second, "re848-payments assigned", func(v view848) bool { return v.balanced(1, 3) })
	ctx := ctxT(t, 10*time.Second)
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for _, mm := range described[group].Members {
		if _, ok := mm.Assignment["other848"]; ok {
			t.Fatalf("a topic the regex does not match was assigned: %v", mm.Assignment)
		}
		if mm.SubscribedTopicRegex == nil {
			t.Fatal("ConsumerGroupDescribe shows no regex subscription")
		}
	}
	p := produceSpread(t, b, "re848-payments", "pay", 3, 5)
	testutil.WaitFor(t, 20*time.Second, func() bool { return led.distinct() == 15 }, "the records of the new topic")
	checkAll(t, p, led.all(), nil)

	// ListGroups shows the group's type.
	listed, err := adm.ListGroupsByType(ctx, []string{"consumer"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed[group]; !ok {
		t.Fatalf("ListGroups of type consumer does not show %s: %v", group, listed.Groups())
	}
}

// TestGroups848GroupConfigs: a group's own consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms (GROUP configs, KIP-848) replace the broker's for
// that group. The broker's session timeout is 60 s and its heartbeat interval 5 s;
// the group sets 2 s and 200 ms. A killed member is then removed within seconds, and
// the live one, told to heartbeat every 200 ms, is never removed by the short
// session. Values outside the broker's bounds are refused with INVALID_CONFIG.
func TestGroups848GroupConfigs(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t,
		"group.consumer.min.session.timeout.ms=500", "group.consumer.session.timeout.ms=60000",
		"group.consumer.min.heartbeat.interval.ms=50", "group.consumer.heartbeat.interval.ms=5000")
	adm := newAdmin(t, b)
	const topic, group = "configs848", "configs848-franz"
	createTopic(t, adm, topic, 6, nil)

	cl := newClient(t, b)
	for _, bad := range []struct{ name, value, want string }{
		{"consumer.session.timeout.ms", "100", "group.consumer.min.session.timeout.ms=500"},
		{"consumer.heartbeat.interval.ms", "20000", "group.consumer.max.heartbeat.interval.ms=15000"},
		{"consumer.rebalance.ms", "1", "not a group config"},
		{"consumer.assignment.interval.ms", "20000", "group.consumer.max.assignment.interval.ms=15000"},
		{"share.assignment.interval.ms", "-1", "at least 0"},
	} {
		code, msg := alterGroupConfigs(t, cl, group, map[string]string{bad.name: bad.value})
		if code != kerr.InvalidConfig.Code || !strings.Contains(msg, bad.want) {
			t.Errorf("%s=%s: error %v %q, want INVALID_CONFIG naming %s", bad.name, bad.value, kerr.ErrorForCode(code), msg, bad.want)
		}
	}
	setGroupConfigs(t, b, group, map[string]string{"consumer.session.timeout.ms": "2000", "consumer.heartbeat.interval.ms": "200"})
	d := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	d.Resources = append(d.Resources, dr)
	described, err := d.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]kmsg.ConfigSource{}
	for _, c := range described.Resources[0].Configs {
		sources[c.Name] = c.Source
	}
	if sources["consumer.session.timeout.ms"] != kmsg.ConfigSourceGroupConfig || sources["share.session.timeout.ms"] != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("DescribeConfigs sources: %v, want the group's for consumer.session.timeout.ms and the default for share.session.timeout.ms", sources)
	}

	watch := startWatch848(t, adm, group, topic)
	hooks := &ownership{}
	led := newLedger(t)
	m0 := new848Member(t, b, "m0", group, topic, hooks).run(commitLoop(t, "m0", led, 20))
	m1 := new848Member(t, b, "m1", group, topic, hooks).run(commitLoop(t, "m1", led, 20))
	wait848(t, adm, group, topic, 30*time.Second, "2 members on 6 partitions", func(v view848) bool { return v.balanced(2, 6) })

	m1.ks.Kill() // no leave: removed when the group's 2 s session expires
	hooks.releaseAll("m1")
	settled := wait848(t, adm, group, topic, 20*time.Second, "m1 removed after the group's session timeout, well before the broker's 60 s",
		func(v view848) bool { return v.balanced(1, 6) })
	// m0 heartbeats every 200 ms as the group tells it, not every 5 s, so the 2 s
	// session never removes it: over several sessions the group does not change.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		v := wait848(t, adm, group, topic, 5*time.Second, "the group", func(view848) bool { return true })
		if v.Epoch != settled.Epoch || !v.balanced(1, 6) {
			t.Fatalf("the group changed while its one member heartbeat: %v, was %v", v, settled)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if id := m0.memberID(); settled.Epochs[id] == 0 {
		t.Fatalf("m0 (%s) is not the member left: %v", id, settled)
	}
	hooks.check(t)
	watch.check(t)
}

// TestGroups848AssignmentInterval: with the group's consumer.assignment.interval.ms
// (KIP-1263) at 2 s, two franz-go members joining together are assigned together once
// the interval has passed: meanwhile ConsumerGroupDescribe shows the group Assigning,
// its epoch ahead of the assignment epoch, and the joined members wait with nothing.
// Then they get their share, no partition ever owned twice. At 0, two more members'
// joins are each assigned in the heartbeat that makes it: the group is never seen
// Assigning.
func TestGroups848AssignmentInterval(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	const topic, group = "interval848", "interval848-franz"
	createTopic(t, adm, topic, 6, nil)
	setGroupConfigs(t, b, group, map[string]string{"consumer.assignment.interval.ms": "2000"})

	watch := startWatch848(t, adm, group, topic)
	hooks := &ownership{}
	led := newLedger(t)
	new848Member(t, b, "m0", group, topic, hooks).run(commitLoop(t, "m0", led, 20))
	first := wait848(t, adm, group, topic, 30*time.Second, "m0 alone on 6 partitions", func(v view848) bool { return v.balanced(1, 6) })
	new848Member(t, b, "m1", group, topic, hooks).run(commitLoop(t, "m1", led, 20))
	new848Member(t, b, "m2", group, topic, hooks).run(commitLoop(t, "m2", led, 20))
	waiting := wait848(t, adm, group, topic, 30*time.Second, "the group to wait for its assignment with m1 and m2 in it", func(v view848) bool {
		return v.State == "Assigning" && len(v.Members) == 3
	})
	if waiting.AssignmentEpoch >= waiting.Epoch {
		t.Fatalf("Assigning with the assignment epoch %d not behind the group epoch %d: %v", waiting.AssignmentEpoch, waiting.Epoch, waiting)
	}
	for m, ps := range waiting.Members {
		if waiting.Epochs[m] > waiting.AssignmentEpoch || len(ps) > 0 && waiting.Epochs[m] != first.Epoch {
			t.Fatalf("while the group waits, member %s is at epoch %d with %v: %v", m, waiting.Epochs[m], ps, waiting)
		}
	}
	settled := wait848(t, adm, group, topic, 30*time.Second, "3 members on 6 partitions", func(v view848) bool { return v.balanced(3, 6) })
	if settled.AssignmentEpoch != settled.Epoch {
		t.Fatalf("settled with the assignment epoch %d behind the group epoch %d", settled.AssignmentEpoch, settled.Epoch)
	}

	setGroupConfigs(t, b, group, map[string]string{"consumer.assignment.interval.ms": "0"})
	new848Member(t, b, "m3", group, topic, hooks).run(commitLoop(t, "m3", led, 20))
	new848Member(t, b, "m4", group, topic, hooks).run(commitLoop(t, "m4", led, 20))
	wait848(t, adm, group, topic, 30*time.Second, "5 members on 6 partitions", func(v view848) bool {
		if v.State == "Assigning" {
			t.Fatalf("the group waits for its assignment at an interval of 0: %v", v)
		}
		return v.balanced(5, 6)
	})
	hooks.check(t)
	watch.check(t)
}

// TestGroupsRawChurn: raw clients hammer a classic group and a consumer-protocol group
// at once for a few seconds — joins (some static), syncs, heartbeats and leaves with
// whatever member id and generation they last got, consumer-group heartbeats joining,
// leaving and from fenced epochs, offset commits from stale generations, deletes,
// describes, and now and then a member of the other protocol. Throughout,
// ConsumerGroupDescribe never shows a partition owned twice; afterwards both groups
// are described and listed, and a franz-go member of each gets all the partitions.
func TestGroupsRawChurn(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	const topic, partitions = "raw-churn", 6
	const classic, consumer = "raw-churn-classic", "raw-churn-848"
	createTopic(t, adm, topic, partitions, nil)
	watch := startWatch848(t, adm, consumer, topic)

	deadline := time.Now().Add(8 * time.Second)
	var wg sync.WaitGroup
	for w := range 8 {
		c := newClient(t, b)
		wg.Go(func() { rawChurn(c, w, topic, partitions, classic, consumer, deadline) })
	}
	wg.Wait()
	watch.check(t)

	ctx := ctxT(t, 10*time.Second)
	if _, err := adm.ListGroups(ctx); err != nil {
		t.Fatalf("ListGroups after the churn: %v", err)
	}
	described, err := adm.DescribeGroups(ctx, classic, consumer)
	if err != nil {
		t.Fatalf("DescribeGroups after the churn: %v", err)
	}
	for _, g := range described {
		if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
			t.Fatalf("DescribeGroups %s after the churn: %v", g.Group, g.Err)
		}
	}
	// The churn's members expire within a session timeout (3 s); then a member of
	// each group, of the protocol the group was made for, gets every partition.
	members := []*kgoMember{
		newKgoMember(t, b, "classic", classic, topic, &ownership{}).run(autoLoop("classic", &ledger{})),
		new848Member(t, b, "consumer", consumer, topic, &ownership{}).run(autoLoop("consumer", &ledger{})),
	}
	for _, m := range members {
		testutil.WaitFor(t, 60*time.Second, func() bool { return len(m.ownedSorted()) == partitions },
			fmt.Sprintf("the %s member to own all %d partitions", m.name, partitions))
	}
}

// rawChurn is one of TestGroupsRawChurn's raw clients (number w), sending random
// group requests on c until deadline; it ignores every answer but the ids and
// epochs it goes on with.
func rawChurn(c *kgo.Client, w int, topic string, partitions int, classic, consumer string, deadline time.Time) {
	memberID, generation := "", int32(-1) // classic
	cgMemberID, cgEpoch := "", int32(0)   // consumer protocol
	var instanceID *string
	if w%3 == 0 {
		instanceID = kmsg.StringPtr(fmt.Sprintf("raw-churn-static-%d", w))
	}
	for time.Now().Before(deadline) {
		// Mostly each protocol on its own group; one request in ten on the other.
		ownGroup := func(g, other string) string {
			if rand.IntN(10) == 0 {
				return other
			}
			return g
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		switch rand.IntN(9) {
		case 0, 1:
			req := kmsg.NewPtrJoinGroupRequest()
			req.Group, req.MemberID, req.InstanceID, req.ProtocolType = ownGroup(classic, consumer), memberID, instanceID, "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 3000, 3000
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = "range"
			req.Protocols = append(req.Protocols, p)
			if resp, err := req.RequestWith(ctx, c); err == nil {
				memberID, generation = resp.MemberID, resp.Generation
			}
		case 2:
			req := kmsg.NewPtrSyncGroupRequest()
			req.Group, req.MemberID, req.InstanceID, req.Generation = classic, memberID, instanceID, generation
			req.RequestWith(ctx, c)
		case 3:
			req := kmsg.NewPtrHeartbeatRequest()
			req.Group, req.MemberID, req.InstanceID, req.Generation = classic, memberID, instanceID, generation
			req.RequestWith(ctx, c)
		case 4:
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Group = classic
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID, m.InstanceID = memberID, instanceID
			req.Members = append(req.Members, m)
			req.RequestWith(ctx, c)
		case 5:
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.MemberID, req.Generation = ownGroup(classic, consumer), memberID, generation
			if rand.IntN(2) == 0 { // a commit from outside the group
				req.MemberID, req.Generation = "", -1
			}
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = int32(rand.IntN(partitions)), int64(rand.IntN(100))
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			req.RequestWith(ctx, c)
		case 6:
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Groups = []string{classic, consumer}[rand.IntN(2):]
			req.RequestWith(ctx, c)
		case 7:
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.MemberEpoch = ownGroup(consumer, classic), cgMemberID, cgEpoch
			if cgMemberID == "" {
				req.MemberID, req.MemberEpoch = fmt.Sprintf("raw-churn-%d-%d", w, time.Now().UnixNano()), 0
			}
			req.SubscribedTopicNames, req.RebalanceTimeoutMillis = []string{topic}, 5000
			if rand.IntN(5) == 0 {
				req.MemberEpoch = -1 // leave
			}
			resp, err := req.RequestWith(ctx, c)
			cgMemberID, cgEpoch = "", 0
			if err == nil && resp.ErrorCode == 0 && resp.MemberEpoch >= 0 && resp.MemberID != nil {
				cgMemberID, cgEpoch = *resp.MemberID, resp.MemberEpoch
			}
		case 8:
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups = []string{classic, consumer}
			req.RequestWith(ctx, c)
		}
		cancel()
	}
}

// TestGroups848CommitAssignmentEpochs: KIP-1251 (Kafka 4.3) over TCP. A franz-go
// member holding a topic's four partitions since epoch e1 is moved to a newer epoch
// when a second member joins; raw OffsetCommit requests in its name at e1 (v9 by
// topic name, v10 by topic id) are accepted for the partitions it kept, refused whole
// with STALE_MEMBER_EPOCH when one partition is the other member's or when the epoch
// is newer than its own. The other member may not commit at e1: its partitions were
// assigned to it later.
func TestGroups848CommitAssignmentEpochs(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	const topic, group = "epochs848", "epochs848-franz"
	createTopic(t, adm, topic, 4, nil)
	// No commits of their own (new848Member disables autocommit): only the raw ones.
	new848Member(t, b, "a", group, topic, nil).run(autoLoop("a", &ledger{}))
	v := wait848(t, adm, group, topic, 30*time.Second, "a alone on 4 partitions", func(v view848) bool { return v.balanced(1, 4) })
	var aID string
	for id := range v.Members {
		aID = id
	}
	e1 := v.Epochs[aID]
	new848Member(t, b, "b", group, topic, nil).run(autoLoop("b", &ledger{}))
	v = wait848(t, adm, group, topic, 30*time.Second, "a and b on 4 partitions, a past e1", func(v view848) bool {
		return v.balanced(2, 4) && v.Epochs[aID] > e1
	})
	var bID string
	for id := range v.Members {
		if id != aID {
			bID = id
		}
	}
	e2, kept, taken := v.Epochs[aID], v.Members[aID], v.Members[bID]
	t.Logf("a %s held all since %d, now at %d with %v; b %s at %d with %v", aID, e1, e2, kept, bID, v.Epochs[bID], taken)

	cl9 := pinned(t, b, kmsg.OffsetCommit, 9)
	cl10 := newClient(t, b, kgo.MaxVersions(kversion.Stable()))
	id := topicIDByName(t, cl10, topic)
	commit := func(cl *kgo.Client, version int16, member string, epoch int32, offsets map[int32]int64, unknownID bool) map[int32]int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = group, member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		for _, p := range slices.Sorted(maps.Keys(offsets)) {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[p], -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		if unknownID { // a topic id no topic has, beside the real one
			ut := kmsg.NewOffsetCommitRequestTopic()
			ut.TopicID = [16]byte{9, 9, 9}
			ut.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rt.Partitions[0]}
			req.Topics = append(req.Topics, ut)
		}
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version != version {
			t.Fatalf("OffsetCommit answered in v%d, want v%d", resp.Version, version)
		}
		out := map[int32]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if unknownID && rt.TopicID == [16]byte{9, 9, 9} {
					if rp.ErrorCode != kerr.UnknownTopicID.Code {
						t.Fatalf("partition %d of an unknown topic id: error %d, want UNKNOWN_TOPIC_ID", rp.Partition, rp.ErrorCode)
					}
					continue
				}
				out[rp.Partition] = rp.ErrorCode
			}
		}
		return out
	}
	offsets := func(offset int64, ps ...int32) map[int32]int64 {
		out := map[int32]int64{}
		for _, p := range ps {
			out[p] = offset
		}
		return out
	}
	want := func(what string, got map[int32]int16, code int16) {
		t.Helper()
		for p, c := range got {
			if c != code {
				t.Fatalf("%s: partition %d error %d (%v), want %d, all: %v", what, p, c, kerr.ErrorForCode(c), code, got)
			}
		}
	}

	want("v9, a at e1, the partitions it kept", commit(cl9, 9, aID, e1, offsets(11, kept...), false), 0)
	if got := committedOffsets(t, adm, group, topic); got[kept[0]] != 11 || got[kept[1]] != 11 {
		t.Fatalf("committed after a's commit at e1: %v, want 11 for %v", got, kept)
	}
	want("v9, a at e1, one partition it kept and one of b's", commit(cl9, 9, aID, e1, offsets(12, kept[0], taken[0]), false), kerr.StaleMemberEpoch.Code)
	if got := committedOffsets(t, adm, group, topic); got[kept[0]] != 11 {
		t.Fatalf("a refused commit moved partition %d to %d", kept[0], got[kept[0]])
	}
	want("v10 by id, a at e1, the partitions it kept, an unknown topic id beside", commit(cl10, 10, aID, e1, offsets(13, kept...), true), 0)
	want("v10 by id, a at a newer epoch than its own", commit(cl10, 10, aID, e2+1, offsets(14, kept...), false), kerr.StaleMemberEpoch.Code)
	want("v9, b at e1, partitions assigned to it after e1", commit(cl9, 9, bID, e1, offsets(15, taken...), false), kerr.StaleMemberEpoch.Code)
	want("v9, a at its own epoch, any partition", commit(cl9, 9, aID, e2, offsets(16, taken[0]), false), 0)
	got := committedOffsets(t, adm, group, topic)
	for p, o := range map[int32]int64{kept[0]: 13, kept[1]: 13, taken[0]: 16} {
		if got[p] != o {
			t.Fatalf("committed offsets at the end: %v, want partition %d at %d", got, p, o)
		}
	}
	if _, ok := got[taken[1]]; ok {
		t.Fatalf("committed offsets at the end: %v, want none for partition %d", got, taken[1])
	}
}
