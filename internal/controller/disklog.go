package controller

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// On-disk format constants (see doc.go). Changing any of them changes the format.
const (
	segmentSuffix  = ".log"
	snapshotSuffix = ".snapshot"
	tmpSuffix      = ".tmp"

	frameHeaderSize = 8 // u32 body length, u32 CRC32C of body
	maxFrameBody    = 64 << 20

	frameEntry     byte = 1
	frameHardState byte = 2

	snapshotMagic   = "SAMSASNP"
	snapshotVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segment is one file of the entry log, named by a sequence number (not by an index:
// Raft may overwrite an uncommitted suffix, so indexes are not monotonic across
// files, but write order is).
type segment struct {
	seq      uint64
	maxIndex uint64 // highest entry index written in it, 0 if none
}

// diskLog is the durable half of the Raft log: segment files of entry and HardState
// frames plus at most one snapshot file. It is used by the raft loop goroutine only
// and is not safe for concurrent use.
type diskLog struct {
	dir    string
	logger *slog.Logger

	segments   []segment // by seq; the last one is active
	active     appendFile
	activeSize int64         // bytes of whole frames in the active segment
	hardState  *pb.HardState // last one written
	buf        []byte
}

// appendFile is the active segment (an *os.File opened O_APPEND; tests wrap it to
// fail writes).
type appendFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

func segmentName(seq uint64) string    { return fmt.Sprintf("%020d%s", seq, segmentSuffix) }
func snapshotName(index uint64) string { return fmt.Sprintf("%020d%s", index, snapshotSuffix) }

// openDiskLog loads dir into storage and opens the log for appending. It returns the
// snapshot loaded (nil if none) and the last HardState (nil if none). A torn frame at
// the end of the newest segment is truncated away with a log line; damage anywhere
// else is ErrCorruptLog. If there is no snapshot, storage must already hold the
// bootstrap ConfState; if there is one, it replaces storage's contents.
func openDiskLog(dir string, logger *slog.Logger, storage *raft.MemoryStorage) (*diskLog, *pb.Snapshot, *pb.HardState, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	l := &diskLog{dir: dir, logger: logger}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	var snapIndexes []uint64
	for _, de := range names {
		name := de.Name()
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			_ = os.Remove(filepath.Join(dir, name)) // a write that never completed
		case strings.HasSuffix(name, segmentSuffix):
			if seq, err := strconv.ParseUint(strings.TrimSuffix(name, segmentSuffix), 10, 64); err == nil {
				l.segments = append(l.segments, segment{seq: seq})
			}
		case strings.HasSuffix(name, snapshotSuffix):
			if idx, err := strconv.ParseUint(strings.TrimSuffix(name, snapshotSuffix), 10, 64); err == nil {
				snapIndexes = append(snapIndexes, idx)
			}
		}
	}
	slices.SortFunc(l.segments, func(a, b segment) int { return cmpUint(a.seq, b.seq) })
	slices.Sort(snapIndexes)

	var snap *pb.Snapshot
	var firstSeg uint64
	if len(snapIndexes) > 0 {
		newest := snapIndexes[len(snapIndexes)-1]
		snap, firstSeg, err = readSnapshotFile(filepath.Join(dir, snapshotName(newest)))
		if err != nil {
			return nil, nil, nil, err
		}
		for _, idx := range snapIndexes[:len(snapIndexes)-1] {
			_ = os.Remove(filepath.Join(dir, snapshotName(idx)))
		}
		if err := storage.ApplySnapshot(snap); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: apply snapshot %d: %v", ErrCorruptLog, newest, err)
		}
	}
	snapIndex := snap.GetMetadata().GetIndex()

	// Segments older than a snapshot received from the leader belong to a history
	// that snapshot replaced.
	kept := l.segments[:0]
	for _, s := range l.segments {
		if s.seq < firstSeg {
			_ = os.Remove(filepath.Join(dir, segmentName(s.seq)))
			continue
		}
		kept = append(kept, s)
	}
	l.segments = kept

	for i := range l.segments {
		last := i == len(l.segments)-1
		if err := l.replaySegment(&l.segments[i], last, snapIndex, storage); err != nil {
			return nil, nil, nil, err
		}
	}
	if l.hardState != nil {
		lastIndex, _ := storage.LastIndex()
		if l.hardState.GetCommit() > lastIndex {
			// The entries were torn off after their HardState was written: they
			// were never acknowledged, and the commit index is only knowledge.
			logger.Warn("metadata log commit index beyond its last entry; lowering it", "commit", l.hardState.GetCommit(), "last_index", lastIndex)
			l.hardState.Commit = new(lastIndex)
		}
		if l.hardState.GetCommit() < snapIndex {
			l.hardState.Commit = new(snapIndex)
		}
		if err := storage.SetHardState(l.hardState); err != nil {
			return nil, nil, nil, err
		}
	}

	if len(l.segments) == 0 {
		next := firstSeg
		if next == 0 {
			next = 1
		}
		if err := l.roll(next); err != nil {
			return nil, nil, nil, err
		}
	} else {
		f, err := os.OpenFile(filepath.Join(dir, segmentName(l.segments[len(l.segments)-1].seq)), os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, nil, nil, err
		}
		l.active, l.activeSize = f, st.Size()
	}
	return l, snap, l.hardState, nil
}

