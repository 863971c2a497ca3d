package conformance

// The online upgrade of a group from the classic protocol to KIP-848's consumer
// protocol, with members of each external client: Kafka 4's rolling upgrade, where a
// group of Java, librdkafka or kafkajs consumers meets its first member on the new
// protocol and goes back to the classic protocol when that member leaves.

import (
	"context"
	"fmt"
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

// upgradePerKey is the records per key of each phase; numKeys' ten keys fall in all
// six partitions (murmur2: one to three keys each).
const upgradePerKey = 10

// groupOnlineUpgrade: two members of the client share a 6-partition topic as a
// classic group (the client's default assignor); a franz-go member on the consumer
// protocol joins and the group becomes a consumer group in which the two keep
// going as classic members while the coordinator assigns; the franz-go member leaves
// and the group is a classic group again. Every record of each phase is consumed.
func groupOnlineUpgrade(t *testing.T, tg *target, c groupClient) {
	const parts = 6
	topic := tg.topic("gupgrade", c.name)
	createTopic(t, tg, c.client, topic, parts)
	group := tg.group(c, "upgrade")
	opts := memberOptions{group: group, topic: topic, commit: true}
	clients := []*member{startMember(t, tg, c.client, "a", opts), startMember(t, tg, c.client, "b", opts)}

	// 1. A classic group of the client's two members.
	produceWithKgo(t, tg, topic, "classic", numKeys, upgradePerKey)
	waitClassic(t, tg, group, topic, clients, parts, "the two "+c.name+" members Stable on 6 partitions (classic)")
	waitTag(t, "classic", clients, nil)

	// 2. A member on the consumer protocol joins: the group becomes a consumer group.
	fg := startConsumerMember(t, tg, group, topic)
	var last consumerView
	waitUntil(t, "a consumer group of the two classic members and the franz-go consumer member, every partition assigned once", func() string {
		last = describeConsumer(t, tg, group, topic)
		if problem := last.settled(fg.memberID(), 2, parts); problem != "" {
			return problem
		}
		if problem := ownedOnce(clients, fg, parts); problem != "" {
			return "members' callbacks: " + problem
		}
		return ""
	})
	t.Logf("after the upgrade: %s", last)
	produceWithKgo(t, tg, topic, "mixed", numKeys, upgradePerKey)
	waitTag(t, "mixed", clients, fg)
	if !slices.ContainsFunc(fg.records(), func(r record) bool { return strings.HasPrefix(*r.Value, "mixed|") }) {
		t.Errorf("the franz-go member, owning %v, consumed none of the records produced after the upgrade", fg.owned())
	}
	waitUntil(t, "the mixed group's commits to reach the end of every partition", func() string {
		return committedToEnd(t, tg, group, topic, parts)
	})

	// 3. The consumer member leaves: the group is a classic group again.
	fg.close()
	waitClassic(t, tg, group, topic, clients, parts, "the two "+c.name+" members Stable on 6 partitions (classic again)")
	produceWithKgo(t, tg, topic, "downgraded", numKeys, upgradePerKey)
	waitTag(t, "downgraded", clients, nil)
	waitUntil(t, "the classic group's commits to reach the end of every partition", func() string {
		return committedToEnd(t, tg, group, topic, parts)
	})
	for _, m := range clients {
		if errs := m.errors(); len(errs) > 0 {
			t.Logf("%s reported (rebalances fail commits in flight): %v", m.name, errs)
		}
	}
}

// waitClassic waits until DescribeGroups shows the group as a classic group, Stable,
// of exactly the given members, every partition assigned once both by the broker
// and by the members' own callbacks.
func waitClassic(t *testing.T, tg *target, group, topic string, members []*member, parts int, what string) {
	t.Helper()
	waitUntil(t, what, func() string {
		if problem := describeClassic(t, tg, group, topic, len(members), parts); problem != "" {
			return problem
		}
		if _, problem := ownership(members, parts); problem != "" {
			return "members' callbacks: " + problem + "; " + describe(members)
		}
		return ""
	})
}

// waitUntil polls check until it returns "" and fails the test with its last answer
// after rebalanceWait.
func waitUntil(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(rebalanceWait)
	for {
		problem := check()
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", rebalanceWait, what, problem)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// describeClassic returns what keeps the group from being a Stable classic group of
// n members sharing the topic's partitions ("" when it is one).
func describeClassic(t *testing.T, tg *target, group, topic string, n, parts int) string {
	t.Helper()
	adm, done := admin(t, tg)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return "DescribeGroups: " + err.Error()
	}
	g := described[group]
	if g.Err != nil {
		return fmt.Sprintf("DescribeGroups: %v %s", g.Err, g.ErrMessage)
	}
	if g.State != "Stable" || g.ProtocolType != "consumer" || len(g.Members) != n {
		return fmt.Sprintf("state %s, protocol type %q, %d members", g.State, g.ProtocolType, len(g.Members))
	}
	seen := map[int32]string{}
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return "member " + m.MemberID + " has no consumer assignment"
		}
		for _, at := range a.Topics {
			if at.Topic != topic {
				continue
			}
			for _, p := range at.Partitions {
				if prev, dup := seen[p]; dup {
					return fmt.Sprintf("partition %d assigned to %s and %s", p, prev, m.MemberID)
				}
				seen[p] = m.MemberID
			}
		}
	}
	if len(seen) != parts {
		return fmt.Sprintf("%d of %d partitions assigned: %v", len(seen), parts, seen)
	}
	return ""
}

