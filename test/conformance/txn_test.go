package conformance

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactional producers among the external clients (kafka-python 2.0 has no
// transactions), and the clients that read read_committed (kafka-python 2.0 cannot).
var (
	txnProducers = []client{confluent, kafkajs}
	txnReaders   = []client{kcat, confluent, kafkajs}
)

const (
	txnKeys   = 4
	txnRounds = 9 // rounds 1, 4 and 7 abort
)

// txnValues are the values "transact" writes, committed or aborted (see common.py).
func txnValues(tag string, committed bool) []string {
	var out []string
	for seq := range txnRounds {
		if (seq%3 != 1) != committed {
			continue
		}
		for i := range txnKeys {
			key := "k" + strconv.Itoa(i)
			v := fmt.Sprintf("%s|%s|%d|", tag, key, seq)
			for range 1 + seq%7 {
				v += "samsa-"
			}
			out = append(out, v)
		}
	}
	return out
}

// TestTransactionsAcrossClients: librdkafka (confluent-kafka-python) and kafkajs
// produce in transactions, committing some and aborting others; kcat,
// confluent-kafka-python, kafkajs and franz-go reading read_committed see exactly the
// committed records, and read_uncommitted readers see them all.
func TestTransactionsAcrossClients(t *testing.T) {
	tg := startTarget(t)
	for _, producer := range txnProducers {
		t.Run(producer.name, func(t *testing.T) {
			t.Parallel()
			topic := tg.topic("txn", producer.name)
			createTopic(t, tg, kcat, topic, partitions) // through kadm
			tag := "txn/" + producer.name
			s := producer.run(t, tg, "transact", "--topic", topic, "--keys", strconv.Itoa(txnKeys),
				"--per-key", strconv.Itoa(txnRounds), "--tag", tag, "--txn-id", "conf-"+producer.name+"-"+tg.suffix)
			committed := txnValues(tag, true)
			if s.Produced != len(committed) {
				t.Fatalf("%s committed %d records, want %d", producer.name, s.Produced, len(committed))
			}
			for _, reader := range txnReaders {
				t.Run("read_committed-"+reader.name, func(t *testing.T) {
					got := reader.run(t, tg, "consume", "--topic", topic, "--isolation", "read_committed",
						"--expect", strconv.Itoa(len(committed)))
					checkValues(t, valuesOf(got.Records), committed)
				})
			}
			t.Run("read_committed-franz-go", func(t *testing.T) {
				checkValues(t, franzGoValues(t, tg, topic, len(committed)), committed)
			})
			all := append(txnValues(tag, true), txnValues(tag, false)...)
			for _, reader := range []client{kcat, confluent} {
				t.Run("read_uncommitted-"+reader.name, func(t *testing.T) {
					got := reader.run(t, tg, "consume", "--topic", topic)
					checkValues(t, valuesOf(got.Records), all)
				})
			}
		})
	}
}

func valuesOf(records []record) []string {
	out := make([]string, 0, len(records))
	for _, r := range records {
		if r.Value != nil {
			out = append(out, *r.Value)
		}
	}
	return out
}

// checkValues compares two multisets of values.
func checkValues(t *testing.T, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("read %d records, want %d\n got %q\nwant %q", len(g), len(w), g, w)
	}
}

// franzGoValues reads n records of topic read_committed with franz-go.
func franzGoValues(t *testing.T, tg *target, topic string, n int) []string {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(tg.addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []string
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := c.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}
