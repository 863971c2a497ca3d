package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestKill9DuringRollsRetentionAndCompaction kills the broker with SIGKILL three times
// while producers write to a topic with tiny segments and retention.bytes (rolls and
// retention deleting segments all the time) and to a compacted topic with tiny
// segments (the cleaner swapping segments). After each restart every partition is
// read with a real client: every acknowledged record at or above the log start is at
// its offset, in order, once, without gaps (the compacted topic: every key's latest
// acknowledged value is there).
func TestKill9DuringRollsRetentionAndCompaction(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "log.retention.check.interval.ms=100", "log.cleaner.backoff.ms=100")
	adm := newAdmin(t, b)
	createTopicOrFail(t, adm, "churn", 2, map[string]string{"segment.bytes": "4096", "retention.bytes": "16384"})
	createTopicOrFail(t, adm, "compacted", 2, map[string]string{"segment.bytes": "4096", "cleanup.policy": "compact",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100"})
	topics := []struct {
		name      string
		compacted bool
	}{{"churn", false}, {"compacted", true}}
	acked := map[string][]*ackedLog{}
	for _, tp := range topics {
		acked[tp.name] = []*ackedLog{newAckedLog(), newAckedLog()}
	}
	for round := range 3 {
		// Batches stay below segment.bytes: a larger one is refused (RECORD_BATCH_TOO_LARGE,
		// as in Kafka), and on a loaded machine the client's batches grow past 4 KiB.
		c := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerBatchMaxBytes(2048),
			kgo.RecordRetries(2), kgo.ProduceRequestTimeout(5*time.Second), kgo.RecordDeliveryTimeout(10*time.Second))
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			n    int
			done = make(chan struct{})
		)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			defer close(done)
			for i := 0; ctx.Err() == nil; i++ {
				for _, tp := range topics {
					p := int32(i % 2)
					v := fmt.Sprintf("r%d-%06d-%s", round, i, "padding-padding-padding-padding-padding")
					if tp.compacted {
						v = fmt.Sprintf("key%02d/r%d-%06d", i%40, round, i)
					}
					rec := &kgo.Record{Topic: tp.name, Partition: p, Key: []byte(keyOf(v)), Value: []byte(v)}
					wg.Add(1)
					c.Produce(ctx, rec, func(r *kgo.Record, err error) {
						defer wg.Done()
						if err == nil {
							mu.Lock()
							acked[r.Topic][r.Partition].add(r)
							n++
							mu.Unlock()
						}
					})
				}
			}
		}()
		// Kill once enough has been acknowledged that segments rolled, were deleted
		// and compacted.
		testutil.WaitFor(t, 60*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return n >= 1500*(round+1)
		}, "records acknowledged before the kill")
		b.Kill()
		cancel()
		<-done
		c.Close()
		wg.Wait()
		b.StartAgain(t)
		for _, tp := range topics {
			for p := range int32(2) {
				checkPartition(t, b, tp.name, p, acked[tp.name][p], tp.compacted, noLoss)
			}
		}
	}
	// The test exercised what it says: retention deleted segments, the cleaner
	// removed records.
	if _, start := readPartition(t, b, "churn", 0); start == 0 {
		t.Fatal("retention deleted nothing from churn/0")
	}
	if got, _ := readPartition(t, b, "compacted", 0); len(got) >= len(acked["compacted"][0].values) {
		t.Fatalf("compacted/0 holds %d records of the %d acknowledged: nothing was compacted", len(got), len(acked["compacted"][0].values))
	}
}
