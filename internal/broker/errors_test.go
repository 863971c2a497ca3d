package broker

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/config"
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

func TestWireMessage(t *testing.T) {
	unknown := fmt.Errorf("%w: foo is not a topic config", config.ErrUnknownProperty)
	for _, tc := range []struct {
		err  error
		want string
	}{
		// The sentinels at the front go, however deep: the code names them.
		{fmt.Errorf("%w: %w", controller.ErrInvalidConfig, unknown), "foo is not a topic config"},
		{fmt.Errorf("%w: topic %q already exists", controller.ErrTopicExists, "t"), `topic "t" already exists`},
		// A forwarded answer comes back as the sentinel and the message: unchanged.
		{controller.ErrorForCode(kerr.InvalidConfig.Code, kmsg.StringPtr("foo is not a topic config")), "foo is not a topic config"},
		// Both of a multiple wrap.
		{fmt.Errorf("%w: %w: x=1", controller.ErrInvalidRequest, config.ErrInvalidValue), "x=1"},
		// Nothing but a sentinel stays as it is; a sentinel not at the front stays.
		{controller.ErrTopicExists, "topic already exists"},
		{fmt.Errorf("append to t-0: %w", storage.ErrOutOfOrderSequence), "append to t-0: " + storage.ErrOutOfOrderSequence.Error()},
		{&fs.PathError{Op: "write", Path: "/data/t-0/0.log", Err: syscall.ENOSPC}, "write /data/t-0/0.log: no space left on device"},
	} {
		if got := wireMessage(tc.err); got != tc.want {
			t.Errorf("wireMessage(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if errorMessage(nil) != nil {
		t.Error("nil error has a message")
	}
}
