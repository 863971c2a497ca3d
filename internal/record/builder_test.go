package record

import (
	"bytes"
	"errors"
	"testing"
)

// TestBuildMatchesKmsg checks Build against batches encoded by franz-go's kmsg: byte for
// byte when uncompressed, record for record (each decoding the other's) when compressed.
func TestBuildMatchesKmsg(t *testing.T) {
	rs := sampleRecords(20)
	rs[5].Attributes = 0 // attributes are carried; keep them zero as clients send them
	rs[7].TimestampDelta = -3
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			o := producerOpts(c)
			o.BaseOffset = 1234
			o.PartitionLeaderEpoch = 9
			ours := mustBuild(t, o, rs)
			ref := refBatch(t, o, rs)
			if c == CompressionNone && !bytes.Equal(ours, ref) {
				t.Fatalf("uncompressed batch differs from kmsg's:\n ours %x\n  ref %x", ours, ref)
			}
			for name, b := range map[string][]byte{"ours": ours, "kmsg": ref} {
				h, err := Validate(b, ValidateOptions{MaxBatchBytes: 1 << 20})
				if err != nil {
					t.Fatalf("%s: Validate: %v", name, err)
				}
				h2, got, err := Records(b)
				if err != nil {
					t.Fatalf("%s: Records: %v", name, err)
				}
				if h != h2 {
					t.Fatalf("%s: Validate header %+v != Records header %+v", name, h, h2)
				}
				if h.BaseOffset != 1234 || h.PartitionLeaderEpoch != 9 || h.Compression() != c ||
					h.MaxTimestamp != o.BaseTimestamp+19*7 || h.NumRecords != 20 {
					t.Fatalf("%s: header %+v", name, h)
				}
				equalRecords(t, got, rs)
			}
		})
	}
}

func TestBuildRoundTripOptions(t *testing.T) {
	rs := sampleRecords(3)
	tests := []struct {
		name   string
		opts   func() BuildOptions
		attrs  int16
		maxTS  int64
		valid  bool // acceptable from a client
		hasPID bool
	}{
		{"defaults", DefaultBuildOptions, 0, 14, true, false},
		{"idempotent", func() BuildOptions { return producerOpts(CompressionNone) }, 0, 1_700_000_000_014, true, true},
		{"transactional lz4", func() BuildOptions {
			o := producerOpts(CompressionLZ4)
			o.Transactional = true
			return o
		}, AttrTransactional | 3, 1_700_000_000_014, true, true},
		{"log append time", func() BuildOptions {
			o := DefaultBuildOptions()
			o.LogAppendTime = true
			o.BaseTimestamp = 5000
			return o
		}, AttrTimestampType, 5000, true, false},
		{"control", func() BuildOptions {
			o := producerOpts(CompressionNone)
			o.Control, o.Transactional = true, true
			return o
		}, AttrControl | AttrTransactional, 1_700_000_000_014, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts()
			b := mustBuild(t, o, rs)
			h, got, err := Records(b)
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, got, rs)
			if h.Attributes != tt.attrs || h.MaxTimestamp != tt.maxTS || h.HasProducerID() != tt.hasPID ||
				h.PartitionLeaderEpoch != o.PartitionLeaderEpoch || h.ProducerEpoch != o.ProducerEpoch ||
				h.BaseSequence != o.BaseSequence {
				t.Fatalf("header %+v", h)
			}
			if _, err := Validate(b, ValidateOptions{}); (err == nil) != tt.valid {
				t.Fatalf("Validate = %v, want valid %v", err, tt.valid)
			}
		})
	}
}

func TestBuildOffsetDeltas(t *testing.T) {
	kv := func(d int32) Record { return Record{OffsetDelta: d, Key: []byte{byte(d)}, Value: []byte("v")} }
	tests := []struct {
		name      string
		in        []Record
		wantDelta []int32
		wantErr   error
	}{
		{"all zero are numbered", []Record{kv(0), kv(0), kv(0)}, []int32{0, 1, 2}, nil},
		{"explicit", []Record{kv(0), kv(1), kv(2)}, []int32{0, 1, 2}, nil},
		{"gaps kept", []Record{kv(0), kv(3), kv(7)}, []int32{0, 3, 7}, nil},
		{"starting above zero", []Record{kv(2), kv(5)}, []int32{2, 5}, nil},
		{"single", []Record{kv(0)}, []int32{0}, nil},
		{"decreasing", []Record{kv(0), kv(2), kv(1)}, nil, ErrInvalid},
		{"repeated", []Record{kv(0), kv(1), kv(1)}, nil, ErrInvalid},
		{"negative", []Record{kv(-1)}, nil, ErrInvalid},
		{"empty", nil, nil, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Build(DefaultBuildOptions(), tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Build error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h, got, err := Records(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.LastOffsetDelta != tt.wantDelta[len(tt.wantDelta)-1] || int(h.NumRecords) != len(tt.wantDelta) {
				t.Fatalf("header lastOffsetDelta %d, count %d", h.LastOffsetDelta, h.NumRecords)
			}
			for i, r := range got {
				if r.OffsetDelta != tt.wantDelta[i] {
					t.Fatalf("record %d: offset delta %d, want %d", i, r.OffsetDelta, tt.wantDelta[i])
				}
			}
		})
	}
}

func TestBatchBuilderReuse(t *testing.T) {
	bb := NewBatchBuilder(producerOpts(CompressionZstd))
	var batches []byte
	for n := 1; n <= 3; n++ {
		o := producerOpts(CompressionZstd)
		o.BaseOffset = int64(10 * n)
		bb.Reset(o)
		for i := range n {
			bb.Append(Record{OffsetDelta: int32(i), Value: []byte{byte(n), byte(i)}})
		}
		if bb.Len() != n || bb.EncodedSize() == 0 {
			t.Fatalf("Len %d EncodedSize %d", bb.Len(), bb.EncodedSize())
		}
		var err error
		if batches, err = bb.AppendTo(batches); err != nil {
			t.Fatal(err)
		}
	}
	split, err := Split(batches)
	if err != nil || len(split) != 3 {
		t.Fatalf("Split: %d batches, %v", len(split), err)
	}
	for n, b := range split {
		h, rs, err := Records(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != int64(10*(n+1)) || len(rs) != n+1 || rs[n].Value[0] != byte(n+1) {
			t.Fatalf("batch %d: header %+v, %d records", n, h, len(rs))
		}
	}
	bb.Append(Record{OffsetDelta: 0})
	if _, err := bb.AppendTo(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AppendTo after an out-of-order Append: %v, want ErrInvalid", err)
	}
}

func TestSetLogAppendTimeKeepsBatchValid(t *testing.T) {
	b := mustBuild(t, producerOpts(CompressionSnappy), sampleRecords(4))
	SetBaseOffset(b, 500)
	SetPartitionLeaderEpoch(b, 3)
	SetLogAppendTime(b, 42)
	h, err := Validate(b, ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 500 || h.PartitionLeaderEpoch != 3 || !h.LogAppendTime() || h.MaxTimestamp != 42 {
		t.Fatalf("header %+v", h)
	}
}
