package integration

// Shared helpers for the consumer-group tests with the Go clients (groups_*_test.go).
//
// "Killing" an in-process client: a Go client cannot be kill -9'd on its own, so each
// member that a test may kill dials the broker through a killSwitch. Kill closes every
// connection the member has open and makes all later dials fail. From the broker's side
// that is what kill -9 of a consumer process looks like: its sockets close, no
// LeaveGroup and no further OffsetCommit ever arrive, and the member only leaves the
// group when its session times out. The client object itself is closed when the test
// ends (its attempts to leave or commit then fail to dial).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// startGroupBroker starts a broker tuned for fast group tests: no initial rebalance
// delay, session timeouts down to 100 ms, and a small __consumer_offsets topic.
func startGroupBroker(t *testing.T, extra ...string) *testutil.Broker {
	t.Helper()
	return testutil.StartBroker(t, append([]string{
		"group.initial.rebalance.delay.ms=0",
		"group.min.session.timeout.ms=100",
		"offsets.topic.num.partitions=4",
		// Share tests hold records for a second or two (Kafka's floor is 15 s).
		"group.share.min.record.lock.duration.ms=1000",
	}, extra...)...)
}

var errKilled = errors.New("test: member killed")

// killSwitch is a dialer whose connections can all be cut at once (see the file
// comment). It serves kgo.Dialer, sarama's Net.Proxy.Dialer and kafka-go's
// Dialer.DialFunc.
type killSwitch struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (k *killSwitch) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if k.killed() {
		return nil, errKilled
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		conn.Close()
		return nil, errKilled
	}
	k.conns = append(k.conns, conn)
	return conn, nil
}

// Dial implements golang.org/x/net/proxy.Dialer for sarama.
func (k *killSwitch) Dial(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return k.DialContext(ctx, network, addr)
}

func (k *killSwitch) killed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dead
}

// Kill closes every connection and refuses new ones.
func (k *killSwitch) Kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	k.cutLocked()
}

// Cut closes every connection; the client may dial again.
func (k *killSwitch) Cut() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cutLocked()
}

func (k *killSwitch) cutLocked() {
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

// groupView is what DescribeGroups says about a group, restricted to one topic.
type groupView struct {
	State    string
	Members  map[string][]int32 // member id -> sorted partitions of the topic assigned to it
	Instance map[string]string  // member id -> group.instance.id ("" if none)
	Client   map[string]string  // member id -> client.id
}

// describe returns the group as the broker describes it.
func describe(ctx context.Context, adm *kadm.Client, group, topic string) (groupView, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return groupView{}, err
	}
	g, ok := described[group]
	if !ok {
		return groupView{}, fmt.Errorf("group %s not described", group)
	}
	if g.Err != nil {
		return groupView{}, g.Err
	}
	v := groupView{State: g.State, Members: map[string][]int32{}, Instance: map[string]string{}, Client: map[string]string{}}
	for _, m := range g.Members {
		var ps []int32
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range a.Topics {
				if at.Topic == topic {
					ps = append(ps, at.Partitions...)
				}
			}
		}
		slices.Sort(ps)
		v.Members[m.MemberID] = ps
		v.Client[m.MemberID] = m.ClientID
		if m.InstanceID != nil {
			v.Instance[m.MemberID] = *m.InstanceID
		}
	}
	return v, nil
}

// balanced reports whether the group is Stable with exactly members members and every
// partition in [0, partitions) assigned to exactly one of them.
func (v groupView) balanced(members int, partitions int32) bool {
	if v.State != "Stable" || len(v.Members) != members {
		return false
	}
	owners := map[int32]int{}
	for _, ps := range v.Members {
		for _, p := range ps {
			owners[p]++
		}
	}
	if len(owners) != int(partitions) {
		return false
	}
	for p, n := range owners {
		if p < 0 || p >= partitions || n != 1 {
			return false
		}
	}
	return true
}

// owner returns the member that owns partition p, or "".
func (v groupView) owner(p int32) string {
	for m, ps := range v.Members {
		if slices.Contains(ps, p) {
			return m
		}
	}
	return ""
}

