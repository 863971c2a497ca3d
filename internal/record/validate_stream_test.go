package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// streamCodec is a way a producer may compress records: each codec, and snappy both
// as one raw block and xerial-framed (as the Java client writes it).
type streamCodec struct {
	name     string
	c        Compression
	compress func(t testing.TB, src []byte) []byte
}

var streamCodecs = []streamCodec{
	{"gzip", CompressionGzip, func(t testing.TB, src []byte) []byte { return mustCompress(t, CompressionGzip, src) }},
	{"lz4", CompressionLZ4, func(t testing.TB, src []byte) []byte { return mustCompress(t, CompressionLZ4, src) }},
	{"zstd", CompressionZstd, func(t testing.TB, src []byte) []byte { return mustCompress(t, CompressionZstd, src) }},
	{"snappy", CompressionSnappy, func(t testing.TB, src []byte) []byte { return mustCompress(t, CompressionSnappy, src) }},
	{"snappy-xerial", CompressionSnappy, func(_ testing.TB, src []byte) []byte { return xerialFrame(src, 32<<10) }},
}

// largeRecords returns records around and far beyond the walk's buffer: values,
// keys and headers of up to 1 MiB, between small records, null keys among them.
func largeRecords() []Record {
	sizes := []int{10, streamBufferSize - 100, 20, streamBufferSize, streamBufferSize + 1, 5, 1 << 20, 300 << 10, 1}
	var rs []Record
	for i, n := range sizes {
		r := Record{OffsetDelta: int32(len(rs)), TimestampDelta: int64(i * 3), Value: bytes.Repeat([]byte{byte(i)}, n)}
		switch i % 3 {
		case 0:
			r.Key = bytes.Repeat([]byte("k"), n/3)
		case 1:
			r.Headers = []RecordHeader{{Key: "big", Value: make([]byte, n/2)}, {Key: "null"}}
		}
		rs = append(rs, r)
		rs = append(rs, Record{OffsetDelta: int32(len(rs)), Key: []byte("small"), Value: []byte("v")})
	}
	return rs
}

// TestValidateStreamsLargeRecords: records longer than the walk's buffer, and
// records cut by its end, are checked in every codec and seen by Check with their
// timestamps and null keys; a header claiming one more record than there are, or one
// fewer, is ErrInvalid.
func TestValidateStreamsLargeRecords(t *testing.T) {
	recs := largeRecords()
	plain := kmsgRecords(recs)
	n := int32(len(recs))
	for _, sc := range streamCodecs {
		t.Run(sc.name, func(t *testing.T) {
			o := producerOpts(sc.c)
			payload := sc.compress(t, plain)
			var seen []Record
			check := func(delta int32, ts int64, keyNull bool) error {
				seen = append(seen, Record{OffsetDelta: delta, TimestampDelta: ts - o.BaseTimestamp, Key: map[bool][]byte{false: {}}[keyNull]})
				return nil
			}
			if _, err := Validate(kmsgBatch(o, n, n-1, o.BaseTimestamp, payload), ValidateOptions{Check: check}); err != nil {
				t.Fatal(err)
			}
			if len(seen) != len(recs) {
				t.Fatalf("Check saw %d records, want %d", len(seen), len(recs))
			}
			for i, r := range seen {
				if w := recs[i]; r.OffsetDelta != w.OffsetDelta || r.TimestampDelta != w.TimestampDelta || (r.Key == nil) != (w.Key == nil) {
					t.Fatalf("record %d: Check saw %d, %d, null key %v; want %d, %d, %v", i,
						r.OffsetDelta, r.TimestampDelta, r.Key == nil, w.OffsetDelta, w.TimestampDelta, w.Key == nil)
				}
			}
			for _, count := range []int32{n + 1, n - 1} {
				if _, err := Validate(kmsgBatch(o, count, count-1, o.BaseTimestamp, payload), ValidateOptions{}); !errors.Is(err, ErrInvalid) {
					t.Errorf("header stating %d records for %d: %v, want ErrInvalid", count, n, err)
				}
			}
		})
	}
}

