package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestValidate(t *testing.T) {
	rs := sampleRecords(4)
	good := func() []byte { return mustBuild(t, producerOpts(CompressionNone), rs) }
	gz := func() []byte { return mustBuild(t, producerOpts(CompressionGzip), rs) }
	put32 := func(b []byte, at int, v int32) []byte { binary.BigEndian.PutUint32(b[at:], uint32(v)); return b }
	put64 := func(b []byte, at int, v int64) []byte { binary.BigEndian.PutUint64(b[at:], uint64(v)); return b }
	withRecords := func(o BuildOptions, count, last int32, payload []byte) []byte {
		return kmsgBatch(o, count, last, o.BaseTimestamp, payload)
	}
	reordered := []Record{rs[0], rs[2], rs[1], rs[3]}
	reordered[1].OffsetDelta, reordered[2].OffsetDelta = 2, 1

	tests := []struct {
		name  string
		batch []byte
		max   int
		want  error // nil = valid
	}{
		{"uncompressed", good(), 0, nil},
		{"gzip header only", gz(), 0, nil},
		{"single record", mustBuild(t, producerOpts(CompressionNone), rs[:1]), 0, nil},
		{"no producer id", mustBuild(t, DefaultBuildOptions(), rs), 0, nil},
		{"kmsg reference", refBatch(t, producerOpts(CompressionNone), rs), 0, nil},
		{"at size limit", good(), len(good()), nil},
		{"over size limit", good(), len(good()) - 1, ErrTooLarge},
		{"flipped crc byte", func() []byte { b := good(); b[CRCOffset+2] ^= 0x40; return b }(), 0, ErrCorrupt},
		{"flipped record byte", func() []byte { b := good(); b[len(b)-3] ^= 1; return b }(), 0, ErrCorrupt},
		{"flipped compressed byte", func() []byte { b := gz(); b[HeaderSize+12] ^= 1; return b }(), 0, ErrCorrupt},
		{"length too big", func() []byte { b := good(); return put32(b, LengthOffset, int32(len(b)-11)) }(), 0, ErrCorrupt},
		{"length too small", func() []byte { b := good(); return put32(b, LengthOffset, int32(len(b)-13)) }(), 0, ErrCorrupt},
		{"negative length", func() []byte { b := good(); return put32(b, LengthOffset, -1) }(), 0, ErrCorrupt},
		{"truncated tail", func() []byte { b := good(); return b[:len(b)-1] }(), 0, ErrCorrupt},
		{"truncated header", good()[:HeaderSize-1], 0, ErrCorrupt},
		{"only offset and length", good()[:12], 0, ErrCorrupt},
		{"empty", nil, 0, ErrCorrupt},
		{"magic 1", func() []byte { b := good(); b[MagicOffset] = 1; return b }(), 0, ErrUnsupportedMagic},
		{"magic 0 short", func() []byte { b := good()[:30]; b[MagicOffset] = 0; return b }(), 0, ErrUnsupportedMagic},
		{"magic 3", func() []byte { b := good(); b[MagicOffset] = 3; return b }(), 0, ErrUnsupportedMagic},
		{"count below lastOffsetDelta+1", fixCRC(put32(good(), 57, 3)), 0, ErrInvalid},
		{"count above records present", fixCRC(put32(put32(good(), 57, 5), 23, 4)), 0, ErrInvalid},
		{"count below records present", fixCRC(put32(put32(good(), 57, 3), 23, 2)), 0, ErrInvalid},
		{"zero records", withRecords(producerOpts(CompressionNone), 0, 0, nil), 0, ErrInvalid},
		{"negative count", fixCRC(put32(good(), 57, -1)), 0, ErrInvalid},
		{"offset deltas out of order", withRecords(producerOpts(CompressionNone), 4, 3, kmsgRecords(reordered)), 0, ErrInvalid},
		{"offset deltas not from zero", func() []byte {
			shifted := append([]Record(nil), rs...)
			for i := range shifted {
				shifted[i].OffsetDelta++
			}
			return withRecords(producerOpts(CompressionNone), 4, 4, kmsgRecords(shifted))
		}(), 0, ErrInvalid},
		{"negative lastOffsetDelta compressed", fixCRC(put32(gz(), 23, -1)), 0, ErrInvalid},
		{"compressed count mismatch", fixCRC(put32(gz(), 57, 9)), 0, ErrInvalid},
		{"codec 5", fixCRC(func() []byte { b := gz(); b[AttributesOffset+1] = b[AttributesOffset+1]&^7 | 5; return b }()), 0, ErrInvalid},
		{"codec 7", fixCRC(func() []byte { b := gz(); b[AttributesOffset+1] |= 7; return b }()), 0, ErrInvalid},
		{"control batch from client", func() []byte {
			o := producerOpts(CompressionNone)
			o.Control = true
			return mustBuild(t, o, []Record{ControlRecord{Type: ControlCommit}.Record()})
		}(), 0, ErrInvalid},
		{"producer id without sequence", fixCRC(put32(good(), 53, -1)), 0, ErrInvalid},
		{"record length past payload", withRecords(producerOpts(CompressionNone), 1, 0, []byte{40, 0, 0, 0, 1, 1, 0}), 0, ErrInvalid},
		{"record longer than its fields", withRecords(producerOpts(CompressionNone), 1, 0, []byte{16, 0, 0, 0, 1, 1, 0, 0, 0, 0}), 0, ErrInvalid},
		{"record shorter than its fields", withRecords(producerOpts(CompressionNone), 1, 0, []byte{8, 0, 0, 0, 2, 'a', 1, 0}), 0, ErrInvalid},
		{"malformed varint", withRecords(producerOpts(CompressionNone), 1, 0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), 0, ErrInvalid},
		{"null header key", withRecords(producerOpts(CompressionNone), 1, 0, []byte{16, 0, 0, 0, 1, 1, 2, 1, 0}), 0, ErrInvalid},
		{"negative header count", withRecords(producerOpts(CompressionNone), 1, 0, []byte{12, 0, 0, 0, 1, 1, 1}), 0, ErrInvalid},
		{"trailing garbage after records", withRecords(producerOpts(CompressionNone), 4, 3, append(kmsgRecords(rs), 0)), 0, ErrInvalid},
		{"create time stamped max", fixCRC(put64(good(), 35, 5)), 0, nil},
	}
	sentinels := []error{ErrCorrupt, ErrInvalid, ErrUnsupportedMagic, ErrTooLarge}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Validate(tt.batch, ValidateOptions{MaxBatchBytes: tt.max})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if h.Size() != len(tt.batch) || h.NumRecords != h.LastOffsetDelta+1 {
					t.Fatalf("header %+v for %d bytes", h, len(tt.batch))
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate error = %v, want %v", err, tt.want)
			}
			for _, s := range sentinels {
				if s != tt.want && errors.Is(err, s) {
					t.Fatalf("error %v is also %v", err, s)
				}
			}
		})
	}
}

