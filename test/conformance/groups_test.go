package conformance

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// groupClient is a client whose group consumer the group scenarios drive, with the
// group features the client itself has.
type groupClient struct {
	client
	static      bool // group.instance.id
	cooperative bool // cooperative-sticky assignor
	// pollEviction: the client gives up its membership when processing outlasts
	// max.poll.interval.ms, so the group rebalances without it.
	pollEviction bool
}

var groupClients = []groupClient{
	{client: kafkaPython, pollEviction: true},
	{client: confluent, static: true, cooperative: true, pollEviction: true},
	{client: kafkajs},
}

// groupScenario is one issue-3 behaviour, run for every client that applies.
type groupScenario struct {
	name    string
	applies func(groupClient) bool
	run     func(t *testing.T, tg *target, c groupClient)
}

func always(groupClient) bool { return true }

var groupScenarios = []groupScenario{
	{"four-members-three-partitions", always, groupFourOfThree},
	{"fan-out-two-groups", always, groupFanOut},
	{"commit-kill-resume", always, groupCommitKillResume},
	{"static-rolling-restart", func(c groupClient) bool { return c.static }, groupStaticRollingRestart},
	{"poll-interval-eviction", func(c groupClient) bool { return c.pollEviction }, groupPollEviction},
	{"cooperative-sticky", func(c groupClient) bool { return c.cooperative }, groupCooperativeSticky},
	{"online-upgrade", always, groupOnlineUpgrade},
}

// groupBrokerOverrides makes first joins immediate instead of waiting 3 s.
var groupBrokerOverrides = []string{"group.initial.rebalance.delay.ms=0"}

// rebalanceWait bounds any wait for a rebalance: a crashed member is noticed after
// its session timeout (6 s here), then the group rejoins.
const rebalanceWait = 45 * time.Second

// TestGroups runs the group scenarios of issue 3 against each client's group
// consumer, one broker for all.
func TestGroups(t *testing.T) {
	tg := startTarget(t, groupBrokerOverrides...)
	for _, c := range groupClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range groupScenarios {
				if sc.applies(c) {
					t.Run(sc.name, func(t *testing.T) { sc.run(t, tg, c) })
				}
			}
		})
	}
}

func (tg *target) group(c groupClient, scenario string) string {
	return "conf." + c.name + "." + scenario + "." + tg.suffix
}

// ownership summarises who owns what: a failure message if any partition in
// [0, partitions) is owned by none or by two members.
func ownership(members []*member, partitions int) (owners map[int32]*member, problem string) {
	owners = map[int32]*member{}
	for _, m := range members {
		for _, p := range m.owned() {
			if prev, ok := owners[p]; ok {
				return owners, fmt.Sprintf("partition %d owned by %s and %s", p, prev.name, m.name)
			}
			owners[p] = m
		}
	}
	for p := int32(0); p < int32(partitions); p++ {
		if owners[p] == nil {
			return owners, fmt.Sprintf("partition %d unowned", p)
		}
	}
	if len(owners) != partitions {
		return owners, fmt.Sprintf("owned partitions %v outside [0,%d)", owners, partitions)
	}
	return owners, ""
}

func describe(members []*member) string {
	var b strings.Builder
	for _, m := range members {
		fmt.Fprintf(&b, "%s(alive=%v owns=%v errors=%v) ", m.name, m.alive(), m.owned(), m.errors())
	}
	return b.String()
}

