package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/samsa-streaming/samsa/internal/record"
)

// producerBatchesCached is how many recent batches per producer are remembered for
// duplicate detection (Kafka: 5, the limit of max.in.flight.requests.per.connection
// with idempotence).
const producerBatchesCached = 5

// ProducerInfo describes one producer's state (DescribeProducers).
type ProducerInfo struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64 // -1 when no transaction is open
}

type batchMeta struct {
	firstSeq, lastSeq      int32
	baseOffset, lastOffset int64
	timestamp              int64
}

type producerEntry struct {
	epoch            int16
	batches          []batchMeta // oldest first, at most producerBatchesCached
	lastTimestamp    int64
	coordinatorEpoch int32
	txnStartOffset   int64
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

// producerState is the idempotence and transaction table of one partition: a pure data
// structure, guarded by Log.mu.
type producerState struct {
	producers map[int64]*producerEntry
	// ongoing holds the first offset of every open transaction, by producer id (the
	// entries' txnStartOffset, indexed for the first unstable offset).
	ongoing map[int64]int64
	// unreplicated holds the transactions whose marker was appended but may not be
	// below the high watermark yet, ascending by marker offset: they stay unstable
	// until it passes their marker (Kafka's unreplicatedTxns). Not in snapshots.
	unreplicated []completedTxn
	// guards holds the verification guard of each producer whose first transactional
	// batch here is being verified with its coordinator (KIP-890); a marker for the
	// producer or the start of its transaction clears it. Memory only.
	guards map[int64]uint64
}

// completedTxn is a transaction ended by a marker: its first offset here, the marker's
// offset, and whether it aborted.
type completedTxn struct {
	producerID  int64
	first, last int64
	aborted     bool
}

func newProducerState() *producerState {
	return &producerState{producers: make(map[int64]*producerEntry), ongoing: make(map[int64]int64)}
}

// openAt reports whether producerID has a transaction open here at epoch.
func (ps *producerState) openAt(producerID int64, epoch int16) bool {
	e := ps.producers[producerID]
	return e != nil && e.txnStartOffset >= 0 && e.epoch == epoch
}

// inSequence reports whether next follows last (with int32 wrap-around).
func inSequence(last, next int32) bool {
	return next == last+1 || (last == math.MaxInt32 && next == 0)
}

// check validates a leader append; marker is the control record of a control batch.
// It returns the duplicate's original batch when the batch was already appended. A
// coordinator's append (opts.Coordinator: markers, transactional offset commits) has
// no sequence numbers: only its epochs are checked, a marker's as opts.TxnVersion
// says.
func (ps *producerState) check(h *record.Header, marker *record.ControlRecord, opts AppendOptions) (dup *batchMeta, err error) {
	if h.ProducerID < 0 {
		return nil, nil
	}
	e := ps.producers[h.ProducerID]
	if h.IsControl() {
		if e != nil && staleMarker(h.ProducerEpoch, e, opts.TxnVersion) {
			return nil, fmt.Errorf("%w: stale marker of producer %d at epoch %d, whose epoch here is %d (transaction version %d)",
				ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch, opts.TxnVersion)
		}
		if e != nil && marker != nil && marker.CoordinatorEpoch < e.coordinatorEpoch {
			return nil, fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, %d wrote before",
				ErrTransactionCoordinatorFenced, h.ProducerID, marker.CoordinatorEpoch, e.coordinatorEpoch)
		}
		return nil, nil
	}
	if e != nil && e.txnStartOffset >= 0 {
		switch {
		case !h.IsTransactional():
			return nil, fmt.Errorf("%w: producer %d wrote a batch outside its open transaction", ErrInvalidTxnState, h.ProducerID)
		case h.ProducerEpoch > e.epoch:
			// The next transaction (transactions v2 bump the epoch) before the
			// marker of the one open here.
			return nil, fmt.Errorf("%w: producer %d at epoch %d before the marker of its transaction at epoch %d",
				ErrInvalidTxnState, h.ProducerID, h.ProducerEpoch, e.epoch)
		}
	}
	if opts.Coordinator {
		if e != nil && h.ProducerEpoch < e.epoch {
			return nil, fmt.Errorf("%w: producer %d epoch %d older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
		}
		return nil, nil
	}
	first, last := h.BaseSequence, h.LastSequence()
	if e == nil {
		// No state here (a new producer, one expired after producer.id.expiration.ms,
		// or one whose batches retention removed before a snapshot kept it): any
		// sequence is accepted, as Kafka's ProducerAppendInfo.checkSequence does for a
		// producer without an epoch. Refusing would fail the next send of a producer
		// that merely idled.
		return nil, nil
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if first != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		}
		return nil, nil
	}
	for i := range e.batches {
		b := &e.batches[i]
		if b.firstSeq == first && b.lastSeq == last {
			d := *b
			return &d, nil
		}
	}
	if ls := e.lastSeq(); ls < 0 {
		if first != 0 {
			return nil, fmt.Errorf("%w: producer %d expected sequence 0, got %d", ErrOutOfOrderSequence, h.ProducerID, first)
		}
	} else if !inSequence(ls, first) {
		return nil, fmt.Errorf("%w: producer %d expected sequence %d, got %d", ErrOutOfOrderSequence, h.ProducerID, int64(ls)+1, first)
	}
	return nil, nil
}

