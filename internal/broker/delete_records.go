package broker

// DeleteRecords (key 21), versions 0–2.
//
// Moves a partition's log start offset forward (offset -1 means the high watermark);
// whole segments below it are deleted and ListOffsets earliest / Fetch follow the new
// start. An offset above the high watermark is OFFSET_OUT_OF_RANGE. The internal
// topics are INVALID_TOPIC_EXCEPTION, as in Kafka: their coordinators replay them from
// the log start, so records deleted there would take committed offsets, groups and
// transactional ids with them at the next load.

import (
	"cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.DeleteRecords, 0, 2, (*Broker).handleDeleteRecords) }

func (b *Broker) handleDeleteRecords(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DeleteRecordsRequest)
	resp := kmsg.NewPtrDeleteRecordsResponse()
	resp.SetVersion(req.Version)
	img := b.image()
	for _, rt := range r.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		authErr := b.topicAuthError(req, auth.OpDelete, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			p := b.namedReplica(img, rt.Topic, rp.Partition)
			var internalErr error
			if isInternalTopic(rt.Topic) {
				internalErr = kerr.InvalidTopicException
			}
			if err := cmp.Or(authErr, internalErr, fetchablePartition(p, -1)); err != nil {
				sp.ErrorCode = errorCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			offset := rp.Offset
			hw := p.HighWatermark()
			if offset == -1 {
				offset = hw
			}
			if offset < 0 || offset > hw {
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			low, err := p.Log.DeleteRecordsBefore(offset)
			if err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				sp.LowWatermark = low
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
