package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// populate drives a controller through every kind of command.
func populate(t *testing.T, c *Controller) {
	t.Helper()
	register(t, c, 1)
	register(t, c, 2)
	register(t, c, 3)
	res := c.CreateTopics(ctx(t), []CreateTopic{
		{Name: "keep", NumPartitions: 3, ReplicationFactor: 2, Configs: map[string]string{"retention.ms": "5"}},
		{Name: "gone", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "grow", NumPartitions: 1, ReplicationFactor: 1},
	}, false)
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if d := c.DeleteTopics(ctx(t), []string{"gone"}, nil); d[0].Err != nil {
		t.Fatal(d[0].Err)
	}
	if err := c.CreatePartitions(ctx(t), "grow", 4, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterConfigs(ctx(t), metadata.ResourceTopic, "keep", []ConfigOp{{Name: "cleanup.policy", Value: ptr("compact")}}, false, false); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterConfigs(ctx(t), metadata.ResourceBroker, "", []ConfigOp{{Name: "log.retention.ms", Value: ptr("7")}}, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AllocateProducerIDs(ctx(t), 1000); err != nil {
		t.Fatal(err)
	}
	if err := c.UnregisterBroker(ctx(t), 3); err != nil {
		t.Fatal(err)
	}
}

func TestRestartReplaysIdentically(t *testing.T) {
	for _, every := range []uint64{0, 1, 3} {
		t.Run("snapshot every "+map[uint64]string{0: "default", 1: "1", 3: "3"}[every], func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(t, dir)
			o.SnapshotEvery = every

			c := startController(t, o)
			populate(t, c)
			want := c.Image().Records()
			offset := c.Image().Offset()
			nextPID := c.Image().NextProducerID()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}

			for restart := range 3 {
				c := startController(t, o)
				img := c.Image()
				if got := img.Records(); !reflect.DeepEqual(got, want) {
					t.Fatalf("restart %d: image differs\n got: %v\nwant: %v", restart, got, want)
				}
				if img.Offset() < offset {
					t.Fatalf("restart %d: offset went back from %d to %d", restart, offset, img.Offset())
				}
				if c.Leader() != 1 {
					t.Fatalf("restart %d: leader = %d", restart, c.Leader())
				}
				first, err := c.AllocateProducerIDs(ctx(t), 10)
				if err != nil {
					t.Fatal(err)
				}
				if first < nextPID {
					t.Fatalf("restart %d: producer id %d handed out again (high water mark %d)", restart, first, nextPID)
				}
				nextPID = first + 10
				want = c.Image().Records()
				offset = c.Image().Offset()
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestSnapshotCompactsTheLog(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir)
	o.SnapshotEvery = 4
	c := startController(t, o)
	register(t, c, 1)
	for i := range 30 {
		name := "t" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: name, NumPartitions: 1, ReplicationFactor: 1}}, false); r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
	}
	want := c.Image().Records()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, segs := listDir(t, dir)
	if len(snaps) != 1 {
		t.Fatalf("snapshots = %v, want exactly one", snaps)
	}
	if len(segs) > 3 {
		t.Fatalf("segments = %v: old ones were not deleted", segs)
	}
	c = startController(t, o)
	if got := c.Image().Records(); !reflect.DeepEqual(got, want) {
		t.Fatalf("image after restart from snapshot differs")
	}
}

func listDir(t *testing.T, dir string) (snaps, segs []string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		switch {
		case strings.HasSuffix(de.Name(), snapshotSuffix):
			snaps = append(snaps, de.Name())
		case strings.HasSuffix(de.Name(), segmentSuffix):
			segs = append(segs, de.Name())
		}
	}
	slices.Sort(segs)
	return snaps, segs
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	_, segs := listDir(t, dir)
	if len(segs) == 0 {
		t.Fatal("no segments")
	}
	return filepath.Join(dir, segs[len(segs)-1])
}

