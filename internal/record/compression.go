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
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
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
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
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
		enc, err := zstdEncoder()
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
// ErrCorrupt; an unknown codec is ErrInvalid.
func Decompress(c Compression, src []byte) ([]byte, error) {
	return decompress(c, src, MaxDecompressedBytes)
}

func decompress(c Compression, src []byte, limit int) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch c {
	case CompressionNone:
		return src, nil
	case CompressionGzip:
		r := gzipReaders.Get().(*gzip.Reader)
		defer gzipReaders.Put(r)
		if err = r.Reset(bytes.NewReader(src)); err == nil {
			out, err = readLimited(r, len(src), limit)
		}
	case CompressionSnappy:
		out, err = decodeSnappy(src, limit)
	case CompressionLZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(src))
		out, err = readLimited(r, len(src), limit)
	case CompressionZstd:
		var dec *zstd.Decoder
		if dec, err = zstdDecoder(); err == nil {
			out, err = dec.DecodeAll(src, nil)
			if err == nil && len(out) > limit {
				err = errTooBig
			}
		}
	default:
		return nil, fmt.Errorf("%w: %w %d", ErrInvalid, errUnknownCodec, int8(c))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, c, err)
	}
	return out, nil
}

var errTooBig = fmt.Errorf("decompressed size exceeds %d bytes", MaxDecompressedBytes)

// readLimited reads r to EOF, refusing more than limit bytes.
func readLimited(r io.Reader, srcLen, limit int) ([]byte, error) {
	guess := min(max(4*srcLen, 512), limit+1)
	buf := make([]byte, 0, guess)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return nil, errTooBig
			}
			buf = grow(buf, min(cap(buf), limit+1-len(buf)))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
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

// xerialMagic starts a snappy stream framed by snappy-java: the 8-byte magic, then a
// 4-byte version and a 4-byte compatible version, then blocks each prefixed by a
// big-endian int32 length.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

func decodeSnappy(src []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderSize || !bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
		return decodeSnappyBlock(nil, src, limit)
	}
	var out []byte
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
		if out, err = decodeSnappyBlock(out, rest[:n], limit); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// decodeSnappyBlock appends the decoding of one raw snappy block to dst.
func decodeSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > limit-len(dst) {
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

// grow returns b with room for at least n more bytes.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// appendWriter is an io.Writer appending to a slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Codec state. Writers and readers are pooled; the zstd encoder and decoder are each
// created once and shared, since EncodeAll and DecodeAll are safe for concurrent use.
var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	gzipReaders = sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4Writers  = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// The options are constants; Apply cannot fail for them.
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1))
		return w
	}}
	lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return nil, fmt.Errorf("record: zstd encoder: %w", err)
		}
		return enc, nil
	})
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
