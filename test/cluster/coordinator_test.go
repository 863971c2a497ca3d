package cluster

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// groupConsumer is a franz-go group member that polls, processes and then commits
// what it processed, synchronously, recording what the coordinator acknowledged.
type groupConsumer struct {
	cl     *kgo.Client
	topic  string
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	processed map[int32]map[int64]bool // partition → offsets processed
	acked     map[int32]int64          // partition → highest commit the coordinator acknowledged
	ackedAt   []time.Time              // when each acknowledged commit came
	problems  []string
}

// startGroupConsumer starts a member of group consuming topic from its start; opts are
// extra client options (kgo.ServerSideBalancer() for the KIP-848 protocol).
func startGroupConsumer(t *testing.T, c *testutil.Cluster, group, topic string, opts ...kgo.Opt) *groupConsumer {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.BrokerAddrs()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithCancel(context.Background())
	g := &groupConsumer{cl: cl, topic: topic, cancel: cancel, done: make(chan struct{}),
		processed: map[int32]map[int64]bool{}, acked: map[int32]int64{}}
	go g.run(ctx)
	return g
}

func (g *groupConsumer) run(ctx context.Context) {
	defer close(g.done)
	for ctx.Err() == nil {
		fs := g.cl.PollFetches(ctx)
		next := map[int32]kgo.EpochOffset{}
		fs.EachRecord(func(r *kgo.Record) {
			g.process(r)
			next[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		if len(next) == 0 {
			continue
		}
		g.commit(ctx, next)
	}
}

// process checks that a record seen before is not below what the coordinator
// acknowledged as committed: the group resumes from its committed offsets, never
// before them.
func (g *groupConsumer) process(r *kgo.Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := g.processed[r.Partition]
	if seen == nil {
		seen = map[int64]bool{}
		g.processed[r.Partition] = seen
	}
	if seen[r.Offset] && r.Offset < g.acked[r.Partition] {
		g.problems = append(g.problems, fmt.Sprintf("partition %d offset %d processed again after offset %d was committed",
			r.Partition, r.Offset, g.acked[r.Partition]))
	}
	seen[r.Offset] = true
}

// commit commits next synchronously and records what was acknowledged.
func (g *groupConsumer) commit(ctx context.Context, next map[int32]kgo.EpochOffset) {
	g.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{g.topic: next},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				return
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode == 0 {
						g.acked[p.Partition] = max(g.acked[p.Partition], next[p.Partition].Offset)
						g.ackedAt = append(g.ackedAt, time.Now())
					}
				}
			}
		})
}

// ackedCommits returns a copy of the acknowledged commits and when the last came.
func (g *groupConsumer) ackedCommits() (map[int32]int64, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var last time.Time
	if n := len(g.ackedAt); n > 0 {
		last = g.ackedAt[n-1]
	}
	return maps.Clone(g.acked), last
}

// stop leaves the group and returns what went wrong.
func (g *groupConsumer) stop(t *testing.T) []string {
	t.Helper()
	g.cancel()
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the group consumer did not stop")
	}
	g.cl.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.problems
}

// committedWatch polls a group's committed offsets and records any that went back.
type committedWatch struct {
	stopCh, done chan struct{}
	mu           sync.Mutex
	highest      map[int32]int64
	problems     []string
}

