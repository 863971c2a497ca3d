package broker

import (
	"testing"
	"time"

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