func waitOwnership(t *testing.T, members []*member, partitions int, extra func() bool, what string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(rebalanceWait)
	for {
		_, problem := ownership(members, partitions)
		if problem == "" && (extra == nil || extra()) {
			return
		}
		last = problem
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s; members: %s", rebalanceWait, what, last, describe(members))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func consumedAll(members []*member, want int) func() bool {
	return func() bool {
		var all []record
		for _, m := range members {
			all = append(all, m.records()...)
		}
		return len(distinct(all)) >= want
	}
}

// groupFourOfThree: a 3-partition topic read by a group of 4 — each partition owned
// by exactly one member, one member idle; crash an owner and the idle member takes
// over, and records produced afterwards are all consumed.
func groupFourOfThree(t *testing.T, tg *target, c groupClient) {
	topic := tg.topic("g4of3", c.name)
	createTopic(t, tg, c.client, topic, 3)
	produceWithKgo(t, tg, topic, "before", numKeys, 10)
	opts := memberOptions{group: tg.group(c, "4of3"), topic: topic}
	var members []*member
	for i := 0; i < 4; i++ {
		members = append(members, startMember(t, tg, c.client, fmt.Sprintf("m%d", i), opts))
	}
	idleOne := func() bool {
		idle := 0
		for _, m := range members {
			if len(m.owned()) == 0 {
				idle++
			}
		}
		return idle == 1
	}
	waitOwnership(t, members, 3, idleOne, "3 owners and 1 idle member")
	var idle, victim *member
	for _, m := range members {
		switch {
		case len(m.owned()) == 0:
			idle = m
		case victim == nil:
			victim = m
		}
	}
	survivors := slices.DeleteFunc(slices.Clone(members), func(m *member) bool { return m == victim })
	victim.kill()
	waitOwnership(t, survivors, 3, func() bool { return len(idle.owned()) == 1 },
		"the idle member to take over a partition after "+victim.name+" was killed")
	for _, m := range survivors {
		if n := len(m.owned()); n != 1 {
			t.Errorf("%s owns %v after the rebalance, want exactly one partition", m.name, m.owned())
		}
	}
	produceWithKgo(t, tg, topic, "after", numKeys, 10)
	testutil.WaitFor(t, rebalanceWait, func() bool {
		n := 0
		for _, m := range survivors {
			for _, r := range distinct(m.records()) {
				if r.Value != nil && strings.HasPrefix(*r.Value, "after|") {
					n++
				}
			}
		}
		return n >= numKeys*10
	}, "the surviving members to consume every record produced after the rebalance")
}

// groupFanOut: two groups on one topic each read every record, exactly once.
func groupFanOut(t *testing.T, tg *target, c groupClient) {
	topic := tg.topic("gfan", c.name)
	createTopic(t, tg, c.client, topic, 3)
	produceWithKgo(t, tg, topic, "fan", numKeys, perKey)
	a := startMember(t, tg, c.client, "groupA", memberOptions{group: tg.group(c, "fanA"), topic: topic})
	b := startMember(t, tg, c.client, "groupB", memberOptions{group: tg.group(c, "fanB"), topic: topic})
	for _, m := range []*member{a, b} {
		testutil.WaitFor(t, rebalanceWait, consumedAll([]*member{m}, numKeys*perKey),
			m.name+" to consume every record")
	}
	for _, m := range []*member{a, b} {
		t.Run(m.name, func(t *testing.T) {
			verifyRecords(t, "fan", numKeys, perKey, true, nil, byPartitionOffset(m.records()))
		})
	}
}

// groupCommitKillResume: a member commits after processing and is killed with
// SIGKILL mid-stream; a new member of the group resumes at the committed offsets:
// no record lost, duplicates only from the uncommitted tail.
func groupCommitKillResume(t *testing.T, tg *target, c groupClient) {
	topic := tg.topic("gresume", c.name)
	createTopic(t, tg, c.client, topic, 3)
	total := numKeys * perKey
	produceWithKgo(t, tg, topic, "resume", numKeys, perKey)
	opts := memberOptions{group: tg.group(c, "resume"), topic: topic, commit: true,
		processDelayMs: 20, maxPollRecords: 10}
	first := startMember(t, tg, c.client, "first", opts)
	testutil.WaitFor(t, rebalanceWait, func() bool {
		committed := int64(0)
		for _, o := range first.commits() {
			committed += o
		}
		return committed >= int64(total/4)
	}, "the first member to commit a quarter of the records")
	first.kill()
	firstRecs := first.records()
	if len(firstRecs) >= total {
		t.Fatalf("first member consumed everything (%d records) before it was killed; the test needs a mid-stream kill", len(firstRecs))
	}
	committed := first.commits()
	consumedUpTo := map[int32]int64{} // next offset after the last consumed
	for _, r := range firstRecs {
		consumedUpTo[r.Partition] = max(consumedUpTo[r.Partition], r.Offset+1)
	}

	second := startMember(t, tg, c.client, "second", opts)
	testutil.WaitFor(t, rebalanceWait, consumedAll([]*member{first, second}, total),
		"the group to consume every record after the restart")
	secondRecs := byPartitionOffset(second.records())
	firstOffset := map[int32]int64{}
	for _, r := range secondRecs {
		if _, ok := firstOffset[r.Partition]; !ok {
			firstOffset[r.Partition] = r.Offset
		}
	}
	for p, start := range firstOffset {
		if c, ok := committed[p]; ok && start < c {
			t.Errorf("partition %d: resumed at %d, before the committed offset %d", p, start, c)
		}
		if start > consumedUpTo[p] {
			t.Errorf("partition %d: resumed at %d, after the first member's last consumed record %d: records lost", p, start, consumedUpTo[p]-1)
		}
	}
	verifyRecords(t, "resume", numKeys, perKey, true, nil,
		byPartitionOffset(distinct(append(firstRecs, secondRecs...))))
}

// groupStaticRollingRestart: three static members restarted one at a time within
// the session timeout: each gets its partition back, the others see no rebalance,
// and no partition is consumed by two members.
func groupStaticRollingRestart(t *testing.T, tg *target, c groupClient) {
	topic := tg.topic("gstatic", c.name)
	createTopic(t, tg, c.client, topic, 3)
	produceWithKgo(t, tg, topic, "static0", numKeys, 5)
	opts := func(i int) memberOptions {
		return memberOptions{group: tg.group(c, "static"), topic: topic,
			instanceID: fmt.Sprintf("instance-%d", i), sessionTimeoutMs: 30000, assignor: "range"}
	}
	members := make([]*member, 3)
	for i := range members {
		members[i] = startMember(t, tg, c.client, fmt.Sprintf("instance-%d", i), opts(i))
	}
	oneEach := func() bool {
		for _, m := range members {
			if len(m.owned()) != 1 {
				return false
			}
		}
		return true
	}
	waitOwnership(t, members, 3, oneEach, "three static members owning one partition each")
	before := map[string][]int32{}
	for _, m := range members {
		before[m.name] = m.owned()
	}
	// Until the group first settled, a member may have read partitions it then gave
	// up; from here on each member reads only its own partition.
	settledAt := map[*member]int{}
	for _, m := range members {
		settledAt[m] = len(m.records())
	}
	onlyOwn := func(m *member) {
		for _, r := range m.records()[settledAt[m]:] {
			if !slices.Contains(before[m.name], r.Partition) {
				t.Errorf("%s consumed partition %d, which belonged to another member", m.name, r.Partition)
				return
			}
		}
	}
	for i := range members {
		changes := make([]int, len(members))
		for j, m := range members {
			changes[j] = m.assignmentChanges()
		}
		old := members[i]
		old.stop(t)
		onlyOwn(old)
		members[i] = startMember(t, tg, c.client, old.name, opts(i))
		produceWithKgo(t, tg, topic, fmt.Sprintf("static%d", i+1), numKeys, 5)
		waitOwnership(t, members, 3, func() bool { return slices.Equal(members[i].owned(), before[old.name]) },
			fmt.Sprintf("%s to get its partition %v back after its restart", old.name, before[old.name]))
		for j, m := range members {
			if j != i && m.assignmentChanges() != changes[j] {
				t.Errorf("restarting %s rebalanced %s (assignment now %v)", old.name, m.name, m.owned())
			}
		}
	}
	total := numKeys * 5 * 4
	testutil.WaitFor(t, rebalanceWait, consumedAll(members, total), "every record to be consumed")
	for _, m := range members {
		onlyOwn(m)
	}
}

// groupPollEviction: a member whose processing outlasts max.poll.interval.ms is
// dropped and the group rebalances to the other member; with a batch small enough
// to finish in time, a member drains the topic.
func groupPollEviction(t *testing.T, tg *target, c groupClient) {
	topic := tg.topic("gpoll", c.name)
	createTopic(t, tg, c.client, topic, 3)
	produceWithKgo(t, tg, topic, "poll", numKeys, perKey)
	group := tg.group(c, "poll")
	slow := startMember(t, tg, c.client, "slow", memberOptions{group: group, topic: topic,
		maxPollIntervalMs: 7000, sessionTimeoutMs: 6000, maxPollRecords: 100, processDelayMs: 1000})
	waitOwnership(t, []*member{slow}, 3, nil, "the slow member to own every partition")
	fast := startMember(t, tg, c.client, "fast", memberOptions{group: group, topic: topic,
		maxPollIntervalMs: 7000, sessionTimeoutMs: 6000, maxPollRecords: 10})
	testutil.WaitFor(t, 2*rebalanceWait, func() bool { return len(fast.owned()) == 3 && slow.alive() },
		"the slow member to be evicted and the fast one to own every partition")
	slow.kill()
	testutil.WaitFor(t, rebalanceWait, consumedAll([]*member{fast}, numKeys*perKey),
		"the fast member to drain the topic")
}

// groupCooperativeSticky: with cooperative-sticky, a third member joining a group of
// two takes partitions from the others, and only the partitions it takes move.
func groupCooperativeSticky(t *testing.T, tg *target, c groupClient) {
	const parts = 6
	topic := tg.topic("gcoop", c.name)
	createTopic(t, tg, c.client, topic, parts)
	produceWithKgo(t, tg, topic, "coop", numKeys, 5)
	opts := memberOptions{group: tg.group(c, "coop"), topic: topic, assignor: "cooperative-sticky"}
	a := startMember(t, tg, c.client, "a", opts)
	b := startMember(t, tg, c.client, "b", opts)
	waitOwnership(t, []*member{a, b}, parts, func() bool { return len(a.owned()) == 3 && len(b.owned()) == 3 },
		"two members owning three partitions each")
	beforeA, beforeB := a.owned(), b.owned()
	newcomer := startMember(t, tg, c.client, "c", opts)
	members := []*member{a, b, newcomer}
	waitOwnership(t, members, parts, func() bool {
		return len(a.owned()) == 2 && len(b.owned()) == 2 && len(newcomer.owned()) == 2
	}, "three members owning two partitions each")
	for _, m := range []struct {
		m      *member
		before []int32
	}{{a, beforeA}, {b, beforeB}} {
		for _, p := range m.m.owned() {
			if !slices.Contains(m.before, p) {
				t.Errorf("%s gained partition %d; only the newcomer should gain", m.m.name, p)
			}
		}
	}
	for _, p := range newcomer.owned() {
		if !slices.Contains(beforeA, p) && !slices.Contains(beforeB, p) {
			t.Errorf("newcomer owns partition %d that nobody owned", p)
		}
	}
}

// listGroups returns the group ids the broker lists.
func listGroups(t *testing.T, tg *target) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	groups, err := kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	return groups.Groups()
}

