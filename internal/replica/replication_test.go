package replica

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// node is one broker's replica of partition 0 of topic "t".
type node struct {
	id int32
	p  *Partition
}

func newNode(t *testing.T, id int32) *node {
	t.Helper()
	log, err := storage.Open(storage.Options{Dir: t.TempDir(), Topic: "t", Partition: 0,
		Config: storage.DefaultConfig(), Clock: clock.NewFake(time.Unix(1_700_000_000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	p := NewPartition("t", 0, [16]byte{1}, log, id)
	p.SetSettings(Settings{MaxMessageBytes: 1 << 20, MinInsyncReplicas: 2})
	return &node{id: id, p: p}
}

func (n *node) apply(t *testing.T, s State, now time.Time) Change {
	t.Helper()
	ch, err := n.p.Apply(s, now)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// cluster routes follower fetches to whichever node leads, in process.
type cluster struct {
	mu    sync.Mutex
	nodes map[int32]*node
	clock *clock.Fake // the leaders' view of time, for the ISR rules
}

func (c *cluster) Dial(leader int32) (LeaderClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[leader]
	if n == nil {
		return nil, errors.New("no such node")
	}
	return &localClient{leader: n, clock: c.clock}, nil
}

// localClient is a LeaderClient over a leader node's ServeFollower, waiting for new
// records up to MaxWait like a leader does.
type localClient struct {
	leader *node
	clock  *clock.Fake
}

func (c *localClient) Close() {}

func (c *localClient) Fetch(ctx context.Context, req *FetchRequest) ([]FetchResult, error) {
	p := c.leader.p
	wake := make(chan struct{}, 1)
	p.WaitLogEnd(wake)
	out := c.serve(req)
	if len(out) == 1 && out[0].Err == nil && len(out[0].Records) == 0 && out[0].DivergingEpoch < 0 && out[0].DivergingEndOffset < 0 {
		select {
		case <-wake:
		case <-time.After(req.MaxWait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		out = c.serve(req)
	}
	return out, nil
}

func (c *localClient) serve(req *FetchRequest) []FetchResult {
	var out []FetchResult
	for _, fp := range req.Partitions {
		read, _, err := c.leader.p.ServeFollower(req.ReplicaID, req.BrokerEpoch, fp, int(fp.MaxBytes), true, nil, c.clock.Now())
		r := FetchResult{Topic: fp.Topic, Partition: fp.Partition, HighWatermark: read.HighWatermark,
			LogStartOffset: read.LogStartOffset, DivergingEpoch: read.DivergingEpoch, DivergingEndOffset: read.DivergingEndOffset}
		if !read.Diverging {
			r.DivergingEpoch, r.DivergingEndOffset = -1, -1
		}
		switch {
		case err == nil:
			for _, rg := range read.Ranges {
				b := make([]byte, rg.Len)
				if _, err := rg.File.ReadAt(b, rg.Pos); err != nil {
					panic(err)
				}
				r.Records = append(r.Records, b...)
			}
		case errors.Is(err, ErrFetchOffsetOutOfRange), errors.Is(err, ErrFencedLeaderEpoch),
			errors.Is(err, ErrUnknownLeaderEpoch), errors.Is(err, ErrNotLeader):
			r.Err = err
		default:
			r.Err = ErrRetriable
		}
		out = append(out, r)
	}
	return out
}

func newCluster(t *testing.T, ids ...int32) (*cluster, map[int32]*FetcherManager) {
	c := &cluster{nodes: map[int32]*node{}, clock: clock.NewFake(time.Unix(1_700_000_000, 0))}
	managers := map[int32]*FetcherManager{}
	for _, id := range ids {
		c.nodes[id] = newNode(t, id)
		m := NewFetcherManager(FetcherConfig{LocalNode: id, Dial: c.Dial, MaxWait: 50 * time.Millisecond, MinBytes: 1,
			MaxBytes: 10 << 20, PartitionMaxBytes: 1 << 20, Backoff: 20 * time.Millisecond})
		t.Cleanup(m.Close)
		managers[id] = m
	}
	return c, managers
}

// applyAll gives every node the state, starting or stopping fetchers as a broker does.
func (c *cluster) applyAll(t *testing.T, managers map[int32]*FetcherManager, s State) {
	t.Helper()
	for id, n := range c.nodes {
		ch := n.apply(t, s, c.clock.Now())
		switch {
		case ch.BecameLeader, ch.Leaderless:
			managers[id].Unfollow(n.p)
		case ch.BecameFollower:
			managers[id].Follow(n.p, ch.Leader, ch.Epoch)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// logBytes returns a log's batches, byte for byte.
func logBytes(t *testing.T, p *Partition) []byte {
	t.Helper()
	b, err := p.Log.ReadBytes(p.Log.LogStartOffset(), math.MaxInt32, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameLogs reports whether two logs hold the same batches. A log that a follower is
// cutting while it is read (the read runs into the cut: io.EOF) is not the same yet.
func sameLogs(a, b *Partition) bool {
	x, errA := a.Log.ReadBytes(a.Log.LogStartOffset(), math.MaxInt32, math.MaxInt64)
	y, errB := b.Log.ReadBytes(b.Log.LogStartOffset(), math.MaxInt32, math.MaxInt64)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// TestFollowersReplicateAndTheHighWatermarkFollowsTheISR: followers copy the leader's
// batches byte for byte; the high watermark reaches an offset only once every ISR
// member has it, and followers take it from the leader.
func TestFollowersReplicateAndTheHighWatermarkFollowsTheISR(t *testing.T) {
	c, managers := newCluster(t, 1, 2, 3)
	s := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	c.applyAll(t, managers, s)
	leader := c.nodes[1].p
	managers[3].Unfollow(c.nodes[3].p) // node 3 is down for now
	for range 5 {
		if _, err := leader.AppendAsLeader(batch(t, 4), true, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "node 2 to copy the batches", func() bool { return c.nodes[2].p.Log.LogEndOffset() == 20 })
	if hw := leader.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d with an ISR member (3) holding nothing", hw)
	}
	managers[3].Follow(c.nodes[3].p, 1, 1)
	waitUntil(t, "the high watermark to cover everything", func() bool { return leader.HighWatermark() == 20 })
	waitUntil(t, "the followers to take the high watermark", func() bool {
		return c.nodes[2].p.HighWatermark() == 20 && c.nodes[3].p.HighWatermark() == 20
	})
	want := logBytes(t, leader)
	for _, id := range []int32{2, 3} {
		if got := logBytes(t, c.nodes[id].p); !bytes.Equal(got, want) {
			t.Fatalf("node %d's log differs from the leader's (%d vs %d bytes)", id, len(got), len(want))
		}
		if e := c.nodes[id].p.Log.LatestEpoch(); e != 1 {
			t.Fatalf("node %d: latest epoch %d, want the leader's 1", id, e)
		}
	}
}

// TestISRShrinksAndExpands: a follower that stops fetching for longer than the lag
// limit is proposed out of the ISR, and the high watermark stops waiting for it once
// the change is in the metadata; when it catches up again it is proposed back in.
func TestISRShrinksAndExpands(t *testing.T) {
	c, managers := newCluster(t, 1, 2, 3)
	s := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	c.applyAll(t, managers, s)
	leader := c.nodes[1].p
	if _, err := leader.AppendAsLeader(batch(t, 2), true, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the high watermark", func() bool { return leader.HighWatermark() == 2 })
	if _, ok := leader.ProposeISR(c.clock.Now(), 30*time.Second, nil); ok {
		t.Fatal("an ISR change proposed with every follower caught up")
	}

	managers[3].Unfollow(c.nodes[3].p)
	if _, err := leader.AppendAsLeader(batch(t, 2), true, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "node 2 to catch up", func() bool { return c.nodes[2].p.Log.LogEndOffset() == 4 })
	c.clock.Advance(31 * time.Second)
	var change ISRChange
	var ok bool
	waitUntil(t, "a proposal without node 3 once node 2 fetched after the clock moved", func() bool {
		change, ok = leader.ProposeISR(c.clock.Now(), 30*time.Second, nil)
		if ok && !slices.Equal(change.Removed, []int32{3}) {
			leader.CancelISR() // node 2 has not fetched since the clock moved
			return false
		}
		return ok
	})
	if !slices.Equal(change.ISR, []int32{1, 2}) {
		t.Fatalf("proposal %+v, want node 3 out", change)
	}
	if _, again := leader.ProposeISR(c.clock.Now(), 30*time.Second, nil); again {
		t.Fatal("a second change proposed while one is in flight")
	}
	if hw := leader.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d before the shrink committed; node 3 holds 2", hw)
	}
	s.PartitionEpoch, s.ISR = 2, change.ISR
	c.applyAll(t, managers, s)
	managers[3].Unfollow(c.nodes[3].p) // still down
	waitUntil(t, "the high watermark without node 3", func() bool { return leader.HighWatermark() == 4 })

	managers[3].Follow(c.nodes[3].p, 1, 1)
	waitUntil(t, "node 3 to catch up", func() bool { return c.nodes[3].p.Log.LogEndOffset() == 4 })
	var back ISRChange
	waitUntil(t, "node 3 proposed back into the ISR", func() bool {
		leader.CancelISR()
		back, ok = leader.ProposeISR(c.clock.Now(), 30*time.Second, nil)
		return ok
	})
	if !slices.Equal(back.ISR, []int32{1, 2, 3}) || !slices.Equal(back.Added, []int32{3}) || back.PartitionEpoch != 2 {
		t.Fatalf("expansion %+v", back)
	}
}

// replicatedThenCut starts nodes 1 (leader in epoch 1) and 2 (follower), waits for
// node 2 to copy a first batch of 3 records, then stops node 2 fetching.
func replicatedThenCut(t *testing.T) (*cluster, map[int32]*FetcherManager, *Partition, *Partition) {
	t.Helper()
	c, managers := newCluster(t, 1, 2)
	a, b := c.nodes[1].p, c.nodes[2].p
	s := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	c.applyAll(t, managers, s)
	if _, err := a.AppendAsLeader(batch(t, 3), true, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "node 2 to copy the first batch", func() bool { return b.Log.LogEndOffset() == 3 })
	managers[2].Unfollow(b)
	return c, managers, a, b
}

// TestDivergentTailIsTruncated: a former leader holding records the new leader never
// got (written in its epoch, never replicated) cuts them off before it follows, then
// copies the new leader's log: both end up identical.
func TestDivergentTailIsTruncated(t *testing.T) {
	c, managers, a, b := replicatedThenCut(t) // what node 1 writes now stays its own
	for range 2 {
		if _, err := a.AppendAsLeader(batch(t, 5), false, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// Node 2 becomes leader in epoch 2 and writes other records; node 1 follows it.
	s := State{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{2}}
	c.applyAll(t, managers, s)
	if _, err := b.AppendAsLeader(batch(t, 7), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "node 1 to converge on node 2's log", func() bool { return sameLogs(a, b) })
	if end := a.Log.LogEndOffset(); end != 10 {
		t.Fatalf("node 1 ends at %d, want 10 (3 common + 7 of epoch 2)", end)
	}
	if got := a.Log.EpochEntries(); len(got) != 2 || got[0] != (storage.EpochEntry{Epoch: 1, StartOffset: 0}) ||
		got[1] != (storage.EpochEntry{Epoch: 2, StartOffset: 3}) {
		t.Fatalf("node 1's epochs %v", got)
	}
}

// TestFollowerDropsAnEpochItLedWithoutAppending: a replica made leader in an epoch
// it appended nothing in (a broker restarting reads, before the record that moves
// the leadership on, that it leads: the controller elected it while it was down)
// has that epoch as its latest; following the next leader, which never had it, it
// drops the epoch when told its fetches diverge, and then copies the leader's log.
func TestFollowerDropsAnEpochItLedWithoutAppending(t *testing.T) {
	c, managers, a, b := replicatedThenCut(t) // node 2 is down; node 1 writes on
	if _, err := a.AppendAsLeader(batch(t, 5), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Node 2, back, leads epoch 2 for a moment (node 1 never saw it), then follows
	// node 1 in epoch 3.
	if ch := c.nodes[2].apply(t, State{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, c.clock.Now()); !ch.BecameLeader {
		t.Fatalf("node 2: change %+v, want leader", ch)
	}
	if e := b.Log.LatestEpoch(); e != 2 {
		t.Fatalf("node 2's latest epoch %d, want 2, assigned at its log end", e)
	}
	c.applyAll(t, managers, State{Leader: 1, LeaderEpoch: 3, PartitionEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1}})
	if _, err := a.AppendAsLeader(batch(t, 2), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "node 2 to converge on node 1's log", func() bool { return sameLogs(a, b) })
	want := []storage.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 8}}
	if got := b.Log.EpochEntries(); !slices.Equal(got, want) {
		t.Fatalf("node 2's epochs %v, want %v", got, want)
	}
}

// TestAckStateAndLeadership: an acks=all produce that reached the high watermark fails
// when the ISR fell below min.insync.replicas meanwhile, or when the leadership moved.
func TestAckStateAndLeadership(t *testing.T) {
	n := newNode(t, 1)
	now := time.Now()
	n.apply(t, State{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
	if err := n.p.AckState(5); err != nil {
		t.Fatalf("ISR 2 ≥ min 2: %v", err)
	}
	n.apply(t, State{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1}}, now)
	if err := n.p.AckState(5); !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("ISR 1 < min 2: %v", err)
	}
	if _, err := n.p.AppendAsLeader(batch(t, 1), true, now); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with ISR 1 < min 2: %v", err)
	}
	ch := n.apply(t, State{Leader: 2, LeaderEpoch: 6, PartitionEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{2}}, now)
	if !ch.BecameFollower || ch.Leader != 2 {
		t.Fatalf("change %+v, want follower of 2", ch)
	}
	if err := n.p.AckState(5); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("after the leadership moved: %v", err)
	}
	// An older state is ignored.
	if ch := n.apply(t, State{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 9, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now); ch != (Change{}) || n.p.Leader() != 2 {
		t.Fatalf("a stale state was applied: %+v, leader %d", ch, n.p.Leader())
	}
}

// TestFollowerBehindLogStartStartsOver: a follower whose log ends before the leader's
// log start (the leader deleted what it lacks) starts over at the leader's log start.
func TestFollowerBehindLogStartStartsOver(t *testing.T) {
	c, managers := newCluster(t, 1, 2)
	a, b := c.nodes[1].p, c.nodes[2].p
	s := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}
	c.applyAll(t, managers, s)
	managers[2].Unfollow(b)
	for range 3 {
		if _, err := a.AppendAsLeader(batch(t, 4), false, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Log.DeleteRecordsBefore(8); err != nil {
		t.Fatal(err)
	}
	managers[2].Follow(b, 1, 1)
	waitUntil(t, "node 2 to hold the leader's records from its log start", func() bool {
		return b.Log.LogStartOffset() == 8 && b.Log.LogEndOffset() == 12
	})
}

// TestReadReplicas: a leader sends a consumer only to a follower in the ISR that holds
// the consumer's fetch offset (KIP-392), as its fetches report it.
func TestReadReplicas(t *testing.T) {
	n := newNode(t, 1)
	now := time.Now()
	n.apply(t, State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1, 2, 3}}, now)
	if _, err := n.p.AppendAsLeader(batch(t, 10), false, now); err != nil {
		t.Fatal(err)
	}
	fetch := func(id int32, offset, logStart int64) {
		t.Helper()
		fp := FetchPartition{CurrentLeaderEpoch: 1, FetchOffset: offset, LastFetchedEpoch: -1, LogStartOffset: logStart}
		if _, _, err := n.p.ServeFollower(id, -1, fp, 1<<20, true, nil, now); err != nil {
			t.Fatalf("fetch of node %d: %v", id, err)
		}
	}
	ids := func(rs []ReadReplica) []int32 {
		var out []int32
		for _, r := range rs {
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := n.p.ReadReplicas(0); len(got) != 0 {
		t.Fatalf("read replicas before any follower fetched: %v", got)
	}
	fetch(2, 10, 0)
	fetch(3, 4, 0)
	fetch(4, 10, 0) // caught up, but not in the ISR
	if got := ids(n.p.ReadReplicas(5)); !slices.Equal(got, []int32{2}) {
		t.Fatalf("read replicas for offset 5: %v, want [2] (3 ends at 4, 4 is out of the ISR)", got)
	}
	if got := ids(n.p.ReadReplicas(4)); !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("read replicas for offset 4: %v, want [2 3]", got)
	}
	fetch(2, 10, 6) // node 2 deleted its records below 6
	if got := ids(n.p.ReadReplicas(4)); !slices.Equal(got, []int32{3}) {
		t.Fatalf("read replicas for offset 4 after node 2's log start moved to 6: %v, want [3]", got)
	}
	n.apply(t, State{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1, 2, 3}}, now)
	if got := n.p.ReadReplicas(4); got != nil {
		t.Fatalf("a follower answered read replicas %v", got)
	}
}

// TestHighWatermarkBehindNewEpoch: a leader just elected whose high watermark has not
// reached the start of its epoch says so (KIP-207's OFFSET_NOT_AVAILABLE) until its
// followers' positions raise it.
func TestHighWatermarkBehindNewEpoch(t *testing.T) {
	n := newNode(t, 1)
	now := time.Now()
	n.apply(t, State{Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
	if _, err := n.p.AppendAsFollower(batch(t, 5)); err != nil {
		t.Fatal(err)
	}
	if err := n.p.CheckHighWatermarkCaughtUp(); err != nil {
		t.Fatalf("a follower: %v", err)
	}
	n.apply(t, State{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
	if err := n.p.CheckHighWatermarkCaughtUp(); !errors.Is(err, ErrOffsetNotAvailable) {
		t.Fatalf("a new leader with high watermark %d below its epoch start 5: %v", n.p.HighWatermark(), err)
	}
	fp := FetchPartition{CurrentLeaderEpoch: 2, FetchOffset: 5, LastFetchedEpoch: -1, LogStartOffset: 0}
	if _, _, err := n.p.ServeFollower(2, -1, fp, 1<<20, true, nil, now); err != nil {
		t.Fatal(err)
	}
	if err := n.p.CheckHighWatermarkCaughtUp(); err != nil || n.p.HighWatermark() != 5 {
		t.Fatalf("after the follower's fetch at 5: high watermark %d, %v", n.p.HighWatermark(), err)
	}
}

// TestFollowerRetriesQuicklyWhileTheLeaderCatchesUp: a follower that learns of a new
// leadership before the leader does has its first fetches refused (the leader does
// not lead yet). It fetches again within milliseconds — the backoff starts small and
// doubles — not after replica.fetch.backoff.ms, which would hold the high watermark,
// and every acks=all produce, for that long.
func TestFollowerRetriesQuicklyWhileTheLeaderCatchesUp(t *testing.T) {
	c := &cluster{nodes: map[int32]*node{1: newNode(t, 1), 2: newNode(t, 2)}, clock: clock.NewFake(time.Unix(1_700_000_000, 0))}
	follower := NewFetcherManager(FetcherConfig{LocalNode: 2, Dial: c.Dial, MaxWait: 50 * time.Millisecond, MinBytes: 1,
		MaxBytes: 10 << 20, PartitionMaxBytes: 1 << 20, Backoff: time.Minute})
	t.Cleanup(follower.Close)
	s := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	ch := c.nodes[2].apply(t, s, c.clock.Now())
	follower.Follow(c.nodes[2].p, ch.Leader, ch.Epoch)
	time.Sleep(100 * time.Millisecond) // fetches refused meanwhile: node 1 does not lead yet
	c.nodes[1].apply(t, s, c.clock.Now())
	if _, err := c.nodes[1].p.AppendAsLeader(batch(t, 3), true, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the follower to copy the leader's first batch", func() bool { return c.nodes[2].p.Log.LogEndOffset() == 3 })
}

// TestFollowerAppendRacingLeadership: a follower's append of its old leader's batches
// and its own election race; whichever comes first, the new leader's epoch starts
// after every batch of the old epoch in its log. Before, an append that passed its
// leadership check just before the election landed after the new epoch's start, and
// followers told to cut back to that start fetched the same batches and cut them again
// forever.
func TestFollowerAppendRacingLeadership(t *testing.T) {
	b, err := record.Build(record.BuildOptions{PartitionLeaderEpoch: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}, {OffsetDelta: 2, Value: []byte("c")}})
	if err != nil {
		t.Fatal(err)
	}
	follow := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	lead := State{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	for i := range 300 {
		n := newNode(t, 2)
		n.apply(t, follow, time.Now())
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, _ = n.p.AppendAsFollower(b) // ErrNotLeader when the election came first
		}()
		go func() {
			defer wg.Done()
			<-start
			_, _ = n.p.Apply(lead, time.Now())
		}()
		close(start)
		wg.Wait()
		end := n.p.Log.LogEndOffset()
		if got := n.p.Log.EpochEntries(); len(got) == 0 || got[len(got)-1] != (storage.EpochEntry{Epoch: 2, StartOffset: end}) {
			t.Fatalf("round %d: the log ends at %d with epochs %v; want epoch 2 to start at %d, after the batches of epoch 1", i, end, got, end)
		}
	}
}

// TestISRChangeOfUnknownOutcomeStaysCounted: an ISR expansion whose AlterPartition got
// no answer (RetryISR) may have been committed, so the high watermark keeps waiting for
// the member it adds, and the change is proposed again; only a refusal (CancelISR)
// stops counting it. Forgetting it on a timeout let a leader acknowledge records the
// added member lacked, which were lost when that member was elected (seen in
// TestRandomFaults: the leader SIGSTOPped with its expansion in flight).
func TestISRChangeOfUnknownOutcomeStaysCounted(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	leader := newNode(t, 1)
	leader.apply(t, State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}}, now)
	p := leader.p
	if _, err := p.AppendAsLeader(batch(t, 2), true, now); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int32{2, 3} {
		if err := p.FollowerFetch(r, -1, 2, 0, now); err != nil {
			t.Fatal(err)
		}
	}
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d, want 2", hw)
	}
	change, ok := p.ProposeISR(now, 30*time.Second, nil)
	if !ok || !slices.Equal(change.Added, []int32{2}) {
		t.Fatalf("proposal %+v (%v), want node 2 added", change, ok)
	}

	// More records, copied by node 3 alone while the expansion's outcome is unknown.
	if _, err := p.AppendAsLeader(batch(t, 2), true, now); err != nil {
		t.Fatal(err)
	}
	p.RetryISR()
	if err := p.FollowerFetch(3, -1, 4, 0, now); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d with the expansion's outcome unknown; node 2, which it adds, holds 2", hw)
	}
	again, ok := p.ProposeISR(now, 30*time.Second, nil)
	if !ok || !slices.Equal(again.ISR, change.ISR) || again.PartitionEpoch != change.PartitionEpoch {
		t.Fatalf("after RetryISR: proposal %+v (%v), want the same change %+v", again, ok, change)
	}
	if _, ok := p.ProposeISR(now, 30*time.Second, nil); ok {
		t.Fatal("the change proposed a third time without another RetryISR")
	}

	// Refused: the controller did not apply it; node 3 alone holds the watermark back.
	p.CancelISR()
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d after the refusal, want 4", hw)
	}
}

// TestISRProposalLeavesOutIneligibleFollowers: a caught-up follower that may not join
// the ISR (fenced, shutting down: Kafka's isReplicaIsrEligible) is not proposed, so
// the removal of a lagging member goes ahead alone; the controller would refuse a
// change naming it, the removal with it.
func TestISRProposalLeavesOutIneligibleFollowers(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	leader := newNode(t, 1)
	leader.apply(t, State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, now)
	p := leader.p
	later := now.Add(time.Minute) // node 2 has not fetched since the epoch began
	if err := p.FollowerFetch(3, -1, 0, 0, later); err != nil {
		t.Fatal(err)
	}
	change, ok := p.ProposeISR(later, 30*time.Second, func(id int32, _ int64) bool { return id != 3 })
	if !ok || !slices.Equal(change.ISR, []int32{1}) || len(change.Added) != 0 {
		t.Fatalf("proposal %+v (%v), want the ISR [1]: node 2 removed, the ineligible node 3 not added", change, ok)
	}
}

// TestAckStateKeepsALeaderThatStaysLeader: an acks=all batch appended in one leader
// epoch is acknowledged once the high watermark covers it when the same node still
// leads in a later epoch (a reassignment that drops a follower bumps the epoch, the
// leader staying): Kafka's DelayedProduce asks only whether the log is still led
// here (Partition.checkEnoughReplicasReachOffset). A node that stopped leading in
// between (it may have been truncated) answers NOT_LEADER_OR_FOLLOWER.
func TestAckStateKeepsALeaderThatStaysLeader(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	leader := newNode(t, 1)
	leader.apply(t, State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, now)
	p := leader.p
	info, err := p.AppendAsLeader(batch(t, 2), true, now)
	if err != nil {
		t.Fatal(err)
	}
	// Node 3 leaves the replicas: a new leader epoch, node 1 still leading.
	leader.apply(t, State{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
	if err := p.FollowerFetch(2, -1, 2, 0, now); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d, want 2", hw)
	}
	if err := p.AckState(info.LeaderEpoch); err != nil {
		t.Fatalf("ack of a batch of epoch %d, committed under the same leader in epoch 2: %v", info.LeaderEpoch, err)
	}

	// Follower in epoch 3, leader again in epoch 4: the batch of epoch 1 is not acked.
	leader.apply(t, State{Leader: 2, LeaderEpoch: 3, PartitionEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
	leader.apply(t, State{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
	if err := p.AckState(info.LeaderEpoch); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ack of a batch of epoch %d after leading again in epoch 4: %v, want ErrNotLeader", info.LeaderEpoch, err)
	}
}

// TestISRKeepsAnIdleFollowerThatHoldsEverything: a follower whose log end is the
// leader's is in sync however long ago it last fetched — on a partition nobody
// writes to, it lacks nothing (Kafka's ReplicaState.isCaughtUp: leaderEndOffset ==
// logEndOffset, or caught up within replica.lag.time.max.ms). Dropping it would
// leave the partition offline if the leader then failed, its only complete copy
// elsewhere out of the ISR. Once the leader appends, the same follower is behind and
// leaves after the lag.
func TestISRKeepsAnIdleFollowerThatHoldsEverything(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	leader := newNode(t, 1)
	leader.apply(t, State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
	p := leader.p
	if _, err := p.AppendAsLeader(batch(t, 2), true, now); err != nil {
		t.Fatal(err)
	}
	if err := p.FollowerFetch(2, -1, 2, 0, now); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Minute) // node 2 has not fetched since; nothing was written
	if change, ok := p.ProposeISR(later, 30*time.Second, nil); ok {
		t.Fatalf("proposal %+v for an idle partition whose follower holds every record, want none", change)
	}
	if _, err := p.AppendAsLeader(batch(t, 1), false, later); err != nil {
		t.Fatal(err)
	}
	change, ok := p.ProposeISR(later, 30*time.Second, nil)
	if !ok || !slices.Equal(change.Removed, []int32{2}) {
		t.Fatalf("proposal %+v (%v) once node 2 is behind, want it removed", change, ok)
	}
}

// TestFollowerIncarnations (KIP-903): the leader keeps, per follower, the broker
// epoch of the fetch that set its position, and an ISR proposal names each follower
// with it, so the controller refuses a member that restarted since. A fetch of a
// newer incarnation starts the follower over at what it fetches now; one of the
// previous incarnation arriving after it (a fetch in flight when it crashed) is
// refused and moves nothing, or it would put back the lost tail's position.
func TestFollowerIncarnations(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	leader := newNode(t, 1)
	leader.apply(t, State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}}, now)
	p := leader.p
	if _, err := p.AppendAsLeader(batch(t, 4), true, now); err != nil {
		t.Fatal(err)
	}
	if err := p.FollowerFetch(3, 7, 4, 0, now); err != nil {
		t.Fatal(err)
	}
	if err := p.FollowerFetch(2, 5, 4, 0, now); err != nil {
		t.Fatal(err)
	}
	// Node 2 restarts as epoch 6, its log cut to 1 record; then its previous
	// incarnation's last fetch arrives.
	if err := p.FollowerFetch(2, 6, 1, 0, now); err != nil {
		t.Fatal(err)
	}
	if err := p.FollowerFetch(2, 5, 4, 0, now); !errors.Is(err, ErrStaleReplicaEpoch) {
		t.Fatalf("a fetch of epoch 5 after one of epoch 6: %v, want ErrStaleReplicaEpoch", err)
	}
	if change, ok := p.ProposeISR(now, 30*time.Second, nil); ok {
		t.Fatalf("proposal %+v for node 2 at offset 1 of 4, want none", change)
	}
	var asked []int64
	if err := p.FollowerFetch(2, 6, 4, 0, now); err != nil {
		t.Fatal(err)
	}
	change, ok := p.ProposeISR(now, 30*time.Second, func(id int32, epoch int64) bool {
		asked = append(asked, epoch)
		return true
	})
	if !ok || !slices.Equal(change.ISR, []int32{1, 3, 2}) || !slices.Equal(change.BrokerEpochs, []int64{-1, 7, 6}) {
		t.Fatalf("proposal %+v (%v), want the ISR [1 3 2] at broker epochs [-1 7 6]", change, ok)
	}
	if !slices.Equal(asked, []int64{6}) {
		t.Fatalf("eligibility asked at broker epochs %v, want [6] (node 2's new incarnation)", asked)
	}
	// A fetch without ReplicaState (before Fetch v15) leaves the epoch unknown.
	p.CancelISR()
	if err := p.FollowerFetch(2, -1, 4, 0, now); err != nil {
		t.Fatal(err)
	}
	if change, ok = p.ProposeISR(now, 30*time.Second, nil); !ok || !slices.Equal(change.BrokerEpochs, []int64{-1, 7, -1}) {
		t.Fatalf("proposal %+v (%v), want broker epochs [-1 7 -1]", change, ok)
	}
}

// TestAckStateCountsTheMaximalISR: an acks=all batch whose high watermark was
// reached is acknowledged when the committed ISR plus the members an ISR change in
// flight adds reach min.insync.replicas (Kafka's checkEnoughReplicasReachOffset
// counts partitionState.maximalIsr), while a new append still needs the committed
// ISR alone (appendRecordsToLeader).
func TestAckStateCountsTheMaximalISR(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	leader := newNode(t, 1)
	leader.apply(t, State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
	p := leader.p
	settings := p.Settings()
	settings.MinInsyncReplicas = 2
	p.SetSettings(settings)
	info, err := p.AppendAsLeader(batch(t, 2), true, now)
	if err != nil {
		t.Fatal(err)
	}
	// Node 2 leaves the ISR (committed), then fetches the batch and is proposed back.
	leader.apply(t, State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1}}, now)
	if err := p.FollowerFetch(2, 5, 2, 0, now); err != nil {
		t.Fatal(err)
	}
	if change, ok := p.ProposeISR(now, 30*time.Second, nil); !ok || !slices.Equal(change.Added, []int32{2}) {
		t.Fatalf("proposal %+v (%v), want node 2 added", change, ok)
	}
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d, want 2", hw)
	}
	if err := p.AckState(info.LeaderEpoch); err != nil {
		t.Fatalf("ack with node 2 being added back (maximal ISR [1 2]): %v, want none", err)
	}
	if _, err := p.AppendAsLeader(batch(t, 1), true, now); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all append with the committed ISR [1]: %v, want ErrNotEnoughReplicas", err)
	}
	p.CancelISR()
	if err := p.AckState(info.LeaderEpoch); !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("ack with the ISR [1] and no change in flight: %v, want ErrNotEnoughReplicasAfterAppend", err)
	}
}