func TestValidateHeaderFields(t *testing.T) {
	o := producerOpts(CompressionZstd)
	o.BaseOffset = 99
	o.PartitionLeaderEpoch = 7
	o.Transactional = true
	b := mustBuild(t, o, sampleRecords(5))
	h, err := Validate(b, ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := Header{BaseOffset: 99, Length: int32(len(b) - 12), PartitionLeaderEpoch: 7, Magic: 2,
		CRC: Checksum(b), Attributes: int16(CompressionZstd) | AttrTransactional, LastOffsetDelta: 4,
		BaseTimestamp: o.BaseTimestamp, MaxTimestamp: o.BaseTimestamp + 28, ProducerID: 4000,
		ProducerEpoch: 3, BaseSequence: 17, NumRecords: 5}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	if h.LastOffset() != 103 || h.LastSequence() != 21 || !h.IsTransactional() || h.Compression() != CompressionZstd {
		t.Fatalf("derived header fields wrong: %+v", h)
	}
}

// TestValidateReplica: batches a leader's log holds and no client may send — a marker,
// a coordinator's write without sequences, a compacted batch with a gap — pass as a
// replica's; a damaged one does not.
func TestValidateReplica(t *testing.T) {
	marker := DefaultBuildOptions()
	marker.ProducerID, marker.ProducerEpoch, marker.Transactional, marker.Control = 7, 1, true, true
	coordinator := DefaultBuildOptions()
	coordinator.ProducerID, coordinator.ProducerEpoch, coordinator.Transactional = 7, 1, true
	gap := []Record{{OffsetDelta: 0, Value: []byte("a")}, {OffsetDelta: 2, Value: []byte("c")}}
	for name, b := range map[string][]byte{
		"marker":      mustBuild(t, marker, []Record{ControlRecord{Type: ControlCommit}.Record()}),
		"coordinator": mustBuild(t, coordinator, sampleRecords(2)),
		"compacted":   mustBuild(t, DefaultBuildOptions(), gap),
	} {
		if _, err := Validate(b, ValidateOptions{}); err == nil {
			t.Errorf("%s: accepted from a client", name)
		}
		if _, err := Validate(b, ValidateOptions{Replica: true}); err != nil {
			t.Errorf("%s: refused from a leader: %v", name, err)
		}
		b[len(b)-1] ^= 1
		if _, err := Validate(b, ValidateOptions{Replica: true}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: damaged batch from a leader: %v", name, err)
		}
	}
}

func TestValidateDoesNotAllocate(t *testing.T) {
	b := mustBuild(t, producerOpts(CompressionNone), sampleRecords(50))
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Validate(b, ValidateOptions{MaxBatchBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Validate allocated %.1f times per call", allocs)
	}
}

func TestSplit(t *testing.T) {
	a := mustBuild(t, producerOpts(CompressionNone), sampleRecords(3))
	b := mustBuild(t, producerOpts(CompressionLZ4), sampleRecords(9))
	c := mustBuild(t, DefaultBuildOptions(), sampleRecords(1))
	all := append(append(append([]byte(nil), a...), b...), c...)

	tests := []struct {
		name      string
		in        []byte
		wantSizes []int
		wantErr   error
	}{
		{"empty", nil, nil, nil},
		{"one", a, []int{len(a)}, nil},
		{"three", all, []int{len(a), len(b), len(c)}, nil},
		{"torn last batch", all[:len(all)-1], []int{len(a), len(b)}, ErrTooShort},
		{"torn inside length", all[:len(a)+5], []int{len(a)}, ErrTooShort},
		{"bad length", append(append([]byte(nil), a...), make([]byte, 20)...), []int{len(a)}, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Split(tt.in)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Split error = %v, want %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Split error %v is not ErrCorrupt", err)
			}
			if len(got) != len(tt.wantSizes) {
				t.Fatalf("got %d batches, want %d", len(got), len(tt.wantSizes))
			}
			for i, g := range got {
				if len(g) != tt.wantSizes[i] {
					t.Fatalf("batch %d: %d bytes, want %d", i, len(g), tt.wantSizes[i])
				}
				if _, err := Validate(g, ValidateOptions{}); err != nil {
					t.Fatalf("batch %d from Split does not validate: %v", i, err)
				}
			}
		})
	}
}

