package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The walk of a compressed batch. The codec's output is read into a fixed pooled
// buffer and the records in it are checked by walk.records, the uncompressed walk;
// a record cut by the buffer's end is moved to its front and the buffer refilled. A
// record larger than the whole buffer is checked field by field as it streams past
// (walk.largeRecord), holding only its varints. So a batch costs the buffer plus the
// codec's state however far it expands: gzip's 32 KiB window, lz4's blocks (at most
// 4 MiB), zstd's window (at most zstdMaxWindow; past it, up to zstdMaxLargeWindow
// within the process-wide largeWindows budget), a snappy chunk (xerial framing) or
// block (raw snappy, decoded whole: at most 64/3 times its input, bounded by
// MaxDecompressedBytes).

// streamBufferSize is the size of the buffer a compressed batch is walked in.
const streamBufferSize = 128 << 10

// recordStream is a codec's output being walked: the bytes buf[start:end] are read
// and not yet walked; read counts every byte the codec has produced.
type recordStream struct {
	r          io.Reader
	buf        []byte
	start, end int
	read       int64
	eof        bool
}

// streams holds recordStreams and their buffers for walk.compressed.
var streams = sync.Pool{New: func() any { return &recordStream{buf: make([]byte, streamBufferSize)} }}

// compressed walks the records of payload, compressed with codec c. A count whose
// records could not fit in MaxDecompressedBytes is refused before decompressing
// anything.
func (w *walk) compressed(payload []byte, c Compression) error {
	count := w.count
	if int64(count)*minRecordSize > MaxDecompressedBytes {
		return fmt.Errorf("%w: record count %d cannot fit in the %d bytes a batch may decompress to",
			ErrInvalid, count, MaxDecompressedBytes)
	}
	if c == CompressionSnappy && !isXerial(payload) {
		return w.whole(payload, c, MaxDecompressedBytes) // one block: decoded whole
	}
	s := streams.Get().(*recordStream)
	defer streams.Put(s)
	s.start, s.end, s.read, s.eof = 0, 0, 0, false
	var err error
	switch c {
	case CompressionGzip:
		r := gzipReaders.Get().(*gzipReader)
		r.src.Reset(payload)
		if err = r.Reset(&r.src); err == nil {
			s.r = r
			err = w.stream(s)
		} else {
			err = fmt.Errorf("%w: %s: %w", ErrCorrupt, c, err)
		}
		r.src.Reset(nil)
		gzipReaders.Put(r)
	case CompressionLZ4:
		r := lz4Readers.Get().(*lz4Reader)
		r.src.Reset(payload)
		r.Reset(&r.src)
		s.r = r
		err = w.stream(s)
		r.src.Reset(nil)
		lz4Readers.Put(r)
	case CompressionSnappy:
		r := xerialReaders.Get().(*xerialReader)
		r.reset(payload[xerialHeaderSize:])
		s.r = r
		err = w.stream(s)
		r.reset(nil)
		xerialReaders.Put(r)
	case CompressionZstd:
		r := zstdStreams.Get().(*zstdStream)
		if err = r.reset(payload); err == nil {
			s.r = r.dec
			err = w.stream(s)
		}
		r.reset(nil)
		zstdStreams.Put(r)
		if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			// A frame declares a window past zstdMaxWindow (a Java producer at levels
			// 20–22, which Kafka accepts; a single-segment frame's window is its
			// content size, refused as ErrDecoderSizeExceeded): walked again from the
			// start. (A batch past MaxDecompressedBytes fails the same way again.)
			s.start, s.end, s.read, s.eof = 0, 0, 0, false
			w.next, w.last = 0, -1
			err = w.largeWindowZstd(payload, s)
		}
	default:
		return fmt.Errorf("%w: %w %d", ErrInvalid, errUnknownCodec, int8(c))
	}
	s.r = nil
	if errors.Is(err, ErrInvalid) { // not a Check's error
		err = fmt.Errorf("%w (%s batch of %d bytes, %d decompressed)", err, c, len(payload), s.read)
	}
	return err
}

// zstdMaxLargeWindow is the largest zstd window Validate decodes: 128 MiB, zstd's
// default limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT, window log 27), with which Kafka
// decodes through zstd-jni and refuses a frame declaring more.
const zstdMaxLargeWindow = 128 << 20

