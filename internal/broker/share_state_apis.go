package broker

// The share coordinator's APIs (KIP-932), inter-broker: the leader of a topic
// partition reads and writes the state of its share partitions on the leader of the
// state's __share_group_state partition (share_state.go).
//
//	InitializeShareGroupState  (83) v0    replaces the state with an empty window at
//	                                      StartOffset under StateEpoch
//	ReadShareGroupState        (84) v0    the start offset, state epoch and state
//	                                      batches; records a newer LeaderEpoch
//	WriteShareGroupState       (85) v0–1  lays the state batches over the stored ones
//	                                      and moves the start offset
//	DeleteShareGroupState      (86) v0    removes the state, keeping the next state
//	                                      epoch (start offset -1)
//	ReadShareGroupStateSummary (87) v0–1  start offset, state and leader epochs, and
//	                                      from v1 the delivery-complete count
//
// Each partition answers NOT_COORDINATOR when this node does not lead its state's
// partition, COORDINATOR_NOT_AVAILABLE when the state cannot be loaded or written
// (no __share_group_state yet, too few in-sync replicas), REQUEST_TIMED_OUT when the
// write was not committed in time (it may still be), FENCED_LEADER_EPOCH for a leader
// epoch older than the stored one, FENCED_STATE_EPOCH for a write or initialization
// of an older state epoch, UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata
// does not have, and INVALID_REQUEST without a group id or for a negative partition.
// A share partition without state reads as start offset -1 and state epoch 0, as in
// Kafka, and once its state was deleted as start offset -1 and the next state epoch
// (Kafka forgets it); its summary reads the same. WriteShareGroupState v1's
// DeliveryCompleteCount is not needed: the coordinator counts from the batches.

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/share"
)

func init() {
	// Each answers from its own goroutine (later): they wait for the state partition's
	// writes to replicate, or for its load, and the share partition leaders of one
	// broker send all of theirs on one connection.
	register(kmsg.InitializeShareGroupState, 0, 0, later((*Broker).handleInitializeShareGroupState))
	register(kmsg.ReadShareGroupState, 0, 0, later((*Broker).handleReadShareGroupState))
	register(kmsg.WriteShareGroupState, 0, 1, later((*Broker).handleWriteShareGroupState))
	register(kmsg.DeleteShareGroupState, 0, 0, later((*Broker).handleDeleteShareGroupState))
	register(kmsg.ReadShareGroupStateSummary, 0, 1, later((*Broker).handleReadShareGroupStateSummary))
}

// shareStateCheck is the code a partition of a share-coordinator request answers
// before its state is looked at (0: go on). allowed is whether the caller may act as a
// broker (CLUSTER_ACTION on the cluster, which Kafka asks of these inter-broker
// requests); knownTopic asks that the metadata have the partition.
func shareStateCheck(allowed bool, img *metadata.Image, groupID string, topicID [16]byte, partition int32, knownTopic bool) (int16, *string) {
	switch {
	case !allowed:
		return kerr.ClusterAuthorizationFailed.Code, nil
	case groupID == "":
		return kerr.InvalidRequest.Code, kmsg.StringPtr("The group id cannot be empty.")
	case partition < 0:
		return kerr.InvalidRequest.Code, kmsg.StringPtr("The partition id cannot be a negative number.")
	}
	if knownTopic {
		t, ok := img.TopicByID(metadata.TopicID(topicID))
		if !ok || int(partition) >= len(t.Partitions) {
			return kerr.UnknownTopicOrPartition.Code, nil
		}
	}
	return 0, nil
}

// shareStateResult fills a partition's error fields from err.
func shareStateResult(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	return shareCoordinatorErrorCode(err), errorMessage(err)
}

// shareStateOps are the state operations of one share-coordinator request, run once
// its answer is laid out: each key's in request order, different keys side by side
// (forEachShareKey), as each waits for its own replicated write or its partition's
// load — a request of many partitions takes about as long as its slowest, as in
// Kafka's coordinator, not as long as all of them in a row.
type shareStateOps struct {
	keys  []share.Key
	byKey map[share.Key][]func()
}