// replaySegment reads one segment into storage. Entries at or below snapIndex are
// already in the snapshot and skipped.
func (l *diskLog) replaySegment(seg *segment, last bool, snapIndex uint64, storage *raft.MemoryStorage) error {
	path := filepath.Join(l.dir, segmentName(seg.seq))
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var good int64 // end of the last whole frame
	for {
		typ, body, n, err := readFrame(r)
		if err == io.EOF {
			return nil
		}
		if err == nil {
			err = l.replayFrame(seg, typ, body, snapIndex, storage)
		}
		if err != nil {
			if !last || !errors.Is(err, errTornFrame) {
				return fmt.Errorf("%w: %s at byte %d: %v", ErrCorruptLog, path, good, err)
			}
			l.logger.Warn("truncating torn tail of the metadata log", "file", path, "position", good, "error", err)
			if err := os.Truncate(path, good); err != nil {
				return err
			}
			return syncPath(path)
		}
		good += n
	}
}

func (l *diskLog) replayFrame(seg *segment, typ byte, body []byte, snapIndex uint64, storage *raft.MemoryStorage) error {
	switch typ {
	case frameEntry:
		e, err := decodeEntry(body)
		if err != nil {
			return err
		}
		seg.maxIndex = max(seg.maxIndex, e.GetIndex())
		if e.GetIndex() <= snapIndex {
			return nil
		}
		lastIndex, _ := storage.LastIndex()
		if e.GetIndex() > lastIndex+1 {
			return fmt.Errorf("entry %d after last index %d: missing entries", e.GetIndex(), lastIndex)
		}
		return storage.Append([]*pb.Entry{e})
	case frameHardState:
		if len(body) != 24 {
			return fmt.Errorf("%w: hard state of %d bytes", errTornFrame, len(body))
		}
		l.hardState = &pb.HardState{
			Term:   new(binary.BigEndian.Uint64(body[0:])),
			Vote:   new(binary.BigEndian.Uint64(body[8:])),
			Commit: new(binary.BigEndian.Uint64(body[16:])),
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown frame type %d", errTornFrame, typ)
	}
}

// errTornFrame marks a frame that did not read back whole (short, bad CRC, bad
// length). At the end of the newest segment that is a crash mid-write.
var errTornFrame = errors.New("torn frame")

// readFrame reads one frame: it returns io.EOF at a clean end.
func readFrame(r io.Reader) (typ byte, body []byte, n int64, err error) {
	var hdr [frameHeaderSize]byte
	if k, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF && k == 0 {
			return 0, nil, 0, io.EOF
		}
		return 0, nil, 0, fmt.Errorf("%w: short header", errTornFrame)
	}
	size := binary.BigEndian.Uint32(hdr[0:])
	sum := binary.BigEndian.Uint32(hdr[4:])
	if size < 1 || size > maxFrameBody {
		return 0, nil, 0, fmt.Errorf("%w: frame length %d", errTornFrame, size)
	}
	body = make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, 0, fmt.Errorf("%w: short body", errTornFrame)
	}
	if crc32.Checksum(body, castagnoli) != sum {
		return 0, nil, 0, fmt.Errorf("%w: checksum mismatch", errTornFrame)
	}
	return body[0], body[1:], int64(frameHeaderSize) + int64(size), nil
}

