package integration

// Online migration between the classic and the KIP-848 consumer protocol (Kafka 4's
// rolling upgrade): a classic group of franz-go members becomes a consumer group when
// a member with server-side assignment joins it, its classic members carrying on
// through JoinGroup, SyncGroup and Heartbeat while the coordinator assigns; once only
// classic members are left it goes back to the classic protocol.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// memberTypes returns, per member id, the member type ConsumerGroupDescribe reports
// (0 classic, 1 consumer protocol).
func memberTypes(t *testing.T, b *testutil.Broker, group string) map[string]int8 {
	t.Helper()
	types, err := tryMemberTypes(b, group)
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// tryMemberTypes is memberTypes, returning what failed.
func tryMemberTypes(b *testutil.Broker, group string) (map[string]int8, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return nil, fmt.Errorf("ConsumerGroupDescribe of %s: %+v", group, resp.Groups)
	}
	out := map[string]int8{}
	for _, m := range resp.Groups[0].Members {
		out[m.MemberID] = m.MemberType
	}
	return out, nil
}

// TestGroupsOnlineMigration: two classic franz-go members (cooperative-sticky) share
// six partitions; a member on the KIP-848 path joins and the group becomes a
// consumer group, the classic members kept; a classic member leaves; the consumer
// member is killed and, once its session expires, the group is a classic one again,
// which a new classic member joins. Throughout, no partition is owned by two members (their rebalance
// callbacks), every record is processed, and the committed offsets carry over.
func TestGroupsOnlineMigration(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	const topic, group = "migrate", "migrate-franz"
	createTopic(t, adm, topic, 6, nil)
	produced := []map[int32][]string{produceSpread(t, b, topic, "a", 6, 40)}
	led := newLedger(t)
	hooks := &ownership{}
	classic := func(name string) *kgoMember {
		return newKgoMember(t, b, name, group, topic, hooks, kgo.DisableAutoCommit(),
			kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(100*time.Millisecond)).
			run(commitLoop(t, name, led, 20))
	}
	c0, c1 := classic("c0"), classic("c1")
	waitGroup(t, adm, group, topic, 30*time.Second, "2 classic members on 6 partitions", func(v groupView) bool { return v.balanced(2, 6) })
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 240 }, "the classic group to process the first 240 records")

	// Upgrade: a consumer-protocol member joins the classic group.
	n0 := new848Member(t, b, "n0", group, topic, hooks).run(commitLoop(t, "n0", led, 20))
	v := wait848(t, adm, group, topic, 30*time.Second, "2 classic members and a consumer member on 6 partitions", func(v view848) bool { return v.balanced(3, 6) })
	types := memberTypes(t, b, group)
	want := map[string]int8{c0.memberID(): 0, c1.memberID(): 0, n0.memberID(): 1}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("member types after the upgrade: %v, want %v (0 classic, 1 consumer); group %v", types, want, v)
	}
	for _, m := range []*kgoMember{c0, c1, n0} {
		if len(v.Members[m.memberID()]) == 0 {
			t.Fatalf("member %s has no partition after the upgrade: %v", m.name, v)
		}
	}
	produced = append(produced, produceSpread(t, b, topic, "b", 6, 30))
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 420 }, "the mixed group to process 420 records")

	// A classic member leaves (LeaveGroup): the group stays a consumer group.
	c1.close()
	hooks.releaseAll("c1")
	wait848(t, adm, group, topic, 30*time.Second, "a classic and a consumer member on 6 partitions", func(v view848) bool { return v.balanced(2, 6) })

	// Downgrade: the consumer member is killed (no leave); when its session expires
	// only a classic member is left.
	n0.ks.Kill()
	hooks.releaseAll("n0")
	waitGroup(t, adm, group, topic, 30*time.Second, "the classic group back, c0 on 6 partitions", func(v groupView) bool { return v.balanced(1, 6) })
	c2 := classic("c2")
	waitGroup(t, adm, group, topic, 30*time.Second, "2 classic members on 6 partitions", func(v groupView) bool { return v.balanced(2, 6) })
	produced = append(produced, produceSpread(t, b, topic, "c", 6, 30))
	all := mergeProduced(produced)
	waitProcessedAll(t, led, all)
	c0.close()
	c2.close()

	hooks.check(t)
	departed := led.processedBy("c1", "n0")
	checkAll(t, all, led.all(), departed)
	// Committed offsets carried across both conversions: the group's end offsets.
	committed := committedOffsets(t, adm, group, topic)
	for p, vs := range all {
		if committed[p] != int64(len(vs)) {
			t.Errorf("partition %d: committed offset %d, want %d (every record)", p, committed[p], len(vs))
		}
	}
}

