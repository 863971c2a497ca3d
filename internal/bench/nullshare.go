package bench

import (
	"encoding/binary"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The null broker's share groups (KIP-932): enough for a share consumer to run at its
// own ceiling. Every member of every group is assigned every partition of the topics
// it subscribes to; a ShareFetch acquires whole copies of the canned batch from the
// partition's next offset (shared by all members, so members get disjoint records),
// as many as reach MaxRecords (Kafka's batch-optimized mode), and acknowledgements
// are accepted without being checked. Nothing is redelivered.

// nullShareLockMillis is the acquisition lock duration the null broker reports.
const nullShareLockMillis = 30_000

func (b *NullBroker) findCoordinator(req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.NodeID, resp.Host, resp.Port = 0, b.host, b.port
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, k := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = k, 0, b.host, b.port
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

// shareGroupHeartbeat keeps every member in the group at epoch 1 (a member joining
// with epoch 0 is given 1; -1 leaves) and, when the heartbeat names its topics,
// assigns it all of their partitions.
func (b *NullBroker) shareGroupHeartbeat(req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.MemberID = kmsg.StringPtr(req.MemberID)
	resp.HeartbeatIntervalMillis = 5000
	resp.MemberEpoch = max(req.MemberEpoch, 1)
	if req.MemberEpoch < 0 {
		resp.MemberEpoch = req.MemberEpoch
		return resp
	}
	if req.SubscribedTopicNames == nil {
		return resp // unchanged
	}
	assignment := kmsg.NewShareGroupHeartbeatResponseAssignment()
	for _, name := range req.SubscribedTopicNames {
		t, _ := b.topic(name, true, 0)
		tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		tp.TopicID = t.id
		for p := range len(t.next) {
			tp.Partitions = append(tp.Partitions, int32(p))
		}
		assignment.TopicPartitions = append(assignment.TopicPartitions, tp)
	}
	resp.Assignment = &assignment
	return resp
}

// shareFetch answers from the connection's share session: epoch 0 opens it with the
// partitions named, later epochs add and forget partitions, -1 closes it.
func (b *NullBroker) shareFetch(cs *connState, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	resp := kmsg.NewPtrShareFetchResponse()
	resp.AcquisitionLockTimeoutMillis = nullShareLockMillis
	switch {
	case req.ShareSessionEpoch < 0:
		cs.share = nil
		return resp
	case req.ShareSessionEpoch == 0 || cs.share == nil:
		cs.share = make(map[[16]byte][]int32)
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if !slices.Contains(cs.share[rt.TopicID], rp.Partition) {
				cs.share[rt.TopicID] = append(cs.share[rt.TopicID], rp.Partition)
			}
		}
	}
	for _, ft := range req.ForgottenTopicsData {
		kept := cs.share[ft.TopicID][:0]
		for _, p := range cs.share[ft.TopicID] {
			if !slices.Contains(ft.Partitions, p) {
				kept = append(kept, p)
			}
		}
		cs.share[ft.TopicID] = kept
	}

	maxRecords := int64(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = 500
	}
	remaining := int64(req.MaxBytes)
	if remaining <= 0 {
		remaining = 1 << 31
	}
	batchLen := int64(len(b.canned.bytes))
	records := cs.shareRecords[:0]
	for id, partitions := range cs.share {
		t := b.topicByID(id)
		rt := kmsg.NewShareFetchResponseTopic()
		rt.TopicID = id
		for _, p := range partitions {
			rp := kmsg.NewShareFetchResponseTopicPartition()
			rp.Partition = p
			if t == nil || p < 0 || int(p) >= len(t.next) {
				rp.ErrorCode = errCodeUnknownTopicOrPartition
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			batches := min((maxRecords+b.canned.records-1)/b.canned.records, remaining/batchLen)
			if batches <= 0 && len(records) == 0 {
				batches = 1 // like Kafka, at least one whole batch so the consumer progresses
			}
			if batches <= 0 {
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			remaining -= batches * batchLen
			n := batches * b.canned.records
			first := t.next[p].Add(n) - n
			start := len(records)
			for k := range batches {
				records = append(records, b.canned.bytes...)
				binary.BigEndian.PutUint64(records[start+int(k*batchLen):], uint64(first+k*b.canned.records))
			}
			rp.Records = records[start:]
			acq := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			acq.FirstOffset, acq.LastOffset, acq.DeliveryCount = first, first+n-1, 1
			rp.AcquiredRecords = append(rp.AcquiredRecords, acq)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	cs.shareRecords = records
	return resp
}

// shareAcknowledge accepts every acknowledgement.
func (b *NullBroker) shareAcknowledge(req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := kmsg.NewPtrShareAcknowledgeResponse()
	resp.AcquisitionLockTimeoutMillis = nullShareLockMillis
	for _, rt := range req.Topics {
		t := kmsg.NewShareAcknowledgeResponseTopic()
		t.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewShareAcknowledgeResponseTopicPartition()
			p.Partition = rp.Partition
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