func appendFrame(buf []byte, typ byte, payload func([]byte) []byte) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, frameHeaderSize)...)
	buf = append(buf, typ)
	buf = payload(buf)
	body := buf[start+frameHeaderSize:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(body, castagnoli))
	return buf
}

func appendEntryFrame(buf []byte, e *pb.Entry) []byte {
	return appendFrame(buf, frameEntry, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint64(b, e.GetTerm())
		b = binary.BigEndian.AppendUint64(b, e.GetIndex())
		b = append(b, byte(e.GetType()))
		return append(b, e.GetData()...)
	})
}

func appendHardStateFrame(buf []byte, hs *pb.HardState) []byte {
	return appendFrame(buf, frameHardState, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint64(b, hs.GetTerm())
		b = binary.BigEndian.AppendUint64(b, hs.GetVote())
		return binary.BigEndian.AppendUint64(b, hs.GetCommit())
	})
}

func decodeEntry(body []byte) (*pb.Entry, error) {
	if len(body) < 17 {
		return nil, fmt.Errorf("%w: entry of %d bytes", errTornFrame, len(body))
	}
	typ := pb.EntryType(body[16])
	return &pb.Entry{
		Term:  new(binary.BigEndian.Uint64(body[0:])),
		Index: new(binary.BigEndian.Uint64(body[8:])),
		Type:  &typ,
		Data:  slices.Clone(body[17:]),
	}, nil
}

// save appends ents and hs (either may be empty) to the active segment, with one
// write, and fsyncs when sync is set.
func (l *diskLog) save(hs *pb.HardState, ents []*pb.Entry, sync bool) error {
	if raft.IsEmptyHardState(hs) && len(ents) == 0 {
		return nil
	}
	// The HardState goes first: a torn write then never leaves entries of a term
	// whose HardState was lost. Its commit index may cover entries of this write;
	// openDiskLog clamps it if they were torn away.
	buf := l.buf[:0]
	if !raft.IsEmptyHardState(hs) {
		buf = appendHardStateFrame(buf, hs)
		l.hardState = proto.Clone(hs).(*pb.HardState)
	}
	seg := &l.segments[len(l.segments)-1]
	for _, e := range ents {
		buf = appendEntryFrame(buf, e)
		seg.maxIndex = max(seg.maxIndex, e.GetIndex())
	}
	l.buf = buf
	if n, err := l.active.Write(buf); err != nil {
		// Cut what landed (a full disk writes part of buf), so that the segment still
		// ends with a whole frame: the loader refuses a torn frame anywhere but at the
		// end of the newest segment, and a later write would follow this one.
		if terr := l.active.Truncate(l.activeSize); terr != nil {
			return fmt.Errorf("write metadata log (%d of %d bytes written, and cutting them failed: %v): %w", n, len(buf), terr, err)
		}
		return fmt.Errorf("write metadata log: %w", err)
	}
	l.activeSize += int64(len(buf))
	if sync {
		if err := l.active.Sync(); err != nil {
			return fmt.Errorf("sync metadata log: %w", err)
		}
	}
	return nil
}

// saveSnapshot makes snap durable, starts a new segment and deletes what the snapshot
// made obsolete. received says the snapshot came from the leader and replaces the
// whole log, rather than summarising a prefix of it.
func (l *diskLog) saveSnapshot(snap *pb.Snapshot, received bool) error {
	nextSeg := l.segments[len(l.segments)-1].seq + 1
	var firstSeg uint64
	if received {
		firstSeg = nextSeg
	}
	index := snap.GetMetadata().GetIndex()
	if err := writeSnapshotFile(l.dir, snap, firstSeg); err != nil {
		return err
	}
	if err := l.roll(nextSeg); err != nil {
		return err
	}
	// Older snapshots, and segments holding only entries the snapshot covers.
	names, _ := os.ReadDir(l.dir)
	for _, de := range names {
		name := de.Name()
		if idx, ok := strings.CutSuffix(name, snapshotSuffix); ok && idx != fmt.Sprintf("%020d", index) {
			_ = os.Remove(filepath.Join(l.dir, name))
		}
	}
	kept := l.segments[:0]
	for i, s := range l.segments {
		active := i == len(l.segments)-1
		if !active && (received || s.maxIndex <= index) {
			_ = os.Remove(filepath.Join(l.dir, segmentName(s.seq)))
			continue
		}
		kept = append(kept, s)
	}
	l.segments = kept
	return syncPath(l.dir)
}

