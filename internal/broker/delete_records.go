package broker

// DeleteRecords (key 21), versions 0–2.
//
// Moves a partition's log start offset forward (offset -1 means the high watermark);
// whole segments below it are deleted and ListOffsets earliest / Fetch follow the new
// start. An offset above the high watermark is OFFSET_OUT_OF_RANGE. A partition named
// more than once is answered once, with its last mention's offset, as Kafka keys the
// request's partitions by topic and partition (distinctDeletes). As in Kafka
// (DelayedDeleteRecords), the answer waits until the partition's low watermark —
// the smallest log start over the leader and its live followers — reached the
// offset, up to the request's timeout (REQUEST_TIMED_OUT), so that records deleted
// stay deleted when a follower takes over; followers waiting in a fetch are answered
// at once to learn the new log start. The internal
// topics are INVALID_TOPIC_EXCEPTION, as in Kafka: their coordinators replay them from
// the log start, so records deleted there would take committed offsets, groups and
// transactional ids with them at the next load.

import (
	"cmp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
)

func init() { register(kmsg.DeleteRecords, 0, 2, (*Broker).handleDeleteRecords) }

func (b *Broker) handleDeleteRecords(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DeleteRecordsRequest)
	resp := kmsg.NewPtrDeleteRecordsResponse()
	resp.SetVersion(req.Version)
	img := b.image()
	var pending []pendingDelete
	for _, rt := range distinctDeletes(r.Topics) {
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
			if _, err := p.Log.DeleteRecordsBefore(offset); err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				p.LogStartMoved()
				pending = append(pending, pendingDelete{p: p, offset: offset, topic: len(resp.Topics), index: len(st.Partitions)})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(pending) == 0 {
		return reply(resp)
	}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		b.waitLowWatermarks(resp, pending, time.Duration(max(r.TimeoutMillis, 1))*time.Millisecond)
		out <- protocol.Response{Body: resp}
	})
	return out
}

// distinctDeletes returns topics with each partition named once, as Kafka keys a
// DeleteRecords request's partitions by topic and partition: one named again is
// answered once, where first named, deleting before its last mention's offset; a
// topic entry left with no partition is dropped. topics itself is returned when no
// partition repeats.
func distinctDeletes(topics []kmsg.DeleteRecordsRequestTopic) []kmsg.DeleteRecordsRequestTopic {
	type slot struct{ topic, partition int }
	seen := map[topicPartition]slot{}
	repeats := func() bool {
		for _, rt := range topics {
			for _, rp := range rt.Partitions {
				tp := topicPartition{rt.Topic, rp.Partition}
				if _, ok := seen[tp]; ok {
					return true
				}
				seen[tp] = slot{}
			}
		}
		return false
	}
	if !repeats() {
		return topics
	}
	clear(seen)
	out := make([]kmsg.DeleteRecordsRequestTopic, 0, len(topics))
	for _, rt := range topics {
		ti := len(out)
		out = append(out, kmsg.DeleteRecordsRequestTopic{Topic: rt.Topic})
		for _, rp := range rt.Partitions {
			tp := topicPartition{rt.Topic, rp.Partition}
			if at, ok := seen[tp]; ok {
				out[at.topic].Partitions[at.partition].Offset = rp.Offset
				continue
			}
			seen[tp] = slot{ti, len(out[ti].Partitions)}
			out[ti].Partitions = append(out[ti].Partitions, rp)
		}
		if len(out[ti].Partitions) == 0 && len(rt.Partitions) > 0 {
			out = out[:ti]
		}
	}
	return out
}

// pendingDelete is a partition whose DeleteRecords answer waits for its low
// watermark to reach offset; topic and index place its answer in the response.
type pendingDelete struct {
	p            *replica.Partition
	offset       int64
	topic, index int
}

// waitLowWatermarks fills each pending partition's answer once its low watermark
// reached its offset (NOT_LEADER_OR_FOLLOWER if it is no longer led here), and with
// REQUEST_TIMED_OUT those still short after timeout.
func (b *Broker) waitLowWatermarks(resp *kmsg.DeleteRecordsResponse, pending []pendingDelete, timeout time.Duration) {
	wake := make(chan struct{}, 1)
	expired, stop := b.after(timeout)
	defer stop()
	alive := func(id int32) bool {
		br, ok := b.image().Broker(metadata.NodeID(id))
		return ok && !br.Fenced
	}
	for {
		remaining := pending[:0]
		for _, pd := range pending {
			pd.p.Wait(wake) // before the check, so that a move in between is not missed
			sp := &resp.Topics[pd.topic].Partitions[pd.index]
			low, err := pd.p.LowWatermark(alive)
			switch {
			case err != nil:
				sp.ErrorCode = errorCode(err)
			case low >= pd.offset:
				sp.LowWatermark = low
			default:
				remaining = append(remaining, pd)
				continue
			}
			pd.p.StopWaiting(wake)
		}
		pending = remaining
		if len(pending) == 0 {
			return
		}
		select {
		case <-wake:
			continue
		case <-expired:
		case <-b.serving.Done():
		}
		for _, pd := range pending {
			pd.p.StopWaiting(wake)
			resp.Topics[pd.topic].Partitions[pd.index].ErrorCode = kerr.RequestTimedOut.Code
		}
		return
	}
}