// staleMarker reports whether a marker at epoch comes too late for producer e. Below
// transaction version 2 a marker carries the epoch of the transaction's records, so
// only an older epoch is stale. From 2 the coordinator bumps the epoch to end a
// transaction, so a marker at the producer's epoch here is stale too, unless no
// transaction is open here: then it repeats the marker that ended the last one (a
// retry whose answer was lost, a new coordinator sending the markers again), and is
// written again as Kafka does (KAFKA-19999). At MaxInt16, which no producer writes
// records at, a marker is never stale for being equal.
func staleMarker(epoch int16, e *producerEntry, txnVersion int8) bool {
	if txnVersion < 2 || epoch != e.epoch {
		return epoch < e.epoch
	}
	return e.txnStartOffset >= 0 && epoch != math.MaxInt16
}

// update records an appended batch (leader, follower or replay during recovery);
// marker is the control record of a control batch (nil when it could not be read). A
// marker that ends an open transaction returns it (ok).
func (ps *producerState) update(h *record.Header, marker *record.ControlRecord) (done completedTxn, ok bool) {
	if h.ProducerID < 0 {
		return done, false
	}
	e := ps.producers[h.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch, txnStartOffset: -1}
		ps.producers[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	e.lastTimestamp = h.MaxTimestamp
	if h.IsControl() {
		// A transaction marker ends the open transaction.
		delete(ps.guards, h.ProducerID)
		if e.txnStartOffset >= 0 {
			done = completedTxn{producerID: h.ProducerID, first: e.txnStartOffset, last: h.BaseOffset,
				aborted: marker != nil && marker.Type == record.ControlAbort}
			ok = true
		}
		e.txnStartOffset = -1
		delete(ps.ongoing, h.ProducerID)
		if marker != nil {
			e.coordinatorEpoch = marker.CoordinatorEpoch
		}
		return done, ok
	}
	if h.IsTransactional() && e.txnStartOffset < 0 {
		e.txnStartOffset = h.BaseOffset
		ps.ongoing[h.ProducerID] = h.BaseOffset
		delete(ps.guards, h.ProducerID)
	}
	if h.BaseSequence < 0 {
		return done, false
	}
	if len(e.batches) == producerBatchesCached {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesCached-1]
	}
	e.batches = append(e.batches, batchMeta{
		firstSeq: h.BaseSequence, lastSeq: h.LastSequence(),
		baseOffset: h.BaseOffset, lastOffset: h.LastOffset(), timestamp: h.MaxTimestamp,
	})
	return done, false
}

// SetCoordinatorEpoch records the transaction coordinator epoch of the last marker for
// a producer (the log does not parse control records itself).
func (ps *producerState) setCoordinatorEpoch(pid int64, epoch int32) {
	if e := ps.producers[pid]; e != nil {
		e.coordinatorEpoch = epoch
	}
}

// expire forgets producers with no open transaction whose last batch timestamp is
// older than cutoff (Kafka's producer.id.expiration.ms).
func (ps *producerState) expire(cutoff int64) int {
	n := 0
	for pid, e := range ps.producers {
		if e.txnStartOffset < 0 && e.lastTimestamp < cutoff {
			delete(ps.producers, pid)
			delete(ps.guards, pid)
			n++
		}
	}
	return n
}

func (ps *producerState) infos() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(ps.producers))
	for pid, e := range ps.producers {
		out = append(out, ProducerInfo{
			ProducerID: pid, Epoch: e.epoch, LastSequence: e.lastSeq(), LastTimestamp: e.lastTimestamp,
			CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.txnStartOffset,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// Snapshot file format (big-endian), see doc.go:
//
//	version  uint16 (1)
//	crc      uint32  CRC-32C of everything after this field
//	count    uint32
//	count × { producerID int64, epoch int16, coordinatorEpoch int32, txnStartOffset int64,
//	          lastTimestamp int64, n uint8, n × { firstSeq int32, lastSeq int32,
//	          baseOffset int64, lastOffset int64, timestamp int64 } }
const snapshotVersion = 1

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (ps *producerState) encode() []byte {
	b := make([]byte, 10, 10+len(ps.producers)*64)
	binary.BigEndian.PutUint16(b, snapshotVersion)
	binary.BigEndian.PutUint32(b[6:], uint32(len(ps.producers)))
	for pid, e := range ps.producers {
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.txnStartOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastTimestamp))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(m.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(m.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(m.baseOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.lastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.timestamp))
		}
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], crcTable))
	return b
}

