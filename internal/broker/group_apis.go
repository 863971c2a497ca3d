package broker

// The group coordinator APIs. Each handler casts the request, hands it to
// internal/group and returns its response; the coordinator answers the version it was
// given. Delayed answers (a JoinGroup waiting for the rebalance, a SyncGroup waiting for
// the leader's assignment, writes waiting for __consumer_offsets) arrive on the
// coordinator's channel and are relayed as they come.
//
//	OffsetCommit     (8) v0–10  topics by id from v10 (UNKNOWN_TOPIC_ID for an unknown one)
//	OffsetFetch      (9) v0–10  several groups per request from v8, topics by id from v10
//	JoinGroup       (11) v0–9   MEMBER_ID_REQUIRED handshake from v4, static members
//	                            from v5, SkipAssignment for a returning static leader v9
//	Heartbeat       (12) v0–4
//	LeaveGroup      (13) v0–5   batched, by member id or group.instance.id, from v3
//	SyncGroup       (14) v0–5
//	DescribeGroups  (15) v0–6   a consumer group (KIP-848) is Dead here, GROUP_ID_NOT_FOUND
//	                            from v6: ConsumerGroupDescribe describes it
//	ListGroups      (16) v0–5   state filter from v4, type filter ("classic", "consumer")
//	                            from v5
//	DeleteGroups    (42) v0–3   any group type; share groups lose their share state too
//	OffsetDelete    (47) v0
//
// OffsetCommit and OffsetFetch serve consumer groups (KIP-848) as Kafka 4.3 does: a
// member commits (v9+) at its member epoch, or at an older epoch the partitions it
// has owned since then (KIP-1251; one partition that fails makes the whole request
// STALE_MEMBER_EPOCH), and fetches at its member epoch; a commit from outside the
// group is accepted only while it has no members. The consumer protocol itself is in
// consumer_group_heartbeat.go.
//
// OffsetFetch with RequireStable (v7+) answers UNSTABLE_OFFSET_COMMIT for a partition
// whose offset a transaction not decided yet committed (TxnOffsetCommit is in
// txn_apis.go).

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.OffsetCommit, 0, 10, (*Broker).handleOffsetCommit)
	register(kmsg.OffsetFetch, 0, 10, (*Broker).handleOffsetFetch)
	register(kmsg.JoinGroup, 0, 9, (*Broker).handleJoinGroup)
	register(kmsg.Heartbeat, 0, 4, (*Broker).handleHeartbeat)
	register(kmsg.LeaveGroup, 0, 5, (*Broker).handleLeaveGroup)
	register(kmsg.SyncGroup, 0, 5, (*Broker).handleSyncGroup)
	register(kmsg.DescribeGroups, 0, 6, (*Broker).handleDescribeGroups)
	register(kmsg.ListGroups, 0, 5, (*Broker).handleListGroups)
	register(kmsg.DeleteGroups, 0, 3, (*Broker).handleDeleteGroups)
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
	r := req.Body.(*kmsg.OffsetCommitRequest)
	unknown := map[[16]byte]bool{}
	if r.Version >= 10 {
		// Offsets are kept by topic name, as in Kafka: resolve the ids first.
		img := b.image()
		for i := range r.Topics {
			if t, ok := img.TopicByID(metadata.TopicID(r.Topics[i].TopicID)); ok {
				r.Topics[i].Topic = t.Name
			} else {
				unknown[r.Topics[i].TopicID] = true
			}
		}
	}
	in := b.groups.OffsetCommit(r)
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		resp := <-in
		for i := range resp.Topics {
			if unknown[resp.Topics[i].TopicID] {
				for j := range resp.Topics[i].Partitions {
					resp.Topics[i].Partitions[j].ErrorCode = kerr.UnknownTopicID.Code
				}
			}
		}
		out <- protocol.Response{Body: resp}
	})
	return out
}

