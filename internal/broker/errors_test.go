package broker

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/storage"
)

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("append: %w", storage.ErrOutOfOrderSequence), kerr.OutOfOrderSequenceNumber},
		{record.ErrCorrupt, kerr.CorruptMessage},
		{record.ErrTooLarge, kerr.MessageTooLarge},
		{fmt.Errorf("x: %w", controller.ErrTopicExists), kerr.TopicAlreadyExists},
		{&fs.PathError{Op: "write", Path: "/data/t-0/0.log", Err: syscall.ENOSPC}, kerr.KafkaStorageError},
		{kerr.NotLeaderForPartition, kerr.NotLeaderForPartition},
		{fmt.Errorf("something else"), kerr.UnknownServerError},
	} {
		if got := errorCode(tc.err); got != tc.want.Code {
			t.Errorf("errorCode(%v) = %d, want %s", tc.err, got, tc.want.Message)
		}
	}
	if errorCode(nil) != 0 {
		t.Error("nil error has a code")
	}
}
