package broker

// ElectLeaders (key 43), versions 0–2; on the client listeners and the controller
// listener.
//
// Preferred (type 0, the only one before v1) or unclean (type 1) leader election on
// the named partitions, or on every partition when the topic list is null (then the
// partitions that need no election are left out of the answer, as in Kafka). A
// broker forwards the request to the active controller. Per partition:
// ELECTION_NOT_NEEDED (the preferred replica already leads; the partition has a
// leader), PREFERRED_LEADER_NOT_AVAILABLE (the preferred replica is not an active
// ISR member), ELIGIBLE_LEADERS_NOT_AVAILABLE (no active replica at all),
// UNKNOWN_TOPIC_OR_PARTITION. A partition named twice is not refused: it is elected
// and answered at each mention, as Kafka's controller does
// (ReplicationControlManager.electLeaders); the answer has one entry per topic, in
// name order, where Kafka's has one per topic entry of the request, in its order.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.ElectLeaders, 0, 2, (*Broker).handleElectLeaders)
	registerController(kmsg.ElectLeaders, 0, 2, (*Broker).serveElectLeaders)
}

func (b *Broker) handleElectLeaders(req *protocol.Request) <-chan protocol.Response {
	return b.forward(req, req.Body.(*kmsg.ElectLeadersRequest).TimeoutMillis, nil)
}

func (b *Broker) serveElectLeaders(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.ElectLeadersRequest)
	resp := kmsg.NewPtrElectLeadersResponse()
	resp.SetVersion(r.Version)
	var targets map[string][]int32
	if r.Topics != nil {
		targets = map[string][]int32{}
		for _, t := range r.Topics {
			targets[t.Topic] = append(targets[t.Topic], t.Partitions...)
		}
	}
	typ := controller.ElectionType(r.ElectionType)
	if r.Version == 0 {
		typ = controller.ElectPreferred
	}
	results, err := b.controller.ElectLeaders(ctx, typ, targets)
	if err != nil {
		return failedResponse(r, errorCode(err), wireMessage(err))
	}
	index := map[string]int{}
	for _, res := range results {
		i := topicSlot(index, &resp.Topics, res.Topic, func() kmsg.ElectLeadersResponseTopic {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = res.Topic
			return rt
		})
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = res.Partition
		rp.ErrorCode, rp.ErrorMessage = errorCode(res.Err), errorMessage(res.Err)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

// topicSlot returns the index of topic's entry in *topics, appending mk() when there
// is none yet; index remembers the positions.
func topicSlot[T any](index map[string]int, topics *[]T, topic string, mk func() T) int {
	i, ok := index[topic]
	if !ok {
		i = len(*topics)
		index[topic] = i
		*topics = append(*topics, mk())
	}
	return i
}
