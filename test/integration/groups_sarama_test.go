package integration

// Consumer groups driven by sarama's ConsumerGroup (issue 3, "Tests with real clients").
//
// Not expressible with sarama: cooperative rebalancing (sarama only implements the
// eager protocol; its "sticky" strategy is eager sticky), so scenario 7 is franz-go's.

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

	"github.com/IBM/sarama"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// saramaProcess handles one message of a claim; it returns false to end the claim.
type saramaProcess func(sess sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) bool

// saramaMember is one sarama ConsumerGroup running Consume in a loop.
type saramaMember struct {
	name    string
	cg      sarama.ConsumerGroup
	ks      *killSwitch
	process saramaProcess
	owners  *ownership

	mu         sync.Mutex
	owned      []int32 // claims of the current session, nil between sessions
	memberID   string
	generation int32
	sessions   int // Setup calls
	errs       []error

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

func saramaConfig(ks *killSwitch) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = ks
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.MaxWaitTime = 20 * time.Millisecond // commits queue behind fetches on the shared connection
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 5 * time.Second
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	return cfg
}

// startSarama starts a member of group on topic; configure adjusts the config; owners,
// if set, is told about the partitions of every session.
func startSarama(t *testing.T, b *testutil.Broker, name, group, topic string, process saramaProcess, configure func(*sarama.Config), owners *ownership) *saramaMember {
	t.Helper()
	m := &saramaMember{name: name, ks: &killSwitch{}, process: process, owners: owners, done: make(chan struct{})}
	cfg := saramaConfig(m.ks)
	cfg.ClientID = name
	if configure != nil {
		configure(cfg)
	}
	cg, err := sarama.NewConsumerGroup([]string{b.Addr}, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.cg = cg
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		for err := range cg.Errors() {
			m.mu.Lock()
			m.errs = append(m.errs, err)
			m.mu.Unlock()
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, m); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond): // back off before rejoining
				}
			}
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *saramaMember) close() {
	m.closeOnce.Do(func() {
		m.cancel()
		<-m.done
		m.cg.Close()
	})
}

func (m *saramaMember) Setup(sess sarama.ConsumerGroupSession) error {
	var ps []int32
	for _, claimed := range sess.Claims() {
		ps = append(ps, claimed...)
	}
	slices.Sort(ps)
	m.owners.acquire(m.name, ps)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owned = ps
	m.memberID = sess.MemberID()
	m.generation = sess.GenerationID()
	m.sessions++
	return nil
}

// Cleanup runs after every ConsumeClaim of the session has returned: the member
// consumes nothing until its next Setup.
func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	ps := m.owned
	m.owned = nil
	m.mu.Unlock()
	m.owners.release(m.name, ps)
	return nil
}

func (m *saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok || !m.process(sess, msg) {
				return nil
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

func (m *saramaMember) state() (owned []int32, memberID string, generation int32, sessions int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.owned), m.memberID, m.generation, m.sessions
}

func (m *saramaMember) errors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.errs)
}

// saramaAuto records every message and marks it for sarama's autocommit.
func saramaAuto(name string, led *ledger) saramaProcess {
	return func(sess sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) bool {
		led.add(seen{Member: name, Partition: msg.Partition, Offset: msg.Offset, Value: string(msg.Value)})
		sess.MarkMessage(msg, "")
		return true
	}
}

// saramaCommitEach records a message, then commits it synchronously.
func saramaCommitEach(name string, led *ledger) saramaProcess {
	return func(sess sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) bool {
		led.add(seen{Member: name, Partition: msg.Partition, Offset: msg.Offset, Value: string(msg.Value)})
		sess.MarkMessage(msg, "")
		sess.Commit()
		return true
	}
}

func noAutoCommit(cfg *sarama.Config) { cfg.Consumer.Offsets.AutoCommit.Enable = false }

// saramaShortSession is for tests that wait for a killed member's session to expire.
func saramaShortSession(cfg *sarama.Config) { cfg.Consumer.Group.Session.Timeout = 3 * time.Second }

