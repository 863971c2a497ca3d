package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxDecompressedBytes bounds the output of Decompress. A batch that would expand beyond
// it is refused as ErrCorrupt, so a small compressed batch cannot exhaust memory.
const MaxDecompressedBytes = 256 << 20

// errUnknownCodec marks a compression codec outside 0..4; it is wrapped in ErrInvalid.
var errUnknownCodec = errors.New("unknown compression codec")

// Compress appends the compression of src with codec c to dst and returns the extended
// slice. CompressionNone appends src unchanged. Snappy is written as one raw snappy
// block, which Kafka (snappy-java's stream reader falls back to raw), librdkafka,
// franz-go, sarama and kafka-python all read. LZ4 is the LZ4 frame format Kafka uses
// since message format v1, with 64 KiB blocks as the Java producer writes them.
func Compress(c Compression, dst, src []byte) ([]byte, error) {
	return CompressLevel(c, 0, dst, src)
}

// CompressLevel is Compress at a compression level as Kafka names it (KIP-390): gzip
// 1–9 (compression.gzip.level, default -1), lz4 1–17 (compression.lz4.level, default 9),
// zstd -131072–22 (compression.zstd.level, default 3). Zero and each codec's default
// mean the codec's default; snappy has no levels. Levels map onto the Go codecs: lz4's
// default is its fast compressor (as Kafka's is) and 1–17 its high-compression levels,
// of which it has nine (10–17 act as 9); zstd has four speeds (below 3 fastest, 3–5
// default, 6–9 better, 10 and up best).
func CompressLevel(c Compression, level int, dst, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		pool := &gzipWriters[gzipLevel(level)]
		w := pool.Get().(*gzip.Writer)
		defer pool.Put(w)
		out := &appendWriter{b: dst}
		w.Reset(out)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("record: gzip: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("record: gzip: %w", err)
		}
		return out.b, nil
	case CompressionSnappy:
		n := len(dst)
		dst = grow(dst, snappy.MaxEncodedLen(len(src)))
		enc := snappy.Encode(dst[n:cap(dst)], src)
		return dst[:n+len(enc)], nil
	case CompressionLZ4:
		pool := &lz4Writers[lz4Level(level)]
		w := pool.Get().(*lz4.Writer)
		defer pool.Put(w)
		out := &appendWriter{b: dst}
		w.Reset(out)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("record: lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("record: lz4: %w", err)
		}
		return out.b, nil
	case CompressionZstd:
		enc, err := zstdEncoders[zstdLevel(level)]()
		if err != nil {
			return dst, err
		}
		return enc.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %w %d", ErrInvalid, errUnknownCodec, int8(c))
}

// Decompress returns the decompression of src with codec c in a new slice (src itself
// for CompressionNone). Snappy input may be raw or xerial-framed (as the Java client
// writes it). Output larger than MaxDecompressedBytes and undecodable input are
// ErrCorrupt; an unknown codec is ErrInvalid. Memory grows with what src actually
// decodes to, never with a size src claims (see decompressAppend).
func Decompress(c Compression, src []byte) ([]byte, error) {
	return decompress(c, src, MaxDecompressedBytes)
}

func decompress(c Compression, src []byte, limit int) ([]byte, error) {
	if c == CompressionNone {
		return src, nil
	}
	return decompressAppend(c, nil, src, limit)
}

// decompressAppend appends the decompression of src with codec c to dst (which may be
// a pooled buffer: it is reused when it has room). Allocation is bounded by what src
// can really expand to, not by sizes written inside it: gzip and lz4 are read as
// streams into a buffer that grows as output arrives (readLimited); a snappy block's
// stated length is refused when the block is too short to expand to it; a zstd frame
// is decoded into a buffer no larger than the output seen so far allows (decodeZstd).
func decompressAppend(c Compression, dst, src []byte, limit int) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		r := gzipReaders.Get().(*gzipReader)
		defer gzipReaders.Put(r)
		r.src.Reset(src)
		if err = r.Reset(&r.src); err == nil {
			out, err = readLimited(dst, r, len(src), limit)
		}
		r.src.Reset(nil)
	case CompressionSnappy:
		out, err = decodeSnappy(dst, src, limit)
	case CompressionLZ4:
		r := lz4Readers.Get().(*lz4Reader)
		defer lz4Readers.Put(r)
		r.src.Reset(src)
		r.Reset(&r.src)
		out, err = readLimited(dst, r, len(src), limit)
		r.src.Reset(nil)
	case CompressionZstd:
		out, err = decodeZstd(dst, src, limit)
	default:
		return nil, fmt.Errorf("%w: %w %d", ErrInvalid, errUnknownCodec, int8(c))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, c, err)
	}
	return out, nil
}

