package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestFullDisk fills a real (tmpfs) log directory while a producer writes to a
// partition in it: the producer gets KAFKA_STORAGE_ERROR and no acknowledgement for
// what is not in the log; the process stays up; the partition in the other log
// directory keeps serving; the full directory stays online; once space is freed the
// same partition takes writes again without a restart; after a restart everything
// acknowledged is there. The metadata log lives in log.dirs[0], the healthy disk.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	full := testutil.SmallDisk(t, "4m")
	healthy := t.TempDir()
	b := testutil.StartBroker(t, "log.dirs="+healthy+","+full)
	createTopicOrFail(t, newAdmin(t, b), "disk", 2, map[string]string{"segment.bytes": "1048576"})
	onFull := int32(-1)
	for p := range int32(2) {
		if _, err := os.Stat(filepath.Join(full, fmt.Sprintf("disk-%d", p))); err == nil {
			onFull = p
		}
	}
	if onFull < 0 {
		t.Fatal("no partition of the new topic was placed on the second log directory")
	}
	onHealthy := 1 - onFull
	acked := []*ackedLog{newAckedLog(), newAckedLog()}
	c := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(0), kgo.RequestRetries(0))
	for p := range int32(2) {
		produceTracked(t, c, "disk", p, fmt.Sprintf("before-%d", p), 100, time.Now(), acked[p])
	}

	ballast := testutil.FillDisk(t, full, 64<<10)
	big := strings.Repeat("x", 8<<10)
	refused := 0
	for i := 0; i < 200 && refused < 3; i++ {
		r := &kgo.Record{Topic: "disk", Partition: onFull, Value: []byte(fmt.Sprintf("full-%04d-%s", i, big))}
		err := c.ProduceSync(ctxT(t, 20*time.Second), r).FirstErr()
		switch {
		case err == nil:
			acked[onFull].add(r)
		case isStorageError(err):
			refused++
		default:
			t.Fatalf("produce to the full directory: %v, want KAFKA_STORAGE_ERROR", err)
		}
	}
	if refused == 0 {
		t.Fatal("the disk never filled")
	}
	// The other directory serves; the full one stays online and readable.
	produceTracked(t, c, "disk", onHealthy, "while-full", 50, time.Now(), acked[onHealthy])
	meta, err := newAdmin(t, b).Metadata(ctxT(t, 10*time.Second), "disk")
	if err != nil {
		t.Fatal(err)
	}
	if p := meta.Topics["disk"].Partitions[onFull]; p.Leader != 1 || len(p.OfflineReplicas) != 0 {
		t.Fatalf("partition on the full disk: %+v, want it online", p)
	}
	checkPartition(t, b, "disk", onFull, acked[onFull], false, noLoss)

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	end := acked[onFull].end()
	r := &kgo.Record{Topic: "disk", Partition: onFull, Value: []byte("after")}
	produceSync(t, c, r)
	if r.Offset != end {
		t.Fatalf("first record once space is freed at offset %d, want %d", r.Offset, end)
	}
	acked[onFull].add(r)
	c.Close()
	noPanic(t, b)
	b.Restart(t)
	for p := range int32(2) {
		checkPartition(t, b, "disk", p, acked[p], false, noLoss)
	}
}

// TestFullDiskUnderTheMetadataLog: log.dirs[0], which holds the metadata log, fills
// up. A metadata change fails with an error (the metadata log stops, with a log line
// naming the error; no file is corrupted), the process stays up and keeps serving the
// partitions in the healthy directory; after space is freed and a restart, every
// record is there and metadata changes work again.
func TestFullDiskUnderTheMetadataLog(t *testing.T) {
	t.Parallel()
	full := testutil.SmallDisk(t, "8m")
	healthy := t.TempDir()
	b := testutil.StartBroker(t, "log.dirs="+full+","+healthy)
	adm := newAdmin(t, b)
	createTopicOrFail(t, adm, "keep", 2, nil)
	onHealthy := int32(-1)
	for p := range int32(2) {
		if _, err := os.Stat(filepath.Join(healthy, fmt.Sprintf("keep-%d", p))); err == nil {
			onHealthy = p
		}
	}
	if onHealthy < 0 {
		t.Fatal("no partition placed on the healthy directory")
	}
	acked := newAckedLog()
	c := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceTracked(t, c, "keep", onHealthy, "before", 100, time.Now(), acked)

	ballast := testutil.FillDisk(t, full, 0)
	var alterErr error
	for i := 0; i < 2000 && alterErr == nil; i++ { // until a metadata write meets the full disk
		v := fmt.Sprint(1000000 + i)
		res, err := adm.AlterTopicConfigs(ctxT(t, 10*time.Second), []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, "keep")
		if err == nil {
			err = res[0].Err
		}
		alterErr = err
	}
	if alterErr == nil {
		t.Fatal("metadata changes on a full metadata disk kept succeeding")
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return strings.Contains(b.Log(), "metadata log stopped") && strings.Contains(b.Log(), "no space left on device")
	}, "a log line saying the metadata log stopped on the full disk")
	produceTracked(t, c, "keep", onHealthy, "while-full", 50, time.Now(), acked)
	checkPartition(t, b, "keep", onHealthy, acked, false, noLoss)
	c.Close()
	noPanic(t, b)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	_ = b.Stop() // may fail: the metadata log stopped on the error
	b.StartAgain(t)
	checkPartition(t, b, "keep", onHealthy, acked, false, noLoss)
	adm = newAdmin(t, b)
	v := "2000000"
	res, err := adm.AlterTopicConfigs(ctxT(t, 10*time.Second), []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, "keep")
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("a metadata change after space was freed: %v", err)
	}
}

// noPanic fails the test if the broker's log shows a panic.
func noPanic(t *testing.T, b *testutil.Broker) {
	t.Helper()
	if strings.Contains(b.Log(), "panic") {
		t.Fatalf("the broker panicked:\n%s", b.Log())
	}
}