// idle returns the members with no partition.
func (v groupView) idle() []string {
	var out []string
	for m, ps := range v.Members {
		if len(ps) == 0 {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

func (v groupView) String() string {
	var parts []string
	for m, ps := range v.Members {
		parts = append(parts, fmt.Sprintf("%s%s=%v", m, map[bool]string{true: "(" + v.Instance[m] + ")"}[v.Instance[m] != ""], ps))
	}
	sort.Strings(parts)
	return v.State + " " + strings.Join(parts, " ")
}

// waitGroup waits until cond holds for the group's description and returns that view.
func waitGroup(t *testing.T, adm *kadm.Client, group, topic string, timeout time.Duration, what string, cond func(groupView) bool) groupView {
	t.Helper()
	return waitDescribed(t, group, timeout, what, func(ctx context.Context) (groupView, error) {
		return describe(ctx, adm, group, topic)
	}, cond)
}

// waitDescribed polls describe until cond holds for its answer and returns it; it
// fails the test with the last answer after timeout.
func waitDescribed[V any](t *testing.T, group string, timeout time.Duration, what string, describe func(context.Context) (V, error), cond func(V) bool) V {
	t.Helper()
	var last V
	var lastErr error
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := describe(ctx)
		cancel()
		if err == nil {
			last = v
			if cond(v) {
				return v
			}
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("group %s: timed out after %v waiting for %s; last view: %v (err %v)", group, timeout, what, last, lastErr)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// produceSpread produces perPartition records to each of partitions partitions and
// returns, per partition, the values in acknowledgement (= log) order. Values are
// "<prefix>-p<partition>-<i>".
func produceSpread(t *testing.T, b *testutil.Broker, topic, prefix string, partitions int32, perPartition int) map[int32][]string {
	t.Helper()
	c := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer c.Close()
	out := map[int32][]string{}
	var recs []*kgo.Record
	for i := 0; i < perPartition; i++ {
		for p := int32(0); p < partitions; p++ {
			v := fmt.Sprintf("%s-p%d-%04d", prefix, p, i)
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte(v)})
			out[p] = append(out[p], v)
		}
	}
	produceSync(t, c, recs...)
	return out
}

// seen is one record as a consumer processed it.
type seen struct {
	Member    string
	Partition int32
	Offset    int64
	Value     string
}

// ledger collects what the members of a test processed.
type ledger struct {
	mu   sync.Mutex
	recs []seen
}

func (l *ledger) add(s seen) {
	l.mu.Lock()
	l.recs = append(l.recs, s)
	l.mu.Unlock()
}

func (l *ledger) all() []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// processedBy returns the values members processed: those of members that left or
// were killed, which checkAll lets others process again.
func (l *ledger) processedBy(members ...string) map[string]bool {
	out := map[string]bool{}
	for _, s := range l.all() {
		if slices.Contains(members, s.Member) {
			out[s.Value] = true
		}
	}
	return out
}

// newLedger returns an empty ledger that logs what each member processed if the test
// fails.
func newLedger(t *testing.T) *ledger {
	l := &ledger{}
	l.dumpOnFailure(t)
	return l
}

// distinct returns how many different values were processed.
func (l *ledger) distinct() int {
	m := map[string]bool{}
	for _, s := range l.all() {
		m[s.Value] = true
	}
	return len(m)
}

// byMember returns the values each member processed.
func (l *ledger) byMember() map[string][]seen {
	out := map[string][]seen{}
	for _, s := range l.all() {
		out[s.Member] = append(out[s.Member], s)
	}
	return out
}

// checkAll asserts that every produced record was processed, that each member
// processed each partition in log order, and that no record outside allowedDup was
// processed more than once. A nil allowedDup allows no duplicates.
func checkAll(t *testing.T, produced map[int32][]string, recs []seen, allowedDup map[string]bool) {
	t.Helper()
	count := map[string]int{}
	for _, s := range recs {
		count[s.Value]++
	}
	for p, vs := range produced {
		for _, v := range vs {
			switch n := count[v]; {
			case n == 0:
				t.Fatalf("partition %d: record %s never processed", p, v)
			case n > 1 && !allowedDup[v]:
				t.Fatalf("partition %d: record %s processed %d times and it was not in the uncommitted tail", p, v, n)
			}
		}
	}
	// Within one member's run, a partition is read in log order: offsets only grow
	// (a member may legitimately re-read from a committed offset only after losing and
	// regaining the partition, which these tests' members do not do).
	last := map[string]int64{}
	for _, s := range recs {
		k := fmt.Sprintf("%s/%d", s.Member, s.Partition)
		if prev, ok := last[k]; ok && s.Offset <= prev {
			t.Fatalf("member %s partition %d: offset %d processed after %d", s.Member, s.Partition, s.Offset, prev)
		}
		last[k] = s.Offset
	}
}

// committedOffsets returns the group's committed offset per partition of topic.
func committedOffsets(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	res, err := adm.FetchOffsets(ctxT(t, 10*time.Second), group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	if err := res.Error(); err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	for p, r := range res[topic] {
		out[p] = r.At
	}
	return out
}

// waitDrained waits until the group's committed offsets reach the end of every
// partition of topic.
func waitDrained(t *testing.T, adm *kadm.Client, group, topic string, timeout time.Duration) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	var last kadm.OffsetResponses
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := adm.FetchOffsets(ctx, group)
		cancel()
		if err == nil && res.Error() == nil {
			last = res
			done := true
			ends.Each(func(e kadm.ListedOffset) {
				if r, ok := res.Lookup(topic, e.Partition); !ok || r.At != e.Offset {
					done = false
				}
			})
			if done {
				return
			}
		}
		if time.Now().After(deadline) {
			var got []string
			ends.Each(func(e kadm.ListedOffset) {
				r, _ := last.Lookup(topic, e.Partition)
				got = append(got, fmt.Sprintf("p%d %d/%d", e.Partition, r.At, e.Offset))
			})
			sort.Strings(got)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			v, err := describe(ctx, adm, group, topic)
			cancel()
			t.Fatalf("group %s: timed out after %v waiting to commit the end of %s (committed/end: %v; group: %v %v)", group, timeout, topic, got, v, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// checkResumed asserts that a member that took over from a killed one started every
// partition exactly at the committed offset (or had nothing to read there) and so
// re-processed the killed member's whole uncommitted tail.
func checkResumed(t *testing.T, produced map[int32][]string, committed map[int32]int64, tail map[string]bool, second []seen) {
	t.Helper()
	firstOffset := map[int32]int64{}
	for _, s := range second {
		if _, ok := firstOffset[s.Partition]; !ok {
			firstOffset[s.Partition] = s.Offset
		}
	}
	for p, vs := range produced {
		first, ok := firstOffset[p]
		switch {
		case ok && first != committed[p]:
			t.Fatalf("partition %d: new member started at offset %d, committed offset is %d", p, first, committed[p])
		case !ok && committed[p] != int64(len(vs)):
			t.Fatalf("partition %d: new member read nothing, committed offset %d of %d", p, committed[p], len(vs))
		}
	}
	again := map[string]bool{}
	for _, s := range second {
		again[s.Value] = true
	}
	for v := range tail {
		if !again[v] {
			t.Fatalf("uncommitted record %s processed by the killed member was not processed again", v)
		}
	}
}

// mergeProduced joins per-partition values produced in several rounds, in order.
func mergeProduced(rounds []map[int32][]string) map[int32][]string {
	all := map[int32][]string{}
	for _, round := range rounds {
		for p, vs := range round {
			all[p] = append(all[p], vs...)
		}
	}
	return all
}

// waitProcessedAll waits until the ledger holds every record of all.
func waitProcessedAll(t *testing.T, led *ledger, all map[int32][]string) {
	t.Helper()
	total := 0
	for _, vs := range all {
		total += len(vs)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == total }, fmt.Sprintf("the group to process all %d records", total))
}

// dumpOnFailure logs, if the test fails, which offsets each member processed.
func (l *ledger) dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for m, recs := range l.byMember() {
			per := map[int32][]int64{}
			for _, s := range recs {
				per[s.Partition] = append(per[s.Partition], s.Offset)
			}
			for p, offs := range per {
				t.Logf("%s processed partition %d offsets %v", m, p, offs)
			}
		}
	})
}

// ownership checks that no partition is owned by two live members at once, from the
// members' own rebalance callbacks.
type ownership struct {
	mu         sync.Mutex
	owner      map[int32]string
	violations []string
}

func (o *ownership) acquire(member string, ps []int32) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.owner == nil {
		o.owner = map[int32]string{}
	}
	for _, p := range ps {
		if cur, ok := o.owner[p]; ok && cur != member {
			o.violations = append(o.violations, fmt.Sprintf("partition %d assigned to %s while %s still owns it", p, member, cur))
		}
		o.owner[p] = member
	}
}

func (o *ownership) release(member string, ps []int32) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if o.owner[p] == member {
			delete(o.owner, p)
		}
	}
}