// largeWindows bounds the memory of the windows past zstdMaxWindow being decoded at
// once, whatever the number of connections sending them: two of the largest.
var largeWindows = budget{limit: 2 * zstdMaxLargeWindow}

// largeWindowZstd walks the records of zstd frames declaring windows past
// zstdMaxWindow as a stream, with a decoder of its own allowed Kafka's largest
// window, once largeWindows has room for it; a frame declaring more is ErrCorrupt, as
// Kafka refuses it. Decoding the frames whole instead would cost what they expand to
// (up to MaxDecompressedBytes, and its growing buffers' garbage) for a few kilobytes
// of input.
func (w *walk) largeWindowZstd(payload []byte, s *recordStream) error {
	largeWindows.acquire(zstdMaxLargeWindow)
	defer largeWindows.release(zstdMaxLargeWindow)
	// bytes.Reader has no Bytes method: the decoder streams (see zstdStreams).
	dec, err := zstd.NewReader(bytes.NewReader(payload), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(zstdMaxLargeWindow), zstd.WithDecoderMaxMemory(MaxDecompressedBytes))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, CompressionZstd, err)
	}
	defer dec.Close()
	s.r = dec
	if err = w.stream(s); errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return fmt.Errorf("%w: %s: a frame declares a window of more than %d bytes, or the batch decompresses to more than %d: %w",
			ErrCorrupt, CompressionZstd, zstdMaxLargeWindow, MaxDecompressedBytes, err)
	}
	return err
}

// budget is a count of bytes that callers take and give back, waiting while taking
// them would pass limit. One caller may take up to limit.
type budget struct {
	limit int64
	mu    sync.Mutex
	cond  *sync.Cond
	used  int64
}

func (b *budget) acquire(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cond == nil {
		b.cond = sync.NewCond(&b.mu)
	}
	for b.used > 0 && b.used+n > b.limit {
		b.cond.Wait()
	}
	b.used += n
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// whole decompresses payload whole into a pooled buffer, refusing more than limit
// bytes, and walks it: for a raw snappy block, which is one unit.
func (w *walk) whole(payload []byte, c Compression, limit int) error {
	bufp := decompressBuffers.Get().(*[]byte)
	records, err := decompressAppend(c, (*bufp)[:0], payload, limit)
	if err == nil {
		if err = w.uncompressed(records); errors.Is(err, ErrInvalid) { // not a Check's error
			err = fmt.Errorf("%w (%s batch of %d bytes, %d decompressed)", err, c, len(payload), len(records))
		}
		if cap(records) > cap(*bufp) && cap(records) <= maxPooledDecompressBuffer {
			*bufp = records[:0]
		}
	}
	decompressBuffers.Put(bufp)
	return err
}

// maxPooledDecompressBuffer is the largest buffer walk.whole puts back in the pool;
// a bigger one, from an unusually large batch, is left to the garbage collector rather
// than held by an idle pool.
const maxPooledDecompressBuffer = 8 << 20

// decompressBuffers holds *[]byte scratch buffers for walk.whole.
var decompressBuffers = sync.Pool{New: func() any { return new([]byte) }}

// stream walks the records s's codec produces, then checks that nothing follows
// the last one.
func (w *walk) stream(s *recordStream) error {
	for w.next < w.count {
		if err := s.fill(len(s.buf)); err != nil {
			return err
		}
		n, err := w.records(s.buf[s.start:s.end], s.eof)
		if err != nil {
			return err
		}
		s.start += n
		if n == 0 && w.next < w.count {
			// The buffer is full and holds only the start of one record.
			if err := w.largeRecord(s); err != nil {
				return err
			}
		}
	}
	trailing := int64(s.end - s.start)
	s.start = s.end
	for !s.eof { // to the codec's end: its own checks, and the count of what follows
		before := s.read
		if err := s.fill(len(s.buf)); err != nil {
			return err
		}
		trailing += s.read - before
		s.start = s.end
	}
	if trailing > 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrInvalid, trailing, w.count)
	}
	return nil
}

// fill moves the unwalked bytes to the front of the buffer and reads until it holds
// at least need of them (need <= len(s.buf)) or the codec's output ends. Codec errors
// and output beyond MaxDecompressedBytes are ErrCorrupt.
func (s *recordStream) fill(need int) error {
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	for s.end < need && !s.eof {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		s.read += int64(n)
		if s.read > MaxDecompressedBytes {
			return fmt.Errorf("%w: %w", ErrCorrupt, errTooBig)
		}
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
	}
	return nil
}

