package broker

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// TestRetentionZeroKeepsNothing: retention.ms=0 and retention.bytes=0 are valid
// topic configs (Kafka's LogConfig: retention.ms at least -1, retention.bytes any
// long) that keep nothing: every segment is deleted, the active one rolled first
// (UnifiedLog.deleteRetentionMsBreachedSegments, deleteRetentionSizeBreachedSegments).
func TestRetentionZeroKeepsNothing(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	for _, overrides := range []map[string]string{
		{"retention.ms": "0"},
		{"retention.ms": "-1", "retention.bytes": "0"},
	} {
		tc, err := config.ResolveTopic(config.Default(), overrides)
		if err != nil {
			t.Fatal(err)
		}
		l, err := storage.Open(storage.Options{Dir: t.TempDir(), Topic: "t", Config: storageConfig(tc, config.Default()), Clock: clock.NewFake(now)})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		batch, err := record.Build(record.BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: now.UnixMilli() - 10},
			[]record.Record{{Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(batch, storage.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if n, err := l.EnforceRetention(now); err != nil || n != 1 || l.LogStartOffset() != 1 {
			t.Errorf("%v: deleted %d segments (err %v), log start %d; want 1, 1", overrides, n, err, l.LogStartOffset())
		}
	}
}

// TestRetentionKeepsRecordsAboveHighWatermark: retention deletes only segments wholly
// below the high watermark, so that the log start offset never passes it (Kafka's
// UnifiedLog.deletableSegments: highWatermark >= the segment's upper bound; the
// active segment only when the high watermark is the log end).
func TestRetentionKeepsRecordsAboveHighWatermark(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "hw", 1)
	if code := produceTo(t, b, "hw"); code != 0 { // timestamp 0: long expired
		t.Fatalf("produce: %v", code)
	}
	p := b.replicas.Get("hw", 0)
	batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("not replicated yet")}})
	if err != nil {
		t.Fatal(err)
	}
	// Appended under the high watermark's feet, as a leader's append waits for its
	// followers: high watermark 1, log end 2.
	if _, err := p.Log.Append(batch, storage.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	b.logs.RetentionPass()
	if start, hw := p.Log.LogStartOffset(), p.HighWatermark(); start > hw {
		t.Fatalf("retention moved the log start to %d, past the high watermark %d", start, hw)
	}
	if code := produceTo(t, b, "hw"); code != 0 { // high watermark 3 = log end
		t.Fatalf("produce: %v", code)
	}
	b.logs.RetentionPass()
	if start := p.Log.LogStartOffset(); start != 3 {
		t.Fatalf("log start %d after retention below the high watermark, want 3", start)
	}
}

// TestProduceRecomputesMaxTimestamp: the broker sets a batch's maxTimestamp to the
// largest timestamp of its records, whatever the producer wrote there (Kafka's
// LogValidator: batch.setMaxTimestamp(CREATE_TIME, maxTimestamp) after the walk).
// Trusted, a header claiming the far future would keep its segment from retention
// forever and answer ListOffsets MAX_TIMESTAMP with a time no record has.
func TestProduceRecomputesMaxTimestamp(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "maxts", 1)
	opts := record.DefaultBuildOptions()
	opts.BaseTimestamp = 1000
	batch, err := record.Build(opts, []record.Record{{Value: []byte("a")}, {TimestampDelta: 5, Value: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(batch[35:], uint64(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()))
	binary.BigEndian.PutUint32(batch[record.CRCOffset:], record.Checksum(batch))
	if code := produceBatch(t, b, "maxts", batch); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "maxts"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = listMaxTimestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	got := call[*kmsg.ListOffsetsResponse](t, b, req).Topics[0].Partitions[0]
	if got.ErrorCode != 0 || got.Timestamp != 1005 || got.Offset != 1 {
		t.Fatalf("MAX_TIMESTAMP: timestamp %d offset %d (%v); want 1005 at offset 1", got.Timestamp, got.Offset, kerr.ErrorForCode(got.ErrorCode))
	}
}

// TestSmallSegmentIndexBytes: segment.index.bytes accepts 4 and more, as Kafka's
// LogConfig does (atLeast(4)); a partition so configured opens and takes records
// (each index then holds no entry: every append rolls the non-empty segment).
func TestSmallSegmentIndexBytes(t *testing.T) {
	b := startTestBroker(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "tinyindex", 1, 1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "segment.index.bytes", kmsg.StringPtr("4")
	rt.Configs = append(rt.Configs, c)
	req.Topics = append(req.Topics, rt)
	if code := call[*kmsg.CreateTopicsResponse](t, b, req).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.replicas.Get("tinyindex", 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("partition never opened")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 2 {
		if code := produceTo(t, b, "tinyindex"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
}

// TestFlushMsZeroFlushes: flush.ms=0 (Kafka's LogConfig: atLeast(0)) flushes at every
// pass of the flush scheduler (Kafka's LogManager.flushDirtyLogs flushes when the
// time since the last flush is at least flush.ms); it is not "never".
func TestFlushMsZeroFlushes(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewFake(now)
	tc, err := config.ResolveTopic(config.Default(), map[string]string{"flush.ms": "0"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := storage.Open(storage.Options{Dir: t.TempDir(), Topic: "t", Config: storageConfig(tc, config.Default()), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batch, storage.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second) // the next flush scheduler pass
	if err := l.MaybeFlush(clk.Now()); err != nil || l.RecoveryPoint() != 1 {
		t.Fatalf("MaybeFlush: %v, recovery point %d; want 1", err, l.RecoveryPoint())
	}
}

// TestIndexIntervalBytesZero: index.interval.bytes=0 (Kafka's LogConfig: atLeast(0))
// indexes every batch but the segment's first (Kafka's LogSegment.append adds an
// entry when more than index.interval.bytes were appended since the last one); it
// is not the 4096-byte default.
func TestIndexIntervalBytesZero(t *testing.T) {
	tc, err := config.ResolveTopic(config.Default(), map[string]string{"index.interval.bytes": "0"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l, err := storage.Open(storage.Options{Dir: dir, Topic: "t", Config: storageConfig(tc, config.Default()), Clock: clock.NewFake(time.UnixMilli(0))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(batch, storage.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(l.Dir(), "00000000000000000000.index"))
	if err != nil || st.Size() != 2*8 {
		t.Fatalf("offset index: %v, %d bytes; want 2 entries of 8 bytes", err, st.Size())
	}
}

// TestListOffsetsLeaderEpoch: ListOffsets answers the leader epoch of the offset it
// returns, as Kafka does: the earliest epoch for EARLIEST (UnifiedLog.
// fetchOffsetByTimestamp), the found batch's partition leader epoch for a timestamp
// and MAX_TIMESTAMP (FileRecords.searchForTimestamp, largestTimestampAfter). Clients
// keep it with the position to validate it after a leader change (KIP-320).
func TestListOffsetsLeaderEpoch(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "epochs", 1)
	if code := produceTo(t, b, "epochs"); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	want := b.replicas.Get("epochs", 0).LeaderEpoch()
	for _, ts := range []int64{listEarliest, listMaxTimestamp, 0} {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "epochs"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		got := call[*kmsg.ListOffsetsResponse](t, b, req).Topics[0].Partitions[0]
		if got.ErrorCode != 0 || got.Offset != 0 || got.LeaderEpoch != want {
			t.Errorf("timestamp %d: offset %d, leader epoch %d (%v); want 0, %d", ts, got.Offset, got.LeaderEpoch, kerr.ErrorForCode(got.ErrorCode), want)
		}
	}
}