func (o *shareStateOps) add(k share.Key, op func()) {
	if o.byKey == nil {
		o.byKey = map[share.Key][]func(){}
	}
	if _, ok := o.byKey[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.byKey[k] = append(o.byKey[k], op)
}

func (o *shareStateOps) run() {
	forEachShareKey(o.keys, func(k share.Key) {
		for _, op := range o.byKey[k] {
			op()
		}
	})
}

// shareStateContext bounds a share-coordinator request: its writes wait for the
// state's in-sync replicas, as a commit does.
func (b *Broker) shareStateContext() (context.Context, context.CancelFunc) {
	return b.requestContext(b.cfg.OffsetsCommitTimeoutMs)
}

func (b *Broker) handleInitializeShareGroupState(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.InitializeShareGroupStateRequest)
	resp := r.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	ctx, cancel := b.shareStateContext()
	defer cancel()
	img, allowed := b.image(), b.authorizeCluster(req, auth.OpClusterAction)
	var ops shareStateOps
	for ti, rt := range r.Topics {
		ot := kmsg.NewInitializeShareGroupStateResponseTopic()
		ot.TopicID = rt.TopicID
		for pi, rp := range rt.Partitions {
			op := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			op.Partition = rp.Partition
			op.ErrorCode, op.ErrorMessage = shareStateCheck(allowed, img, r.GroupID, rt.TopicID, rp.Partition, true)
			if op.ErrorCode == 0 {
				k := share.Key{Group: r.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
				ops.add(k, func() {
					op := &resp.Topics[ti].Partitions[pi]
					op.ErrorCode, op.ErrorMessage = shareStateResult(b.shareState.initializeState(ctx, k, rp.StateEpoch, rp.StartOffset))
				})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	ops.run()
	return reply(resp)
}

func (b *Broker) handleReadShareGroupState(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ReadShareGroupStateRequest)
	resp := r.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	ctx, cancel := b.shareStateContext()
	defer cancel()
	img, allowed := b.image(), b.authorizeCluster(req, auth.OpClusterAction)
	var ops shareStateOps
	for ti, rt := range r.Topics {
		ot := kmsg.NewReadShareGroupStateResponseTopic()
		ot.TopicID = rt.TopicID
		for pi, rp := range rt.Partitions {
			op := kmsg.NewReadShareGroupStateResponseTopicPartition()
			op.Partition, op.StartOffset = rp.Partition, -1
			op.ErrorCode, op.ErrorMessage = shareStateCheck(allowed, img, r.GroupID, rt.TopicID, rp.Partition, true)
			if op.ErrorCode == 0 {
				k := share.Key{Group: r.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
				ops.add(k, func() {
					op := &resp.Topics[ti].Partitions[pi]
					snap, found, err := b.shareState.readState(ctx, k, rp.LeaderEpoch)
					op.ErrorCode, op.ErrorMessage = shareStateResult(err)
					if err == nil && found {
						op.StateEpoch, op.StartOffset = snap.StateEpoch, snap.Start
						for _, run := range snap.Runs {
							op.StateBatches = append(op.StateBatches, kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
								FirstOffset: run.First, LastOffset: run.Last, DeliveryState: int8(run.State), DeliveryCount: run.Deliveries,
							})
						}
					}
				})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	ops.run()
	return reply(resp)
}

func (b *Broker) handleWriteShareGroupState(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.WriteShareGroupStateRequest)
	resp := r.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	ctx, cancel := b.shareStateContext()
	defer cancel()
	img, allowed := b.image(), b.authorizeCluster(req, auth.OpClusterAction)
	var ops shareStateOps
	for ti, rt := range r.Topics {
		ot := kmsg.NewWriteShareGroupStateResponseTopic()
		ot.TopicID = rt.TopicID
		for pi, rp := range rt.Partitions {
			op := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			op.Partition = rp.Partition
			op.ErrorCode, op.ErrorMessage = shareStateCheck(allowed, img, r.GroupID, rt.TopicID, rp.Partition, true)
			if op.ErrorCode == 0 {
				op.ErrorCode, op.ErrorMessage = shareWriteCheck(rp.StateBatches)
			}
			if op.ErrorCode == 0 {
				k := share.Key{Group: r.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
				runs := make([]share.StateRun, 0, len(rp.StateBatches))
				for _, sb := range rp.StateBatches {
					runs = append(runs, share.StateRun{First: sb.FirstOffset, Last: sb.LastOffset, State: uint8(sb.DeliveryState), Deliveries: sb.DeliveryCount})
				}
				ops.add(k, func() {
					op := &resp.Topics[ti].Partitions[pi]
					op.ErrorCode, op.ErrorMessage = shareStateResult(b.shareState.writeState(ctx, k, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, runs))
				})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	ops.run()
	return reply(resp)
}

// shareWriteCheck refuses state batches that are not ranges of a known state.
func shareWriteCheck(batches []kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch) (int16, *string) {
	for _, sb := range batches {
		switch {
		case sb.LastOffset < sb.FirstOffset || sb.FirstOffset < 0:
			return kerr.InvalidRequest.Code, kmsg.StringPtr("A state batch's last offset is before its first.")
		case sb.LastOffset == math.MaxInt64:
			return kerr.InvalidRequest.Code, kmsg.StringPtr("A state batch's last offset is the largest int64, past any offset a log can hold.")
		case uint8(sb.DeliveryState) != share.Available && uint8(sb.DeliveryState) != share.Acknowledged && uint8(sb.DeliveryState) != share.Archived:
			return kerr.InvalidRequest.Code, kmsg.StringPtr("A state batch's delivery state is not 0 (available), 2 (acknowledged) or 4 (archived).")
		}
	}
	return 0, nil
}

func (b *Broker) handleDeleteShareGroupState(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DeleteShareGroupStateRequest)
	resp := r.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	ctx, cancel := b.shareStateContext()
	defer cancel()
	img, allowed := b.image(), b.authorizeCluster(req, auth.OpClusterAction)
	var ops shareStateOps
	for ti, rt := range r.Topics {
		ot := kmsg.NewDeleteShareGroupStateResponseTopic()
		ot.TopicID = rt.TopicID
		for pi, rp := range rt.Partitions {
			op := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			op.Partition = rp.Partition
			// The state of a deleted topic's partition can still be deleted.
			op.ErrorCode, op.ErrorMessage = shareStateCheck(allowed, img, r.GroupID, rt.TopicID, rp.Partition, false)
			if op.ErrorCode == 0 {
				k := share.Key{Group: r.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
				ops.add(k, func() {
					op := &resp.Topics[ti].Partitions[pi]
					op.ErrorCode, op.ErrorMessage = shareStateResult(b.shareState.deleteState(ctx, k))
				})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	ops.run()
	return reply(resp)
}

func (b *Broker) handleReadShareGroupStateSummary(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := r.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	ctx, cancel := b.shareStateContext()
	defer cancel()
	img, allowed := b.image(), b.authorizeCluster(req, auth.OpClusterAction)
	var ops shareStateOps
	for ti, rt := range r.Topics {
		ot := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		ot.TopicID = rt.TopicID
		for pi, rp := range rt.Partitions {
			op := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			op.Partition, op.StartOffset, op.LeaderEpoch = rp.Partition, -1, -1
			op.ErrorCode, op.ErrorMessage = shareStateCheck(allowed, img, r.GroupID, rt.TopicID, rp.Partition, true)
			if op.ErrorCode == 0 {
				k := share.Key{Group: r.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
				ops.add(k, func() {
					op := &resp.Topics[ti].Partitions[pi]
					snap, found, err := b.shareState.summary(ctx, k, rp.LeaderEpoch)
					op.ErrorCode, op.ErrorMessage = shareStateResult(err)
					if err == nil && found {
						op.StateEpoch, op.LeaderEpoch, op.StartOffset = snap.StateEpoch, snap.LeaderEpoch, snap.Start
						op.DeliveryCompleteCount = int32(min(snap.DeliveryComplete(), 1<<31-1))
					}
				})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	ops.run()
	return reply(resp)
}