// TestGroupsSaramaGroupOfFour: four sarama members (sticky strategy) on three
// partitions; one is idle; a killed owner's partition moves to the idle member.
func TestGroupsSaramaGroupOfFour(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "four", "four-sarama"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	var ms []*saramaMember
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("m%d", i)
		ms = append(ms, startSarama(t, b, name, group, topic, saramaAuto(name, led), saramaShortSession, nil))
	}
	v := waitGroup(t, adm, group, topic, 30*time.Second, "4 members sharing 3 partitions", func(v groupView) bool { return v.balanced(4, 3) })
	idle := v.idle()
	if len(idle) != 1 {
		t.Fatalf("want exactly one idle member, got %v", v)
	}
	byID := map[string]*saramaMember{}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		clear(byID)
		for _, m := range ms {
			owned, id, _, _ := m.state()
			ps, ok := v.Members[id]
			if !ok || !slices.Equal(owned, ps) {
				return false
			}
			byID[id] = m
		}
		return true
	}, "every member's session claims to match DescribeGroups: "+v.String())

	first := produceSpread(t, b, topic, "a", 3, 20)
	testutil.WaitFor(t, 20*time.Second, func() bool { return led.distinct() == 60 }, "the group to read the first 60 records")
	readByOwners(t, led, "", func(p int32) string { return byID[v.owner(p)].name })
	checkAll(t, first, led.all(), nil)

	victimID := v.owner(0)
	byID[victimID].ks.Kill()
	v2 := waitStickyMove(t, adm, group, topic, v, victimID, idle[0])
	checkReadAfterKill(t, b, led, topic, func(p int32) string { return byID[v2.owner(p)].name })
}

// TestGroupsSaramaFanOut: two sarama groups on one topic each read every record once.
func TestGroupsSaramaFanOut(t *testing.T) {
	t.Parallel()
	runFanOut(t, func(b *testutil.Broker, name, group, topic string, led *ledger) {
		startSarama(t, b, name, group, topic, saramaAuto(name, led), nil, nil)
	})
}

// TestGroupsSaramaResumeAfterKill: a member commits after processing each message and
// is killed after processing one it has not committed; a new member resumes at the
// committed offsets with nothing lost and only that tail processed twice.
func TestGroupsSaramaResumeAfterKill(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "resume", "resume-sarama"
	createTopic(t, adm, topic, 3, nil)
	produced := produceSpread(t, b, topic, "r", 3, 100)

	led := newLedger(t)
	var (
		mu        sync.Mutex
		processed int
		dead      bool
		tail      = map[string]bool{}
		committed = map[int32]int64{}
	)
	killed := make(chan struct{})
	ks := &killSwitch{}
	startSarama(t, b, "first", group, topic, func(sess sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) bool {
		// One message at a time across the member's claims, so that "processed" and
		// "committed" are exact when the kill comes.
		mu.Lock()
		defer mu.Unlock()
		if dead {
			return false
		}
		led.add(seen{Member: "first", Partition: msg.Partition, Offset: msg.Offset, Value: string(msg.Value)})
		processed++
		if processed >= 120 {
			tail[string(msg.Value)] = true
			dead = true
			ks.Kill()
			close(killed)
			return false
		}
		sess.MarkMessage(msg, "")
		sess.Commit()
		committed[msg.Partition] = msg.Offset + 1
		return true
	}, func(cfg *sarama.Config) {
		noAutoCommit(cfg)
		saramaShortSession(cfg)
		cfg.Net.Proxy.Dialer = ks
	}, nil)
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("first member did not process 120 records in 30s")
	}
	mu.Lock()
	wantCommitted := maps.Clone(committed)
	mu.Unlock()
	if got := committedOffsets(t, adm, group, topic); !maps.Equal(got, wantCommitted) {
		t.Fatalf("broker has committed offsets %v, the member committed %v", got, wantCommitted)
	}

	startSarama(t, b, "second", group, topic, saramaCommitEach("second", led), noAutoCommit, nil)
	waitDrained(t, adm, group, topic, 30*time.Second)
	checkResumed(t, produced, wantCommitted, tail, led.byMember()["second"])
	checkAll(t, produced, led.all(), tail)
}

