// Package integration drives a real `samsa serve` process with real Kafka clients
// (franz-go, sarama, segmentio/kafka-go) over TCP.
package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// newClient returns a franz-go client for the broker, closed when the test ends.
func newClient(t testing.TB, b *testutil.Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)
	c, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newAdmin(t testing.TB, b *testutil.Broker) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, b))
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates a topic and fails the test on error.
func createTopic(t testing.TB, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	res, err := adm.CreateTopics(ctxT(t, 10*time.Second), partitions, 1, configs, name)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[name]; r.Err != nil {
		t.Fatalf("create %s: %v", name, r.Err)
	}
}

// produceSync produces records and fails the test on any error.
func produceSync(t testing.TB, c *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := c.ProduceSync(ctxT(t, 20*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeN reads n records from the beginning of topic with a fresh client.
func consumeN(t testing.TB, b *testutil.Broker, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	opts = append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)
	c := newClient(t, b, opts...)
	ctx := ctxT(t, 30*time.Second)
	var out []*kgo.Record
	for len(out) < n {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(out), n)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

func value(i int) []byte { return []byte(fmt.Sprintf("value-%06d", i)) }
