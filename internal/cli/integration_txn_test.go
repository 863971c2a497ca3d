package cli_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/cli"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestTransactionCommands: `samsa transactions` lists and describes an open
// transaction and its partition's producers; doctor reports the last stable offset it
// holds and the group lag behind it; a hanging transaction (open in a partition, known
// to no coordinator) is found and aborted.
func TestTransactionCommands(t *testing.T) {
	// Without verification a produce can open a transaction no coordinator knows.
	b := testutil.StartBroker(t, "transaction.partition.verification.enable=false")
	ok(t, b, "", "topic", "create", "orders", "-p", "1", "-r", "1")
	ok(t, b, "", "topic", "create", "stray", "-p", "1", "-r", "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	plain, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	produce := func(c *kgo.Client, values ...string) {
		t.Helper()
		for _, v := range values {
			if err := c.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(plain, "p1", "p2", "p3")
	app, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID("app"), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if err := app.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(app, "t1", "t2")
	produce(plain, "p4")
	adm := kadm.NewClient(plain)
	if err := adm.CommitAllOffsets(ctx, "rc", kadm.OffsetsFromRecords(kgo.Record{Topic: "orders", Partition: 0, Offset: 2})); err != nil {
		t.Fatal(err)
	}

	var list struct {
		Transactions []struct {
			TransactionalID string `json:"transactional_id"`
			State           string `json:"state"`
		} `json:"transactions"`
	}
	okJSON(t, b, &list, "transactions", "list")
	if len(list.Transactions) != 1 || list.Transactions[0].TransactionalID != "app" || list.Transactions[0].State != "Ongoing" {
		t.Fatalf("transactions list: %+v", list)
	}
	var desc struct {
		State      string `json:"state"`
		DurationMs int64  `json:"duration_ms"`
		Partitions []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"partitions"`
	}
	okJSON(t, b, &desc, "transactions", "describe", "app")
	if desc.State != "Ongoing" || desc.DurationMs < 0 || len(desc.Partitions) != 1 || desc.Partitions[0].Topic != "orders" {
		t.Fatalf("transactions describe: %+v", desc)
	}
	var producers struct {
		Producers []struct {
			CurrentTxnStartOffset int64 `json:"current_txn_start_offset"`
		} `json:"producers"`
	}
	okJSON(t, b, &producers, "transactions", "describe-producers", "orders")
	starts := []int64{}
	for _, p := range producers.Producers {
		starts = append(starts, p.CurrentTxnStartOffset)
	}
	if !slices.Contains(starts, 3) {
		t.Fatalf("describe-producers: %+v", producers)
	}
	var hanging struct {
		Hanging []struct {
			Partition             int32  `json:"partition"`
			CurrentTxnStartOffset int64  `json:"current_txn_start_offset"`
			Reason                string `json:"reason"`
		} `json:"hanging"`
	}
	okJSON(t, b, &hanging, "transactions", "find-hanging", "orders")
	if len(hanging.Hanging) != 0 {
		t.Fatalf("find-hanging while the coordinator has the transaction open: %+v", hanging)
	}
	rep := doctor(t, b, cli.ExitFindings, "--window", "1s", "--topic", "orders")
	if want := []string{"orders//lso_stuck", "orders/rc/lag_held_by_transaction"}; !slices.Equal(rep.codes(), want) {
		t.Fatalf("doctor: %v, want %v", rep.codes(), want)
	}
	if f := rep.Findings[0]; f.Numbers["last_stable_offset"] != 3 || f.Numbers["held_records"] != 3 {
		t.Fatalf("lso_stuck numbers: %+v", f)
	}
	if err := app.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	doctor(t, b, cli.ExitOK, "--window", "0", "--topic", "orders")

	// A hanging transaction: an idempotent producer id writing a transactional batch.
	ip := kmsg.NewPtrInitProducerIDRequest()
	ipr, err := ip.RequestWith(ctx, plain)
	if err != nil || ipr.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %+v %v", ipr, err)
	}
	v11 := kversion.Stable()
	v11.SetMaxKeyVersion(int16(kmsg.Produce), 11) // v12 would add the partition to a transaction
	old, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.MaxVersions(v11))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	strayProduce(t, ctx, old, ipr.ProducerID, ipr.ProducerEpoch)
	okJSON(t, b, &hanging, "transactions", "find-hanging", "stray")
	if len(hanging.Hanging) != 1 || hanging.Hanging[0].CurrentTxnStartOffset != 0 {
		t.Fatalf("find-hanging: %+v", hanging)
	}
	rep = doctor(t, b, cli.ExitFindings, "--window", "0", "--topic", "stray")
	if !slices.Equal(rep.codes(), []string{"stray//lso_stuck"}) {
		t.Fatalf("doctor on the hanging transaction: %v", rep.codes())
	}
	ok(t, b, "", "transactions", "abort", "--topic", "stray", "--partition", "0", "--start-offset", "0")
	okJSON(t, b, &hanging, "transactions", "find-hanging", "stray")
	if len(hanging.Hanging) != 0 {
		t.Fatalf("find-hanging after the abort: %+v", hanging)
	}
	doctor(t, b, cli.ExitOK, "--window", "0", "--topic", "stray")

	// A partition or topic that does not exist is named as such, not as a shard
	// error of the DescribeProducers request.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"transactions", "abort", "--topic", "stray", "--partition", "7", "--start-offset", "0"},
			`topic "stray" has no partition 7 (it has 1)`},
		{[]string{"transactions", "abort", "--topic", "stray", "--partition", "7", "--producer-id", "5", "--producer-epoch", "0"},
			`topic "stray" has no partition 7 (it has 1)`},
		{[]string{"transactions", "describe-producers", "stray", "--partition", "7"},
			`topic "stray" has no partition 7 (it has 1)`},
		{[]string{"transactions", "abort", "--topic", "nowhere", "--partition", "0", "--start-offset", "0"},
			"topic \"nowhere\" does not exist; see `samsa topic list`"},
	} {
		res := run(t, b, "", c.args...)
		if want := "Error: " + c.want + "\n"; res.code != cli.ExitFailed || res.stderr != want {
			t.Errorf("samsa %v: exit %d, stderr %q; want exit %d and %q", c.args, res.code, res.stderr, cli.ExitFailed, want)
		}
	}
}

// strayProduce writes one transactional batch of an idempotent producer id to stray.
func strayProduce(t *testing.T, ctx context.Context, c *kgo.Client, pid int64, epoch int16) {
	t.Helper()
	rec := kmsg.NewRecord()
	rec.Value = []byte("stray")
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	batch := kmsg.NewRecordBatch()
	batch.Magic, batch.Attributes, batch.ProducerID, batch.ProducerEpoch, batch.NumRecords = 2, 0x10, pid, epoch, 1
	batch.FirstTimestamp = time.Now().UnixMilli()
	batch.MaxTimestamp = batch.FirstTimestamp
	batch.Records = rec.AppendTo(nil)
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	id := "stray"
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = &id
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "stray"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("stray transactional produce: %+v %v", resp, err)
	}
}