// committedToEnd returns what keeps the group's committed offsets from being the end
// offsets of the topic's partitions ("" when they are): the members commit what they
// consume, classic members of a consumer group included.
func committedToEnd(t *testing.T, tg *target, group, topic string, parts int) string {
	t.Helper()
	adm, done := admin(t, tg)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return "OffsetFetch: " + err.Error()
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return "ListOffsets: " + err.Error()
	}
	var behind []string
	for p := range int32(parts) {
		end, _ := ends.Lookup(topic, p)
		c, ok := committed.Lookup(topic, p)
		if !ok || c.At != end.Offset {
			behind = append(behind, fmt.Sprintf("p%d committed %d of %d", p, c.At, end.Offset))
		}
	}
	return strings.Join(behind, ", ")
}

// consumerView is the group as ConsumerGroupDescribe shows it.
type consumerView struct {
	err     string
	state   string
	epoch   int32
	members []consumerViewMember
}

type consumerViewMember struct {
	id, clientID string
	typ          int8 // 0 classic protocol, 1 consumer protocol
	epoch        int32
	assigned     []int32 // of the topic, current
	target       []int32
}

func (v consumerView) String() string {
	if v.err != "" {
		return v.err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s at epoch %d:", v.state, v.epoch)
	for _, m := range v.members {
		fmt.Fprintf(&b, " %s(%s type %d epoch %d owns %v target %v)", m.id, m.clientID, m.typ, m.epoch, m.assigned, m.target)
	}
	return b.String()
}

// settled returns what keeps the group from being a Stable consumer group of the
// consumer-protocol member consumerID and classic classic members, each member at
// the group epoch and every partition assigned once ("" when it is one).
func (v consumerView) settled(consumerID string, classic, parts int) string {
	if v.err != "" {
		return v.err
	}
	if v.state != "Stable" || len(v.members) != classic+1 {
		return v.String()
	}
	seen := map[int32]bool{}
	for _, m := range v.members {
		wantType := int8(0)
		if m.id == consumerID {
			wantType = 1
		}
		if m.typ != wantType || m.epoch != v.epoch || !slices.Equal(m.assigned, m.target) {
			return v.String()
		}
		for _, p := range m.assigned {
			if seen[p] {
				return fmt.Sprintf("partition %d assigned twice: %s", p, v)
			}
			seen[p] = true
		}
	}
	if len(seen) != parts {
		return v.String()
	}
	return ""
}

func describeConsumer(t *testing.T, tg *target, group, topic string) consumerView {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return consumerView{err: "ConsumerGroupDescribe: " + err.Error()}
	}
	if resp.Version < 1 {
		t.Fatalf("ConsumerGroupDescribe v%d: MemberType needs v1", resp.Version)
	}
	if len(resp.Groups) != 1 {
		return consumerView{err: fmt.Sprintf("ConsumerGroupDescribe: %d groups", len(resp.Groups))}
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return consumerView{err: fmt.Sprintf("ConsumerGroupDescribe: %v %v", err, g.ErrorMessage)}
	}
	v := consumerView{state: g.State, epoch: g.Epoch}
	of := func(a kmsg.Assignment) []int32 {
		var out []int32
		for _, tp := range a.TopicPartitions {
			if tp.Topic == topic {
				out = append(out, tp.Partitions...)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, m := range g.Members {
		v.members = append(v.members, consumerViewMember{id: m.MemberID, clientID: m.ClientID, typ: m.MemberType,
			epoch: m.MemberEpoch, assigned: of(m.Assignment), target: of(m.TargetAssignment)})
	}
	return v
}

// ownedOnce returns what keeps the partitions [0, parts) from being owned once each
// by the members' and the franz-go member's own callbacks ("" when they are).
func ownedOnce(members []*member, fg *consumerMember, parts int) string {
	owners := map[int32]string{}
	own := func(name string, ps []int32) string {
		for _, p := range ps {
			if prev, dup := owners[p]; dup {
				return fmt.Sprintf("partition %d owned by %s and %s", p, prev, name)
			}
			owners[p] = name
		}
		return ""
	}
	for _, m := range members {
		if problem := own(m.name, m.owned()); problem != "" {
			return problem
		}
	}
	if problem := own("franz-go", fg.owned()); problem != "" {
		return problem
	}
	for p := range int32(parts) {
		if owners[p] == "" {
			return fmt.Sprintf("partition %d unowned", p)
		}
	}
	if len(owners) != parts {
		return fmt.Sprintf("partitions %v owned, want [0,%d)", owners, parts)
	}
	return ""
}

// waitTag waits until the members and fg (if not nil) have consumed every record
// produced with tag, at least once as a group, and checks them.
func waitTag(t *testing.T, tag string, members []*member, fg *consumerMember) {
	t.Helper()
	tagged := func() []record {
		var all []record
		for _, m := range members {
			all = append(all, m.records()...)
		}
		if fg != nil {
			all = append(all, fg.records()...)
		}
		var out []record
		for _, r := range distinct(all) {
			if r.Value != nil && strings.HasPrefix(*r.Value, tag+"|") {
				out = append(out, r)
			}
		}
		return out
	}
	testutil.WaitFor(t, rebalanceWait, func() bool { return len(tagged()) >= numKeys*upgradePerKey },
		fmt.Sprintf("the group to consume every %q record", tag))
	verifyRecords(t, tag, numKeys, upgradePerKey, true, nil, byPartitionOffset(tagged()))
}

func admin(t *testing.T, tg *target) (*kadm.Client, func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.addr))
	if err != nil {
		t.Fatal(err)
	}
	return kadm.NewClient(cl), cl.Close
}

// consumerMember is a franz-go group member on the consumer protocol (KIP-848), in
// the test process; it commits as franz-go does by default (autocommit, and on
// revocation). Its accessors are safe for concurrent use.
type consumerMember struct {
	cl   *kgo.Client
	done chan struct{}

	mu struct {
		sync.Mutex
		owned   map[int32]bool
		records []record
	}
	closeOnce sync.Once
}

func startConsumerMember(t *testing.T, tg *target, group, topic string) *consumerMember {
	t.Helper()
	m := &consumerMember{done: make(chan struct{})}
	m.mu.owned = map[int32]bool{}
	set := func(ps map[string][]int32, own bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range ps[topic] {
			if own {
				m.mu.owned[p] = true
			} else {
				delete(m.mu.owned, p)
			}
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.addr), kgo.ClientID("samsa-conformance-franz-go"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { set(ps, true) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			// What kgo does on a revocation when autocommitting without this callback.
			_ = cl.CommitUncommittedOffsets(ctx)
			set(ps, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { set(ps, false) }),
	)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go m.poll()
	t.Cleanup(m.close)
	return m
}

func (m *consumerMember) poll() {
	defer close(m.done)
	for {
		fs := m.cl.PollFetches(context.Background())
		if fs.IsClientClosed() {
			return
		}
		fs.EachRecord(func(r *kgo.Record) {
			key, value := string(r.Key), string(r.Value)
			rec := record{Partition: r.Partition, Offset: r.Offset, Key: &key, Value: &value, Headers: map[string]string{}}
			for _, h := range r.Headers {
				rec.Headers[h.Key] = string(h.Value)
			}
			m.mu.Lock()
			m.mu.records = append(m.mu.records, rec)
			m.mu.Unlock()
		})
	}
}

// memberID is the member id the client made for itself (KIP-848: the client's).
func (m *consumerMember) memberID() string {
	id, _ := m.cl.GroupMetadata()
	return id
}

func (m *consumerMember) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.mu.owned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (m *consumerMember) records() []record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.records)
}

// close leaves the group (a ConsumerGroupHeartbeat with epoch -1) and closes the
// client.
func (m *consumerMember) close() {
	m.closeOnce.Do(func() {
		m.cl.Close()
		<-m.done
	})
}