// releaseAll drops every partition member owns (after the member is closed it consumes
// nothing, whatever its callbacks said).
func (o *ownership) releaseAll(member string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for p, m := range o.owner {
		if m == member {
			delete(o.owner, p)
		}
	}
}

func (o *ownership) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.violations) > 0 {
		t.Fatalf("partitions owned twice: %s", strings.Join(o.violations, "; "))
	}
}

// readByOwners returns the ledger's records whose value starts with prefix and fails
// the test if any was read by a member other than its partition's owner.
func readByOwners(t *testing.T, led *ledger, prefix string, owner func(partition int32) string) []seen {
	t.Helper()
	var out []seen
	for _, s := range led.all() {
		if !strings.HasPrefix(s.Value, prefix) {
			continue
		}
		out = append(out, s)
		if want := owner(s.Partition); s.Member != want {
			t.Fatalf("record %s of partition %d read by %s, owner is %s", s.Value, s.Partition, s.Member, want)
		}
	}
	return out
}

// runFanOut starts two groups of two members each (start adds one member of group
// named name, recording into led) on a 3-partition topic and checks that each group
// reads every record once.
func runFanOut(t *testing.T, start func(b *testutil.Broker, name, group, topic string, led *ledger)) {
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic = "fanout"
	createTopic(t, adm, topic, 3, nil)

	ledgers := map[string]*ledger{"fan-a": {}, "fan-b": {}}
	for group, led := range ledgers {
		for i := 0; i < 2; i++ {
			start(b, fmt.Sprintf("%s-%d", group, i), group, topic, led)
		}
	}
	for group := range ledgers {
		waitGroup(t, adm, group, topic, 30*time.Second, "2 members sharing 3 partitions", func(v groupView) bool { return v.balanced(2, 3) })
	}
	produced := produceSpread(t, b, topic, "f", 3, 50)
	for group, led := range ledgers {
		testutil.WaitFor(t, 20*time.Second, func() bool { return led.distinct() == 150 }, group+" to read all 150 records")
		checkAll(t, produced, led.all(), nil)
	}
}

