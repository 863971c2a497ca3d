package storage

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/samsa-streaming/samsa/internal/record"
)

// minBatchLength is the smallest legal batchLength field (a header with no records).
const minBatchLength = record.HeaderSize - record.LogOverhead

// errTorn marks an incomplete or unparsable batch at the end of a file region.
var errTorn = fmt.Errorf("%w: torn or invalid batch", ErrCorrupt)

// batchIter walks batch headers of a file region [pos, end) without reading record
// data, using explicit-offset reads (never the file's seek position), so any number of
// iterators may run on one file concurrently.
type batchIter struct {
	r        io.ReaderAt
	pos, end int64
	buf      []byte
	pooled   *[]byte // buf's pool entry (newReadIter)
	bufStart int64   // file position of buf[0]
	bufLen   int
}

func newBatchIter(r io.ReaderAt, pos, end int64, bufSize int) *batchIter {
	if bufSize < record.HeaderSize {
		bufSize = record.HeaderSize
	}
	return &batchIter{r: r, pos: pos, end: end, buf: make([]byte, bufSize), bufStart: -1}
}

// readIterBuf is the buffer size of the iterators on the read path (Read, find,
// OffsetForTimestamp), which take it from readIterBufs and give it back with close: a
// Fetch of many partitions walks headers in each of them. A copying read (ReadBytes:
// share fetches, coordinator loads) that wants more takes a buffer of up to
// readIterMaxBuf from copyIterBufs, cut to the size it reads, so that it reads the
// file once rather than once every readIterBuf bytes.
const (
	readIterBuf    = 16 << 10
	readIterMaxBuf = 256 << 10
)

var (
	readIterBufs = sync.Pool{New: func() any { b := make([]byte, readIterBuf); return &b }}
	copyIterBufs = sync.Pool{New: func() any { b := make([]byte, readIterMaxBuf); return &b }}
)

// newReadIter is newBatchIter with a pooled buffer of readIterBuf bytes, returned by
// value so that it can live on the caller's stack; call close when done.
func newReadIter(r io.ReaderAt, pos, end int64) batchIter { return newReadIterSized(r, pos, end, 0) }

// newReadIterSized is newReadIter with a buffer of size bytes, as far as
// readIterMaxBuf (at least readIterBuf).
func newReadIterSized(r io.ReaderAt, pos, end int64, size int) batchIter {
	if size <= readIterBuf {
		p := readIterBufs.Get().(*[]byte)
		return batchIter{r: r, pos: pos, end: end, buf: *p, pooled: p, bufStart: -1}
	}
	p := copyIterBufs.Get().(*[]byte)
	return batchIter{r: r, pos: pos, end: end, buf: (*p)[:min(size, readIterMaxBuf)], pooled: p, bufStart: -1}
}

// close gives a pooled buffer back; the iterator must not be used afterwards.
func (it *batchIter) close() {
	if it.pooled != nil {
		if cap(*it.pooled) == readIterBuf {
			readIterBufs.Put(it.pooled)
		} else {
			copyIterBufs.Put(it.pooled)
		}
		it.pooled, it.buf = nil, nil
	}
}

// next returns the header of the batch at the current position and its position, then
// advances past the batch. It returns io.EOF at the end of the region and errTorn when
// the bytes left do not hold a whole, well-formed batch header.
func (it *batchIter) next() (record.Header, int64, error) {
	var h record.Header
	if it.pos >= it.end {
		return h, it.pos, io.EOF
	}
	if it.pos+record.HeaderSize > it.end {
		return h, it.pos, errTorn
	}
	if !it.holds(it.pos, record.HeaderSize) {
		want := int64(len(it.buf))
		if rem := it.end - it.pos; rem < want {
			want = rem
		}
		n, err := it.r.ReadAt(it.buf[:want], it.pos)
		if n < record.HeaderSize {
			if err == nil || errors.Is(err, io.EOF) {
				return h, it.pos, errTorn
			}
			return h, it.pos, err
		}
		it.bufStart, it.bufLen = it.pos, n
	}
	off := it.pos - it.bufStart
	h, err := record.ParseHeader(it.buf[off : off+record.HeaderSize])
	if err != nil || h.Length < minBatchLength || it.pos+int64(h.Size()) > it.end || h.LastOffsetDelta < 0 {
		return h, it.pos, errTorn
	}
	pos := it.pos
	it.pos += int64(h.Size())
	return h, pos, nil
}

