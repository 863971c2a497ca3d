package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// txnVersions are the two transaction protocols clients speak: transactions v2
// (KIP-890 part 2, what franz-go uses when the broker finalizes transaction.version 2)
// and the first one (AddPartitionsToTxn from the producer; EndTxn at most v4).
var txnVersions = []struct {
	name string
	opts []kgo.Opt
}{
	{"v2", nil},
	{"v1", []kgo.Opt{kgo.MaxVersions(func() *kversion.Versions {
		v := kversion.Stable()
		v.SetMaxKeyVersion(26, 4) // EndTxn
		v.SetMaxKeyVersion(0, 11) // Produce
		v.SetMaxKeyVersion(28, 4) // TxnOffsetCommit
		return v
	}())}},
}

// newTxnProducer returns a transactional franz-go producer.
func newTxnProducer(t testing.TB, b *testutil.Broker, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, b, append([]kgo.Opt{kgo.TransactionalID(id), kgo.TransactionTimeout(30 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// inTxn runs one transaction of c producing recs (synchronously), committed or not.
func inTxn(t testing.TB, c *kgo.Client, commit bool, recs ...*kgo.Record) {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := c.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	if err := c.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

func recordsTo(topic string, partition int32, values ...string) []*kgo.Record {
	var out []*kgo.Record
	for _, v := range values {
		out = append(out, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)})
	}
	return out
}

// readAll reads every record of topic up to its end offsets (for the isolation level)
// and returns their values in partition and offset order.
func readAll(t testing.TB, b *testutil.Broker, topic string, committed bool) []string {
	t.Helper()
	return testutil.ReadAll(t, []string{b.Addr}, topic, committed, 30*time.Second)
}

// TestTransactionsCommitAndAbort: committed transactions are visible to read_committed
// consumers, aborted ones only to read_uncommitted; with both transaction protocols.
func TestTransactionsCommitAndAbort(t *testing.T) {
	b := testutil.StartBroker(t)
	for _, tv := range txnVersions {
		t.Run(tv.name, func(t *testing.T) {
			topic := "txn-basic-" + tv.name
			createTopic(t, newAdmin(t, b), topic, 2, nil)
			p := newTxnProducer(t, b, "basic-"+tv.name, tv.opts...)
			inTxn(t, p, true, append(recordsTo(topic, 0, "a1", "a2"), recordsTo(topic, 1, "a3")...)...)
			inTxn(t, p, false, append(recordsTo(topic, 0, "b1"), recordsTo(topic, 1, "b2", "b3")...)...)
			inTxn(t, p, true, recordsTo(topic, 1, "c1")...)
			plain := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			produceSync(t, plain, recordsTo(topic, 0, "plain")...)
			if got, want := readAll(t, b, topic, true), []string{"a1", "a2", "plain", "a3", "c1"}; !slices.Equal(got, want) {
				t.Errorf("read_committed: %q, want %q", got, want)
			}
			if got, want := readAll(t, b, topic, false), []string{"a1", "a2", "b1", "plain", "a3", "b2", "b3", "c1"}; !slices.Equal(got, want) {
				t.Errorf("read_uncommitted: %q, want %q", got, want)
			}
		})
	}
}

// TestOpenTransactionHoldsReadCommitted: an open transaction holds read_committed
// consumers at its first offset (the last stable offset), later records of other
// producers included, until it ends; ListOffsets answers the last stable offset.
func TestOpenTransactionHoldsReadCommitted(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	const topic = "txn-lso"
	createTopic(t, adm, topic, 1, nil)
	plain := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, plain, recordsTo(topic, 0, "before")...)
	p := newTxnProducer(t, b, "lso")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctxT(t, 10*time.Second), recordsTo(topic, 0, "open1", "open2")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, plain, recordsTo(topic, 0, "after")...)
	ends, err := adm.ListCommittedOffsets(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	if lso := ends[topic][0].Offset; lso != 1 {
		t.Fatalf("last stable offset %d, want 1 (the open transaction's first offset)", lso)
	}
	c := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	var seen []string
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := c.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { seen = append(seen, string(r.Value)) })
	}
	if !slices.Equal(seen, []string{"before"}) {
		t.Fatalf("read_committed during the transaction: %q, want only \"before\"", seen)
	}
	if err := p.EndTransaction(ctxT(t, 10*time.Second), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	for len(seen) < 4 {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("after the commit read_committed got %q", seen)
		}
		fs.EachRecord(func(r *kgo.Record) { seen = append(seen, string(r.Value)) })
	}
	if want := []string{"before", "open1", "open2", "after"}; !slices.Equal(seen, want) {
		t.Fatalf("read_committed after the commit: %q, want %q", seen, want)
	}
}

