package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
)

// Index entry sizes (format constants; see doc.go).
const (
	offsetEntrySize = 8  // relative offset uint32 + position uint32
	timeEntrySize   = 12 // timestamp int64 + relative offset uint32
)

// offsetEntry maps the base offset of a batch (relative to the segment's base offset)
// to the batch's byte position in the segment file.
type offsetEntry struct {
	relOffset uint32
	position  uint32
}

// timeEntry records that the largest timestamp seen in the segment up to the batch
// starting at relOffset is timestamp.
type timeEntry struct {
	timestamp int64
	relOffset uint32
}

// segmentIndex holds a segment's sparse offset and time indexes in memory. The files
// are append-only copies that can always be rebuilt from the segment. It is guarded by
// segment.idx's mutex.
type segmentIndex struct {
	offsets []offsetEntry
	times   []timeEntry
}

// lookup returns the position of the last indexed batch whose base offset is ≤ target
// (0 if none).
func (x *segmentIndex) lookup(base, target int64) int64 {
	e, _ := x.lookupEntry(base, target)
	return int64(e.position)
}

// lookupEntry returns the last entry whose offset is ≤ target; ok is false (and the
// entry zero: the segment's start) when there is none.
func (x *segmentIndex) lookupEntry(base, target int64) (e offsetEntry, ok bool) {
	rel := target - base
	if rel < 0 {
		return e, false
	}
	i := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].relOffset) > rel })
	if i == 0 {
		return e, false
	}
	return x.offsets[i-1], true
}

// lookupTime returns the offset of the last time entry whose timestamp is strictly below
// ts. Every record before that offset has a timestamp below ts. ok is false when no
// entry qualifies (scan from the start of the segment).
func (x *segmentIndex) lookupTime(base, ts int64) (int64, bool) {
	i := sort.Search(len(x.times), func(i int) bool { return x.times[i].timestamp >= ts })
	if i == 0 {
		return 0, false
	}
	return base + int64(x.times[i-1].relOffset), true
}

func encodeOffsetEntry(b []byte, e offsetEntry) {
	binary.BigEndian.PutUint32(b[0:], e.relOffset)
	binary.BigEndian.PutUint32(b[4:], e.position)
}

func encodeTimeEntry(b []byte, e timeEntry) {
	binary.BigEndian.PutUint64(b[0:], uint64(e.timestamp))
	binary.BigEndian.PutUint32(b[8:], e.relOffset)
}

// readIndexes loads the two index files and checks them against the segment size:
// entries must be strictly increasing and point inside the segment. Any violation or a
// partial entry returns an error wrapping ErrCorrupt; a missing file is reported with
// os.ErrNotExist so the caller rebuilds.
func readIndexes(fsys FS, offsetPath, timePath string, segmentSize int64) (segmentIndex, error) {
	var x segmentIndex
	ob, err := readFile(fsys, offsetPath)
	if err != nil {
		return x, err
	}
	tb, err := readFile(fsys, timePath)
	if err != nil {
		return x, err
	}
	if len(ob)%offsetEntrySize != 0 || len(tb)%timeEntrySize != 0 {
		return x, fmt.Errorf("%w: %s (%d bytes) or %s (%d bytes): size not a multiple of the entry size", ErrCorrupt, offsetPath, len(ob), timePath, len(tb))
	}
	x.offsets = make([]offsetEntry, 0, len(ob)/offsetEntrySize)
	for i := 0; i < len(ob); i += offsetEntrySize {
		e := offsetEntry{binary.BigEndian.Uint32(ob[i:]), binary.BigEndian.Uint32(ob[i+4:])}
		if int64(e.position) >= segmentSize || e.position == 0 {
			// The first batch is never indexed (an entry follows index.interval.bytes).
			return x, fmt.Errorf("%w: %s: entry at position %d, segment of %d bytes", ErrCorrupt, offsetPath, e.position, segmentSize)
		}
		if n := len(x.offsets); n > 0 && (e.relOffset <= x.offsets[n-1].relOffset || e.position <= x.offsets[n-1].position) {
			return x, fmt.Errorf("%w: %s: entries not increasing", ErrCorrupt, offsetPath)
		}
		x.offsets = append(x.offsets, e)
	}
	x.times = make([]timeEntry, 0, len(tb)/timeEntrySize)
	for i := 0; i < len(tb); i += timeEntrySize {
		e := timeEntry{int64(binary.BigEndian.Uint64(tb[i:])), binary.BigEndian.Uint32(tb[i+8:])}
		if n := len(x.times); n > 0 && (e.timestamp <= x.times[n-1].timestamp || e.relOffset < x.times[n-1].relOffset) {
			return x, fmt.Errorf("%w: %s: entries not increasing", ErrCorrupt, timePath)
		}
		x.times = append(x.times, e)
	}
	return x, nil
}

// encode returns the contents of the two index files.
func (x *segmentIndex) encode() (offsets, times []byte) {
	offsets = make([]byte, len(x.offsets)*offsetEntrySize)
	for i, e := range x.offsets {
		encodeOffsetEntry(offsets[i*offsetEntrySize:], e)
	}
	times = make([]byte, len(x.times)*timeEntrySize)
	for i, e := range x.times {
		encodeTimeEntry(times[i*timeEntrySize:], e)
	}
	return offsets, times
}

// writeIndexes replaces both index files with the given entries, fsyncing them when
// sync is set. The files are rewritten in place: a crash may leave them torn, which
// the loader's checks find (they are rebuilt then).
func writeIndexes(fsys FS, offsetPath, timePath string, x *segmentIndex, sync bool) error {
	ob, tb := x.encode()
	return errors.Join(writeIndexFile(fsys, offsetPath, ob, sync), writeIndexFile(fsys, timePath, tb, sync))
}

func writeIndexFile(fsys FS, path string, data []byte, sync bool) error {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	errs := []error{f.Truncate(int64(len(data)))}
	if len(data) > 0 {
		_, err := f.WriteAt(data, 0)
		errs = append(errs, err)
	}
	if sync {
		errs = append(errs, f.Sync())
	}
	errs = append(errs, f.Close())
	return errors.Join(errs...)
}