// TestValidateStreamMatchesWhole: the streamed walk accepts and refuses exactly what
// walking the whole decompressed payload does, for payloads damaged around each
// record's varints (where the buffer's edge may cut them), cut short, or followed by
// stray bytes.
func TestValidateStreamMatchesWhole(t *testing.T) {
	recs := []Record{
		{Value: make([]byte, 100)},
		{Key: []byte("key"), Value: make([]byte, streamBufferSize-40)},
		{Value: make([]byte, 300<<10), Headers: []RecordHeader{{Key: "h", Value: make([]byte, 1000)}}},
		{Value: []byte("x")},
		{Key: make([]byte, 200<<10)},
	}
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	plain := kmsgRecords(recs)
	var starts []int
	for pos := 0; pos < len(plain); {
		starts = append(starts, pos)
		n, _, err := scanRecord(plain[pos:], nil)
		if err != nil {
			t.Fatal(err)
		}
		pos += n
	}
	var variants [][]byte
	for _, start := range append(starts, len(plain)) {
		for _, at := range []int{start - 3, start - 1, start, start + 1, start + 2, start + 3, start + 4, start + 6} {
			if at < 0 || at >= len(plain) {
				continue
			}
			for _, v := range []byte{0x00, 0x01, 0x7f, 0x80, 0xff} {
				b := bytes.Clone(plain)
				b[at] = v
				variants = append(variants, b)
			}
		}
	}
	for _, cut := range []int{1, 5, 200, streamBufferSize, len(plain) - starts[4]} {
		variants = append(variants, plain[:len(plain)-cut])
	}
	variants = append(variants, append(bytes.Clone(plain), 0), append(bytes.Clone(plain), make([]byte, 300<<10)...))
	for _, sc := range streamCodecs {
		if sc.c == CompressionGzip && testing.Short() {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			for i, v := range variants {
				payload := sc.compress(t, v)
				streamed := walk{count: int32(len(recs))}
				whole := streamed
				got := streamed.compressed(payload, sc.c)
				want := whole.whole(payload, sc.c, MaxDecompressedBytes)
				if (got == nil) != (want == nil) || errors.Is(got, ErrInvalid) != errors.Is(want, ErrInvalid) ||
					errors.Is(got, ErrCorrupt) != errors.Is(want, ErrCorrupt) {
					t.Fatalf("variant %d: streamed %v; whole %v", i, got, want)
				}
			}
		})
	}
}

// TestValidateStreamMemory: a batch expanding to 64 MiB — one record, while its
// header states two, or zeros — is refused having allocated no more than the walk's
// buffer and the codec's state, not the expanded size.
func TestValidateStreamMemory(t *testing.T) {
	const expanded = 64 << 20
	body := []byte{0, 0, 0, 1} // attributes, timestamp delta, offset delta, null key
	body = appendVarint32(body, expanded-16)
	body = append(body, make([]byte, expanded-16)...)
	body = append(body, 0) // no headers
	record := append(appendVarint32(nil, int32(len(body))), body...)
	if n, _, err := scanRecord(record, nil); err != nil || n != len(record) {
		t.Fatalf("the 64 MiB record does not scan: %d of %d bytes, %v", n, len(record), err)
	}
	for _, sc := range streamCodecs {
		if sc.name == "snappy" { // one raw block, decoded whole
			continue
		}
		for name, src := range map[string][]byte{"one record": record, "zeros": make([]byte, expanded)} {
			payload := sc.compress(t, src)
			o := producerOpts(sc.c)
			b := kmsgBatch(o, 2, 1, o.BaseTimestamp, payload)
			Validate(b, ValidateOptions{}) // the pools' first decoder
			var err error
			n := allocatedBy(func() { _, err = Validate(b, ValidateOptions{}) })
			if !errors.Is(err, ErrInvalid) || n > 16<<20 {
				t.Errorf("%s, %s: Validate = %v after allocating %d bytes, want ErrInvalid and at most 16 MiB",
					sc.name, name, err, n)
			}
		}
	}
}

