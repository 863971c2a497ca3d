package record

import (
	"encoding/binary"
	"fmt"
)

// Recompress appends batch, re-encoded with codec c at level (as CompressLevel takes
// it), to dst: every header field is kept but the codec, the length and the CRC, and
// the records section is decompressed and compressed again byte for byte, so the
// records keep their framing. The decompressed records pass through a pooled buffer:
// a batch costs its decompressed size once, not a Record per record. batch must be a
// whole batch that passed Validate.
func Recompress(dst, batch []byte, c Compression, level int) ([]byte, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return dst, err
	}
	if len(batch) < HeaderSize {
		return dst, fmt.Errorf("%w: batch of %d bytes is shorter than its header", ErrCorrupt, len(batch))
	}
	payload := batch[HeaderSize:]
	bufp := decompressBuffers.Get().(*[]byte)
	defer decompressBuffers.Put(bufp)
	records := payload
	if from := h.Compression(); from != CompressionNone {
		if records, err = decompressAppend(from, (*bufp)[:0], payload, MaxDecompressedBytes); err != nil {
			return dst, err
		}
		defer func() {
			if cap(records) > cap(*bufp) && cap(records) <= maxPooledDecompressBuffer {
				*bufp = records[:0]
			}
		}()
	}
	start := len(dst)
	dst = append(dst, batch[:HeaderSize]...)
	attrs := binary.BigEndian.Uint16(dst[start+AttributesOffset:])
	binary.BigEndian.PutUint16(dst[start+AttributesOffset:], attrs&^AttrCompressionMask|uint16(c)&AttrCompressionMask)
	if dst, err = CompressLevel(c, level, dst, records); err != nil {
		return dst[:start], err
	}
	if err := finishBatch(dst[start:]); err != nil {
		return dst[:start], err
	}
	return dst, nil
}