var errBadSnapshot = fmt.Errorf("%w: producer snapshot", ErrCorrupt)

func decodeProducerState(b []byte) (*producerState, error) {
	if len(b) < 10 || binary.BigEndian.Uint16(b) != snapshotVersion {
		return nil, errBadSnapshot
	}
	if crc32.Checksum(b[6:], crcTable) != binary.BigEndian.Uint32(b[2:]) {
		return nil, errBadSnapshot
	}
	n := binary.BigEndian.Uint32(b[6:])
	b = b[10:]
	ps := newProducerState()
	for range n {
		if len(b) < 31 {
			return nil, errBadSnapshot
		}
		pid := int64(binary.BigEndian.Uint64(b))
		e := &producerEntry{
			epoch:            int16(binary.BigEndian.Uint16(b[8:])),
			coordinatorEpoch: int32(binary.BigEndian.Uint32(b[10:])),
			txnStartOffset:   int64(binary.BigEndian.Uint64(b[14:])),
			lastTimestamp:    int64(binary.BigEndian.Uint64(b[22:])),
		}
		nb := int(b[30])
		b = b[31:]
		if nb > producerBatchesCached || len(b) < nb*32 {
			return nil, errBadSnapshot
		}
		for range nb {
			e.batches = append(e.batches, batchMeta{
				firstSeq:   int32(binary.BigEndian.Uint32(b)),
				lastSeq:    int32(binary.BigEndian.Uint32(b[4:])),
				baseOffset: int64(binary.BigEndian.Uint64(b[8:])),
				lastOffset: int64(binary.BigEndian.Uint64(b[16:])),
				timestamp:  int64(binary.BigEndian.Uint64(b[24:])),
			})
			b = b[32:]
		}
		ps.producers[pid] = e
		if e.txnStartOffset >= 0 {
			ps.ongoing[pid] = e.txnStartOffset
		}
	}
	if len(b) != 0 {
		return nil, errBadSnapshot
	}
	return ps, nil
}

// snapshotsIn returns the offsets of the snapshot files of a directory listing,
// ascending.
func snapshotsIn(ents []os.DirEntry) []int64 {
	var out []int64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, snapshotSuffix) {
			continue
		}
		if off, ok := parseBase(strings.TrimSuffix(name, snapshotSuffix)); ok {
			out = append(out, off)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// writeSnapshot writes the state as of offset (every batch below offset applied).
func writeSnapshot(fsys FS, dir string, offset int64, ps *producerState) error {
	return writeFileAtomic(fsys, filepath.Join(dir, fileName(offset, snapshotSuffix)), ps.encode(), true)
}

// loadLatestSnapshot loads the newest valid snapshot with offset ≤ limit, deleting
// snapshots above limit (taken back by a truncation) and damaged ones (logged). It
// returns offset -1 when none is usable: producer state is then replayed from the
// log start.
func (l *Log) loadLatestSnapshot(snaps []int64, limit int64) (*producerState, int64) {
	for i := len(snaps) - 1; i >= 0; i-- {
		p := filepath.Join(l.dir, fileName(snaps[i], snapshotSuffix))
		if snaps[i] > limit {
			_ = l.fs.Remove(p)
			continue
		}
		b, err := readFile(l.fs, p)
		if err == nil {
			var ps *producerState
			if ps, err = decodeProducerState(b); err == nil {
				return ps, snaps[i]
			}
		}
		next := "replaying the batch headers from the log start"
		if i > 0 {
			next = "trying the snapshot at offset " + strconv.FormatInt(snaps[i-1], 10)
		}
		l.logger.Warn("producer snapshot unreadable; deleting it, "+next, "topic", l.topic, "partition", l.partition,
			"file", p, "err", err)
		_ = l.fs.Remove(p)
	}
	return newProducerState(), -1
}

// pruneSnapshots keeps the newest keep snapshots.
func pruneSnapshots(fsys FS, dir string, keep int) error {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	snaps := snapshotsIn(ents)
	var errs []error
	for i := 0; i < len(snaps)-keep; i++ {
		if err := fsys.Remove(filepath.Join(dir, fileName(snaps[i], snapshotSuffix))); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
