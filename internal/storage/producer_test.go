package storage

import (
	"errors"
	"math"
	"testing"
)

func TestIdempotentProducer(t *testing.T) {
	type step struct {
		epoch   int16
		seq     int32
		n       int
		wantErr error
		wantDup bool
		wantOff int64 // base offset expected (original one for duplicates)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{0, 0, 2, nil, false, 0}, {0, 2, 3, nil, false, 2}, {0, 5, 1, nil, false, 5}}},
		{"duplicate of last", []step{{0, 0, 2, nil, false, 0}, {0, 2, 2, nil, false, 2}, {0, 2, 2, nil, true, 2}}},
		{"duplicate of older cached batch", []step{{0, 0, 1, nil, false, 0}, {0, 1, 1, nil, false, 1}, {0, 2, 1, nil, false, 2}, {0, 0, 1, nil, true, 0}}},
		{"duplicate evicted after five", []step{{0, 0, 1, nil, false, 0}, {0, 1, 1, nil, false, 1}, {0, 2, 1, nil, false, 2}, {0, 3, 1, nil, false, 3}, {0, 4, 1, nil, false, 4}, {0, 5, 1, nil, false, 5}, {0, 0, 1, ErrOutOfOrderSequence, false, 0}}},
		{"gap", []step{{0, 0, 2, nil, false, 0}, {0, 3, 1, ErrOutOfOrderSequence, false, 0}}},
		{"new producer at any sequence", []step{{0, 7, 1, nil, false, 0}, {0, 9, 1, ErrOutOfOrderSequence, false, 0}, {0, 8, 1, nil, false, 1}}},
		{"epoch bump resets", []step{{0, 0, 3, nil, false, 0}, {1, 0, 1, nil, false, 3}, {1, 1, 1, nil, false, 4}}},
		{"epoch bump not at zero", []step{{0, 0, 3, nil, false, 0}, {1, 3, 1, ErrOutOfOrderSequence, false, 0}}},
		{"old epoch fenced", []step{{2, 0, 1, nil, false, 0}, {1, 1, 1, ErrInvalidProducerEpoch, false, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := openTest(t, Config{})
			for i, s := range tc.steps {
				info, err := l.Append(mkBatch(t, batchSpec{n: s.n, pid: 42, epoch: s.epoch, seq: s.seq}), AppendOptions{})
				if !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d: err %v, want %v", i, err, s.wantErr)
				}
				if err != nil {
					continue
				}
				if info.Duplicate != s.wantDup || info.BaseOffset != s.wantOff || info.LastOffset != s.wantOff+int64(s.n)-1 {
					t.Fatalf("step %d: %+v, want dup=%v base=%d", i, info, s.wantDup, s.wantOff)
				}
			}
		})
	}
}

