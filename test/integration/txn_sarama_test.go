package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// saramaTxnConfig is a sarama transactional producer's configuration (sarama speaks
// the first transaction protocol: AddPartitionsToTxn from the producer, EndTxn v≤3).
func saramaTxnConfig(id string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = id
	cfg.Producer.Transaction.Timeout = 30 * time.Second
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	return cfg
}

// TestSaramaTransactions: sarama's transactional producer commits and aborts; its
// consumer reading read_committed sees the committed records only; AddOffsetsToTxn
// (sarama's AddMessageToTxn) commits a group's offsets with the transaction.
func TestSaramaTransactions(t *testing.T) {
	b := testutil.StartBroker(t)
	const in, out = "sarama-txn-in", "sarama-txn-out"
	adm := newAdmin(t, b)
	createTopic(t, adm, in, 1, nil)
	createTopic(t, adm, out, 1, nil)

	p, err := sarama.NewSyncProducer([]string{b.Addr}, saramaTxnConfig("sarama-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(commit bool, values ...string) {
		t.Helper()
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: in, Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("send %s: %v", v, err)
			}
		}
		end := p.CommitTxn
		if !commit {
			end = p.AbortTxn
		}
		if err := end(); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
	send(true, "a", "b")
	send(false, "x", "y")
	send(true, "c")

	consumer, err := sarama.NewConsumer([]string{b.Addr}, saramaTxnConfig("unused"))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(in, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var got []string
	timeout := time.After(20 * time.Second)
	for len(got) < 3 {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-timeout:
			t.Fatalf("read_committed read %q before the deadline", got)
		}
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed: %q, want %q", got, want)
	}

	// Consume-transform-produce: the group's offset goes with the transaction.
	const group = "sarama-txn-group"
	send2 := func(commit bool, offset int64) {
		t.Helper()
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: out, Value: sarama.StringEncoder(fmt.Sprint(offset))}); err != nil {
			t.Fatal(err)
		}
		msg := &sarama.ConsumerMessage{Topic: in, Partition: 0, Offset: offset}
		if err := p.AddMessageToTxn(msg, group, nil); err != nil {
			t.Fatalf("AddMessageToTxn: %v", err)
		}
		end := p.CommitTxn
		if !commit {
			end = p.AbortTxn
		}
		if err := end(); err != nil {
			t.Fatal(err)
		}
	}
	send2(true, 4)
	send2(false, 7)
	offs, err := adm.FetchOffsets(ctxT(t, 10*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(in, 0); !ok || o.At != 5 {
		t.Fatalf("group offset after a committed and an aborted transaction: %+v (found %v), want 5", o, ok)
	}
	if got := readAll(t, b, out, true); !slices.Equal(got, []string{"4"}) {
		t.Fatalf("output read_committed: %q", got)
	}
}