// TestGroupsSaramaBrokerRestart: offsets committed by sarama and the group listing
// survive a clean restart and a kill -9; a member started afterwards resumes there.
func TestGroupsSaramaBrokerRestart(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "persist", "persist-sarama"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	all := produceSpread(t, b, topic, "x", 3, 30)
	m := startSarama(t, b, "one", group, topic, saramaCommitEach("one", led), noAutoCommit, nil)
	waitDrained(t, adm, group, topic, 30*time.Second)
	m.close()
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

	for p, vs := range produceSpread(t, b, topic, "y", 3, 10) {
		all[p] = append(all[p], vs...)
	}
	m2 := startSarama(t, b, "two", group, topic, saramaCommitEach("two", led), noAutoCommit, nil)
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
	checkAll(t, all, led.all(), nil)
}

// TestGroupsSaramaStaticRollingRestart: three sarama members with
// Consumer.Group.InstanceId are restarted one by one: each new incarnation gets its
// predecessor's partitions in the same generation, the others never start a new
// session, and every record is processed exactly once.
func TestGroupsSaramaStaticRollingRestart(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "static", "static-sarama"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	owners := &ownership{}
	start := func(i, incarnation int) *saramaMember {
		name := fmt.Sprintf("s%d.%d", i, incarnation)
		return startSarama(t, b, name, group, topic, saramaCommitEach(name, led), func(cfg *sarama.Config) {
			noAutoCommit(cfg)
			cfg.Consumer.Group.InstanceId = fmt.Sprintf("s%d", i)
			cfg.Consumer.Group.Session.Timeout = 20 * time.Second
		}, owners)
	}
	members := []*saramaMember{start(0, 0), start(1, 0), start(2, 0)}
	v := waitGroup(t, adm, group, topic, 30*time.Second, "3 static members sharing 3 partitions", func(v groupView) bool { return v.balanced(3, 3) })
	var gen int32
	base := map[*saramaMember]int{}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		for _, m := range members {
			owned, id, g, sessions := m.state()
			if !slices.Equal(owned, v.Members[id]) || len(owned) != 1 {
				return false
			}
			gen = g
			base[m] = sessions
		}
		return true
	}, "every member's session to hold the partition DescribeGroups shows: "+v.String())
	instancePartitions := map[string][]int32{}
	for id, ps := range v.Members {
		instancePartitions[v.Instance[id]] = ps
	}
	for _, m := range members {
		if _, _, g, _ := m.state(); g != gen {
			t.Fatalf("members disagree on the generation: %d and %d", gen, g)
		}
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
		instance := fmt.Sprintf("s%d", i)
		_, oldID, _, _ := members[i].state()
		members[i].close() // static: sarama sends no LeaveGroup
		if v := waitGroup(t, adm, group, topic, 5*time.Second, "the group to stay as it was", func(v groupView) bool { return v.balanced(3, 3) }); v.Instance[oldID] != instance {
			t.Fatalf("static member %s left the group on close: %v", instance, v)
		}
		members[i] = start(i, 1)
		base[members[i]] = 1
		testutil.WaitFor(t, 20*time.Second, func() bool { owned, _, _, _ := members[i].state(); return len(owned) == 1 }, "the restarted member to get its partition")
		nv := waitGroup(t, adm, group, topic, 10*time.Second, "the new incarnation in the group", func(v groupView) bool {
			_, oldThere := v.Members[oldID]
			return v.balanced(3, 3) && !oldThere
		})
		for id, ps := range nv.Members {
			if want := instancePartitions[nv.Instance[id]]; !slices.Equal(ps, want) {
				t.Fatalf("after restarting %s, instance %s has %v, had %v", instance, nv.Instance[id], ps, want)
			}
		}
		for _, m := range members {
			owned, _, g, sessions := m.state()
			if g != gen {
				t.Fatalf("after restarting %s, %s is in generation %d, was %d: the restart caused a rebalance", instance, m.name, g, gen)
			}
			if sessions != base[m] {
				t.Fatalf("after restarting %s, %s started %d sessions, had %d: the restart caused a rebalance", instance, m.name, sessions, base[m])
			}
			if len(owned) != 1 {
				t.Fatalf("after restarting %s, %s owns %v", instance, m.name, owned)
			}
		}
		produceAndDrain(fmt.Sprintf("after%d", i))
	}
	owners.check(t)
	checkAll(t, mergeProduced(produced), led.all(), nil)
}