func watchCommitted(t *testing.T, c *testutil.Cluster, group, topic string) *committedWatch {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	w := &committedWatch{stopCh: make(chan struct{}), done: make(chan struct{}), highest: map[int32]int64{}}
	go func() {
		defer close(w.done)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := adm.FetchOffsets(ctx, group)
			cancel()
			if err == nil {
				resp.Each(func(o kadm.OffsetResponse) {
					if o.Err == nil && o.Topic == topic {
						w.observe(o.Partition, o.At)
					}
				})
			}
			select {
			case <-w.stopCh:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *committedWatch) observe(p int32, at int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.highest[p]; ok && at < prev {
		w.problems = append(w.problems, fmt.Sprintf("partition %d committed offset went back from %d to %d", p, prev, at))
	}
	w.highest[p] = max(w.highest[p], at)
}

func (w *committedWatch) stop() []string {
	close(w.stopCh)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.problems
}

// TestReplicationCoordinatorFailover: a franz-go group consumer commits its offsets
// synchronously on a topic with replication factor 3 (and __consumer_offsets with 3)
// under an acks=all load; the node coordinating the group — the leader of its
// __consumer_offsets partition — is killed with kill -9. The consumer carries on with
// the new coordinator (NOT_COORDINATOR → FindCoordinator); every commit acknowledged
// before the kill is intact after it, committed offsets never go back, no record is
// processed again below an acknowledged commit, and a new member resumes exactly at
// the committed offsets. Every acknowledged record of the load is there.
func TestReplicationCoordinatorFailover(t *testing.T) {
	t.Parallel()
	const topic, group, partitions = "clicks", "click-counter", 3
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{}, topic, partitions, 1000, "acknowledged records before the consumer starts")
	consumer := startGroupConsumer(t, c, group, topic)
	watch := watchCommitted(t, c, group, topic)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		acked, _ := consumer.ackedCommits()
		return len(acked) == partitions
	}, "commits acknowledged for every partition")

	adm := kadm.NewClient(newNodeClient(t, c.Node(1).Addr).cl)
	coordinator := groupCoordinator(t, adm, group)
	md, err := clientExcept(t, c, coordinator).metadata(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	offsetsLeaders := map[int32]int{}
	for _, p := range partitionsOf(md, "__consumer_offsets") {
		offsetsLeaders[p.Leader]++
		if len(p.Replicas) != 3 {
			t.Fatalf("__consumer_offsets-%d has replicas %v, want 3", p.Partition, p.Replicas)
		}
	}
	before, _ := consumer.ackedCommits()
	killed := time.Now()
	c.Node(coordinator).Kill()
	t.Logf("kill -9 of node %d, the coordinator of %s (it led %d of the __consumer_offsets partitions); commits acknowledged before: %v",
		coordinator, group, offsetsLeaders[coordinator], before)
	survivorAdm := kadm.NewClient(clientExcept(t, c, coordinator).cl)
	var next int32
	testutil.WaitFor(t, 60*time.Second, func() bool {
		var err error
		next, err = tryGroupCoordinator(survivorAdm, group)
		return err == nil && next != coordinator
	}, "another coordinator for the group")
	elected := time.Now()
	testutil.WaitFor(t, 60*time.Second, func() bool {
		_, last := consumer.ackedCommits()
		return last.After(elected)
	}, "a commit acknowledged by the new coordinator")
	_, last := consumer.ackedCommits()
	t.Logf("node %d coordinates %s %v after the kill; the consumer's commits were acknowledged again %v after the kill",
		next, group, elected.Sub(killed).Round(time.Millisecond), last.Sub(killed).Round(time.Millisecond))
	resp, err := survivorAdm.FetchOffsets(ctxT(t, 10*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	for p, at := range before {
		if o, ok := resp.Lookup(topic, p); !ok || o.Err != nil || o.At < at {
			t.Fatalf("after the failover %s-%d's committed offset is %+v; %d was acknowledged before the kill", topic, p, o, at)
		}
	}
	l.waitAcks(t, 1000, "writes after the failover")
	acked, _ := consumer.ackedCommits()
	testutil.WaitFor(t, 60*time.Second, func() bool {
		now, _ := consumer.ackedCommits()
		for p, at := range acked {
			if now[p] <= at {
				return false
			}
		}
		return true
	}, "the consumer committing further on every partition")
	problems := consumer.stop(t)
	final, _ := consumer.ackedCommits()
	problems = append(problems, watch.stop()...)
	resp, err = survivorAdm.FetchOffsets(ctxT(t, 10*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	committed := map[int32]int64{}
	for p, at := range final {
		o, ok := resp.Lookup(topic, p)
		if !ok || o.Err != nil || o.At < at {
			t.Fatalf("%s-%d's committed offset is %+v; %d was acknowledged", topic, p, o, at)
		}
		committed[p] = o.At
	}
	for _, p := range problems {
		t.Error(p)
	}

	// A new member of the group resumes exactly at the committed offsets.
	resume := startGroupConsumer(t, c, group, topic)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		resume.mu.Lock()
		defer resume.mu.Unlock()
		return len(resume.processed) == partitions
	}, "the new member consuming every partition")
	problems = resume.stop(t)
	for p, offsets := range resume.processed {
		first := int64(-1)
		for o := range offsets {
			if first < 0 || o < first {
				first = o
			}
		}
		if first != committed[p] {
			problems = append(problems, fmt.Sprintf("the new member started partition %d at %d; the group had committed %d", p, first, committed[p]))
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// groupCoordinator returns the node coordinating group.
func groupCoordinator(t *testing.T, adm *kadm.Client, group string) int32 {
	t.Helper()
	var id int32
	testutil.WaitFor(t, 30*time.Second, func() bool {
		var err error
		id, err = tryGroupCoordinator(adm, group)
		return err == nil
	}, "the coordinator of "+group)
	return id
}

func tryGroupCoordinator(adm *kadm.Client, group string) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resps := adm.FindGroupCoordinators(ctx, group)
	r, ok := resps[group]
	switch {
	case !ok:
		return -1, kerr.CoordinatorNotAvailable
	case r.Err != nil:
		return -1, r.Err
	}
	return r.NodeID, nil
}
