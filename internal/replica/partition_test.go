package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/storage"
)

func newTestPartition(t *testing.T) *Partition {
	t.Helper()
	log, err := storage.Open(storage.Options{Dir: t.TempDir(), Topic: "t", Partition: 0,
		Config: storage.DefaultConfig(), Clock: clock.NewFake(time.Unix(1_700_000_000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	p := NewPartition("t", 0, [16]byte{1}, log, 1)
	if _, err := p.Apply(State{Leader: 1, LeaderEpoch: 3, Replicas: []int32{1}, ISR: []int32{1}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	p.SetSettings(Settings{MaxMessageBytes: 1 << 20, MinInsyncReplicas: 1})
	return p
}

func batch(t *testing.T, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: []byte("v")}
	}
	b, err := record.Build(record.DefaultBuildOptions(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHighWatermarkFollowsAppendsAndWakesWaiters(t *testing.T) {
	p := newTestPartition(t)
	wake := make(chan struct{}, 1)
	p.Wait(wake)
	info, err := p.AppendAsLeader(batch(t, 3), true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if info.BaseOffset != 0 || info.LastOffset != 2 || p.HighWatermark() != 3 {
		t.Fatalf("append: %+v, high watermark %d", info, p.HighWatermark())
	}
	select {
	case <-wake:
	default:
		t.Fatal("waiter not woken by the high watermark moving")
	}
	if got := p.Log.LatestEpoch(); got != 3 {
		t.Fatalf("batch stamped with epoch %d, want the leader epoch 3", got)
	}
}

func TestLeaderEpochChecks(t *testing.T) {
	p := newTestPartition(t)
	for _, tc := range []struct {
		epoch int32
		want  error
	}{{-1, nil}, {3, nil}, {2, ErrFencedLeaderEpoch}, {4, ErrUnknownLeaderEpoch}} {
		if err := p.CheckLeaderEpoch(tc.epoch); !errors.Is(err, tc.want) {
			t.Errorf("epoch %d: %v, want %v", tc.epoch, err, tc.want)
		}
	}
}

func TestAppendRefusals(t *testing.T) {
	p := newTestPartition(t)
	p.SetSettings(Settings{MaxMessageBytes: 1 << 20, MinInsyncReplicas: 2})
	if _, err := p.AppendAsLeader(batch(t, 1), true, time.Now()); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with ISR 1 < min.insync.replicas 2: %v", err)
	}
	if _, err := p.AppendAsLeader(batch(t, 1), false, time.Now()); err != nil {
		t.Fatalf("acks=1 ignores min.insync.replicas: %v", err)
	}
	if _, err := p.Apply(State{Leader: 2, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsLeader(batch(t, 1), false, time.Now()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append on a follower: %v", err)
	}
}

// txnBatch builds a transactional batch of producer pid (epoch 0) starting at seq, or
// its marker when marker is set.
func txnBatch(t *testing.T, pid int64, seq int32, n int, marker bool) []byte {
	t.Helper()
	o := record.DefaultBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = pid, 0, seq, true
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: []byte("v")}
	}
	if marker {
		o.Control, o.BaseSequence = true, -1
		recs = []record.Record{record.ControlRecord{Type: record.ControlCommit}.Record()}
	}
	b, err := record.Build(o, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLastStableOffset: the last stable offset stops at an open transaction, and
// passes it once the high watermark passed its marker (on a leader with a follower,
// whose fetches move the high watermark).
func TestLastStableOffset(t *testing.T) {
	p := newTestPartition(t)
	if _, err := p.Apply(State{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	appendAt := func(b []byte) {
		t.Helper()
		if _, err := p.AppendAsLeader(b, false, now); err != nil {
			t.Fatal(err)
		}
	}
	follow := func(offset int64) {
		t.Helper()
		if err := p.FollowerFetch(2, -1, offset, 0, now); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(hw, lso int64) {
		t.Helper()
		if p.HighWatermark() != hw || p.LastStableOffset() != lso {
			t.Fatalf("high watermark %d, last stable offset %d; want %d, %d", p.HighWatermark(), p.LastStableOffset(), hw, lso)
		}
	}
	appendAt(batch(t, 2)) // 0-1
	follow(2)
	expect(2, 2)
	appendAt(txnBatch(t, 7, 0, 3, false)) // 2-4
	appendAt(batch(t, 1))                 // 5
	follow(6)
	expect(6, 2)
	appendAt(txnBatch(t, 7, 0, 0, true)) // 6: commit marker, not replicated yet
	expect(6, 2)
	follow(7)
	expect(7, 7)
}

// TestLastStableOffsetNotBelowLogStart: DeleteRecords past the first offset of an
// open transaction leaves the last stable offset at the log start, not below it, as
// Kafka's UnifiedLog.maybeIncrementFirstUnstableOffset clamps the first unstable
// offset to the log start offset.
func TestLastStableOffsetNotBelowLogStart(t *testing.T) {
	p := newTestPartition(t)
	for _, b := range [][]byte{txnBatch(t, 7, 0, 3, false), batch(t, 2)} { // 0-2 open, 3-4
		if _, err := p.AppendAsLeader(b, false, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if p.HighWatermark() != 5 || p.LastStableOffset() != 0 {
		t.Fatalf("high watermark %d, last stable offset %d; want 5, 0", p.HighWatermark(), p.LastStableOffset())
	}
	if _, err := p.Log.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	p.LogStartMoved()
	if got := p.LastStableOffset(); got != 4 {
		t.Fatalf("last stable offset %d after the log start moved to 4, want 4", got)
	}
}
