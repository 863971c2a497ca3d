package broker

// ShareAcknowledge (key 79), versions 1–2: a share group member acknowledges records
// it acquired through ShareFetch — ACCEPT, RELEASE, REJECT, and RENEW (v2, KIP-1222:
// the lock restarts) — in its share session, whose epoch it carries and advances.
// Epoch -1 closes the session after the acknowledgements, releasing every record the
// member still holds here; epoch 0 is refused (INVALID_SHARE_SESSION_EPOCH): a session
// is opened by ShareFetch. As in Kafka, a partition's batches are applied all or none:
// it answers INVALID_REQUEST for a malformed batch (shareAckCheck: batches out of
// order, a count of types that fits no range, a type out of range, a RENEW without
// IsRenewAck, which v2 adds) and INVALID_RECORD_STATE if a batch names an offset the
// member does not hold (not acquired by it, or its lock expired) or renews while the
// group's share.renew.acknowledge.enable is false; nothing of it applied. The
// answer waits until the changes are durable on the share coordinator, for up to
// shareStoreTimeout while the coordinator moves (share_store.go); a partition whose
// write still failed answers COORDINATOR_NOT_AVAILABLE, its change undone.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/share"
)

func init() {
	register(kmsg.ShareAcknowledge, 1, 2, (*Broker).handleShareAcknowledge)
}

func (b *Broker) handleShareAcknowledge(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ShareAcknowledgeRequest)
	resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if r.GroupID == nil || *r.GroupID == "" || r.MemberID == nil || *r.MemberID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	groupID, member := *r.GroupID, *r.MemberID
	var named []share.Key
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			named = append(named, share.Key{Group: groupID, TopicID: t.TopicID, Partition: p.Partition})
		}
	}
	sess, parts, closing, code := b.shareSessionCache.use(groupID, member, req.ConnID, r.ShareSessionEpoch, nil, nil, false)
	if code != 0 {
		resp.ErrorCode = code
		return reply(resp)
	}
	ctx, cancel := b.requestContext(0)
	defer cancel()
	check := shareAckCheck{b: b, group: groupID, version: r.Version, isRenewAck: r.IsRenewAck}
	for _, t := range r.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			k := share.Key{Group: groupID, TopicID: t.TopicID, Partition: p.Partition}
			var batches []shareAck
			for _, a := range p.AcknowledgementBatches {
				batches = append(batches, shareAck{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes})
			}
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			if sp, err := b.sharePartition(k); err == nil {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = b.nodeID, sp.LeaderEpoch()
			}
			if rp.ErrorCode = check.code(batches); rp.ErrorCode == 0 {
				rp.ErrorCode = b.shareAcknowledge(ctx, k, member, batches)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	switch {
	case closing:
		b.releaseShareSession(ctx, groupID, member, append(parts, named...))
	case sess.ended():
		// The session ended (its connection closed) while its acknowledgements
		// were applied, possibly to partitions loaded again after the group's left
		// memory.
		b.dropIdleShareGroup(groupID)
	}
	return reply(resp)
}
