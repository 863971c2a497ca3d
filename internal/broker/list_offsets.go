package broker

// ListOffsets (key 2), versions 1–8.
//
// Timestamp -2 (earliest) and -4 (earliest local; there is no tiered storage, so the
// same) answer the log start offset; -1 (latest) the high watermark, or the last stable
// offset for read_committed; -3 (max timestamp, KIP-734) the record with the largest
// timestamp; any other timestamp the earliest offset whose record timestamp is at least
// that, looked up through the time index, or -1 when there is none below the high
// watermark. CurrentLeaderEpoch is validated (v4+). A leader just elected whose high
// watermark has not reached the start of its epoch answers OFFSET_NOT_AVAILABLE for the
// latest offset, and for a timestamp found at or past its high watermark, as Kafka does
// (KIP-207): the client retries once the high watermark caught up.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
)

const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3
	listEarliestLocal = -4
)

func init() { register(kmsg.ListOffsets, 1, 8, (*Broker).handleListOffsets) }

func (b *Broker) handleListOffsets(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ListOffsetsRequest)
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.SetVersion(req.Version)
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			p := b.replicas.Get(rt.Topic, rp.Partition)
			err := fetchablePartition(p, rp.CurrentLeaderEpoch)
			if err == nil {
				sp.Timestamp, sp.Offset, sp.LeaderEpoch, err = listOffset(p, rp.Timestamp, r.IsolationLevel == 1)
			}
			if err != nil {
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
				sp.ErrorCode = errorCode(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}

// listOffset answers one partition's query: (timestamp, offset, leader epoch), or
// replica.ErrOffsetNotAvailable from a leader whose high watermark lags its epoch.
func listOffset(p *replica.Partition, ts int64, readCommitted bool) (int64, int64, int32, error) {
	limit := p.HighWatermark()
	if readCommitted {
		limit = p.LastStableOffset()
	}
	lagging := p.CheckHighWatermarkCaughtUp()
	switch ts {
	case listEarliest, listEarliestLocal:
		return -1, p.Log.LogStartOffset(), -1, nil
	case listLatest:
		return -1, limit, p.LeaderEpoch(), lagging
	case listMaxTimestamp:
		maxTS, off := p.Log.MaxTimestamp()
		if off < 0 || off >= limit {
			return -1, -1, -1, lagging
		}
		return maxTS, off, -1, nil
	}
	off, found, ok := p.Log.OffsetForTimestamp(ts)
	if !ok || off >= limit {
		return -1, -1, -1, lagging
	}
	return found, off, -1, nil
}