var errTooBig = fmt.Errorf("decompressed size exceeds %d bytes", MaxDecompressedBytes)

// readLimited appends r's bytes to dst until EOF, refusing more than limit of them. The
// buffer starts at dst's spare room or a small multiple of srcLen and doubles as output
// arrives.
func readLimited(dst []byte, r io.Reader, srcLen, limit int) ([]byte, error) {
	start := len(dst)
	buf := grow(dst, min(max(4*srcLen, 512), limit+1))
	for {
		if len(buf) == cap(buf) {
			if len(buf)-start > limit {
				return nil, errTooBig
			}
			buf = grow(buf, min(cap(buf)-start, limit+1-(len(buf)-start)))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf)-start > limit {
			return nil, errTooBig
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// zstdMaxExpansion is the most output one byte of a zstd frame can stand for: a block
// takes at least 4 bytes (a 3-byte header and an RLE byte) and yields at most 128 KiB.
const zstdMaxExpansion = (128 << 10) / 4

// decodeZstd appends the decoding of the zstd frames in src to dst, with memory that
// grows with the output actually decoded, never with a content size a frame header
// states (the decoder pre-allocates a stated size, up to 32768 times the input). A
// first frame stating more than limit, or more than src can expand to, is refused
// outright. One stating no more than dst's spare room, or a small multiple of
// len(src), and followed by no other frame, is decoded into a buffer of that size.
// One stating more, or followed by other frames, is decoded from a
// copy of src whose frame headers state no size, so the buffer grows only as output
// arrives, and the output is then checked against the sizes the frames stated.
// Frames stating no size (the Java client's) are decoded as output arrives too.
func decodeZstd(dst, src []byte, limit int) ([]byte, error) {
	dec, err := zstdDecoder()
	if err != nil {
		return nil, err
	}
	most := uint64(min(limit, MaxDecompressedBytes))
	if e := uint64(len(src)) * zstdMaxExpansion; e < most {
		most = e
	}
	start := len(dst)
	room := min(max(uint64(max(4*len(src), 512)), uint64(cap(dst)-start)), most)
	stated, checkStated := uint64(0), false
	var h zstd.Header
	if h.Decode(src) == nil && h.HasFCS {
		switch {
		case h.FrameContentSize > most:
			return nil, fmt.Errorf("frame states %d bytes of content, more than its %d bytes can hold or the limit of %d",
				h.FrameContentSize, len(src), limit)
		case h.FrameContentSize <= room && singleZstdFrame(src):
			dst = grow(dst, int(h.FrameContentSize))
		default: // too big for the room, or later frames whose sizes are unchecked
			if src, stated, checkStated, err = stripZstdContentSizes(src); err != nil {
				return nil, err
			}
		}
	}
	out, err := dec.DecodeAll(src, dst)
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			err = errTooBig
		}
		return nil, err
	}
	if uint64(len(out)-start) > uint64(limit) {
		return nil, errTooBig
	}
	if checkStated && uint64(len(out)-start) != stated {
		return nil, fmt.Errorf("frames state %d bytes of content, hold %d", stated, len(out)-start)
	}
	return out, nil
}

const (
	zstdMagic          = 0xfd2fb528
	zstdSkippableMagic = 0x184d2a50 // to 0x184d2a5f
)

// stripZstdContentSizes returns a copy of the zstd frames in src with no frame
// content size in their headers (a single-segment frame becomes one whose window
// covers its stated size), the sum of the sizes they stated, and whether every frame
// stated one. It reads only frame and block headers; the decoder checks the rest.
func stripZstdContentSizes(src []byte) (out []byte, stated uint64, all bool, err error) {
	return walkZstdFrames(src, make([]byte, 0, len(src)+8))
}

// singleZstdFrame reports whether src holds one zstd frame and nothing after it
// (reading block headers only).
func singleZstdFrame(src []byte) bool {
	_, _, _, err := walkZstdFrames(src, nil)
	return err == nil
}

var (
	errZstdTruncated  = errors.New("truncated zstd frame")
	errZstdMoreFrames = errors.New("more than one zstd frame")
)

// walkZstdFrames walks the frame and block headers of src. With out nil it stops
// with errZstdMoreFrames at a second frame and copies nothing; otherwise it appends
// to out the frames with no content size, as stripZstdContentSizes describes.
func walkZstdFrames(src, out []byte) (_ []byte, stated uint64, all bool, err error) {
	errTruncated := errZstdTruncated
	countOnly := out == nil
	all = true
	for pos := 0; pos < len(src); {
		if countOnly && pos > 0 {
			return nil, 0, false, errZstdMoreFrames
		}
		if len(src)-pos < 8 {
			return nil, 0, false, errTruncated
		}
		magic := binary.LittleEndian.Uint32(src[pos:])
		if magic&^0xf == zstdSkippableMagic {
			n := 8 + uint64(binary.LittleEndian.Uint32(src[pos+4:]))
			if n > uint64(len(src)-pos) {
				return nil, 0, false, errTruncated
			}
			if !countOnly {
				out = append(out, src[pos:pos+int(n)]...)
			}
			pos += int(n)
			continue
		}
		if magic != zstdMagic {
			return nil, 0, false, fmt.Errorf("zstd magic %#x", magic)
		}
		descriptor := src[pos+4]
		singleSegment := descriptor&0x20 != 0
		dictLen := [4]int{0, 1, 2, 4}[descriptor&3]
		fcsLen := [4]int{0, 2, 4, 8}[descriptor>>6]
		if singleSegment && fcsLen == 0 {
			fcsLen = 1
		}
		p := pos + 5
		window := -1
		if !singleSegment {
			window = int(src[p])
			p++
		}
		if len(src)-p < dictLen+fcsLen {
			return nil, 0, false, errTruncated
		}
		dict := src[p : p+dictLen]
		p += dictLen
		var fcs uint64
		switch fcsLen {
		case 1:
			fcs = uint64(src[p])
		case 2:
			fcs = uint64(binary.LittleEndian.Uint16(src[p:])) + 256
		case 4:
			fcs = uint64(binary.LittleEndian.Uint32(src[p:]))
		case 8:
			fcs = binary.LittleEndian.Uint64(src[p:])
		}
		p += fcsLen
		if fcsLen == 0 {
			all = false
		}
		stated += fcs
		if window < 0 {
			window = zstdWindowDescriptor(fcs)
		}
		if !countOnly {
			out = binary.LittleEndian.AppendUint32(out, zstdMagic)
			out = append(out, descriptor&0x0f, byte(window))
			out = append(out, dict...)
		}
		// The blocks, then the checksum, unchanged.
		blocksStart := p
		for last := false; !last; {
			if len(src)-p < 3 {
				return nil, 0, false, errTruncated
			}
			header := uint32(src[p]) | uint32(src[p+1])<<8 | uint32(src[p+2])<<16
			last = header&1 != 0
			size := int(header >> 3)
			if header>>1&3 == 1 { // RLE: one byte stands for size bytes
				size = 1
			}
			p += 3
			if size > len(src)-p {
				return nil, 0, false, errTruncated
			}
			p += size
		}
		if descriptor&4 != 0 {
			p += 4
			if p > len(src) {
				return nil, 0, false, errTruncated
			}
		}
		if !countOnly {
			out = append(out, src[blocksStart:p]...)
		}
		pos = p
	}
	return out, stated, all, nil
}

// zstdWindowDescriptor returns the smallest window descriptor (exponent and eighths)
// whose window holds n bytes, at least the 1 KiB minimum.
func zstdWindowDescriptor(n uint64) int {
	for exponent := 0; exponent < 32; exponent++ {
		base := uint64(1) << (10 + exponent)
		for mantissa := uint64(0); mantissa < 8; mantissa++ {
			if base+base/8*mantissa >= n {
				return exponent<<3 | int(mantissa)
			}
		}
	}
	return 0xff
}

// xerialMagic starts a snappy stream framed by snappy-java: the 8-byte magic, then a
// 4-byte version and a 4-byte compatible version, then blocks each prefixed by a
// big-endian int32 length.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// isXerial reports whether snappy input src is xerial-framed rather than one raw block.
func isXerial(src []byte) bool {
	return len(src) >= xerialHeaderSize && bytes.Equal(src[:len(xerialMagic)], xerialMagic)
}

func decodeSnappy(dst, src []byte, limit int) ([]byte, error) {
	if !isXerial(src) {
		return decodeSnappyBlock(dst, src, limit)
	}
	start := len(dst)
	out := dst
	rest := src[xerialHeaderSize:]
	for len(rest) > 0 {
		if len(rest) < 4 {
			return nil, errors.New("xerial: truncated block length")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, errors.New("xerial: truncated block")
		}
		var err error
		if out, err = decodeSnappyBlock(out, rest[:n], limit-(len(out)-start)); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// snappyMaxExpansion bounds a snappy block's output per byte of its elements: a
// literal yields no more bytes than it takes, a 2-byte copy at most 11, a 3-byte copy
// and a 5-byte copy at most 64 each. The 3-byte copy is the most: 64 bytes per 3, so
// a block expands at most about 21.3 times (TestSnappyExpansionBound builds a block
// of nothing but 3-byte copies and finds it decodes at that ratio). Validate decodes
// a raw snappy block whole, which this bounds: 21 MiB for a 1 MiB batch.
const (
	snappyMaxOut = 64
	snappyMaxIn  = 3
)

// decodeSnappyBlock appends the decoding of one raw snappy block to dst. Its stated
// length is trusted only up to what the block's elements can expand to, so a few
// bytes claiming hundreds of megabytes are refused before anything is allocated.
func decodeSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	_, header := binary.Uvarint(block)
	if header <= 0 {
		return nil, snappy.ErrCorrupt
	}
	if most := uint64(len(block)-header) * snappyMaxOut / snappyMaxIn; uint64(n) > most {
		return nil, fmt.Errorf("snappy block of %d bytes states %d decoded bytes, more than it can expand to (%d)",
			len(block), n, most)
	}
	if n > limit {
		return nil, errTooBig
	}
	start := len(dst)
	dst = grow(dst, n)
	dec, err := snappy.Decode(dst[start:start+n], block)
	if err != nil {
		return nil, err
	}
	return dst[:start+len(dec)], nil
}

// xerialReader reads the output of xerial-framed snappy chunks, decoding one chunk
// at a time into block (a chunk is one raw snappy block, which cannot be streamed).
type xerialReader struct {
	rest  []byte // the chunks not yet decoded
	block []byte // the chunk being read
	pos   int
}

var xerialReaders = sync.Pool{New: func() any { return new(xerialReader) }}

// reset starts reading the chunks after a xerial header (nil: none, to release them).
func (x *xerialReader) reset(chunks []byte) {
	x.rest, x.pos = chunks, 0
	x.block = x.block[:0]
	if cap(x.block) > maxPooledDecompressBuffer {
		x.block = nil
	}
}

func (x *xerialReader) Read(p []byte) (int, error) {
	for x.pos == len(x.block) {
		if len(x.rest) == 0 {
			return 0, io.EOF
		}
		if len(x.rest) < 4 {
			return 0, errors.New("xerial: truncated block length")
		}
		n := binary.BigEndian.Uint32(x.rest)
		x.rest = x.rest[4:]
		if uint64(n) > uint64(len(x.rest)) {
			return 0, errors.New("xerial: truncated block")
		}
		block, err := decodeSnappyBlock(x.block[:0], x.rest[:n], MaxDecompressedBytes)
		if err != nil {
			return 0, err
		}
		x.block, x.pos, x.rest = block, 0, x.rest[n:]
	}
	n := copy(p, x.block[x.pos:])
	x.pos += n
	return n, nil
}

// zstdMaxWindow is the largest zstd window Validate decodes as a stream; a stream
// decoder holds its frame's whole window (for a single-segment frame, its content
// size). 8 MiB is the window of the Java producer (zstd-jni streaming, content size
// unknown) at every level up to 19 — Kafka's default level 3 uses 2 MiB — and of the
// Go encoder's default (franz-go, sarama, this package's Compress); only levels 20–22
// (zstd's "ultra" levels, 32–128 MiB) declare more. A batch whose frames declare more
// is streamed by a decoder of its own holding its window, up to zstdMaxLargeWindow
// (Kafka, through zstd-jni, accepts windows up to 128 MiB), within the process-wide
// largeWindows budget: a stream decoder allocates the declared window however little
// the batch holds, and decoding it whole instead cost what it expands to.
const zstdMaxWindow = 8 << 20

// zstdStream is a pooled streaming zstd decoder with the reader of its input.
type zstdStream struct {
	dec *zstd.Decoder
	src bytes.Reader
}

var zstdStreams = sync.Pool{New: func() any {
	// One goroutine-free decoder per stream (concurrency 1), refusing windows beyond
	// zstdMaxWindow. bytes.Reader has no Bytes method, so Reset never takes the
	// decoder's decode-it-all shortcut for in-memory input.
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderMaxMemory(MaxDecompressedBytes))
	if err != nil {
		panic(fmt.Sprintf("record: zstd stream decoder: %v", err)) // constant options
	}
	return &zstdStream{dec: dec}
}}

// reset starts decoding src (nil: releases the previous input).
func (z *zstdStream) reset(src []byte) error {
	z.src.Reset(src)
	if src == nil {
		return z.dec.Reset(nil)
	}
	if err := z.dec.Reset(&z.src); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, CompressionZstd, err)
	}
	return nil
}

