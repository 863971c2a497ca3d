package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/samsa-streaming/samsa/internal/record"
)

// Transactions in the log, as Kafka's ProducerStateManager and TransactionIndex keep
// them: the producer table knows each producer's open transaction (its first offset
// here), a marker (control batch) ends it, and an aborted transaction is recorded in
// the aborted-transaction index of the segment holding its marker, so that a
// read_committed fetch learns which records to drop. The first unstable offset (the
// first offset of the oldest transaction that is open or whose marker is not yet below
// the high watermark) bounds the last stable offset.

// AbortedTxn is one entry of the aborted-transaction index (Kafka's AbortedTxn): the
// transaction of ProducerID whose first record here is at FirstOffset was aborted by
// the marker at LastOffset; LastStableOffset is the first unstable offset once that
// marker was written (the marker's offset + 1 when no other transaction was open).
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// .txnindex (format, Kafka's TransactionIndex): 34-byte entries, no header:
//
//	version int16 (0), producerID int64, firstOffset int64, lastOffset int64,
//	lastStableOffset int64
const (
	txnIndexSuffix    = ".txnindex"
	txnIndexEntrySize = 34
	txnIndexVersion   = 0
)

func encodeTxnIndex(entries []AbortedTxn) []byte {
	b := make([]byte, 0, len(entries)*txnIndexEntrySize)
	for _, a := range entries {
		b = binary.BigEndian.AppendUint16(b, txnIndexVersion)
		b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(a.LastStableOffset))
	}
	return b
}

func decodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	if len(b)%txnIndexEntrySize != 0 {
		return nil, fmt.Errorf("%w: transaction index of %d bytes is not a multiple of %d", ErrCorrupt, len(b), txnIndexEntrySize)
	}
	out := make([]AbortedTxn, 0, len(b)/txnIndexEntrySize)
	for ; len(b) > 0; b = b[txnIndexEntrySize:] {
		if v := int16(binary.BigEndian.Uint16(b)); v != txnIndexVersion {
			return nil, fmt.Errorf("%w: transaction index entry of version %d", ErrCorrupt, v)
		}
		a := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		if n := len(out); a.FirstOffset > a.LastOffset || (n > 0 && a.LastOffset <= out[n-1].LastOffset) {
			return nil, fmt.Errorf("%w: transaction index entry [%d, %d] out of order", ErrCorrupt, a.FirstOffset, a.LastOffset)
		}
		out = append(out, a)
	}
	return out, nil
}

