package broker

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
)

// BenchmarkShareFetch is the broker's own cost of a share consumer's round trip,
// without the network or a client: four members take turns on one partition of
// 100-byte records in batches of 125, each ShareFetch accepting what the member's
// previous one acquired and asking for 500 more, as franz-go's share consumers do at
// their defaults (group.share.partition.max.record.locks keeps its 2,000: taking
// turns, each member's records are the window's oldest when it acknowledges them).
// The batches are uncompressed, or snappy-compressed values of one repeated byte as
// test/perf's BenchmarkShareConsume produces them (about 9 bytes a record). ns/op
// and allocs/op are per ShareFetch, the state write included.
func BenchmarkShareFetch(b *testing.B) {
	for _, codec := range []record.Compression{record.CompressionNone, record.CompressionSnappy} {
		b.Run("codec="+codec.String(), func(b *testing.B) { benchShareFetch(b, codec) })
	}
}

func benchShareFetch(b *testing.B, codec record.Compression) {
	brk := startTestBrokerWith(b, nil, nil, b.TempDir())
	createTestTopic(b, brk, "share-bench", 1)
	tp, _ := brk.image().Topic("share-bench")
	const members, perFetch, perBatch = 4, 500, 125
	value := bytes.Repeat([]byte("x"), 100)
	recs := make([]record.Record, perBatch)
	for i := range recs {
		recs[i].Value = value
	}
	opts := record.DefaultBuildOptions()
	opts.Compression = codec
	batch, err := record.Build(opts, recs)
	if err != nil {
		b.Fatal(err)
	}
	type member struct {
		id    string
		epoch int32
		acks  []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	}
	ms := make([]*member, members)
	for i := range ms {
		ms[i] = &member{id: fmt.Sprintf("member-%d", i)}
	}
	fetch := func(m *member, conn uint64) int {
		req := kmsg.NewPtrShareFetchRequest()
		req.SetVersion(2)
		req.GroupID, req.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr(m.id)
		req.ShareSessionEpoch, req.MaxRecords, req.MaxBytes = m.epoch, perFetch, 50<<20
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = tp.ID
		rp := kmsg.NewShareFetchRequestTopicPartition()
		for _, a := range m.acks {
			ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.FirstOffset, a.LastOffset, []int8{1}
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r := <-brk.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req, ConnID: conn})
		if r.Written != nil { // as the server does once the answer is on the wire
			defer r.Written()
		}
		resp := r.Body.(*kmsg.ShareFetchResponse)
		m.epoch++
		m.acks = m.acks[:0]
		if resp.ErrorCode != 0 {
			b.Fatalf("ShareFetch of %s: error %d", m.id, resp.ErrorCode)
		}
		n := 0
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
					b.Fatalf("ShareFetch of %s: partition error %d, acknowledgement error %d", m.id, p.ErrorCode, p.AcknowledgeErrorCode)
				}
				m.acks = append(m.acks, p.AcquiredRecords...)
				for _, a := range p.AcquiredRecords {
					n += int(a.LastOffset - a.FirstOffset + 1)
				}
			}
		}
		return n
	}
	// The sessions open before the records are written: the share partition starts
	// at the log's end (share.auto.offset.reset=latest).
	for i, m := range ms {
		fetch(m, uint64(i+1))
	}
	for range (b.N*perFetch)/perBatch + members*perFetch/perBatch {
		if code := produceBatch(b, brk, "share-bench", batch); code != 0 {
			b.Fatalf("produce: error %d", code)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if n := fetch(ms[i%members], uint64(i%members+1)); n != perFetch {
			b.Fatalf("ShareFetch %d acquired %d records, want %d", i, n, perFetch)
		}
	}
}
