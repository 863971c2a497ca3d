package cluster

import (
	"context"
	"errors"
	"fmt"
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

// history records what a producer was told: for every acknowledged record its
// partition and offset. check then reads every partition back and holds the cluster to
// what acks=all promises: each acknowledged record is there exactly once, at the
// offset it was acknowledged at, in the order it was produced; a record whose produce
// failed may be there or not, but at most once (the producer is idempotent).
type history struct {
	mu      sync.Mutex
	acked   map[string]ackedRecord // value → where it went
	order   map[int32][]string     // partition → acknowledged values in produce order
	ackedAt map[int32][]time.Time  // partition → when each acknowledgement came
	failed  map[string]error       // value → why its produce failed
	lastErr error
}

// newHistory returns an empty history.
func newHistory() *history {
	return &history{acked: map[string]ackedRecord{}, order: map[int32][]string{}, ackedAt: map[int32][]time.Time{},
		failed: map[string]error{}}
}

type ackedRecord struct {
	partition int32
	offset    int64
}

// load is a producer writing to every partition of a topic until stopped, each
// partition with records in flight of its own, so that a partition that stops
// acknowledging does not hold up the others.
type load struct {
	h      *history
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	rate   int // records a second per partition; 0: as fast as the cluster acknowledges
}

// inFlightPerPartition bounds the records a load has in flight in one partition:
// enough to keep the brokers busy, few enough that a stop waits for little.
const inFlightPerPartition = 32

// clusterUnderLoad starts a cluster (opts, with min.insync.replicas=2 and the fast ISR
// overrides), creates topic with partitions replicated three times, starts an acks=all
// load on it (startLoad) and waits for acks acknowledged records; the cluster's
// metadata invariants are watched from the start.
func clusterUnderLoad(t *testing.T, opts testutil.ClusterOptions, topic string, partitions int32, acks int, what string) (*testutil.Cluster, *invariants, *load) {
	t.Helper()
	opts.Overrides = append(append([]string{"min.insync.replicas=2"}, replicationOverrides...), opts.Overrides...)
	c := testutil.StartCluster(t, opts)
	inv := watchInvariants(t, c)
	createTopic(t, newNodeClient(t, c.Node(1).Addr), topic, partitions, 3)
	l := startLoad(t, c, topic)
	l.waitAcks(t, acks, what)
	return c, inv, l
}

// startLoad produces records "v-<partition>-<n>" (that string as key and value: unique
// keys keep every record of a compacted topic) to every partition of topic with
// acks=all and an idempotent franz-go producer (its defaults), through every broker
// of the cluster.
func startLoad(t *testing.T, c *testutil.Cluster, topic string, opts ...kgo.Opt) *load {
	t.Helper()
	return startLoadAt(t, c, topic, 0, opts...)
}

// startLoadAt is startLoad writing at most rate records a second to each partition
// (0: no limit).
func startLoadAt(t *testing.T, c *testutil.Cluster, topic string, rate int, opts ...kgo.Opt) *load {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(c.BrokerAddrs()...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(45 * time.Second),
		kgo.ProducerLinger(2 * time.Millisecond),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var partitions int
	testutil.WaitFor(t, 30*time.Second, func() bool {
		topics, err := kadm.NewClient(cl).ListTopics(ctxT(t, 5*time.Second), topic)
		partitions = len(topics[topic].Partitions)
		return err == nil && partitions > 0
	}, "the partitions of "+topic)
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{h: newHistory(), cl: cl, cancel: cancel, done: make(chan struct{}), rate: rate}
	var wg sync.WaitGroup
	for p := range int32(partitions) {
		wg.Go(func() { l.produceTo(ctx, p) })
	}
	go func() {
		wg.Wait()
		close(l.done)
	}()
	return l
}

// produceTo writes to one partition until ctx ends, then waits for its records in
// flight.
func (l *load) produceTo(ctx context.Context, partition int32) {
	sem := make(chan struct{}, inFlightPerPartition)
	var pace <-chan time.Time
	if l.rate > 0 {
		tick := time.NewTicker(time.Second / time.Duration(l.rate))
		defer tick.Stop()
		pace = tick.C
	}
	var wg sync.WaitGroup
	for n := 0; ctx.Err() == nil; n++ {
		if pace != nil {
			select {
			case <-pace:
			case <-ctx.Done():
				continue
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		value := fmt.Sprintf("v-%d-%07d", partition, n)
		wg.Add(1)
		l.cl.Produce(context.Background(), &kgo.Record{Partition: partition, Key: []byte(value), Value: []byte(value)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			defer func() { <-sem }()
			l.h.record(value, r, err)
		})
	}
	wg.Wait()
}

func (h *history) record(value string, r *kgo.Record, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.failed[value] = err
		h.lastErr = err
		return
	}
	h.acked[value] = ackedRecord{r.Partition, r.Offset}
	h.order[r.Partition] = append(h.order[r.Partition], value)
	h.ackedAt[r.Partition] = append(h.ackedAt[r.Partition], time.Now())
}

// unavailability returns, per partition, the longest time acknowledgements stopped
// since fault: the largest gap between two consecutive acknowledgements the later of
// which came after fault. It is what a producer saw of the fault, its retries and
// backoffs included.
func (l *load) unavailability(fault time.Time) map[int32]time.Duration {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	out := map[int32]time.Duration{}
	for p, times := range l.h.ackedAt {
		times = slices.Clone(times)
		slices.SortFunc(times, time.Time.Compare)
		for i := 1; i < len(times); i++ {
			if times[i].After(fault) {
				out[p] = max(out[p], times[i].Sub(times[i-1]))
			}
		}
	}
	return out
}

// everyPartitionAckedAfter reports whether every partition had a record acknowledged
// after t.
func (l *load) everyPartitionAckedAfter(t time.Time) bool {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	for _, times := range l.h.ackedAt {
		if len(times) == 0 || !times[len(times)-1].After(t) {
			return false
		}
	}
	return len(l.h.ackedAt) > 0
}

// lastAck returns when a record of partition was last acknowledged (zero: never).
func (l *load) lastAck(partition int32) time.Time {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	var last time.Time
	for _, at := range l.h.ackedAt[partition] {
		if at.After(last) {
			last = at
		}
	}
	return last
}

// longest returns the largest of the durations and its partition.
func longest(d map[int32]time.Duration) (int32, time.Duration) {
	p, most := int32(-1), time.Duration(0)
	for part, v := range d {
		if v > most || v == most && (p < 0 || part < p) {
			p, most = part, v
		}
	}
	return p, most
}

// acks returns how many records were acknowledged so far.
func (l *load) acks() int {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	return len(l.h.acked)
}

// waitAcks waits until n more records than now were acknowledged.
func (l *load) waitAcks(t *testing.T, n int, what string) {
	t.Helper()
	target := l.acks() + n
	testutil.WaitFor(t, 60*time.Second, func() bool { return l.acks() >= target }, what)
}

// stop ends the load and waits for every record in flight to be answered.
func (l *load) stop(t *testing.T) *history {
	t.Helper()
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(90 * time.Second):
		t.Fatal("records still in flight 90 s after the load stopped")
	}
	return l.h
}

// check reads every partition of topic from its start to its high watermark through
// the cluster and verifies the history against it; it returns the high watermarks.
// opts are extra options of the client that reads (a rack, to read from followers).
func (h *history) check(t *testing.T, c *testutil.Cluster, topic string, opts ...kgo.Opt) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.BrokerAddrs()...), kgo.MetadataMinAge(250 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	testutil.WaitFor(t, 60*time.Second, func() bool {
		ends, err = adm.ListEndOffsets(ctxT(t, 10*time.Second), topic)
		return err == nil && ends.Error() == nil
	}, "the end offsets of "+topic)
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range want {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	cl.AddConsumePartitions(offsets)
	got := map[int32][]*kgo.Record{}
	ctx := ctxT(t, 90*time.Second)
	done := func() bool {
		for p, end := range want {
			if n := len(got[p]); end > 0 && (n == 0 || got[p][n-1].Offset < end-1) {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: %v (read %v of ends %v)", topic, ctx.Err(), counts(got), want)
		}
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("reading %s-%d: %v (retrying)", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r) })
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]int64{}
	var problems []string
	for p, recs := range got {
		for _, r := range recs {
			v := string(r.Value)
			if prev, dup := seen[v]; dup {
				problems = append(problems, fmt.Sprintf("%s at %d-%d and at offset %d: a record written twice", v, p, r.Offset, prev))
			}
			seen[v] = r.Offset
			if a, ok := h.acked[v]; ok && (a.partition != p || a.offset != r.Offset) {
				problems = append(problems, fmt.Sprintf("%s acknowledged at %d-%d, found at %d-%d", v, a.partition, a.offset, p, r.Offset))
			}
		}
	}
	for v, a := range h.acked {
		if _, ok := seen[v]; !ok {
			problems = append(problems, fmt.Sprintf("%s acknowledged at %d-%d is missing", v, a.partition, a.offset))
		}
	}
	for p, values := range h.order {
		for i := 1; i < len(values); i++ {
			if h.acked[values[i]].offset <= h.acked[values[i-1]].offset {
				problems = append(problems, fmt.Sprintf("partition %d: %s acknowledged at %d after %s at %d", p,
					values[i], h.acked[values[i]].offset, values[i-1], h.acked[values[i-1]].offset))
			}
		}
	}
	sort.Strings(problems)
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("… and %d more", len(problems)-20))
	}
	if len(problems) > 0 {
		t.Fatalf("history check of %s failed (%d acknowledged, %d failed):\n%s", topic, len(h.acked), len(h.failed), strings.Join(problems, "\n"))
	}
	t.Logf("history check of %s: %d acknowledged records, each once at its offset and in order; %d failed produces (last error: %v), %d of them written",
		topic, len(h.acked), len(h.failed), h.lastErr, countPresent(h.failed, seen))
	return want
}

func counts(got map[int32][]*kgo.Record) map[int32]int {
	out := map[int32]int{}
	for p, recs := range got {
		out[p] = len(recs)
	}
	return out
}

func countPresent(failed map[string]error, seen map[string]int64) int {
	n := 0
	for v := range failed {
		if _, ok := seen[v]; ok {
			n++
		}
	}
	return n
}
