package broker

// ConsumerGroupDescribe (key 69), versions 0–1: a KIP-848 consumer group's state,
// epochs, assignor and members with their current and target assignments (topics by
// id and name). v1 reports each member's type (always the consumer protocol here).
// A classic or unknown group answers GROUP_ID_NOT_FOUND.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.ConsumerGroupDescribe, 0, 1, (*Broker).handleConsumerGroupDescribe)
}

func (b *Broker) handleConsumerGroupDescribe(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ConsumerGroupDescribeRequest)
	r.Groups = distinctNames(r.Groups) // each group once (distinctNames)
	return relayGroupResponse(b.groups.ConsumerGroupDescribe(r))
}