// TestValidateZstdLargeWindow: a zstd frame declaring a window beyond zstdMaxWindow
// (as Java producers do at levels 20–22, which Kafka accepts) is decoded whole and
// walked, with the same verdicts as a streamed one: well-formed records pass, a
// header stating more records than the batch holds is ErrInvalid.
func TestValidateZstdLargeWindow(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithSingleSegment(false))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	o := producerOpts(CompressionZstd)
	for _, window := range []byte{13 << 3, 13<<3 | 1, 17 << 3} { // exponent<<3 | eighths: 2^(10+exponent) bytes
		recs := []Record{{Value: bytes.Repeat([]byte("0123456789"), 100<<10)}}
		payload := enc.EncodeAll(kmsgRecords(recs), nil)
		if payload[4]&0x20 != 0 {
			t.Fatal("a single-segment frame")
		}
		payload[5] = window
		if _, err := Validate(kmsgBatch(o, 1, 0, o.BaseTimestamp, payload), ValidateOptions{}); err != nil {
			t.Errorf("window descriptor %#x: %v", window, err)
		}
		if _, err := Validate(kmsgBatch(o, 2, 1, o.BaseTimestamp, payload), ValidateOptions{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("window descriptor %#x, two records stated, one present: %v, want ErrInvalid", window, err)
		}
	}
}

// TestSnappyExpansionBound: the most a raw snappy block expands is 64 bytes per 3
// (about 21.3 times, what decodeSnappyBlock trusts): a block of nothing but 3-byte
// copies of 64 bytes decodes to that, and the Go encoder does not exceed it.
func TestSnappyExpansionBound(t *testing.T) {
	const copies = 10000
	elements := []byte{0x00, 'a'} // a 1-byte literal
	for range copies {
		elements = append(elements, 63<<2|2, 1, 0) // copy 64 bytes from 1 back
	}
	out := 1 + 64*copies
	block := append(binary.AppendUvarint(nil, uint64(out)), elements...)
	got, err := decodeSnappyBlock(nil, block, MaxDecompressedBytes)
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte("a"), out)) {
		t.Fatalf("the densest block: %d bytes, %v", len(got), err)
	}
	if ratio := float64(out) / float64(len(elements)); ratio < 21.3 || ratio > float64(snappyMaxOut)/snappyMaxIn {
		t.Fatalf("ratio %.2f", ratio)
	}
	lie := append(binary.AppendUvarint(nil, uint64(len(elements)*snappyMaxOut/snappyMaxIn+1)), elements...)
	if _, err := decodeSnappyBlock(nil, lie, MaxDecompressedBytes); err == nil {
		t.Fatal("a block stating more than 64/3 of its elements decoded")
	}
	for _, n := range []int{1 << 10, 1 << 20, 16 << 20} {
		enc := snappy.Encode(nil, make([]byte, n))
		if ratio := float64(n) / float64(len(enc)); ratio > float64(snappyMaxOut)/snappyMaxIn {
			t.Errorf("%d zeros encode %.2f times smaller, beyond 64/3", n, ratio)
		}
	}
}

func ExampleValidateOptions_check() {
	o := producerOpts(CompressionZstd)
	b, _ := Build(o, []Record{{Key: []byte("k")}, {OffsetDelta: 1}})
	_, err := Validate(b, ValidateOptions{Check: func(delta int32, _ int64, keyNull bool) error {
		fmt.Println(delta, keyNull)
		return nil
	}})
	fmt.Println(err)
	// Output:
	// 0 false
	// 1 true
	// <nil>
}

// largeWindowZstdBomb is a zstd frame declaring a window of 2^windowLog bytes, with
// no content size, whose RLE blocks of 128 KiB of zeros expand to n bytes (4 bytes
// each: a 3-byte block header and the repeated byte).
func largeWindowZstdBomb(windowLog int, n int) []byte {
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte(windowLog-10) << 3} // no content size
	const block = 128 << 10
	for left := n; left > 0; left -= block {
		header := uint32(block<<3 | 1<<1) // RLE
		if left <= block {
			header |= 1 // last
		}
		frame = append(frame, byte(header), byte(header>>8), byte(header>>16), 0)
	}
	return frame
}