// TestGroupsSaramaSlowProcessingEvicted: a sarama member whose handler is still busy
// with a message when the group rebalances does not rejoin within the rebalance
// timeout (sarama waits for every ConsumeClaim to return first) and is evicted; the
// group rebalances without it, its commit is refused, and once its handler is quick
// again it rejoins and the group drains.
func TestGroupsSaramaSlowProcessingEvicted(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "slow", "slow-sarama"
	createTopic(t, adm, topic, 3, nil)
	produced := produceSpread(t, b, topic, "s", 3, 40)

	led := newLedger(t)
	configure := func(cfg *sarama.Config) {
		noAutoCommit(cfg)
		cfg.Consumer.Group.Rebalance.Timeout = 2 * time.Second
		cfg.Consumer.Group.Session.Timeout = 20 * time.Second
	}
	var (
		mu       sync.Mutex
		blocked  *sarama.ConsumerMessage
		slowGen  int32
		slowDups = map[string]bool{}
	)
	polled := make(chan struct{})
	release := make(chan struct{})
	slow := startSarama(t, b, "slow", group, topic, func(sess sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) bool {
		mu.Lock()
		first := blocked == nil
		if first {
			blocked, slowGen = msg, sess.GenerationID()
		}
		if sess.GenerationID() == slowGen {
			// Anything the first session processes may be processed again: its
			// commits can fail once it is evicted.
			slowDups[string(msg.Value)] = true
		}
		mu.Unlock()
		led.add(seen{Member: fmt.Sprintf("slow.%d", sess.GenerationID()), Partition: msg.Partition, Offset: msg.Offset, Value: string(msg.Value)})
		if first {
			close(polled)
			<-release // processing outlasts the rebalance timeout
			sess.MarkMessage(msg, "")
			sess.Commit()
			return false
		}
		if sess.Context().Err() != nil {
			return false
		}
		sess.MarkMessage(msg, "")
		sess.Commit()
		return true
	}, configure, nil)
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // runs before the member is closed
	select {
	case <-polled:
	case <-time.After(30 * time.Second):
		t.Fatal("slow member got no message in 30s")
	}
	_, slowID, _, _ := slow.state()
	startSarama(t, b, "other", group, topic, saramaCommitEach("other", led), configure, nil)
	waitGroup(t, adm, group, topic, 30*time.Second, "the slow member to be evicted and the other to own everything", func(v groupView) bool {
		_, slowThere := v.Members[slowID]
		return !slowThere && v.balanced(1, 3)
	})
	unblock()
	testutil.WaitFor(t, 20*time.Second, func() bool {
		for _, err := range slow.errors() {
			if errors.Is(err, sarama.ErrUnknownMemberId) || errors.Is(err, sarama.ErrIllegalGeneration) {
				return true
			}
		}
		return false
	}, "the evicted member's commit to be refused with UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION")
	joined := waitGroup(t, adm, group, topic, 30*time.Second, "the evicted member to rejoin", func(v groupView) bool { return v.balanced(2, 3) })
	more := produceSpread(t, b, topic, "t", 3, 40)
	waitDrained(t, adm, group, topic, 30*time.Second)
	if v, err := describe(ctxT(t, 5*time.Second), adm, group, topic); err != nil || !maps.EqualFunc(v.Members, joined.Members, slices.Equal) {
		t.Fatalf("group changed while draining: %v -> %v (%v)", joined, v, err)
	}
	for p, vs := range more {
		produced[p] = append(produced[p], vs...)
	}
	mu.Lock()
	defer mu.Unlock()
	checkAll(t, produced, led.all(), slowDups)
}
