package broker

// ListOffsets (key 2), versions 1–11.
//
// Timestamp -2 (earliest) and -4 (earliest local; there is no tiered storage, so the
// same) answer the log start offset; -5 (latest tiered, v9+, KIP-1005) and -6
// (earliest pending upload, v11+, KIP-1023) answer -1: nothing is tiered; -1 (latest) the high watermark, or the last stable
// offset for read_committed; -3 (max timestamp, KIP-734) the record with the largest
// timestamp; any other timestamp the earliest offset whose record timestamp is at least
// that, looked up through the time index, or -1 when there is none below the high
// watermark. A special timestamp in a version that does not know it is
// UNSUPPORTED_VERSION, as on Kafka. CurrentLeaderEpoch is validated (v4+). v10's
// TimeoutMillis bounds remote-storage lookups, which Samsa never makes.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
)

const (
	listLatest           = -1
	listEarliest         = -2
	listMaxTimestamp     = -3
	listEarliestLocal    = -4
	listLatestTiered     = -5
	listEarliestToUpload = -6
)

// listMinVersion is the first ListOffsets version that knows each special timestamp.
var listMinVersion = map[int64]int16{
	listLatest: 0, listEarliest: 0, listMaxTimestamp: 7, listEarliestLocal: 8,
	listLatestTiered: 9, listEarliestToUpload: 11,
}

func init() { register(kmsg.ListOffsets, 1, 11, (*Broker).handleListOffsets) }

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
			if min, known := listMinVersion[rp.Timestamp]; rp.Timestamp < 0 && (!known || req.Version < min) {
				sp.ErrorCode = kerr.UnsupportedVersion.Code
			} else if err := fetchablePartition(p, rp.CurrentLeaderEpoch); err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = listOffset(p, rp.Timestamp, r.IsolationLevel == 1)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}

// listOffset answers one partition's query: (timestamp, offset, leader epoch).
func listOffset(p *replica.Partition, ts int64, readCommitted bool) (int64, int64, int32) {
	limit := p.HighWatermark()
	if readCommitted {
		limit = p.LastStableOffset()
	}
	switch ts {
	case listEarliest, listEarliestLocal:
		return -1, p.Log.LogStartOffset(), -1
	case listLatestTiered, listEarliestToUpload:
		return -1, -1, -1
	case listLatest:
		return -1, limit, p.LeaderEpoch()
	case listMaxTimestamp:
		maxTS, off := p.Log.MaxTimestamp()
		if off < 0 || off >= limit {
			return -1, -1, -1
		}
		return maxTS, off, -1
	}
	off, found, ok := p.Log.OffsetForTimestamp(ts)
	if !ok || off >= limit {
		return -1, -1, -1
	}
	return found, off, -1
}