// TestValidateZstdLargeWindowBombBounded: a batch of 32 KiB whose zstd frame declares
// a 16 MiB window (beyond zstdMaxWindow) and expands to 1 GiB is refused having
// allocated about its window, not the MaxDecompressedBytes a whole decode takes.
func TestValidateZstdLargeWindowBombBounded(t *testing.T) {
	o := producerOpts(CompressionZstd)
	payload := largeWindowZstdBomb(24, 1<<30)
	batch := kmsgBatch(o, 1, 0, o.BaseTimestamp, payload)
	var err error
	n := allocatedBy(func() { _, err = Validate(batch, ValidateOptions{}) })
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
		t.Errorf("Validate = %v, want ErrCorrupt or ErrInvalid", err)
	}
	if bound := uint64(48 << 20); n > bound {
		t.Errorf("a %d KiB batch expanding to 1 GiB with a 16 MiB window: Validate allocated %d MiB, more than %d MiB",
			len(batch)>>10, n>>20, bound>>20)
	}
}

// singleSegmentZstdBomb is a single-segment zstd frame stating n bytes of content,
// n bytes of zeros in RLE blocks: its window is its content size, whatever the
// decoder's window limit.
func singleSegmentZstdBomb(n int) []byte {
	frame := binary.LittleEndian.AppendUint64([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}, uint64(n))
	return append(frame, largeWindowZstdBomb(24, n)[6:]...)
}

// TestValidateZstdSingleSegmentBombBounded: a batch of 8 KiB whose single-segment
// zstd frame states 200 MiB of zeros is refused having allocated far less than 200
// MiB: the window a single-segment frame declares is its content size, which the
// stream decoder's window limit does not bound.
func TestValidateZstdSingleSegmentBombBounded(t *testing.T) {
	o := producerOpts(CompressionZstd)
	batch := kmsgBatch(o, 1, 0, o.BaseTimestamp, singleSegmentZstdBomb(200<<20))
	var err error
	n := allocatedBy(func() { _, err = Validate(batch, ValidateOptions{}) })
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
		t.Errorf("Validate = %v, want ErrCorrupt or ErrInvalid", err)
	}
	if bound := uint64(48 << 20); n > bound {
		t.Errorf("a %d KiB batch stating 200 MiB in one segment: Validate allocated %d MiB, more than %d MiB",
			len(batch)>>10, n>>20, bound>>20)
	}
}

// TestValidateZstdSingleSegmentLargeWindow: a single-segment zstd frame of records
// past zstdMaxWindow, whose window is its content size, is walked as a stream and
// passes (it was refused: the stream decoder's window limit applies to it).
func TestValidateZstdSingleSegmentLargeWindow(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithSingleSegment(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	o := producerOpts(CompressionZstd)
	recs := []Record{{Value: bytes.Repeat([]byte("0123456789"), 2<<20)}} // 20 MiB
	payload := enc.EncodeAll(kmsgRecords(recs), nil)
	if payload[4]&0x20 == 0 {
		t.Fatal("not a single-segment frame")
	}
	var verdict error
	n := allocatedBy(func() { _, verdict = Validate(kmsgBatch(o, 1, 0, o.BaseTimestamp, payload), ValidateOptions{}) })
	if verdict != nil {
		t.Fatalf("a single-segment frame of 20 MiB: %v", verdict)
	}
	if n > 32<<20 {
		t.Errorf("a single-segment frame of 20 MiB: Validate allocated %d MiB", n>>20)
	}
}

// TestLargeWindowBudget: a caller taking room in the budget waits while the room
// others hold would pass its limit, and goes on once they give it back.
func TestLargeWindowBudget(t *testing.T) {
	b := budget{limit: 100}
	b.acquire(60)
	took := make(chan struct{})
	go func() {
		b.acquire(60)
		close(took)
	}()
	select {
	case <-took:
		t.Fatal("took 60 of 100 while 60 were held")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(60)
	select {
	case <-took:
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after the room was given back")
	}
	b.release(60)
	b.acquire(150) // one caller alone may take more than the limit
	b.release(150)
}
