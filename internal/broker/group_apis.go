package broker

// The group coordinator APIs. Each handler casts the request, hands it to
// internal/group and returns its response; the coordinator answers the version it was
// given. Delayed answers (a JoinGroup waiting for the rebalance, a SyncGroup waiting for
// the leader's assignment, writes waiting for __consumer_offsets) arrive on the
// coordinator's channel and are relayed as they come.
//
//	OffsetCommit     (8) v0–9   (v10 names topics by id: not served yet)
//	OffsetFetch      (9) v0–9   several groups per request from v8
//	JoinGroup       (11) v0–9   MEMBER_ID_REQUIRED handshake from v4, static members
//	                            from v5, SkipAssignment for a returning static leader v9
//	Heartbeat       (12) v0–4
//	LeaveGroup      (13) v0–5   batched, by member id or group.instance.id, from v3
//	SyncGroup       (14) v0–5
//	DescribeGroups  (15) v0–5
//	ListGroups      (16) v0–5   state filter from v4, type filter ("classic") from v5
//	DeleteGroups    (42) v0–2
//	OffsetDelete    (47) v0
//
// OffsetFetch with RequireStable (v7+) answers UNSTABLE_OFFSET_COMMIT for a partition
// whose offset a transaction not decided yet committed (TxnOffsetCommit is in
// txn_apis.go).
//
// Differences from Kafka: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat,
// ConsumerGroupDescribe) is not served, so clients use the classic protocol.

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.OffsetCommit, 0, 9, (*Broker).handleOffsetCommit)
	register(kmsg.OffsetFetch, 0, 9, (*Broker).handleOffsetFetch)
	register(kmsg.JoinGroup, 0, 9, (*Broker).handleJoinGroup)
	register(kmsg.Heartbeat, 0, 4, (*Broker).handleHeartbeat)
	register(kmsg.LeaveGroup, 0, 5, (*Broker).handleLeaveGroup)
	register(kmsg.SyncGroup, 0, 5, (*Broker).handleSyncGroup)
	register(kmsg.DescribeGroups, 0, 5, (*Broker).handleDescribeGroups)
	register(kmsg.ListGroups, 0, 5, (*Broker).handleListGroups)
	register(kmsg.DeleteGroups, 0, 2, (*Broker).handleDeleteGroups)
	register(kmsg.OffsetDelete, 0, 0, (*Broker).handleOffsetDelete)
}

// relayGroupResponse turns the coordinator's one-response channel into the server's.
func relayGroupResponse[T kmsg.Response](in <-chan T) <-chan protocol.Response {
	out := make(chan protocol.Response, 1)
	go func() { out <- protocol.Response{Body: <-in} }()
	return out
}

// groupClientHost formats the connection's address as Kafka shows it in DescribeGroups
// ("/127.0.0.1").
func groupClientHost(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return "/" + host
	}
	return "/" + addr
}

func (b *Broker) handleJoinGroup(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.JoinGroupRequest)
	return relayGroupResponse(b.groups.JoinGroup(r, req.ClientID, groupClientHost(req.ClientAddr)))
}

func (b *Broker) handleSyncGroup(req *protocol.Request) <-chan protocol.Response {
	return relayGroupResponse(b.groups.SyncGroup(req.Body.(*kmsg.SyncGroupRequest)))
}

func (b *Broker) handleHeartbeat(req *protocol.Request) <-chan protocol.Response {
	return reply(b.groups.Heartbeat(req.Body.(*kmsg.HeartbeatRequest)))
}

func (b *Broker) handleLeaveGroup(req *protocol.Request) <-chan protocol.Response {
	return reply(b.groups.LeaveGroup(req.Body.(*kmsg.LeaveGroupRequest)))
}

func (b *Broker) handleOffsetCommit(req *protocol.Request) <-chan protocol.Response {
	return relayGroupResponse(b.groups.OffsetCommit(req.Body.(*kmsg.OffsetCommitRequest)))
}

func (b *Broker) handleOffsetFetch(req *protocol.Request) <-chan protocol.Response {
	return reply(b.groups.OffsetFetch(req.Body.(*kmsg.OffsetFetchRequest)))
}

func (b *Broker) handleDescribeGroups(req *protocol.Request) <-chan protocol.Response {
	return reply(b.groups.DescribeGroups(req.Body.(*kmsg.DescribeGroupsRequest)))
}

func (b *Broker) handleListGroups(req *protocol.Request) <-chan protocol.Response {
	return reply(b.groups.ListGroups(req.Body.(*kmsg.ListGroupsRequest)))
}

func (b *Broker) handleDeleteGroups(req *protocol.Request) <-chan protocol.Response {
	return relayGroupResponse(b.groups.DeleteGroups(req.Body.(*kmsg.DeleteGroupsRequest)))
}

func (b *Broker) handleOffsetDelete(req *protocol.Request) <-chan protocol.Response {
	return relayGroupResponse(b.groups.OffsetDelete(req.Body.(*kmsg.OffsetDeleteRequest)))
}