// appendBytes appends the size bytes at pos (a batch next returned) to dst: from the
// buffer when it holds them; else, when the batch fits in the buffer, the buffer is
// read again from pos on, so that the headers after the batch come with it; else
// the batch is read from the file straight into dst.
func (it *batchIter) appendBytes(dst []byte, pos int64, size int) ([]byte, error) {
	if !it.holds(pos, size) && size <= len(it.buf) {
		it.bufStart = -1 // until the read succeeds
		n, err := it.r.ReadAt(it.buf[:min(int64(len(it.buf)), it.end-pos)], pos)
		if n < size {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return dst, err
		}
		it.bufStart, it.bufLen = pos, n
	}
	if it.holds(pos, size) {
		off := pos - it.bufStart
		return append(dst, it.buf[off:off+int64(size)]...), nil
	}
	n := len(dst)
	dst = slices.Grow(dst, size)[:n+size]
	if _, err := it.r.ReadAt(dst[n:], pos); err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// holds reports whether the buffer holds the size bytes at pos.
func (it *batchIter) holds(pos int64, size int) bool {
	return it.bufStart >= 0 && pos >= it.bufStart && pos+int64(size) <= it.bufStart+int64(it.bufLen)
}

// fullBatchReader walks whole batches (header and records) of a region, for recovery
// and copying reads.
type fullBatchReader struct {
	r        io.ReaderAt
	pos, end int64
	buf      []byte
	bufStart int64
	bufLen   int
}

func newFullBatchReader(r io.ReaderAt, pos, end int64) *fullBatchReader {
	// A buffer of up to 1 MiB, no larger than the region: recovery after a crash
	// makes one per partition (it grows for a larger batch).
	size := min(max(end-pos, record.HeaderSize), 1<<20)
	return &fullBatchReader{r: r, pos: pos, end: end, buf: make([]byte, size), bufStart: -1}
}

// next returns the batch at the current position (valid until the next call), its
// header and position. io.EOF at the end; errTorn when the rest is not a whole batch.
// The CRC is not checked here.
func (fr *fullBatchReader) next() ([]byte, record.Header, int64, error) {
	var h record.Header
	if fr.pos >= fr.end {
		return nil, h, fr.pos, io.EOF
	}
	if fr.pos+record.HeaderSize > fr.end {
		return nil, h, fr.pos, errTorn
	}
	hb, err := fr.slice(fr.pos, record.HeaderSize)
	if err != nil {
		return nil, h, fr.pos, err
	}
	h, err = record.ParseHeader(hb)
	if err != nil || h.Length < minBatchLength || fr.pos+int64(h.Size()) > fr.end || h.LastOffsetDelta < 0 {
		return nil, h, fr.pos, errTorn
	}
	b, err := fr.slice(fr.pos, h.Size())
	if err != nil {
		return nil, h, fr.pos, err
	}
	pos := fr.pos
	fr.pos += int64(h.Size())
	return b, h, pos, nil
}

func (fr *fullBatchReader) slice(pos int64, n int) ([]byte, error) {
	if fr.bufStart >= 0 && pos >= fr.bufStart && pos+int64(n) <= fr.bufStart+int64(fr.bufLen) {
		off := pos - fr.bufStart
		return fr.buf[off : off+int64(n)], nil
	}
	if n > len(fr.buf) {
		fr.buf = make([]byte, n)
	}
	want := int64(len(fr.buf))
	if rem := fr.end - pos; rem < want {
		want = rem
	}
	got, err := fr.r.ReadAt(fr.buf[:want], pos)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, errTorn
		}
		return nil, err
	}
	fr.bufStart, fr.bufLen = pos, got
	return fr.buf[:n], nil
}
