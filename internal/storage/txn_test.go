package storage

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/samsa-streaming/samsa/internal/record"
)

// txnBatch is a transactional batch of n records of producer pid at epoch 0.
func txnBatch(t testing.TB, pid int64, seq int32, n int) []byte {
	return mkBatch(t, batchSpec{n: n, pid: pid, seq: seq, txn: true, valueSize: 10})
}

// txnMarker is a commit (or abort) marker of producer pid at epoch from coordinator
// epoch coordinatorEpoch.
func txnMarker(t testing.TB, pid int64, epoch int16, abort bool, coordinatorEpoch int32) []byte {
	t.Helper()
	o := record.DefaultBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.Transactional, o.Control = pid, epoch, true, true
	typ := record.ControlCommit
	if abort {
		typ = record.ControlAbort
	}
	b, err := record.Build(o, []record.Record{record.ControlRecord{Type: typ, CoordinatorEpoch: coordinatorEpoch}.Record()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFirstUnstableOffset: an open transaction holds the first unstable offset at its
// first offset; once its marker is written the transaction stays unstable until the
// high watermark passes the marker.
func TestFirstUnstableOffset(t *testing.T) {
	l := openTest(t, Config{})
	l.mustAppend(simple(t, 2, 0)) // 0-1
	if got := l.FirstUnstableOffset(2); got != math.MaxInt64 {
		t.Fatalf("no transaction: %d", got)
	}
	l.mustAppend(txnBatch(t, 7, 0, 3)) // 2-4
	l.mustAppend(simple(t, 1, 0))      // 5
	l.mustAppend(txnBatch(t, 8, 0, 1)) // 6
	for _, hw := range []int64{2, 6, 7} {
		if got := l.FirstUnstableOffset(hw); got != 2 {
			t.Fatalf("open transactions, high watermark %d: first unstable %d, want 2", hw, got)
		}
	}
	l.mustAppend(txnMarker(t, 7, 0, false, 0)) // 7
	if got := l.FirstUnstableOffset(7); got != 2 {
		t.Fatalf("marker above the high watermark: first unstable %d, want 2", got)
	}
	if got := l.FirstUnstableOffset(8); got != 6 {
		t.Fatalf("marker below the high watermark: first unstable %d, want 6 (producer 8)", got)
	}
	l.mustAppend(txnMarker(t, 8, 0, true, 0)) // 8
	if got := l.FirstUnstableOffset(9); got != math.MaxInt64 {
		t.Fatalf("every transaction ended: %d", got)
	}
	if got := l.AbortedTransactions(0, 9, nil); len(got) != 1 || got[0] != (AbortedTxn{ProducerID: 8, FirstOffset: 6, LastOffset: 8, LastStableOffset: 9}) {
		t.Fatalf("aborted transactions %+v", got)
	}
}

// TestAbortedTransactionsLookup: a fetch of [from, to) gets the aborted transactions
// overlapping it, across segments, also when the transaction started in an earlier
// segment than its marker.
func TestAbortedTransactionsLookup(t *testing.T) {
	l := openTest(t, Config{})
	l.mustAppend(txnBatch(t, 1, 0, 2))        // 0-1
	l.mustAppend(txnMarker(t, 1, 0, true, 0)) // 2
	l.mustAppend(txnBatch(t, 2, 0, 2))        // 3-4
	forceRoll(l)
	l.mustAppend(txnBatch(t, 3, 0, 1))         // 5
	l.mustAppend(txnMarker(t, 2, 0, true, 0))  // 6
	l.mustAppend(txnMarker(t, 3, 0, false, 0)) // 7
	l.mustAppend(txnBatch(t, 1, 2, 1))         // 8
	l.mustAppend(txnMarker(t, 1, 0, true, 0))  // 9
	ids := func(from, to int64) []int64 {
		var out []int64
		for _, a := range l.AbortedTransactions(from, to, nil) {
			out = append(out, a.ProducerID)
		}
		return out
	}
	for _, tc := range []struct {
		from, to int64
		want     []int64
	}{
		{0, 10, []int64{1, 2, 1}},
		{0, 2, []int64{1}},
		{3, 5, []int64{2}},
		{5, 6, []int64{2}},
		{7, 8, nil},
		{8, 10, []int64{1}},
		{10, 10, nil},
	} {
		if got := ids(tc.from, tc.to); !equalInt64s(got, tc.want) {
			t.Errorf("[%d, %d): %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTxnIndexSurvives: the aborted transactions are found again after a clean
// reopen (the .txnindex files), after a crash that lost the active segment's index
// (the replay of the log after the producer snapshot), and a truncation below a
// marker forgets its transaction.
func TestTxnIndexSurvives(t *testing.T) {
	l := openTest(t, Config{})
	l.mustAppend(txnBatch(t, 1, 0, 2))        // 0-1
	l.mustAppend(txnMarker(t, 1, 0, true, 0)) // 2
	forceRoll(l)
	l.mustAppend(txnBatch(t, 2, 0, 2))        // 3-4
	l.mustAppend(txnMarker(t, 2, 0, true, 0)) // 5
	l.mustAppend(txnBatch(t, 3, 0, 1))        // 6, open
	want := []AbortedTxn{{1, 0, 2, 3}, {2, 3, 5, 6}}
	open := int64(6)
	check := func(when string) {
		t.Helper()
		got := l.AbortedTransactions(0, 100, nil)
		if len(got) != len(want) {
			t.Fatalf("%s: %+v, want %+v", when, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: %+v, want %+v", when, got, want)
			}
		}
		if fu := l.FirstUnstableOffset(l.LogEndOffset()); fu != open {
			t.Fatalf("%s: first unstable %d, want %d", when, fu, open)
		}
	}
	check("live")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.Log.dir, fileName(0, txnIndexSuffix))); err != nil {
		t.Fatalf("first segment's transaction index: %v", err)
	}
	l.reopen(true)
	check("clean reopen")

	// A crash loses the active segment's transaction index as rewritten since the
	// clean close (its older version stays: files are replaced atomically): the
	// aborted transactions after the snapshot Close wrote are found by the replay.
	activeIndex := l.segs()[len(l.segs())-1].path(txnIndexSuffix)
	atClose, err := os.ReadFile(activeIndex)
	if err != nil {
		t.Fatal(err)
	}
	l.mustAppend(txnMarker(t, 3, 0, true, 0)) // 7
	want = append(want, AbortedTxn{3, 6, 7, 8})
	l.mustAppend(txnBatch(t, 4, 0, 1)) // 8, open
	open = 8
	l.crash()
	if err := os.WriteFile(activeIndex, atClose, 0o644); err != nil {
		t.Fatal(err)
	}
	l.reopen(false)
	check("reopen after a crash")

	// Without any snapshot the whole log is replayed.
	l.crash()
	snaps, _ := filepath.Glob(filepath.Join(l.Log.dir, "*"+snapshotSuffix))
	for _, p := range snaps {
		os.Remove(p)
	}
	l.reopen(false)
	check("reopen without snapshots")

	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	want = want[:1]
	got := l.AbortedTransactions(0, 100, nil)
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after truncating the second marker: %+v", got)
	}
	if fu := l.FirstUnstableOffset(5); fu != 3 {
		t.Fatalf("after truncating the second marker, producer 2's transaction is open again at 3: %d", fu)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.reopen(true)
	if got := l.AbortedTransactions(0, 100, nil); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after truncation and reopen: %+v", got)
	}
}

// TestTxnIndexRetention: deleting the segment that holds a marker takes its index
// entry with it.
func TestTxnIndexRetention(t *testing.T) {
	l := openTest(t, Config{})
	l.mustAppend(txnBatch(t, 1, 0, 2))        // 0-1
	l.mustAppend(txnMarker(t, 1, 0, true, 0)) // 2
	forceRoll(l)
	l.mustAppend(simple(t, 1, 0)) // 3
	if got := l.AbortedTransactions(0, 4, nil); len(got) != 1 {
		t.Fatalf("before: %+v", got)
	}
	if _, err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	if got := l.AbortedTransactions(3, 4, nil); len(got) != 0 || l.abortedCount.Load() != 0 {
		t.Fatalf("after the segment went: %+v (count %d)", got, l.abortedCount.Load())
	}
	if _, err := os.Stat(filepath.Join(l.Log.dir, fileName(0, txnIndexSuffix))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("transaction index of the deleted segment: %v", err)
	}
}

// TestTxnAppendChecks: verification guards (KIP-890), a non-transactional batch during
// a transaction, fenced coordinators and coordinator writes without sequences.
func TestTxnAppendChecks(t *testing.T) {
	l := openTest(t, Config{})
	guard, needed := l.TxnVerification(5, 0)
	if !needed || guard == 0 {
		t.Fatalf("first batch of a transaction needs verification: %d %v", guard, needed)
	}
	// A marker (the coordinator aborted meanwhile) overtakes the verification.
	if _, err := l.Append(txnMarker(t, 5, 0, true, 3), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(txnBatch(t, 5, 0, 1), AppendOptions{TxnGuard: guard}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append after the marker overtook the verification: %v", err)
	}
	guard, _ = l.TxnVerification(5, 0)
	if _, err := l.Append(txnBatch(t, 5, 0, 1), AppendOptions{TxnGuard: guard}); err != nil {
		t.Fatal(err)
	}
	if _, needed := l.TxnVerification(5, 0); needed {
		t.Fatal("verification needed while the transaction is open")
	}
	// Transactions v2: the next transaction (epoch 1) must not join this one, whose
	// marker has not arrived yet.
	if _, needed := l.TxnVerification(5, 1); !needed {
		t.Fatal("no verification for a batch of the next epoch while the transaction is open")
	}
	next := mkBatch(t, batchSpec{n: 1, pid: 5, epoch: 1, seq: 0, txn: true})
	if _, err := l.Append(next, AppendOptions{}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch of the next epoch before the marker: %v", err)
	}
	if _, err := l.Append(txnBatch(t, 5, 1, 1), AppendOptions{TxnGuard: 12345}); err != nil {
		t.Fatalf("next batch of the open transaction: %v", err)
	}
	idem := mkBatch(t, batchSpec{n: 1, pid: 5, seq: 2})
	if _, err := l.Append(idem, AppendOptions{}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch during the transaction: %v", err)
	}
	if _, err := l.Append(txnMarker(t, 5, 0, false, 2), AppendOptions{}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker from an older coordinator epoch: %v", err)
	}
	if _, err := l.Append(txnMarker(t, 5, 0, false, 3), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// A coordinator's transactional write carries no sequence number.
	o := record.DefaultBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.Transactional = 9, 4, true
	offsets, err := record.Build(o, []record.Record{{Key: []byte("k"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if info, err := l.Append(offsets, AppendOptions{Coordinator: true}); err != nil || info.Duplicate {
			t.Fatalf("coordinator write %d: %+v %v", i, info, err)
		}
	}
	o.ProducerEpoch = 3
	older, _ := record.Build(o, []record.Record{{Key: []byte("k"), Value: []byte("v")}})
	if _, err := l.Append(older, AppendOptions{Coordinator: true}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("coordinator write of an older epoch: %v", err)
	}
}
