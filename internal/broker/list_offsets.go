package broker

// ListOffsets (key 2), versions 1–11.
//
// Timestamp -2 (earliest) and -4 (earliest local; there is no tiered storage, so the
// same) answer the log start offset; -5 (latest tiered, v9+, KIP-1005) and -6
// (earliest pending upload, v11+, KIP-1023) answer -1: nothing is tiered; -1 (latest)
// the high watermark, or the last stable offset for read_committed; -3 (max
// timestamp, KIP-734) the record with the largest timestamp; any other timestamp the
// earliest offset whose record timestamp is at least that, looked up through the time
// index, or -1 when there is none below the high watermark. A special timestamp in a
// version that does not know it is UNSUPPORTED_VERSION, as on Kafka.
// The leader epoch answered is that of the offset answered (the leader epoch cache's,
// which is the batch's), -1 when unknown; the current epoch for latest.
// CurrentLeaderEpoch is validated (v4+). A partition named twice in the request is
// INVALID_REQUEST wherever it appears, as on Kafka. v10's TimeoutMillis bounds
// remote-storage lookups, which Samsa never makes.
//
// A leader just elected whose high watermark has not reached the start of its epoch
// answers OFFSET_NOT_AVAILABLE for the latest offset, and for a timestamp found at or
// past its high watermark, as Kafka does (KIP-207): the client retries once the high
// watermark caught up.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
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
	dup := duplicateListed(r)
	img := b.image()
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		authErr := b.topicAuthError(req, auth.OpDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			p := b.namedReplica(img, rt.Topic, rp.Partition)
			err := authErr
			if err == nil && dup[topicPartition{rt.Topic, rp.Partition}] {
				err = kerr.InvalidRequest
			}
			if err == nil {
				err = timestampKnown(rp.Timestamp, req.Version)
			}
			if err == nil {
				err = fetchablePartition(p, rp.CurrentLeaderEpoch)
			}
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

type topicPartition struct {
	topic     string
	partition int32
}

// duplicateListed returns the partitions a ListOffsets request names more than once,
// in one topic entry or several: each is answered INVALID_REQUEST, as Kafka does.
func duplicateListed(r *kmsg.ListOffsetsRequest) map[topicPartition]bool {
	var seen, dup map[topicPartition]bool
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			tp := topicPartition{rt.Topic, rp.Partition}
			if seen[tp] {
				if dup == nil {
					dup = map[topicPartition]bool{}
				}
				dup[tp] = true
			}
			if seen == nil {
				seen = map[topicPartition]bool{}
			}
			seen[tp] = true
		}
	}
	return dup
}

// timestampKnown returns UNSUPPORTED_VERSION for a special (negative) timestamp that
// the request's version does not know.
func timestampKnown(ts int64, version int16) error {
	if first, known := listMinVersion[ts]; ts < 0 && (!known || version < first) {
		return kerr.UnsupportedVersion
	}
	return nil
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
		start := p.Log.LogStartOffset()
		return -1, start, p.Log.EpochAt(start), nil
	case listLatestTiered, listEarliestToUpload:
		return -1, -1, -1, nil
	case listLatest:
		return -1, limit, p.LeaderEpoch(), lagging
	case listMaxTimestamp:
		maxTS, off := p.Log.MaxTimestamp()
		if off < 0 || off >= limit {
			return -1, -1, -1, lagging
		}
		return maxTS, off, p.Log.EpochAt(off), nil
	}
	off, found, ok := p.Log.OffsetForTimestamp(ts)
	if !ok || off >= limit {
		return -1, -1, -1, lagging
	}
	return found, off, p.Log.EpochAt(off), nil
}
