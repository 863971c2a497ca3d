package storage

import (
	"sort"

	"github.com/samsa-streaming/samsa/internal/record"
)

// txnCleaning is what one cleaning pass knows of transactions, as Kafka's
// CleanedTransactionMetadata: the aborted transactions of the cleaned range (from the
// transaction indexes), met in offset order while the batches are read. The records of
// an aborted transaction are removed. A marker stays while this pass met a batch of its
// transaction (the batch may stay, emptied, as its producer's last); once none is left
// the marker gets a delete horizon (delete.retention.ms, as tombstones do) and goes at
// the first cleaning after it, with its transaction index entry. Every pass reads the
// log from its start, so a transaction is always seen whole.
type txnCleaning struct {
	pending []AbortedTxn // not reached yet, ascending by first offset
	// aborted: open aborted transactions reached, by producer; observed says a batch
	// of theirs was read in this pass.
	aborted   map[int64]*abortedCleaning
	committed map[int64]bool // producers with a batch of a transaction read, not aborted
}

type abortedCleaning struct {
	txn      AbortedTxn
	observed bool
}

func newTxnCleaning(aborted []AbortedTxn) *txnCleaning {
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	return &txnCleaning{pending: aborted, aborted: map[int64]*abortedCleaning{}, committed: map[int64]bool{}}
}

// reach makes the aborted transactions that start at or before offset current.
func (t *txnCleaning) reach(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		a := t.pending[0]
		t.pending = t.pending[1:]
		t.aborted[a.ProducerID] = &abortedCleaning{txn: a}
	}
}

// onData reports whether a data batch belongs to an aborted transaction, whose
// records then go.
func (t *txnCleaning) onData(h *record.Header) bool {
	t.reach(h.LastOffset())
	if !h.IsTransactional() || h.ProducerID < 0 {
		return false
	}
	if a := t.aborted[h.ProducerID]; a != nil {
		a.observed = true
		return true
	}
	t.committed[h.ProducerID] = true
	return false
}

// onMarker reports whether a marker may go (no batch of its transaction was met) and,
// for an abort marker that stays, its transaction index entry.
func (t *txnCleaning) onMarker(h *record.Header, marker *record.ControlRecord) (discardable bool, entry *AbortedTxn) {
	t.reach(h.LastOffset())
	if marker == nil {
		return h.NumRecords == 0, nil // an emptied control batch was cleaned already
	}
	switch marker.Type {
	case record.ControlAbort:
		a := t.aborted[h.ProducerID]
		delete(t.aborted, h.ProducerID)
		if a != nil && a.observed {
			return false, &a.txn
		}
		return true, nil
	case record.ControlCommit:
		observed := t.committed[h.ProducerID]
		delete(t.committed, h.ProducerID)
		return !observed, nil
	}
	return false, nil
}

// filterMarker returns what is left of a control batch: b itself while its
// transaction has batches left or its delete horizon has not passed, b stamped with a
// horizon the first time it could go, nil once the horizon passed. An abort marker
// that stays keeps its transaction index entry in the cleaned segment.
func (j *cleanJob) filterMarker(b []byte, h *record.Header, seg *segment) ([]byte, error) {
	var marker *record.ControlRecord
	if m, err := readMarker(b); err == nil {
		marker = &m
	}
	discardable, entry := j.txn.onMarker(h, marker)
	if entry != nil {
		seg.idx.aborted = append(seg.idx.aborted, *entry)
	}
	if !discardable {
		return b, nil
	}
	if h.Attributes&record.AttrDeleteHorizon != 0 {
		if j.now >= h.BaseTimestamp {
			return nil, nil
		}
		j.nextHorizon = min(j.nextHorizon, h.BaseTimestamp)
		return b, nil
	}
	horizon := j.now + j.cfg.DeleteRetentionMs
	j.nextHorizon = min(j.nextHorizon, horizon)
	_, recs, err := record.Records(b)
	if err != nil {
		return nil, err
	}
	keep := make([]bool, len(recs))
	for i := range keep {
		keep[i] = true
	}
	if len(recs) == 0 {
		return b, nil
	}
	return rebuildBatch(h, recs, keep, horizon)
}