// largeRecord checks record w.next, which starts at s.start and is longer than the
// buffer, as scanRecord would, while skipping its key, value and headers through
// the stream; it calls w.check at its end.
func (w *walk) largeRecord(s *recordStream) error {
	i := w.next
	length, n := readVarint32(s.buf[s.start:s.end]) // complete: see wholeRecord
	s.start += n
	r := recordReader{s: s, left: int64(length)}
	var (
		tsDelta int64
		delta   int32
		keyNull bool
	)
	err := r.skip(1) // the attributes
	if err == nil {
		tsDelta, err = r.varint64()
	}
	if err == nil {
		delta, err = r.varint32()
	}
	if err == nil {
		keyNull, err = r.skipBytes(true) // the key
	}
	if err == nil {
		_, err = r.skipBytes(true) // the value
	}
	if err == nil {
		err = r.skipHeaders()
	}
	if err == nil && r.left != 0 {
		err = errRecordTrailing
	}
	if errors.Is(err, ErrCorrupt) { // the codec's
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: record %d: %w", ErrInvalid, i, err)
	}
	if err := w.checkDelta(i, delta); err != nil {
		return err
	}
	w.maxTimestamp = max(w.maxTimestamp, w.baseTimestamp+tsDelta)
	if w.check != nil {
		if err := w.check(delta, w.baseTimestamp+tsDelta, keyNull); err != nil {
			return err
		}
	}
	w.next++
	return nil
}

// recordReader reads the fields of one record's body from a recordStream; left is
// what remains of the body. Its errors are scanRecord's; a stream ending inside the
// body is errRecordLength, as a body longer than the payload is to scanRecord.
type recordReader struct {
	s    *recordStream
	left int64
}

// have makes at least min(n, r.left) bytes available in the buffer.
func (r *recordReader) have(n int) ([]byte, error) {
	n = int(min(int64(n), r.left))
	s := r.s
	if s.end-s.start < n {
		if err := s.fill(n); err != nil {
			return nil, err
		}
		if s.end-s.start < n {
			return nil, errRecordLength
		}
	}
	return s.buf[s.start : s.start+int(min(int64(s.end-s.start), r.left))], nil
}

func (r *recordReader) consume(n int) {
	r.s.start += n
	r.left -= int64(n)
}

func (r *recordReader) varint32() (int32, error) {
	b, err := r.have(5)
	if err != nil {
		return 0, err
	}
	v, n := readVarint32(b)
	if n == 0 {
		return 0, errRecordVarint
	}
	r.consume(n)
	return v, nil
}

func (r *recordReader) varint64() (int64, error) {
	b, err := r.have(10)
	if err != nil {
		return 0, err
	}
	v, n := readVarint64(b)
	if n == 0 {
		return 0, errRecordVarint
	}
	r.consume(n)
	return v, nil
}

// skip passes over n bytes of the body (n <= r.left).
func (r *recordReader) skip(n int64) error {
	if n > r.left {
		return errRecordLength
	}
	s := r.s
	for n > 0 {
		if s.start == s.end {
			if err := s.fill(len(s.buf)); err != nil {
				return err
			}
			if s.start == s.end {
				return errRecordLength
			}
		}
		k := int(min(n, int64(s.end-s.start)))
		r.consume(k)
		n -= int64(k)
	}
	return nil
}

// skipBytes passes over a length-prefixed field (-1: null, when nullable) and reports
// whether it was null.
func (r *recordReader) skipBytes(nullable bool) (null bool, err error) {
	l, err := r.varint32()
	if err != nil {
		return false, err
	}
	if l == -1 && nullable {
		return true, nil
	}
	if l < 0 || int64(l) > r.left {
		return false, errRecordField
	}
	return false, r.skip(int64(l))
}

// skipHeaders passes over the header count and the headers.
func (r *recordReader) skipHeaders() error {
	nh, err := r.varint32()
	if err != nil {
		return err
	}
	if nh < 0 || int64(nh) > r.left/2 { // each header takes at least two bytes
		return errRecordField
	}
	for range nh {
		if _, err := r.skipBytes(false); err != nil {
			return err
		}
		if _, err := r.skipBytes(true); err != nil {
			return err
		}
	}
	return nil
}