func TestSequenceWrapAround(t *testing.T) {
	l := openTest(t, Config{})
	// Establish state near the top of the sequence space through a follower append.
	b := mkBatch(t, batchSpec{n: 1, pid: 9, epoch: 0, seq: math.MaxInt32})
	if _, err := l.Append(b, AppendOptions{Follower: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(mkBatch(t, batchSpec{n: 2, pid: 9, epoch: 0, seq: 0}), AppendOptions{}); err != nil {
		t.Fatalf("sequence after MaxInt32 must be 0: %v", err)
	}
	if ps := l.Producers(); len(ps) != 1 || ps[0].LastSequence != 1 {
		t.Fatalf("producers %+v", ps)
	}
}

func TestNonIdempotentBatchesSkipChecks(t *testing.T) {
	l := openTest(t, Config{})
	for i := 0; i < 3; i++ {
		info := l.mustAppend(simple(t, 1, 0))
		if info.Duplicate {
			t.Fatal("non-idempotent batch reported duplicate")
		}
	}
	if len(l.Producers()) != 0 {
		t.Fatal("producer state for producer id -1")
	}
}

func TestTransactionalProducerState(t *testing.T) {
	l := openTest(t, Config{})
	l.mustAppend(simple(t, 1, 0))
	if _, err := l.Append(mkBatch(t, batchSpec{n: 2, pid: 5, epoch: 1, seq: 0, txn: true, ts: 77}), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	ps := l.Producers()
	if len(ps) != 1 || ps[0].CurrentTxnStartOffset != 1 || ps[0].Epoch != 1 || ps[0].LastSequence != 1 {
		t.Fatalf("producers %+v", ps)
	}
	marker := mkBatch(t, batchSpec{n: 1, pid: 5, epoch: 1, seq: -1, txn: true, control: true})
	if _, err := l.Append(marker, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if ps := l.Producers(); ps[0].CurrentTxnStartOffset != -1 {
		t.Fatalf("transaction still open after marker: %+v", ps)
	}
	old := mkBatch(t, batchSpec{n: 1, pid: 5, epoch: 0, seq: -1, txn: true, control: true})
	if _, err := l.Append(old, AppendOptions{}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker from old epoch: %v", err)
	}
}

// TestTxnV2MarkerEpoch: with transaction version 2 (KIP-1228) a marker must carry an
// epoch above the records' — the coordinator bumps it to end the transaction — so a
// late copy of the last transaction's marker cannot end the next one, which the
// producer writes at that bumped epoch; a repeat with no transaction open is written
// again. Version 0 markers keep the old rule: the records' epoch is enough.
func TestTxnV2MarkerEpoch(t *testing.T) {
	marker := func(epoch int16) []byte {
		return mkBatch(t, batchSpec{n: 1, pid: 5, epoch: epoch, seq: -1, txn: true, control: true})
	}
	data := func(epoch int16) []byte { return mkBatch(t, batchSpec{n: 1, pid: 5, epoch: epoch, seq: 0, txn: true}) }
	v2 := AppendOptions{Coordinator: true, TxnVersion: 2}
	open := func(l *testLog) int64 {
		t.Helper()
		ps := l.Producers()
		if len(ps) != 1 {
			t.Fatalf("producers %+v", ps)
		}
		return ps[0].CurrentTxnStartOffset
	}

	l := openTest(t, Config{})
	l.mustAppend(data(3))
	if _, err := l.Append(marker(3), v2); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("v2 marker at the records' epoch: %v", err)
	}
	if open(l) != 0 {
		t.Fatal("a refused marker ended the transaction")
	}
	if _, err := l.Append(marker(4), v2); err != nil {
		t.Fatalf("v2 marker at the bumped epoch: %v", err)
	}
	// The answer was lost: the coordinator sends it again.
	if info, err := l.Append(marker(4), v2); err != nil || info.BaseOffset != 2 {
		t.Fatalf("repeated v2 marker with no transaction open: %+v %v", info, err)
	}
	// The next transaction, at the bumped epoch, and a late copy of the marker.
	l.mustAppend(data(4))
	if _, err := l.Append(marker(4), v2); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("late v2 marker during the next transaction: %v", err)
	}
	if open(l) != 3 {
		t.Fatalf("the late marker ended the next transaction: open at %d", open(l))
	}
	// A legacy marker at the records' epoch still ends it (transaction version 0).
	if _, err := l.Append(marker(4), AppendOptions{Coordinator: true}); err != nil {
		t.Fatalf("v0 marker at the records' epoch: %v", err)
	}
	if open(l) != -1 {
		t.Fatal("the v0 marker did not end the transaction")
	}
	if _, err := l.Append(marker(3), AppendOptions{Coordinator: true}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("v0 marker below the epoch: %v", err)
	}

	// At MaxInt16 (a fenced transaction at the last epoch) a marker repeats there.
	l.mustAppend(data(math.MaxInt16 - 1))
	if _, err := l.Append(marker(math.MaxInt16), v2); err != nil {
		t.Fatal(err)
	}
	l.mustAppend(mkBatch(t, batchSpec{n: 1, pid: 5, epoch: math.MaxInt16, seq: 0, txn: true}))
	if _, err := l.Append(marker(math.MaxInt16), v2); err != nil {
		t.Fatalf("v2 marker at MaxInt16: %v", err)
	}
}

func TestProducerStateSurvivesReopen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clean bool
		roll  bool
	}{{"clean", true, false}, {"crash no snapshot", false, false}, {"crash after roll", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{}
			if tc.roll {
				cfg.SegmentBytes = int64(2 * len(mkBatch(t, batchSpec{n: 2, pid: 1, seq: 0})))
			}
			l := openTest(t, cfg)
			var seq int32
			for i := 0; i < 5; i++ {
				l.mustAppend(mkBatch(t, batchSpec{n: 2, pid: 1, epoch: 3, seq: seq}))
				seq += 2
			}
			if tc.clean {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				l.crash()
			}
			l.reopen(tc.clean)
			// A retry of the last batch is a duplicate with its original offsets.
			info, err := l.Append(mkBatch(t, batchSpec{n: 2, pid: 1, epoch: 3, seq: 8}), AppendOptions{})
			if err != nil || !info.Duplicate || info.BaseOffset != 8 {
				t.Fatalf("retry after reopen: %+v %v", info, err)
			}
			if _, err := l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, epoch: 3, seq: 11}), AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("gap after reopen: %v", err)
			}
			if _, err := l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, epoch: 2, seq: 10}), AppendOptions{}); !errors.Is(err, ErrInvalidProducerEpoch) {
				t.Fatalf("old epoch after reopen: %v", err)
			}
			info, err = l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, epoch: 3, seq: 10}), AppendOptions{})
			if err != nil || info.BaseOffset != 10 {
				t.Fatalf("next batch after reopen: %+v %v", info, err)
			}
		})
	}
}

