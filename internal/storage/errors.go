package storage

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers match them with errors.Is; the broker maps each to a Kafka
// error code. Errors returned by this package wrap one of these (or an *os.PathError
// for plain I/O failures).
var (
	// ErrOffsetOutOfRange: a read or DeleteRecords outside [LogStartOffset, LogEndOffset].
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrOutOfOrderSequence: an idempotent batch whose sequence does not follow the last one.
	ErrOutOfOrderSequence = errors.New("storage: out of order sequence number")
	// ErrDuplicateSequence is not returned by Append (duplicates are reported with
	// AppendInfo.Duplicate); it exists for callers that want to name the condition.
	ErrDuplicateSequence = errors.New("storage: duplicate sequence number")
	// ErrInvalidProducerEpoch: a batch from an older producer epoch than the one known.
	ErrInvalidProducerEpoch = errors.New("storage: invalid producer epoch")
	// ErrInvalidTxnState: a producer's batch that does not fit its transaction here —
	// a non-transactional batch while its transaction is open, or a transactional
	// batch whose verification with the coordinator was overtaken by a marker.
	ErrInvalidTxnState = errors.New("storage: invalid transaction state")
	// ErrTransactionCoordinatorFenced: a marker from a coordinator epoch older than
	// the one that last wrote a marker for the producer.
	ErrTransactionCoordinatorFenced = errors.New("storage: transaction coordinator fenced")
	// ErrUnknownProducerID is kept for completeness; modern Kafka never answers it:
	// a producer without state is accepted at any sequence, and so it is here.
	ErrUnknownProducerID = errors.New("storage: unknown producer id")
	// ErrCorrupt marks on-disk data or an appended batch that cannot be parsed.
	ErrCorrupt = errors.New("storage: corrupt data")
	// ErrLogClosed: the log was closed or deleted.
	ErrLogClosed = errors.New("storage: log closed")
	// ErrRecordTooLarge: a batch larger than the segment size.
	ErrRecordTooLarge = errors.New("storage: batch larger than segment size")
	// ErrTopicIDMismatch: the partition directory belongs to another topic of the same
	// name (deleted and re-created); it wraps ErrCorrupt.
	ErrTopicIDMismatch = fmt.Errorf("%w: partition directory holds another topic id", ErrCorrupt)
	// ErrDirLocked: another process holds the lock on a log directory.
	ErrDirLocked = errors.New("storage: log directory is locked by another process")
	// ErrNodeIDMismatch: meta.properties names a different node.id.
	ErrNodeIDMismatch = errors.New("storage: node.id in meta.properties does not match")
	// ErrClusterIDMismatch: two log directories name different cluster.ids.
	ErrClusterIDMismatch = errors.New("storage: log directories belong to different clusters")
	// ErrForeignDir: a directory named like a partition holds nothing of Samsa's; it is
	// left alone.
	ErrForeignDir = errors.New("storage: not a partition directory")
	// ErrNoSpace: an append failed because the disk is full and left the log exactly as
	// it was; appends succeed again once space is freed (the directory stays online,
	// unlike after other I/O errors). It wraps the ENOSPC error.
	ErrNoSpace = errors.New("storage: no space left in the log directory")
)

// ErrLogDirOffline is returned for a partition whose log directory was taken offline
// after an I/O error (Kafka's KAFKA_STORAGE_ERROR).
var ErrLogDirOffline = errors.New("storage: log directory offline")