// grow returns b with room for at least n more bytes.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// gzipReader and lz4Reader are pooled decompressors, each with the bytes.Reader it
// reads from, so that decompressing allocates no reader.
type (
	gzipReader struct {
		gzip.Reader
		src bytes.Reader
	}
	lz4Reader struct {
		*lz4.Reader
		src bytes.Reader
	}
)

// appendWriter is an io.Writer appending to a slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// gzipLevel is the index into gzipWriters, which is the gzip level itself (0: default).
func gzipLevel(level int) int {
	if level < 1 || level > 9 {
		return 0
	}
	return level
}

// lz4Level is the index into lz4Writers: 0 is the fast compressor (the default, and
// Kafka's level 9), 1–9 the high-compression levels.
func lz4Level(level int) int {
	if level <= 0 || level == 9 {
		return 0
	}
	return min(level, 9)
}

// zstdLevel is the zstd encoder speed for a Kafka zstd level (0: default).
func zstdLevel(level int) zstd.EncoderLevel {
	if level == 0 {
		return zstd.SpeedDefault
	}
	return zstd.EncoderLevelFromZstd(level)
}

// Codec state. Writers and readers are pooled, writers per level; the zstd encoders
// (one per speed) and the decoder are each created once and shared, since EncodeAll
// and DecodeAll are safe for concurrent use.
var (
	gzipWriters = func() *[10]sync.Pool {
		var pools [10]sync.Pool
		for level := range pools {
			pools[level].New = func() any {
				if level == 0 {
					return gzip.NewWriter(nil)
				}
				// 1–9 are valid levels; NewWriterLevel cannot fail for them.
				w, _ := gzip.NewWriterLevel(nil, level)
				return w
			}
		}
		return &pools
	}()
	gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}
	lz4Writers  = func() *[10]sync.Pool {
		var pools [10]sync.Pool
		levels := [10]lz4.CompressionLevel{lz4.Fast, lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4,
			lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}
		for i := range pools {
			pools[i].New = func() any {
				w := lz4.NewWriter(nil)
				// The options are constants; Apply cannot fail for them.
				_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1),
					lz4.CompressionLevelOption(levels[i]))
				return w
			}
		}
		return &pools
	}()
	lz4Readers = sync.Pool{New: func() any { return &lz4Reader{Reader: lz4.NewReader(nil)} }}

	zstdEncoders = func() map[zstd.EncoderLevel]func() (*zstd.Encoder, error) {
		m := map[zstd.EncoderLevel]func() (*zstd.Encoder, error){}
		for _, speed := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault,
			zstd.SpeedBetterCompression, zstd.SpeedBestCompression} {
			m[speed] = sync.OnceValues(func() (*zstd.Encoder, error) {
				enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(speed))
				if err != nil {
					return nil, fmt.Errorf("record: zstd encoder: %w", err)
				}
				return enc, nil
			})
		}
		return m
	}()
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		dec, err := zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(MaxDecompressedBytes),
			zstd.WithDecoderConcurrency(0))
		if err != nil {
			return nil, fmt.Errorf("record: zstd decoder: %w", err)
		}
		return dec, nil
	})
)