// roll closes the active segment and starts segment seq, which begins with the
// current HardState so that deleting older segments never loses it.
func (l *diskLog) roll(seq uint64) error {
	if l.active != nil {
		if err := l.active.Sync(); err != nil {
			return err
		}
		if err := l.active.Close(); err != nil {
			return err
		}
		l.active = nil
	}
	path := filepath.Join(l.dir, segmentName(seq))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	l.active, l.activeSize = f, 0
	l.segments = append(l.segments, segment{seq: seq})
	if !raft.IsEmptyHardState(l.hardState) {
		frame := appendHardStateFrame(nil, l.hardState)
		if _, err := f.Write(frame); err != nil {
			return err
		}
		l.activeSize = int64(len(frame))
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return syncPath(l.dir)
}

func (l *diskLog) close() error {
	if l == nil || l.active == nil {
		return nil
	}
	err := l.active.Sync()
	if cerr := l.active.Close(); err == nil {
		err = cerr
	}
	l.active = nil
	return err
}

// Snapshot file: magic, u32 CRC32C of the rest, then version u8, term u64, index u64,
// first segment u64, u32 length + ConfState (protobuf), data.
func writeSnapshotFile(dir string, snap *pb.Snapshot, firstSeg uint64) error {
	md := snap.GetMetadata()
	cs, err := proto.Marshal(pb.EnsureConfState(md.GetConfState()))
	if err != nil {
		return err
	}
	var body []byte
	body = append(body, snapshotVersion)
	body = binary.BigEndian.AppendUint64(body, md.GetTerm())
	body = binary.BigEndian.AppendUint64(body, md.GetIndex())
	body = binary.BigEndian.AppendUint64(body, firstSeg)
	body = binary.BigEndian.AppendUint32(body, uint32(len(cs)))
	body = append(body, cs...)
	body = append(body, snap.GetData()...)
	out := append([]byte(snapshotMagic), binary.BigEndian.AppendUint32(nil, crc32.Checksum(body, castagnoli))...)
	out = append(out, body...)

	final := filepath.Join(dir, snapshotName(md.GetIndex()))
	tmp := final + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(out); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return syncPath(dir)
}

func readSnapshotFile(path string) (*pb.Snapshot, uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	bad := func(why string) (*pb.Snapshot, uint64, error) {
		return nil, 0, fmt.Errorf("%w: snapshot %s: %s", ErrCorruptLog, path, why)
	}
	const fixed = len(snapshotMagic) + 4
	if len(b) < fixed+1+8+8+8+4 || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return bad("bad header")
	}
	body := b[fixed:]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(snapshotMagic):]) {
		return bad("checksum mismatch")
	}
	if body[0] != snapshotVersion {
		return bad(fmt.Sprintf("version %d", body[0]))
	}
	term := binary.BigEndian.Uint64(body[1:])
	index := binary.BigEndian.Uint64(body[9:])
	firstSeg := binary.BigEndian.Uint64(body[17:])
	csLen := binary.BigEndian.Uint32(body[25:])
	rest := body[29:]
	if uint64(csLen) > uint64(len(rest)) {
		return bad("conf state length")
	}
	cs := &pb.ConfState{}
	if err := proto.Unmarshal(rest[:csLen], cs); err != nil {
		return bad("conf state: " + err.Error())
	}
	snap := &pb.Snapshot{
		Metadata: &pb.SnapshotMetadata{ConfState: pb.EnsureConfState(cs), Index: new(index), Term: new(term)},
		Data:     rest[csLen:],
	}
	return snap, firstSeg, nil
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