func TestSnapshotEncoding(t *testing.T) {
	ps := newProducerState()
	for pid := int64(1); pid <= 3; pid++ {
		for s := int32(0); s < 7; s++ {
			h := mkHeader(pid, 2, s, int64(s)*10)
			ps.update(&h, nil)
		}
	}
	b := ps.encode()
	got, err := decodeProducerState(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.producers) != 3 || len(got.producers[2].batches) != producerBatchesCached || got.producers[2].lastSeq() != 6 {
		t.Fatalf("decoded %+v", got.producers[2])
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		if _, err := decodeProducerState(c); err == nil {
			t.Fatalf("flipped byte %d accepted", i)
		}
	}
}

func TestExpireProducers(t *testing.T) {
	l := openTest(t, Config{ProducerIDExpirationMs: 1000})
	now := t0.UnixMilli()
	l.mustAppend(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 0, ts: now - 5000}))
	l.mustAppend(mkBatch(t, batchSpec{n: 1, pid: 2, seq: 0, ts: now}))
	l.mustAppend(mkBatch(t, batchSpec{n: 1, pid: 3, seq: 0, ts: now - 5000, txn: true}))
	if n := l.ExpireProducers(t0); n != 1 {
		t.Fatalf("expired %d producers, want 1", n)
	}
	ps := l.Producers()
	if len(ps) != 2 || ps[0].ProducerID != 2 || ps[1].ProducerID != 3 {
		t.Fatalf("producers left %+v", ps)
	}
	// The forgotten producer is accepted where it stands (TestUnknownProducerAnySequence).
	if _, err := l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 1, ts: now}), AppendOptions{}); err != nil {
		t.Fatalf("expired producer continuing: %v", err)
	}
}

