package broker

// DescribeProducers (key 61), version 0.
//
// The idempotent and transactional producers a partition's log tracks: id, epoch, last
// sequence, last timestamp, the coordinator epoch of their last marker, and the first
// offset of their open transaction (CurrentTxnStartOffset, -1 when none) — what
// `samsa transactions find-hanging` looks at.

import (
	"cmp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
)

func init() { register(kmsg.DescribeProducers, 0, 0, (*Broker).handleDescribeProducers) }

func (b *Broker) handleDescribeProducers(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeProducersRequest)
	resp := kmsg.NewPtrDescribeProducersResponse()
	resp.SetVersion(req.Version)
	img := b.image()
	// A partition named again is described once: each mention would otherwise cost
	// every producer it holds state for again, for 4 bytes of request.
	seen := make(map[replica.Key]struct{})
	for _, rt := range r.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		authErr := b.topicAuthError(req, auth.OpRead, rt.Topic)
		for _, idx := range rt.Partitions {
			if _, repeat := seen[replica.Key{Topic: rt.Topic, Partition: idx}]; repeat {
				continue
			}
			seen[replica.Key{Topic: rt.Topic, Partition: idx}] = struct{}{}
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			p := b.namedReplica(img, rt.Topic, idx)
			if err := cmp.Or(authErr, fetchablePartition(p, -1)); err != nil {
				sp.ErrorCode = errorCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, pi := range p.Log.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID = pi.ProducerID
				ap.ProducerEpoch = int32(pi.Epoch)
				ap.LastSequence = pi.LastSequence
				ap.LastTimestamp = pi.LastTimestamp
				ap.CoordinatorEpoch = pi.CoordinatorEpoch
				ap.CurrentTxnStartOffset = pi.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 || len(rt.Partitions) == 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	return reply(resp)
}