// writeTxnIndex writes a segment's aborted transactions, or removes the file when
// there are none.
func (s *segment) writeTxnIndex(sync bool) error {
	s.idx.RLock()
	entries := s.idx.aborted
	s.idx.RUnlock()
	if len(entries) == 0 {
		if err := s.fs.Remove(s.path(txnIndexSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return writeFileAtomic(s.fs, s.path(txnIndexSuffix), encodeTxnIndex(entries), sync)
}

// addAborted records an aborted transaction whose marker this segment holds. Log.mu
// held.
func (s *segment) addAborted(a AbortedTxn) {
	s.idx.Lock()
	s.idx.aborted = append(s.idx.aborted, a)
	s.idx.Unlock()
	s.txnDirty = true
}

// dropAbortedFrom forgets the aborted transactions whose marker is at or after offset
// (they are replayed again, or were truncated away). Log.mu held.
func (s *segment) dropAbortedFrom(offset int64) int {
	s.idx.Lock()
	defer s.idx.Unlock()
	keep := sort.Search(len(s.idx.aborted), func(i int) bool { return s.idx.aborted[i].LastOffset >= offset })
	n := len(s.idx.aborted) - keep
	if n > 0 {
		s.idx.aborted = s.idx.aborted[:keep:keep]
		s.txnDirty = true
	}
	return n
}

// loadTxnIndexes reads the .txnindex file of every segment that has one (ents is the
// directory's listing). A damaged file is logged and ignored: the transactions it
// named read as committed, as they would after Kafka's cleaner dropped their markers.
func (l *Log) loadTxnIndexes(ents []os.DirEntry) {
	have := map[int64]bool{}
	for _, e := range ents {
		if stem, ok := strings.CutSuffix(e.Name(), txnIndexSuffix); ok {
			if b, ok := parseBase(stem); ok {
				have[b] = true
			}
		}
	}
	if len(have) == 0 {
		return
	}
	for _, s := range l.segs() {
		if !have[s.base] {
			continue
		}
		b, err := readFile(l.fs, s.path(txnIndexSuffix))
		var entries []AbortedTxn
		if err == nil {
			entries, err = decodeTxnIndex(b)
		}
		if err != nil {
			l.logger.Warn("transaction index unreadable; its aborted transactions are forgotten", "topic", l.topic,
				"partition", l.partition, "file", s.path(txnIndexSuffix), "err", err)
			s.txnDirty = true
			continue
		}
		s.idx.Lock()
		s.idx.aborted = entries
		s.idx.Unlock()
		l.abortedCount.Add(int64(len(entries)))
	}
}

// forgetAborted takes the entries of a segment leaving the log out of the count.
func (l *Log) forgetAborted(s *segment) {
	s.idx.RLock()
	n := len(s.idx.aborted)
	s.idx.RUnlock()
	if n > 0 {
		l.abortedCount.Add(-int64(n))
	}
}

// dropAbortedFromLocked forgets every aborted transaction whose marker is at or after
// offset, before producer state is replayed from there. Log.mu held.
func (l *Log) dropAbortedFromLocked(offset int64) {
	if l.abortedCount.Load() == 0 {
		return
	}
	for _, s := range l.segs() {
		if n := s.dropAbortedFrom(offset); n > 0 {
			l.abortedCount.Add(-int64(n))
		}
	}
}

// writeDirtyTxnIndexesLocked writes the transaction index of every inactive segment
// whose entries changed (the active one's is written when it stops being active).
func (l *Log) writeDirtyTxnIndexesLocked() error {
	var errs []error
	for _, s := range l.segs() {
		if s.txnDirty && !s.active {
			err := s.writeTxnIndex(false)
			s.txnDirty = err != nil
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// completeTxnLocked records a transaction a marker in segment s ended: it stays
// unstable until the high watermark passes the marker, and an aborted one enters s's
// transaction index.
func (l *Log) completeTxnLocked(s *segment, done completedTxn) {
	ps := l.mu.producers
	ps.unreplicated = append(ps.unreplicated, done)
	if done.aborted {
		lso := done.last + 1
		for _, first := range ps.ongoing {
			lso = min(lso, first)
		}
		s.addAborted(AbortedTxn{ProducerID: done.producerID, FirstOffset: done.first, LastOffset: done.last, LastStableOffset: lso})
		l.abortedCount.Add(1)
	}
}

// noteTxnsLocked publishes whether any transaction is unstable, so that
// FirstUnstableOffset answers without the lock when none is.
func (l *Log) noteTxnsLocked() {
	ps := l.mu.producers
	l.unstableTxns.Store(int64(len(ps.ongoing) + len(ps.unreplicated)))
}

// readMarker decodes the control record of a control batch.
func readMarker(batch []byte) (record.ControlRecord, error) {
	it, err := record.NewIterator(batch)
	if err != nil {
		return record.ControlRecord{}, err
	}
	var r record.Record
	if !it.Next(&r) {
		if err := it.Err(); err != nil {
			return record.ControlRecord{}, err
		}
		return record.ControlRecord{}, fmt.Errorf("%w: control batch without a record", record.ErrInvalid)
	}
	return record.ParseControlRecord(r.Key, r.Value)
}

// readMarkerAt decodes the control record of the control batch at pos of s.
func readMarkerAt(s *segment, pos int64, h *record.Header) (record.ControlRecord, error) {
	b, err := readBatchAt(s, pos, h)
	if err != nil {
		return record.ControlRecord{}, err
	}
	return readMarker(b)
}

// FirstUnstableOffset returns the first offset of the oldest transaction that is open
// or whose marker is at or above highWatermark (math.MaxInt64 when there is none):
// the last stable offset is the smaller of it and the high watermark. Transactions
// whose marker is below highWatermark are forgotten, as Kafka's
// onHighWatermarkUpdated does. It takes Log.mu only while a transaction is unstable.
func (l *Log) FirstUnstableOffset(highWatermark int64) int64 {
	if l.unstableTxns.Load() == 0 {
		return math.MaxInt64
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.mu.producers
	n := 0
	for n < len(ps.unreplicated) && ps.unreplicated[n].last < highWatermark {
		n++
	}
	if n > 0 {
		ps.unreplicated = append(ps.unreplicated[:0], ps.unreplicated[n:]...)
		l.noteTxnsLocked()
	}
	first := int64(math.MaxInt64)
	for _, off := range ps.ongoing {
		first = min(first, off)
	}
	for _, c := range ps.unreplicated {
		first = min(first, c.first)
	}
	return first
}

// AbortedTransactions appends to dst the aborted transactions that overlap the offsets
// [from, to): those whose marker is at or after from and whose first offset is below
// to. A read_committed fetch of [from, to) returns them, so that the consumer drops
// their records. Like Kafka it reads the segments' indexes from the one holding from
// and stops at an entry whose last stable offset reaches to: no later marker can
// end a transaction that started below it.
func (l *Log) AbortedTransactions(from, to int64, dst []AbortedTxn) []AbortedTxn {
	if l.abortedCount.Load() == 0 || from >= to {
		return dst
	}
	segs := l.segs()
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > from })-1, 0)
	for _, s := range segs[i:] {
		s.idx.RLock()
		entries := s.idx.aborted
		s.idx.RUnlock()
		for _, a := range entries {
			if a.LastOffset >= from && a.FirstOffset < to {
				dst = append(dst, a)
			}
			if a.LastStableOffset >= to {
				return dst
			}
		}
	}
	return dst
}

// TxnVerification is the first step of appending a transactional batch of producerID
// at epoch as leader: when the producer has no transaction open here at that epoch,
// the batch would start one, and the leader verifies with the transaction coordinator
// that the partition is part of it (KIP-890) before appending it with
// AppendOptions.TxnGuard set to guard. A marker for the producer appended in between
// clears the guard and the append then fails with ErrInvalidTxnState. needed is false
// when the producer's transaction is already open at that epoch. (With transactions v2
// every transaction has its own epoch: a batch of the next transaction must not join
// the previous one, still open here while its marker is on its way.)
func (l *Log) TxnVerification(producerID int64, epoch int16) (guard uint64, needed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.mu.producers
	if ps.openAt(producerID, epoch) {
		return 0, false
	}
	if g, ok := ps.guards[producerID]; ok {
		return g, true
	}
	if ps.guards == nil {
		ps.guards = map[int64]uint64{}
	}
	guard = l.nextGuard.Add(1)
	ps.guards[producerID] = guard
	return guard, true
}

// checkTxnGuardLocked refuses a transactional batch that would start a transaction
// when its verification guard is no longer the producer's.
func (l *Log) checkTxnGuardLocked(h *record.Header, guard uint64) error {
	ps := l.mu.producers
	if ps.openAt(h.ProducerID, h.ProducerEpoch) {
		return nil
	}
	if g, ok := ps.guards[h.ProducerID]; !ok || g != guard {
		return fmt.Errorf("%w: producer %d's transaction ended while its partition was being verified", ErrInvalidTxnState, h.ProducerID)
	}
	return nil
}