func TestTornTailIsTruncated(t *testing.T) {
	header := func(length, crc uint32) []byte {
		b := binary.BigEndian.AppendUint32(nil, length)
		return binary.BigEndian.AppendUint32(b, crc)
	}
	tails := map[string][]byte{
		"partial header": {0, 0, 0},
		"huge length":    header(0xffffffff, 0),
		"zero length":    header(0, 0),
		"short body":     append(header(100, 0), 1, 2, 3),
		"bad checksum":   append(header(4, 12345), frameEntry, 1, 2, 3),
		"unknown type":   appendFrame(nil, 77, func(b []byte) []byte { return append(b, 1, 2) }),
		"short entry":    appendFrame(nil, frameEntry, func(b []byte) []byte { return append(b, 1, 2) }),
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(t, dir)
			c := startController(t, o)
			populate(t, c)
			want := c.Image().Records()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			seg := lastSegment(t, dir)
			st, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tail); err != nil {
				t.Fatal(err)
			}
			f.Close()

			c = startController(t, o)
			if got := c.Image().Records(); !reflect.DeepEqual(got, want) {
				t.Fatalf("image after torn-tail recovery differs")
			}
			// The garbage is gone: the file holds what it held plus the new
			// entries of this start, never the torn bytes.
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(data)) < st.Size() {
				t.Fatalf("file shrank below the good prefix: %d < %d", len(data), st.Size())
			}
			if err := verifyFrames(data); err != nil {
				t.Fatalf("segment after recovery: %v", err)
			}
		})
	}
}

// verifyFrames checks that b is a whole sequence of valid frames.
func verifyFrames(b []byte) error {
	r := strings.NewReader(string(b))
	for {
		_, _, _, err := readFrame(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func TestTornLastEntryIsDropped(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir)
	c := startController(t, o)
	register(t, c, 1)
	want := c.Image().Records()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Append a whole proposal entry that was never committed, then cut it short, as
	// a crash in the middle of the write would.
	seg := lastSegment(t, dir)
	e := appendEntryFrame(nil, testEntry(1000, 99, encodeProposal(1, 1, []metadata.Record{metadata.TopicRecord{Name: "torn", ID: metadata.NewTopicID()}})))
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(e[:len(e)-5]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c = startController(t, o)
	if _, ok := c.Image().Topic("torn"); ok {
		t.Fatal("torn entry was applied")
	}
	if got := c.Image().Records(); !reflect.DeepEqual(got, want) {
		t.Fatal("image differs after dropping the torn entry")
	}
}

func TestCorruptionBeforeTheTailFailsStart(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir)
	c := startController(t, o)
	populate(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage in a segment older than the newest one cannot be a torn write.
	older := filepath.Join(dir, segmentName(0))
	if err := os.WriteFile(older, append(appendHardStateFrame(nil, nil), 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	c2, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Start(context.Background()); !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("Start = %v, want ErrCorruptLog", err)
	}
}

func TestSnapshotFileChecksum(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir)
	o.SnapshotEvery = 1
	c := startController(t, o)
	populate(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := listDir(t, dir)
	path := filepath.Join(dir, snaps[0])
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c2, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Start(context.Background()); !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("Start = %v, want ErrCorruptLog", err)
	}
}

func testEntry(term, index uint64, data []byte) *pb.Entry {
	typ := pb.EntryNormal
	return &pb.Entry{Term: &term, Index: &index, Type: &typ, Data: data}
}

func TestCommitIndexBeyondTornEntriesIsLowered(t *testing.T) {
	dir := t.TempDir()
	// A HardState whose entries were torn off: it claims commit 5 with no entries.
	term, vote, commit := uint64(1), RaftID(1), uint64(5)
	hs := appendHardStateFrame(nil, &pb.HardState{Term: &term, Vote: &vote, Commit: &commit})
	if err := os.WriteFile(filepath.Join(dir, segmentName(1)), hs, 0o644); err != nil {
		t.Fatal(err)
	}
	c := startController(t, testOptions(t, dir))
	register(t, c, 1)
	if _, ok := c.Image().Broker(1); !ok {
		t.Fatal("controller not usable after lowering the commit index")
	}
}
