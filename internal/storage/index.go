package storage

import (
	"encoding/binary"
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
	rel := target - base
	if rel < 0 {
		return 0
	}
	i := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].relOffset) > rel })
	if i == 0 {
		return 0
	}
	return int64(x.offsets[i-1].position)
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
func readIndexes(offsetPath, timePath string, segmentSize int64) (segmentIndex, error) {
	var x segmentIndex
	ob, err := os.ReadFile(offsetPath)
	if err != nil {
		return x, err
	}
	tb, err := os.ReadFile(timePath)
	if err != nil {
		return x, err
	}
	if len(ob)%offsetEntrySize != 0 || len(tb)%timeEntrySize != 0 {
		return x, fmt.Errorf("%w: index file size not a multiple of the entry size", ErrCorrupt)
	}
	x.offsets = make([]offsetEntry, 0, len(ob)/offsetEntrySize)
	for i := 0; i < len(ob); i += offsetEntrySize {
		e := offsetEntry{binary.BigEndian.Uint32(ob[i:]), binary.BigEndian.Uint32(ob[i+4:])}
		if int64(e.position) >= segmentSize {
			return x, fmt.Errorf("%w: offset index entry beyond segment end", ErrCorrupt)
		}
		if n := len(x.offsets); n > 0 && (e.relOffset <= x.offsets[n-1].relOffset || e.position <= x.offsets[n-1].position) {
			return x, fmt.Errorf("%w: offset index not increasing", ErrCorrupt)
		}
		x.offsets = append(x.offsets, e)
	}
	x.times = make([]timeEntry, 0, len(tb)/timeEntrySize)
	for i := 0; i < len(tb); i += timeEntrySize {
		e := timeEntry{int64(binary.BigEndian.Uint64(tb[i:])), binary.BigEndian.Uint32(tb[i+8:])}
		if n := len(x.times); n > 0 && (e.timestamp <= x.times[n-1].timestamp || e.relOffset < x.times[n-1].relOffset) {
			return x, fmt.Errorf("%w: time index not increasing", ErrCorrupt)
		}
		x.times = append(x.times, e)
	}
	return x, nil
}

// writeIndexes replaces both index files with the given entries.
func writeIndexes(offsetPath, timePath string, x *segmentIndex) error {
	ob := make([]byte, len(x.offsets)*offsetEntrySize)
	for i, e := range x.offsets {
		encodeOffsetEntry(ob[i*offsetEntrySize:], e)
	}
	tb := make([]byte, len(x.times)*timeEntrySize)
	for i, e := range x.times {
		encodeTimeEntry(tb[i*timeEntrySize:], e)
	}
	if err := os.WriteFile(offsetPath, ob, 0o644); err != nil {
		return err
	}
	return os.WriteFile(timePath, tb, 0o644)
}