func TestNextBatchSize(t *testing.T) {
	b := mustBuild(t, producerOpts(CompressionNone), sampleRecords(2))
	if n, err := NextBatchSize(b[:12]); err != nil || n != len(b) {
		t.Fatalf("NextBatchSize(12 bytes) = %d, %v; want %d", n, err, len(b))
	}
	if _, err := NextBatchSize(b[:11]); !errors.Is(err, ErrTooShort) {
		t.Fatalf("NextBatchSize(11 bytes) error = %v, want ErrTooShort", err)
	}
	short := append([]byte(nil), b[:12]...)
	binary.BigEndian.PutUint32(short[8:], minBatchLength-1)
	if _, err := NextBatchSize(short); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("NextBatchSize(length 48) error = %v, want ErrCorrupt", err)
	}
	binary.BigEndian.PutUint32(short[8:], minBatchLength)
	if n, err := NextBatchSize(short); err != nil || n != HeaderSize {
		t.Fatalf("NextBatchSize(empty batch) = %d, %v", n, err)
	}
}

// BenchmarkValidate validates one batch over and over (its bytes stay in the CPU cache)
// and, for the "cold" cases, 48 copies of a producer's 1 MiB batch in turn — more than
// the last-level cache holds, as a broker sees batches that arrived a while ago.
func BenchmarkValidate(b *testing.B) {
	// A producer's 1 MiB batch: n records with valueSize-byte values and no keys.
	producerBatch := func(n, valueSize int) []Record {
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{OffsetDelta: int32(i), TimestampDelta: int64(i / 100), Value: make([]byte, valueSize)}
		}
		return recs
	}
	for _, tc := range []struct {
		name   string
		c      Compression
		recs   []Record
		copies int
	}{
		{"none-100", CompressionNone, sampleRecords(100), 1},
		{"none-1000", CompressionNone, sampleRecords(1000), 1},
		{"zstd-1000", CompressionZstd, sampleRecords(1000), 1},
		{"snappy-1000", CompressionSnappy, sampleRecords(1000), 1},
		{"lz4-1000", CompressionLZ4, sampleRecords(1000), 1},
		{"gzip-1000", CompressionGzip, sampleRecords(1000), 1},
		{"none-9000x100B", CompressionNone, producerBatch(9000, 100), 1},
		{"none-9000x100B-cold", CompressionNone, producerBatch(9000, 100), 48},
		{"none-1000x1KiB-cold", CompressionNone, producerBatch(1000, 1024), 48},
	} {
		batches := make([][]byte, tc.copies)
		for i := range batches {
			batches[i] = mustBuild(b, producerOpts(tc.c), tc.recs)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(batches[0])))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := Validate(batches[i%len(batches)], ValidateOptions{MaxBatchBytes: 1 << 20}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestPlainRecordSize: the walk's short path takes the records producers write and
// never accepts what scanRecord rejects — checked on records around every varint's
// one-, two- and three-byte boundary, with and without headers, and on each of them
// with every byte changed.
func TestPlainRecordSize(t *testing.T) {
	sizes := []int{0, 1, 50, 57, 58, 63, 64, 100, 8000, 8180, 8200}
	var recs []Record
	for _, ts := range []int64{0, -1, 5, 63, 64, 8191, 8192, 1 << 40} {
		for _, n := range sizes {
			recs = append(recs, Record{TimestampDelta: ts, Value: make([]byte, n)})
		}
	}
	for _, kn := range []int{-1, 0, 10, 70} {
		var key []byte
		if kn >= 0 {
			key = make([]byte, kn)
		}
		recs = append(recs, Record{Key: key, Value: []byte("v")}, Record{Key: key})
	}
	recs = append(recs, Record{Value: []byte("h"), Headers: []RecordHeader{{Key: "k", Value: []byte("v")}}})
	for i, r := range recs {
		for _, delta := range []int32{0, 1, 63, 64, 8191, 8192} {
			r.OffsetDelta = delta
			enc := kmsgRecords([]Record{r})
			plain := len(r.Headers) == 0 && len(enc) < 8192 && len(r.Key) < 8192 && r.TimestampDelta >= -8192 && r.TimestampDelta < 8192 && delta < 8192
			// The short path needs the byte after a varint: the next record's, in a batch.
			b := append(bytes.Clone(enc), 0)
			if got, ts := plainRecordSize(b, 0, delta); (got > 0) != plain || got > 0 && (got != len(enc) || ts != r.TimestampDelta) {
				t.Fatalf("record %d (delta %d, %d bytes): plainRecordSize = %d, %d; want %d, %d (plain %v)", i, delta, len(enc), got, ts, len(enc), r.TimestampDelta, plain)
			}
			for j := range enc {
				if j >= 24 && j < len(enc)-4 {
					continue // inside a key or value
				}
				orig := b[j]
				for _, v := range []byte{0, 1, 2, 0x7f, 0x80, 0xfe, 0xff, orig + 1, orig - 1} {
					b[j] = v
					got, _ := plainRecordSize(b, 0, delta)
					if got == 0 {
						continue
					}
					n, d, err := scanRecord(b[:len(b)-1], nil)
					if err != nil || n != got || d != delta {
						t.Fatalf("record %d (delta %d) with byte %d = %#x: plainRecordSize = %d, scanRecord = %d, %d, %v", i, delta, j, v, got, n, d, err)
					}
				}
				b[j] = orig
			}
		}
	}
}

// TestValidateCheck: ValidateOptions.Check sees every record of the batch, compressed
// or not, in order, with its offset delta, its timestamp and whether its key is null
// (an empty key is not); its error stops the walk and is Validate's, unwrapped.
func TestValidateCheck(t *testing.T) {
	recs := sampleRecords(9)
	errStop := errors.New("stop")
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			o := producerOpts(c)
			b := mustBuild(t, o, recs)
			var seen []Record
			check := func(delta int32, ts int64, keyNull bool) error {
				var key []byte
				if !keyNull {
					key = []byte{}
				}
				seen = append(seen, Record{OffsetDelta: delta, TimestampDelta: ts - o.BaseTimestamp, Key: key})
				return nil
			}
			if _, err := Validate(b, ValidateOptions{Check: check}); err != nil {
				t.Fatal(err)
			}
			if len(seen) != len(recs) {
				t.Fatalf("Check saw %d records, want %d", len(seen), len(recs))
			}
			for i, r := range seen {
				w := recs[i]
				if r.OffsetDelta != w.OffsetDelta || r.TimestampDelta != w.TimestampDelta ||
					(r.Key == nil) != (w.Key == nil) {
					t.Fatalf("record %d: Check saw delta %d, timestamp delta %d, null key %v; want %d, %d, %v",
						i, r.OffsetDelta, r.TimestampDelta, r.Key == nil, w.OffsetDelta, w.TimestampDelta, w.Key == nil)
				}
			}
			calls := 0
			_, err := Validate(b, ValidateOptions{Check: func(delta int32, _ int64, _ bool) error {
				calls++
				if delta == 4 {
					return errStop
				}
				return nil
			}})
			if err != errStop || calls != 5 {
				t.Fatalf("Check failing at record 4: err %v after %d calls, want %v after 5", err, calls, errStop)
			}
		})
	}
}

