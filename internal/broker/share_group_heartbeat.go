package broker

// ShareGroupHeartbeat (key 76) and ShareGroupDescribe (key 77), version 1 (Kafka 4.1
// and later; v0 was Kafka 4.0's early access): share group membership and
// assignment, served by the group coordinator (internal/group) on the leader of the
// group's __consumer_offsets partition. A member that leaves (epoch -1) also gives
// back the records it holds on this broker's share partitions in memory (its share
// sessions end with their own requests or connections, as in Kafka, whose group
// coordinator does not tell share-partition leaders about members).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.ShareGroupHeartbeat, 1, 1, (*Broker).handleShareGroupHeartbeat)
	register(kmsg.ShareGroupDescribe, 1, 1, (*Broker).handleShareGroupDescribe)
}

func (b *Broker) handleShareGroupHeartbeat(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ShareGroupHeartbeatRequest)
	in := b.groups.ShareGroupHeartbeat(r, req.ClientID, groupClientHost(req.ClientAddr))
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		resp := <-in
		if r.MemberEpoch == -1 && resp.ErrorCode == 0 {
			b.shares.ReleaseMember(b.serving, r.GroupID, r.MemberID)
		}
		out <- protocol.Response{Body: resp}
	})
	return out
}

func (b *Broker) handleShareGroupDescribe(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ShareGroupDescribeRequest)
	r.GroupIDs = distinctNames(r.GroupIDs) // each group once (distinctNames)
	return relayGroupResponse(b.groups.ShareGroupDescribe(r))
}
