package integration

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestConcurrentLoad runs several producers and consumers over many partitions and
// connections at once (under -race in `make test`) and checks that every acknowledged
// record arrives once, in order within its partition.
func TestConcurrentLoad(t *testing.T) {
	b := testutil.StartBroker(t)
	const (
		topics     = 4
		partitions = 8
		producers  = 6
		perProd    = 2000
	)
	adm := newAdmin(t, b)
	for i := 0; i < topics; i++ {
		createTopic(t, adm, fmt.Sprintf("load-%d", i), partitions, nil)
	}

	var (
		mu    sync.Mutex
		acked = map[string]map[int][]string{} // topic/partition → producer → values in ack order
		wg    sync.WaitGroup
	)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			c := newClient(t, b, kgo.ProducerLinger(time.Millisecond))
			var pwg sync.WaitGroup
			for i := 0; i < perProd; i++ {
				topic := fmt.Sprintf("load-%d", i%topics)
				// One key per producer and topic: the producer's records for a topic
				// stay in one partition, so their order is checkable.
				rec := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("p%d", p)), Value: []byte(fmt.Sprintf("p%d-%06d", p, i))}
				pwg.Add(1)
				c.Produce(ctxT(t, time.Minute), rec, func(r *kgo.Record, err error) {
					defer pwg.Done()
					if err != nil {
						t.Errorf("produce: %v", err)
						return
					}
					k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
					mu.Lock()
					if acked[k] == nil {
						acked[k] = map[int][]string{}
					}
					acked[k][p] = append(acked[k][p], string(r.Value))
					mu.Unlock()
				})
			}
			pwg.Wait()
		}(p)
	}
	// Consumers read concurrently with the producers.
	total := producers * perProd
	got := map[string][]string{}
	var gmu sync.Mutex
	cwg := sync.WaitGroup{}
	counts := make(chan int, topics)
	for i := 0; i < topics; i++ {
		cwg.Add(1)
		go func(i int) {
			defer cwg.Done()
			topic := fmt.Sprintf("load-%d", i)
			c := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx := ctxT(t, 2*time.Minute)
			n := 0
			for n < total/topics && ctx.Err() == nil {
				fs := c.PollFetches(ctx)
				for _, r := range fs.Records() {
					k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
					gmu.Lock()
					got[k] = append(got[k], string(r.Value))
					gmu.Unlock()
					n++
				}
			}
			counts <- n
		}(i)
	}
	wg.Wait()
	cwg.Wait()
	close(counts)
	sum := 0
	for n := range counts {
		sum += n
	}
	if sum != total {
		t.Fatalf("consumed %d records, produced %d", sum, total)
	}
	// Each producer's acknowledged records are in the partition once, in its order.
	for k, byProducer := range acked {
		n := 0
		for _, values := range byProducer {
			checkAckedPresent(t, 0, values, got[k])
			n += len(values)
		}
		if len(got[k]) != n {
			t.Fatalf("%s: %d acknowledged, %d consumed", k, n, len(got[k]))
		}
	}
}
