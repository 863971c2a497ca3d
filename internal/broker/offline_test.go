package broker

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// failingFS fails every write to files under a directory once armed.
type failingFS struct {
	storage.OSFS
	under string
	armed atomic.Bool
	errno syscall.Errno // EIO when zero
}

func (f *failingFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &failingFile{File: file, fs: f, name: name}, nil
}

type failingFile struct {
	storage.File
	fs   *failingFS
	name string
}

func (f *failingFile) WriteAt(b []byte, off int64) (int, error) {
	if f.fs.armed.Load() && strings.HasPrefix(f.name, f.fs.under) {
		errno := f.fs.errno
		if errno == 0 {
			errno = syscall.EIO
		}
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: errno}
	}
	return f.File.WriteAt(b, off)
}

func call[T kmsg.Response](t testing.TB, b *Broker, req kmsg.Request) T {
	t.Helper()
	req.SetVersion(req.MaxVersion())
	if _, max, _ := Versions(req.Key()); req.GetVersion() > max {
		req.SetVersion(max)
	}
	select {
	case r := <-b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req}):
		return r.Body.(T)
	case <-time.After(10 * time.Second):
		t.Fatal("no response")
	}
	panic("unreachable")
}

func produceTo(t testing.TB, b *Broker, topic string) int16 {
	t.Helper()
	batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return produceBatch(t, b, topic, batch)
}

// produceBatch produces one batch to partition 0 of topic (acks=all) and returns the
// partition's error code.
func produceBatch(t testing.TB, b *Broker, topic string, batch []byte) int16 {
	t.Helper()
	return produceBatchAcks(t, b, topic, batch, -1)
}

// produceBatchAcks is produceBatch with acks.
func produceBatchAcks(t testing.TB, b *Broker, topic string, batch []byte, acks int16) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic // v12 and older; v13 names the topic by id
	if tp, ok := b.image().Topic(topic); ok {
		rt.TopicID = tp.ID
	}
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0].ErrorCode
}

// TestLogDirOffline: an I/O error in one log directory takes that directory offline —
// its partitions answer KAFKA_STORAGE_ERROR and lose their leader in Metadata — while
// partitions in the other directory keep working and nothing panics.
func TestLogDirOffline(t *testing.T) {
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	failing := &failingFS{under: dirA}
	b := startTestBrokerOn(t, failing, dirA, dirB)
	createTestTopic(t, b, "on-a", 1) // one at a time: the first goes to a, the second to b
	createTestTopic(t, b, "on-b", 1)
	if _, err := os.Stat(filepath.Join(dirA, "on-a-0")); err != nil {
		t.Fatalf("on-a-0 not placed in the first directory: %v", err)
	}
	if code := produceTo(t, b, "on-a"); code != 0 {
		t.Fatalf("produce before the failure: %d", code)
	}

	failing.armed.Store(true)
	if code := produceTo(t, b, "on-a"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce hitting the I/O error: %d, want KAFKA_STORAGE_ERROR", code)
	}
	if code := produceTo(t, b, "on-a"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the offline directory: %d, want KAFKA_STORAGE_ERROR", code)
	}
	if code := produceTo(t, b, "on-b"); code != 0 {
		t.Fatalf("produce to the healthy directory: %d", code)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("on-a")}, {Topic: kmsg.StringPtr("on-b")}}
	resp := call[*kmsg.MetadataResponse](t, b, meta)
	a, bb := resp.Topics[0].Partitions[0], resp.Topics[1].Partitions[0]
	if a.Leader != -1 || len(a.OfflineReplicas) != 1 || a.ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("metadata of the offline partition: %+v", a)
	}
	if bb.Leader != 1 || len(bb.OfflineReplicas) != 0 {
		t.Fatalf("metadata of the healthy partition: %+v", bb)
	}
	dirs := call[*kmsg.DescribeLogDirsResponse](t, b, kmsg.NewPtrDescribeLogDirsRequest()).Dirs
	for _, d := range dirs {
		switch offline := d.Dir == filepath.Clean(dirA); {
		case offline && (d.ErrorCode != kerr.KafkaStorageError.Code || len(d.Topics) != 0):
			t.Fatalf("DescribeLogDirs of the offline directory: error %d, topics %+v; want KAFKA_STORAGE_ERROR and none", d.ErrorCode, d.Topics)
		case !offline && (d.ErrorCode != 0 || len(d.Topics) != 1 || d.Topics[0].Topic != "on-b"):
			t.Fatalf("DescribeLogDirs of %s: error %d, topics %+v; want on-b", d.Dir, d.ErrorCode, d.Topics)
		}
	}
	if len(dirs) != 2 {
		t.Fatalf("DescribeLogDirs: %d directories, want 2", len(dirs))
	}
	select {
	case err := <-b.Failed():
		t.Fatalf("the node gave up with a healthy directory left: %v", err)
	default:
	}
}

// TestEveryLogDirFailedStopsTheNode: when the last log directory fails the node
// cannot serve anything any more, and says so (Failed) for samsa serve to stop at
// once, as Kafka halts — in a cluster its leaderships then move to its followers.
func TestEveryLogDirFailedStopsTheNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "only")
	failing := &failingFS{under: dir}
	b := startTestBrokerOn(t, failing, dir)
	createTestTopic(t, b, "doomed", 1)
	select {
	case err := <-b.Failed():
		t.Fatalf("failed before any fault: %v", err)
	default:
	}
	failing.armed.Store(true)
	if code := produceTo(t, b, "doomed"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce hitting the I/O error: %d, want KAFKA_STORAGE_ERROR", code)
	}
	select {
	case err := <-b.Failed():
		if !strings.Contains(err.Error(), dir) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("failure %q does not name the directory %s and the I/O error", err, dir)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the node did not give up with its only log directory offline")
	}
}

// TestDiskFullKeepsDirectoryOnline: an append that meets a full disk is answered
// KAFKA_STORAGE_ERROR (never acknowledged), the directory stays online (Metadata
// still names the leader), and once space is freed the partition takes appends again
// at the next offset, without a restart.
func TestDiskFullKeepsDirectoryOnline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	full := &failingFS{under: dir, errno: syscall.ENOSPC}
	b := startTestBrokerOn(t, full, dir)
	createTestTopic(t, b, "full", 1)
	if code := produceTo(t, b, "full"); code != 0 {
		t.Fatalf("produce before the disk filled: %d", code)
	}
	full.armed.Store(true)
	for range 3 {
		if code := produceTo(t, b, "full"); code != kerr.KafkaStorageError.Code {
			t.Fatalf("produce on a full disk: %d, want KAFKA_STORAGE_ERROR", code)
		}
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("full")}}
	if p := call[*kmsg.MetadataResponse](t, b, meta).Topics[0].Partitions[0]; p.Leader != 1 || len(p.OfflineReplicas) != 0 {
		t.Fatalf("metadata while the disk is full: %+v, want the partition online", p)
	}
	full.armed.Store(false)
	if code := produceTo(t, b, "full"); code != 0 {
		t.Fatalf("produce once space is freed: %d", code)
	}
	if end := b.logs.Get("full", 0).LogEndOffset(); end != 2 {
		t.Fatalf("log end %d, want 2: the refused appends left nothing", end)
	}
}