// TestUnknownProducerAnySequence: a producer the partition holds no state for (expired
// after producer.id.expiration.ms, or never seen) is accepted at whatever sequence it
// sends, as Kafka's ProducerAppendInfo.checkSequence does when the producer has no
// epoch here; from then on its sequences are checked again.
func TestUnknownProducerAnySequence(t *testing.T) {
	l := openTest(t, Config{ProducerIDExpirationMs: 1000})
	now := t0.UnixMilli()
	l.mustAppend(mkBatch(t, batchSpec{n: 2, pid: 1, seq: 0, ts: now - 5000}))
	if n := l.ExpireProducers(t0); n != 1 {
		t.Fatalf("expired %d producers, want 1", n)
	}
	// The producer comes back after idling, numbering on from where it stood.
	info, err := l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 2, ts: now}), AppendOptions{})
	if err != nil || info.Duplicate || info.BaseOffset != 2 {
		t.Fatalf("expired producer continuing at sequence 2: %+v %v", info, err)
	}
	if _, err := l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 4, ts: now}), AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after it came back: %v, want ErrOutOfOrderSequence", err)
	}
	if info, err := l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 2, ts: now}), AppendOptions{}); err != nil || !info.Duplicate || info.BaseOffset != 2 {
		t.Fatalf("retry after it came back: %+v %v", info, err)
	}
	// A producer never seen here, at a later epoch and sequence.
	info, err = l.Append(mkBatch(t, batchSpec{n: 1, pid: 2, epoch: 4, seq: 77, ts: now}), AppendOptions{})
	if err != nil || info.BaseOffset != 3 {
		t.Fatalf("unknown producer at sequence 77: %+v %v", info, err)
	}
}

// TestTruncateFullyForgetsProducers: starting the log over at an offset (a follower
// behind the leader's log start) drops the producer state and its snapshots, as
// Kafka's ProducerStateManager.truncateFullyAndStartAt does: a snapshot of the old log
// must not come back as the state of the new one.
func TestTruncateFullyForgetsProducers(t *testing.T) {
	l := openTest(t, Config{SegmentBytes: int64(2 * len(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 0})))})
	for seq := int32(0); seq < 5; seq++ {
		l.mustAppend(mkBatch(t, batchSpec{n: 1, pid: 1, seq: seq}))
	}
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if ps := l.Producers(); len(ps) != 0 {
		t.Fatalf("producers after starting over at 100: %+v", ps)
	}
	// The producer's sequence 0 is not a duplicate of a batch at an offset gone.
	info, err := l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 0}), AppendOptions{})
	if err != nil || info.Duplicate || info.BaseOffset != 100 {
		t.Fatalf("sequence 0 after starting over: %+v %v", info, err)
	}
	l.crash()
	l.reopen(false)
	if ps := l.Producers(); len(ps) != 1 || ps[0].LastSequence != 0 {
		t.Fatalf("producers after a crash: %+v", ps)
	}
}

// TestProducerStateAfterDeleteRecordsAndCrash: DeleteRecords moves the log start past
// the newest producer snapshot, into batches still on disk, and the process dies
// before the next snapshot. Loading replays the batches after the snapshot, those
// below the log start included: the producer's state is where its last batch left
// it, so its next sequence is accepted and its last batch is still a duplicate.
func TestProducerStateAfterDeleteRecordsAndCrash(t *testing.T) {
	l := openTest(t, Config{SegmentBytes: int64(3 * len(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 0})))})
	for seq := int32(0); seq < 6; seq++ { // segments [0, 3) and [3, 6): a snapshot at 3
		l.mustAppend(mkBatch(t, batchSpec{n: 1, pid: 1, seq: seq}))
	}
	if start, err := l.DeleteRecordsBefore(6); err != nil || start != 6 {
		t.Fatalf("DeleteRecordsBefore(6): %d %v", start, err)
	}
	l.crash()
	l.reopen(false)
	if ps := l.Producers(); len(ps) != 1 || ps[0].LastSequence != 5 {
		t.Fatalf("producers after the crash: %+v, want producer 1 at sequence 5", ps)
	}
	if info, err := l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 5}), AppendOptions{}); err != nil || !info.Duplicate || info.BaseOffset != 5 {
		t.Fatalf("retry of sequence 5: %+v %v", info, err)
	}
	if info, err := l.Append(mkBatch(t, batchSpec{n: 1, pid: 1, seq: 6}), AppendOptions{}); err != nil || info.Duplicate || info.BaseOffset != 6 {
		t.Fatalf("sequence 6: %+v %v", info, err)
	}
}
