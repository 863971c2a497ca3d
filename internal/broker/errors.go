package broker

import (
	"context"
	"errors"
	"io/fs"
	"strings"
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
	{replica.ErrStaleReplicaEpoch, kerr.NotLeaderForPartition},
	{replica.ErrOffsetNotAvailable, kerr.OffsetNotAvailable},
}

// errorMessage returns a message for the response's ErrorMessage field, or nil.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := wireMessage(err)
	return &s
}

// wireMessage is err's text for a client, which prints it after the error code's
// name: the sentinel errors err wraps name the same category as the code, so the
// names it starts with are dropped and the message says the thing once —
// "invalid config: unknown property: foo is not a topic config" goes out as
// "foo is not a topic config" under INVALID_CONFIG. A message that is nothing but a
// sentinel's name is kept.
func wireMessage(err error) string {
	s := err.Error()
	leaves := sentinels(err, nil)
	for trimmed := true; trimmed; {
		trimmed = false
		for _, e := range leaves {
			prefix := e.Error() + ": "
			if len(s) > len(prefix) && strings.HasPrefix(s, prefix) {
				s, trimmed = s[len(prefix):], true
			}
		}
	}
	return s
}

// sentinels appends to dst the errors at the ends of err's wrapping chains (errors
// wrapping nothing), as errors.Is would visit them.
func sentinels(err error, dst []error) []error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return sentinels(inner, dst)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			dst = sentinels(inner, dst)
		}
		return dst
	}
	return append(dst, err)
}