// TestGroupsOnlineMigrationSarama: the same with eager classic members — two sarama
// members (eager sticky: they give up every partition before they join again) — and a
// franz-go member on the KIP-848 path, which joins (upgrade) and later leaves
// (downgrade: sarama's members rebalance as a classic group again).
func TestGroupsOnlineMigrationSarama(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	const topic, group = "migrate-sarama", "migrate-sarama"
	createTopic(t, adm, topic, 6, nil)
	produced := []map[int32][]string{produceSpread(t, b, topic, "a", 6, 20)}
	led := newLedger(t)
	hooks := &ownership{}
	var sms []*saramaMember
	for _, name := range []string{"s0", "s1"} {
		sms = append(sms, startSarama(t, b, name, group, topic, saramaCommitEach(name, led), func(cfg *sarama.Config) {
			noAutoCommit(cfg)
			saramaShortSession(cfg)
		}, hooks))
	}
	waitGroup(t, adm, group, topic, 30*time.Second, "2 sarama members on 6 partitions", func(v groupView) bool { return v.balanced(2, 6) })
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 120 }, "the classic group to process the first 120 records")

	n0 := new848Member(t, b, "n0", group, topic, hooks).run(commitLoop(t, "n0", led, 20))
	wait848(t, adm, group, topic, 30*time.Second, "2 sarama members and a consumer member on 6 partitions", func(v view848) bool {
		if !v.balanced(3, 6) {
			return false
		}
		for _, ps := range v.Members {
			if len(ps) == 0 {
				return false
			}
		}
		return true
	})
	types := memberTypes(t, b, group)
	classic := 0
	for _, typ := range types {
		if typ == 0 {
			classic++
		}
	}
	if classic != 2 || types[n0.memberID()] != 1 {
		t.Fatalf("member types after the upgrade: %v, want the two sarama members classic (0) and %s consumer (1)", types, n0.memberID())
	}
	produced = append(produced, produceSpread(t, b, topic, "b", 6, 20))
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 240 }, "the mixed group to process 240 records")

	n0.close()
	hooks.releaseAll("n0")
	waitGroup(t, adm, group, topic, 30*time.Second, "the classic group back with 2 sarama members on 6 partitions", func(v groupView) bool { return v.balanced(2, 6) })
	produced = append(produced, produceSpread(t, b, topic, "c", 6, 20))
	all := mergeProduced(produced)
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 360 }, "the group to process all 360 records")
	for _, m := range sms {
		m.close()
		for _, err := range m.errors() {
			t.Logf("%s: %v", m.name, err)
		}
	}
	hooks.check(t)
	departed := led.processedBy("n0")
	// An eager member gives up its partitions and may get one back it processed
	// before: it reads on from the committed offset, which checkAll's per-member order
	// allows only without re-reads, and commits follow each record here.
	checkAll(t, all, led.all(), departed)
}

// TestGroupsStaticRestartDowngrade: a rolling downgrade of static members. A classic
// franz-go member and a static member on the KIP-848 path (group.instance.id
// n-static) share six partitions; the static member shuts down (a static member's
// leave keeps its place and partitions for its session) and comes back on the classic
// protocol under the same instance id. It takes the place of its earlier incarnation,
// the group's last member of the consumer protocol, and the group is a classic group
// again, which both members share, as in Kafka. Throughout, no partition is owned by
// two members, and every record is processed.
func TestGroupsStaticRestartDowngrade(t *testing.T) {
	t.Parallel()
	// A consumer-protocol session long enough that the static member's place is still
	// held when it comes back.
	b := start848Broker(t, "group.consumer.session.timeout.ms=30000")
	adm := newAdmin(t, b)
	const topic, group = "static-downgrade", "static-downgrade"
	createTopic(t, adm, topic, 6, nil)
	produced := []map[int32][]string{produceSpread(t, b, topic, "a", 6, 20)}
	led := newLedger(t)
	hooks := &ownership{}
	classicOpts := []kgo.Opt{kgo.DisableAutoCommit(), kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond)}
	c0 := newKgoMember(t, b, "c0", group, topic, hooks, classicOpts...).run(commitLoop(t, "c0", led, 20))
	waitGroup(t, adm, group, topic, 30*time.Second, "a classic member on 6 partitions", func(v groupView) bool { return v.balanced(1, 6) })

	n0 := new848Member(t, b, "n0", group, topic, hooks, kgo.InstanceID("n-static")).run(commitLoop(t, "n0", led, 20))
	wait848(t, adm, group, topic, 30*time.Second, "a classic and a static consumer member on 6 partitions", func(v view848) bool { return v.balanced(2, 6) })
	if types, want := memberTypes(t, b, group), map[string]int8{c0.memberID(): 0, n0.memberID(): 1}; fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("member types after the upgrade: %v, want %v (0 classic, 1 consumer)", types, want)
	}
	produced = append(produced, produceSpread(t, b, topic, "b", 6, 20))
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 240 }, "the mixed group to process 240 records")

	// The static member restarts on the classic protocol.
	n0.close()
	hooks.releaseAll("n0")
	n1 := newKgoMember(t, b, "n1", group, topic, hooks, append(classicOpts, kgo.InstanceID("n-static"))...).run(commitLoop(t, "n1", led, 20))
	v := waitGroup(t, adm, group, topic, 30*time.Second, "the classic group back, 2 members on 6 partitions", func(v groupView) bool { return v.balanced(2, 6) })
	if len(v.Members[n1.memberID()]) == 0 || len(v.Members[c0.memberID()]) == 0 {
		t.Fatalf("classic group after the static restart: %+v, want partitions for both members", v)
	}
	produced = append(produced, produceSpread(t, b, topic, "c", 6, 20))
	all := mergeProduced(produced)
	waitProcessedAll(t, led, all)
	c0.close()
	n1.close()

	hooks.check(t)
	departed := led.processedBy("n0")
	checkAll(t, all, led.all(), departed)
}