// TestGroupsBrokerRestart: offsets committed by each client's group consumer and the
// group listing survive a broker restart; a new member resumes after the commits.
func TestGroupsBrokerRestart(t *testing.T) {
	if os.Getenv(externalBrokerEnv) != "" {
		t.Skip("restarts the broker, so it needs the broker the test starts itself")
	}
	tg := startTarget(t, groupBrokerOverrides...)
	const keys, before = 5, 6
	type clientState struct {
		c     groupClient
		topic string
		group string
	}
	var states []clientState
	for _, c := range groupClients {
		st := clientState{c: c, topic: tg.topic("grestart", c.name), group: tg.group(c, "restart")}
		createTopic(t, tg, c.client, st.topic, 3)
		produceWithKgo(t, tg, st.topic, "before", keys, before)
		m := startMember(t, tg, c.client, c.name+"-before", memberOptions{group: st.group, topic: st.topic, commit: true})
		testutil.WaitFor(t, rebalanceWait, func() bool {
			sum := int64(0)
			for _, o := range m.commits() {
				sum += o
			}
			return sum == keys*before
		}, c.name+" to commit every record")
		m.stop(t)
		states = append(states, st)
	}

	tg.broker.Restart(t)

	listed := listGroups(t, tg)
	for _, st := range states {
		if !slices.Contains(listed, st.group) {
			t.Errorf("group %s missing from ListGroups after restart (listed %v)", st.group, listed)
		}
	}
	for _, st := range states {
		t.Run(st.c.name, func(t *testing.T) {
			produceWithKgo(t, tg, st.topic, "after", keys, 4)
			m := startMember(t, tg, st.c.client, st.c.name+"-after", memberOptions{group: st.group, topic: st.topic})
			testutil.WaitFor(t, rebalanceWait, consumedAll([]*member{m}, keys*4),
				"the new member to consume the records produced after the restart")
			for _, r := range m.records() {
				if r.Value == nil || !strings.HasPrefix(*r.Value, "after|") {
					t.Fatalf("new member re-read p%d@%d (%v), committed before the restart", r.Partition, r.Offset, r.Value)
				}
			}
			verifyRecords(t, "after", keys, 4, true, nil, byPartitionOffset(m.records()))
		})
	}
}
