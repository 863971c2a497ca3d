package txn

import (
	"errors"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors.
var (
	// ErrNotCoordinator: the __transaction_state partition is not led here (an append
	// wrapping it answers NOT_COORDINATOR).
	ErrNotCoordinator = errors.New("txn: not the coordinator")
	// ErrClosed: the coordinator was closed.
	ErrClosed = errors.New("txn: coordinator closed")
	// ErrCorruptRecord marks a __transaction_state record that does not decode.
	ErrCorruptRecord = errors.New("txn: corrupt __transaction_state record")
	// ErrFenced: a partition refused a marker because a newer coordinator wrote one
	// (TRANSACTION_COORDINATOR_FENCED): this coordinator stops completing the
	// transaction, its successor does.
	ErrFenced = errors.New("txn: transaction coordinator fenced")
)

// State is a transaction's state, with Kafka's TransactionState numbering (the value
// stored in __transaction_state) and names (DescribeTransactions, ListTransactions).
type State int8

const (
	StateEmpty             State = 0
	StateOngoing           State = 1
	StatePrepareCommit     State = 2
	StatePrepareAbort      State = 3
	StateCompleteCommit    State = 4
	StateCompleteAbort     State = 5
	StateDead              State = 6
	StatePrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState returns the state named as Kafka names it.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// TopicPartition names a partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func comparePartitions(a, b TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// Metadata is one transactional id's state as __transaction_state stores it (Kafka's
// TransactionMetadata and TransactionLogValue).
type Metadata struct {
	TransactionalID string
	ProducerID      int64
	// PrevProducerID is the producer id before the last rotation (-1 when none);
	// NextProducerID the one a prepared transaction rotates to when it completes
	// (transactions v2 with the epoch exhausted; -1 when none).
	PrevProducerID, NextProducerID int64
	// Epoch is the producer epoch (-1 until the first InitProducerId is written);
	// LastEpoch the epoch before the last bump, which a retry may still name (-1 when
	// the last bump fenced).
	Epoch, LastEpoch int16
	Timeout          time.Duration
	State            State
	Partitions       []TopicPartition // sorted; the transaction's partitions
	// Started is when the transaction began (zero when none); Updated the last
	// transition.
	Started, Updated time.Time
	// ClientVersion is the transaction version the producer uses: 2 for
	// transactions v2 (KIP-890: EndTxn v5 bumps the epoch), else 0.
	ClientVersion int16
}

func (m Metadata) clone() Metadata {
	m.Partitions = slices.Clone(m.Partitions)
	return m
}

// epochExhausted: an epoch a producer may no longer be given (MaxInt16 is kept for
// fencing), as Kafka's TransactionMetadata.isEpochExhausted.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// hasPartitions reports whether every partition in ps is in the transaction.
func (m *Metadata) hasPartitions(ps []TopicPartition) bool {
	for _, p := range ps {
		if _, ok := slices.BinarySearchFunc(m.Partitions, p, comparePartitions); !ok {
			return false
		}
	}
	return true
}

// inTransaction reports whether p is one of the transaction's partitions.
func (m *Metadata) inTransaction(p TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(m.Partitions, p, comparePartitions)
	return ok
}

// --- transitions: each returns the metadata to write, or a Kafka error code ---------

// claimedProducer is the producer id and epoch an InitProducerId names (KIP-360).
type claimedProducer struct {
	producerID int64
	epoch      int16
}

// validExpected is Kafka's check of the producer id an InitProducerId names: the
// metadata was just created, the id is the current one (the epoch is checked when it
// is bumped), or the previous one with its epoch exhausted (a retry of a rotation).
func (m *Metadata) validExpected(e claimedProducer) bool {
	return m.Epoch < 0 || e.producerID == m.ProducerID || (e.producerID == m.PrevProducerID && epochExhausted(e.epoch))
}

// incrementEpoch is InitProducerId on a transactional id without a transaction in
// progress: the epoch is bumped (a retry of the previous bump keeps it).
func (m Metadata) incrementEpoch(timeout time.Duration, expected *claimedProducer, now time.Time) (Metadata, int16) {
	next := m.clone()
	bumped := m.Epoch + 1
	switch {
	case expected == nil:
		next.Epoch, next.LastEpoch = bumped, -1
	case m.Epoch < 0 || expected.epoch == m.Epoch:
		next.Epoch, next.LastEpoch = bumped, m.Epoch
	case expected.epoch == m.LastEpoch:
		// A retry of a bump whose answer was lost.
	default:
		return m, kerr.ProducerFenced.Code
	}
	next.State, next.Timeout, next.Partitions, next.Started, next.Updated = StateEmpty, timeout, nil, time.Time{}, now
	return next, 0
}

// rotate gives the transactional id a new producer id at epoch 0 (its epoch is
// exhausted).
func (m Metadata) rotate(producerID int64, timeout time.Duration, recordLast bool, now time.Time) Metadata {
	next := m.clone()
	next.PrevProducerID, next.ProducerID, next.Epoch, next.LastEpoch = m.ProducerID, producerID, 0, -1
	if recordLast {
		next.LastEpoch = m.Epoch
	}
	next.State, next.Timeout, next.Partitions, next.Started, next.Updated = StateEmpty, timeout, nil, time.Time{}, now
	return next
}

// addPartitions makes the transaction Ongoing with ps added.
func (m Metadata) addPartitions(ps []TopicPartition, now time.Time) Metadata {
	next := m.clone()
	for _, p := range ps {
		if i, ok := slices.BinarySearchFunc(next.Partitions, p, comparePartitions); !ok {
			next.Partitions = slices.Insert(next.Partitions, i, p)
		}
	}
	if m.State != StateOngoing {
		next.Started = now
	}
	next.State, next.Updated = StateOngoing, now
	return next
}

// prepareEnd is the first step of ending a transaction: PrepareCommit or
// PrepareAbort. bump is set for transactions v2 (every end bumps the epoch; an
// exhausted epoch goes to MaxInt16 and the id rotates to nextProducerID when the
// transaction completes) and for fencing (the epoch the markers carry is above every
// epoch the producer had, LastEpoch -1).
func (m Metadata) prepareEnd(commit, bump, fence bool, nextProducerID int64, now time.Time) Metadata {
	next := m.clone()
	next.State = StatePrepareAbort
	if commit {
		next.State = StatePrepareCommit
	}
	// The epoch never passes MaxInt16: no producer may use MaxInt16 (checkProducer),
	// so a transaction is not fenced there twice, but should it be, its markers go out
	// at MaxInt16 again rather than at an epoch below the producer's.
	bumped := m.Epoch + 1
	if m.Epoch == math.MaxInt16 {
		bumped = m.Epoch
	}
	switch {
	case fence:
		next.Epoch, next.LastEpoch = bumped, -1
	case bump:
		next.Epoch, next.LastEpoch = bumped, m.Epoch
		if epochExhausted(m.Epoch) {
			next.NextProducerID = nextProducerID
		}
	}
	if next.Started.IsZero() {
		next.Started = now
	}
	next.Updated = now
	return next
}

// complete is the last step of ending a transaction, once its markers are written.
func (m Metadata) complete(now time.Time) Metadata {
	next := m.clone()
	next.State = StateCompleteAbort
	if m.State == StatePrepareCommit {
		next.State = StateCompleteCommit
	}
	if m.NextProducerID >= 0 {
		// LastEpoch stays the old id's last epoch (32766), the last the producer saw
		// before the new id, which a KIP-360 retry names, as in Kafka.
		next.PrevProducerID, next.ProducerID, next.NextProducerID = m.ProducerID, m.NextProducerID, -1
		next.Epoch = 0
	}
	next.Partitions, next.Updated = nil, now
	return next
}

// answerProducer is the producer id and epoch an EndTxn v5 (or InitProducerId) answers
// once the transition to m is written: the id the producer uses from now on.
func (m *Metadata) answerProducer() (int64, int16) {
	if m.NextProducerID >= 0 {
		return m.NextProducerID, 0
	}
	return m.ProducerID, m.Epoch
}
