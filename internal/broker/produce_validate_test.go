package broker

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/record"
)

// TestProduceRefusesCompressedBatchClaimingPhantomRecords: a snappy batch holding one
// record whose header states 2^31-1 of them is refused with INVALID_RECORD and
// appends nothing (it had advanced the log end by 2^31 offsets); the same batch with
// an honest header is appended.
func TestProduceRefusesCompressedBatchClaimingPhantomRecords(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "phantom", 1)
	opts := record.DefaultBuildOptions()
	opts.Compression = record.CompressionSnappy
	honest, err := record.Build(opts, []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	hostile := append([]byte(nil), honest...)
	binary.BigEndian.PutUint32(hostile[23:], math.MaxInt32-1) // lastOffsetDelta
	binary.BigEndian.PutUint32(hostile[57:], math.MaxInt32)   // record count
	binary.BigEndian.PutUint32(hostile[record.CRCOffset:], record.Checksum(hostile))

	produce := func(batch []byte) int16 { return produceBatch(t, b, "phantom", batch) }
	if code := produce(hostile); code != kerr.InvalidRecord.Code {
		t.Fatalf("hostile batch: %v, want INVALID_RECORD", kerr.ErrorForCode(code))
	}
	if end := b.logs.Get("phantom", 0).LogEndOffset(); end != 0 {
		t.Fatalf("log end offset %d after the refused batch, want 0", end)
	}
	if code := produce(honest); code != 0 {
		t.Fatalf("honest batch: %v", kerr.ErrorForCode(code))
	}
	if end := b.logs.Get("phantom", 0).LogEndOffset(); end != 1 {
		t.Fatalf("log end offset %d after the honest batch, want 1", end)
	}
}