// TestValidateSetMaxTimestamp: with SetMaxTimestamp a client's batch leaves Validate
// with its records' largest timestamp as maxTimestamp and the CreateTime flag, CRC
// recomputed (Kafka's LogValidator, setMaxTimestamp(CREATE_TIME, maxTimestamp)); a
// batch already right is left byte for byte.
func TestValidateSetMaxTimestamp(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionZstd} {
		opts := DefaultBuildOptions()
		opts.Compression, opts.BaseTimestamp = c, 1000
		b, err := Build(opts, []Record{{TimestampDelta: 7, Value: []byte("a")}, {TimestampDelta: -3, Value: []byte("b")}})
		if err != nil {
			t.Fatal(err)
		}
		orig := bytes.Clone(b)
		if h, err := Validate(b, ValidateOptions{SetMaxTimestamp: true}); err != nil || h.MaxTimestamp != 1007 || !bytes.Equal(b, orig) {
			t.Fatalf("%s, right header: max %d, %v, rewritten %v", c, h.MaxTimestamp, err, !bytes.Equal(b, orig))
		}
		for _, lie := range []struct {
			attrs uint16
			max   int64
		}{{0, 1 << 50}, {0, -1}, {AttrTimestampType, 1007}} {
			binary.BigEndian.PutUint16(b[AttributesOffset:], binary.BigEndian.Uint16(orig[AttributesOffset:])|lie.attrs)
			binary.BigEndian.PutUint64(b[35:], uint64(lie.max))
			binary.BigEndian.PutUint32(b[CRCOffset:], Checksum(b))
			h, err := Validate(b, ValidateOptions{SetMaxTimestamp: true})
			if err != nil || h.MaxTimestamp != 1007 || h.LogAppendTime() || !bytes.Equal(b, orig) {
				t.Fatalf("%s, header %+v: max %d, LogAppendTime %v, %v; batch restored %v", c, lie, h.MaxTimestamp, h.LogAppendTime(), err, bytes.Equal(b, orig))
			}
		}
	}
}