// TestProducerFencing: a second producer with the same transactional id fences the
// first — its open transaction is aborted and its next requests fail.
func TestProducerFencing(t *testing.T) {
	b := testutil.StartBroker(t)
	const topic = "txn-fence"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	for _, tv := range txnVersions {
		t.Run(tv.name, func(t *testing.T) {
			id := "fence-" + tv.name
			old := newTxnProducer(t, b, id, tv.opts...)
			if err := old.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := old.ProduceSync(ctxT(t, 10*time.Second), recordsTo(topic, 0, "zombie-"+tv.name)...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			successor := newTxnProducer(t, b, id, tv.opts...)
			inTxn(t, successor, true, recordsTo(topic, 0, "successor-"+tv.name)...)
			err := old.EndTransaction(ctxT(t, 10*time.Second), kgo.TryCommit)
			if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
				t.Fatalf("the fenced producer's commit: %v", err)
			}
		})
	}
	got := readAll(t, b, topic, true)
	if want := []string{"successor-v2", "successor-v1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed: %q, want %q", got, want)
	}
}

// TestTransactionTimeout: a transaction open longer than its timeout is aborted by the
// coordinator; its records never become visible to read_committed and its producer
// cannot commit it.
func TestTransactionTimeout(t *testing.T) {
	b := testutil.StartBroker(t, "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
	const topic = "txn-timeout"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	p := newTxnProducer(t, b, "slow", kgo.TransactionTimeout(time.Second))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctxT(t, 10*time.Second), recordsTo(topic, 0, "late")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := newAdmin(t, b)
	testutil.WaitFor(t, 15*time.Second, func() bool {
		ds, err := adm.DescribeTransactions(context.Background(), "slow")
		if err != nil {
			return false
		}
		d, ok := ds["slow"]
		return ok && d.State == "CompleteAbort"
	}, "the coordinator aborts the timed-out transaction")
	// Its commit comes at the epoch before the abort's bump, which transactions v2
	// would take for a retry of its own end: PRODUCER_FENCED, as Kafka answers
	// (KAFKA-20785), not the fatal INVALID_TXN_STATE.
	if err := p.EndTransaction(ctxT(t, 10*time.Second), kgo.TryCommit); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("commit of the timed-out transaction: %v, want PRODUCER_FENCED", err)
	}
	plain := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, plain, recordsTo(topic, 0, "next")...)
	if got := readAll(t, b, topic, true); !slices.Equal(got, []string{"next"}) {
		t.Fatalf("read_committed: %q", got)
	}
}

// TestTransactionMetrics: the open transaction, the offsets it holds back from
// read_committed consumers, and the completed transactions are exported.
func TestTransactionMetrics(t *testing.T) {
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	b := testutil.StartBroker(t, "metrics.listener="+metricsAddr)
	const topic = "txn-metrics"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	p := newTxnProducer(t, b, "metered")
	inTxn(t, p, true, recordsTo(topic, 0, "a")...)
	inTxn(t, p, false, recordsTo(topic, 0, "b")...)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctxT(t, 10*time.Second), recordsTo(topic, 0, "c1", "c2")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	part := map[string]string{"topic": topic, "partition": "0"}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		m := scrape(t, metricsAddr)
		return testutil.MetricValue(m, "samsa_transactions_open", map[string]string{"state": "Ongoing"}) == 1 &&
			testutil.MetricValue(m, "samsa_partition_unstable_offsets", part) == 2 &&
			testutil.MetricValue(m, "samsa_partition_last_stable_offset", part) == 4 &&
			testutil.MetricValue(m, "samsa_transactions_completed_total", map[string]string{"result": "commit"}) == 1 &&
			testutil.MetricValue(m, "samsa_transactions_completed_total", map[string]string{"result": "abort"}) == 1 &&
			testutil.MetricValue(m, "samsa_transaction_duration_seconds", nil) == 2 &&
			testutil.MetricValue(m, "samsa_transaction_oldest_open_seconds", nil) >= 0
	}, "the transaction gauges and counters")
}

