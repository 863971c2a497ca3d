package record

// Kafka's record format uses zig-zag varints: at most 5 bytes for a 32-bit field and 10
// bytes for a 64-bit one. These readers never allocate and report malformed input as a
// zero length rather than panicking.

// readVarint32 decodes a zig-zag varint of at most 5 bytes that must fit an int32.
// n is the number of bytes consumed, or 0 if b is truncated or the varint is malformed.
func readVarint32(b []byte) (v int32, n int) {
	var u uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, 0 // more than 32 bits
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1
		}
	}
	return 0, 0
}

// readVarint64 decodes a zig-zag varint of at most 10 bytes.
func readVarint64(b []byte) (v int64, n int) {
	var u uint64
	for i := 0; i < 10; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		if i == 9 && c > 0x01 {
			return 0, 0 // more than 64 bits
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, 0
}

// appendVarint32 appends v zig-zag encoded.
func appendVarint32(dst []byte, v int32) []byte {
	return appendUvarint(dst, uint64(uint32(v<<1)^uint32(v>>31)))
}

// appendVarint64 appends v zig-zag encoded.
func appendVarint64(dst []byte, v int64) []byte {
	return appendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

func appendUvarint(dst []byte, u uint64) []byte {
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// varint32Len is the encoded size of v.
func varint32Len(v int32) int {
	u := uint32(v<<1) ^ uint32(v>>31)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