func (b *Broker) handleOffsetFetch(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.OffsetFetchRequest)
	r.Groups = distinctAllOffsets(r.Groups)
	if r.Version < 10 {
		return reply(b.groups.OffsetFetch(r))
	}
	img := b.image()
	for i := range r.Groups {
		for j := range r.Groups[i].Topics {
			if t, ok := img.TopicByID(metadata.TopicID(r.Groups[i].Topics[j].TopicID)); ok {
				r.Groups[i].Topics[j].Topic = t.Name
			}
		}
	}
	resp := b.groups.OffsetFetch(r)
	for i := range resp.Groups {
		for j := range resp.Groups[i].Topics {
			rt := &resp.Groups[i].Topics[j]
			if t, ok := img.Topic(rt.Topic); ok {
				rt.TopicID = t.ID
				continue
			}
			// An id that names no topic: answered in request order, as asked.
			if i < len(r.Groups) && j < len(r.Groups[i].Topics) {
				rt.TopicID = r.Groups[i].Topics[j].TopicID
			}
			for k := range rt.Partitions {
				rt.Partitions[k].ErrorCode = kerr.UnknownTopicID.Code
			}
		}
	}
	return reply(resp)
}

func (b *Broker) handleDescribeGroups(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	r.Groups = distinctNames(r.Groups)
	return reply(b.groups.DescribeGroups(r))
}

// distinctAllOffsets returns groups (an OffsetFetch v8+ request's) without the
// repeats of a group asking for all its offsets (null topics), keeping the first in
// order: each would otherwise cost every committed offset of the group again, for a
// few bytes of request.
func distinctAllOffsets(groups []kmsg.OffsetFetchRequestGroup) []kmsg.OffsetFetchRequestGroup {
	return distinctAll(groups, func(g kmsg.OffsetFetchRequestGroup) (string, bool) { return g.Group, g.Topics == nil })
}

// distinctAll returns groups without the repeats of a group that asks for all it
// holds, keeping the first in order; all answers a group's id and whether it asks
// for all.
func distinctAll[G any](groups []G, all func(G) (string, bool)) []G {
	if len(groups) < 2 {
		return groups
	}
	asked := make(map[string]struct{})
	out := groups[:0:0]
	for _, g := range groups {
		if id, ok := all(g); ok {
			if _, repeat := asked[id]; repeat {
				continue
			}
			asked[id] = struct{}{}
		}
		out = append(out, g)
	}
	return out
}

// distinctNames returns names without repeats, keeping the first of each in order
// (names itself when none repeats). A describe request naming a group again is
// answered once for it, as Metadata is for a topic: each mention would otherwise cost
// the group's whole state again (every member, with its metadata and assignment) for
// a few bytes of request.
func distinctNames(names []string) []string {
	if len(names) < 2 {
		return names
	}
	seen := make(map[string]struct{}, len(names))
	var out []string
	for i, n := range names {
		_, repeat := seen[n]
		seen[n] = struct{}{}
		switch {
		case repeat && out == nil:
			out = append(make([]string, 0, len(names)), names[:i]...)
		case !repeat && out != nil:
			out = append(out, n)
		}
	}
	if out == nil {
		return names
	}
	return out
}

func (b *Broker) handleListGroups(req *protocol.Request) <-chan protocol.Response {
	return reply(b.groups.ListGroups(req.Body.(*kmsg.ListGroupsRequest)))
}

func (b *Broker) handleDeleteGroups(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DeleteGroupsRequest)
	// A share group's state is deleted once its tombstones are written, under the
	// groups' admin locks (share_group_offsets.go), from the topics it had when the
	// coordinator decided.
	unlock := b.groupAdmin.lock(r.Groups...)
	img := b.image()
	in, shareGroups := b.groups.DeleteGroupsWithShareTopics(r)
	if len(shareGroups) == 0 {
		unlock()
		return relayGroupResponse(in)
	}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		defer unlock()
		resp := <-in
		ctx, cancel := b.requestContext(0)
		defer cancel()
		for i := range resp.Groups {
			g := &resp.Groups[i]
			topics, ok := shareGroups[g.Group]
			if !ok || g.ErrorCode != 0 {
				continue
			}
			if err := b.deleteShareStates(ctx, shareStateKeys(img, g.Group, topics.IDs, topics.All)); err != nil {
				// The group is gone, its state not: say so rather than answer NONE.
				b.logger.Warn("share group deleted, deleting its share state failed", "group", g.Group, "err", err)
				g.ErrorCode = shareErrorCode(err)
			}
		}
		out <- protocol.Response{Body: resp}
	})
	return out
}

func (b *Broker) handleOffsetDelete(req *protocol.Request) <-chan protocol.Response {
	return relayGroupResponse(b.groups.OffsetDelete(req.Body.(*kmsg.OffsetDeleteRequest)))
}