// TestTransactionsFencingStorm: four producers share one transactional id, each
// starting again whenever it is fenced, for a few seconds; each transaction commits
// or aborts at random. A read_committed consumer then sees every record of each
// transaction whose commit was acknowledged exactly once, in its producer's order,
// none of one whose abort was acknowledged, and no record twice; and a new producer
// of the id can still commit (no transaction was left hanging).
func TestTransactionsFencingStorm(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	const topic, id, partitions = "txn-storm", "storm", 3
	createTopic(t, newAdmin(t, b), topic, partitions, nil)

	var mu sync.Mutex
	outcome := map[string]string{} // value -> "committed", "aborted" (acknowledged) or "unknown"
	fenced := 0
	deadline := time.Now().Add(8 * time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			n := 0
			for time.Now().Before(deadline) {
				c, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID(id),
					kgo.TransactionTimeout(10*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
				if err != nil {
					t.Error(err)
					return
				}
				for time.Now().Before(deadline) {
					if !stormTxn(c, topic, partitions, w, &n, &mu, outcome) {
						mu.Lock()
						fenced++
						mu.Unlock()
						break
					}
				}
				c.Close()
			}
		})
	}
	wg.Wait()

	final := newTxnProducer(t, b, id)
	inTxn(t, final, true, recordsTo(topic, 0, "p0/final/0")...)
	outcome["p0/final/0"] = "committed"

	seen := map[string]bool{}
	last := map[string]int{} // "p/w" -> the last n read
	counts := map[string]int{}
	for _, v := range readAll(t, b, topic, true) {
		if seen[v] {
			t.Fatalf("read_committed: %s twice", v)
		}
		seen[v] = true
		counts[outcome[v]]++
		if outcome[v] == "aborted" || outcome[v] == "" {
			t.Fatalf("read_committed: %s, whose transaction's outcome was %q", v, outcome[v])
		}
		i := strings.LastIndexByte(v, '/')
		n, _ := strconv.Atoi(v[i+1:])
		if prev, ok := last[v[:i]]; ok && n <= prev {
			t.Fatalf("read_committed: %s after %s/%d", v, v[:i], prev)
		}
		last[v[:i]] = n
	}
	for v, o := range outcome {
		if o == "committed" && !seen[v] {
			t.Fatalf("read_committed: %s, committed, is missing", v)
		}
	}
	t.Logf("%d producers fenced or failed; read_committed: %d committed records, %d of transactions whose outcome the producer did not learn", fenced, counts["committed"], counts["unknown"])
}

// stormTxn runs one transaction of 1–10 records of producer w (numbered from *n on, to
// random partitions) for TestTransactionsFencingStorm, committing or aborting it at
// random, and records the outcome of each record. It reports whether the producer can
// go on (false: fenced or failed; it must be started again).
func stormTxn(c *kgo.Client, topic string, partitions, w int, n *int, mu *sync.Mutex, outcome map[string]string) bool {
	if err := c.BeginTransaction(); err != nil {
		return false
	}
	var recs []*kgo.Record
	for range 1 + rand.IntN(10) {
		*n++
		p := rand.IntN(partitions)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "p%d/w%d/%d", p, w, *n)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	commit := c.ProduceSync(ctx, recs...).FirstErr() == nil && rand.IntN(3) > 0
	err := c.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	o := "unknown"
	switch {
	case err == nil && commit:
		o = "committed"
	case err == nil:
		o = "aborted"
	}
	mu.Lock()
	for _, r := range recs {
		outcome[string(r.Value)] = o
	}
	mu.Unlock()
	return err == nil
}