// waitStickyMove waits until the killed member's partitions have moved to the idle
// member, and fails if any other member's partitions moved too (sticky assignors).
func waitStickyMove(t *testing.T, adm *kadm.Client, group, topic string, v groupView, victimID, idle string) groupView {
	t.Helper()
	victimParts := v.Members[victimID]
	v2 := waitGroup(t, adm, group, topic, 30*time.Second, "the killed member's partitions to move to the idle member", func(nv groupView) bool {
		_, stillThere := nv.Members[victimID]
		return nv.balanced(3, 3) && !stillThere && slices.Equal(nv.Members[idle], victimParts)
	})
	for id, ps := range v2.Members {
		if id != idle && !slices.Equal(ps, v.Members[id]) {
			t.Fatalf("member %s went from %v to %v; only the killed member's partitions should move", id, v.Members[id], ps)
		}
	}
	return v2
}

// checkReadAfterKill produces 20 more records per partition and checks that the group
// reads them all, each by its partition's owner.
func checkReadAfterKill(t *testing.T, b *testutil.Broker, led *ledger, topic string, owner func(partition int32) string) {
	t.Helper()
	second := produceSpread(t, b, topic, "b", 3, 20)
	testutil.WaitFor(t, 20*time.Second, func() bool {
		n := 0
		for _, s := range led.all() {
			if strings.HasPrefix(s.Value, "b-") {
				n++
			}
		}
		return n >= 60
	}, "the group to read the next 60 records after the kill")
	checkAll(t, second, readByOwners(t, led, "b-", owner), nil)
}
