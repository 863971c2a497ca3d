package broker

import (
	"context"
	"errors"
	"io/fs"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// errorCode maps an internal error to the Kafka error code a client understands. It is
// the one table between Samsa's sentinel errors and the wire (the controller's errors
// are in the controller's table, which Channel also reads backwards).
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if code, ok := controller.ErrorCode(err); ok {
		return code
	}
	for _, m := range errorTable {
		if errors.Is(err, m.err) {
			return m.code.Code
		}
	}
	// A failed file operation (disk full, I/O error) is a storage error: the client
	// refreshes metadata and retries, as with Kafka's KAFKA_STORAGE_ERROR.
	var pathErr *fs.PathError
	var errno syscall.Errno
	if errors.As(err, &pathErr) || errors.As(err, &errno) {
		return kerr.KafkaStorageError.Code
	}
	return kerr.UnknownServerError.Code
}

var errorTable = []struct {
	err  error
	code *kerr.Error
}{
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{storage.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{storage.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{storage.ErrInvalidTxnState, kerr.InvalidTxnState},
	{storage.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{storage.ErrCorrupt, kerr.CorruptMessage},
	{storage.ErrRecordTooLarge, kerr.RecordListTooLarge},
	{storage.ErrLogClosed, kerr.NotLeaderForPartition},
	{record.ErrTooLarge, kerr.MessageTooLarge},
	{record.ErrCorrupt, kerr.CorruptMessage},
	{record.ErrTooShort, kerr.CorruptMessage},
	{record.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat},
	{record.ErrInvalid, kerr.InvalidRecord},
	{replica.ErrNotLeader, kerr.NotLeaderForPartition},
	{replica.ErrOffline, kerr.KafkaStorageError},
	{storage.ErrLogDirOffline, kerr.KafkaStorageError},
	{storage.ErrNoSpace, kerr.KafkaStorageError},
	{replica.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{replica.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{replica.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{replica.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	{replica.ErrFetchOffsetOutOfRange, kerr.OffsetOutOfRange},
	{replica.ErrNotAssigned, kerr.ReplicaNotAvailable},
	{replica.ErrOffsetNotAvailable, kerr.OffsetNotAvailable},
}

// errorMessage returns a message for the response's ErrorMessage field, or nil.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
