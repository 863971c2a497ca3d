package broker

// AlterPartition (key 56), versions 0–3, on the controller listener.
//
// A partition leader asks the active controller to change the ISR (and, after an
// unclean election, to mark the partition recovered), naming the leader and
// partition epochs it acts on; v2 names topics by id, v3 gives each ISR member's
// broker epoch (KIP-903). The controller validates as Kafka does —
// FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA (fenced, shutting
// down or re-registered members, KIP-841/903; OPERATION_NOT_ATTEMPTED before v2),
// INVALID_REQUEST (not the leader, members outside the replicas, an ISR without the
// leader, a recovering partition's ISR of more than one), NOT_CONTROLLER (epochs
// newer than this controller knows), NEW_LEADER_ELECTED (FENCED_LEADER_EPOCH before
// v2) when the change completed a reassignment that moved the leadership — and
// answers with the committed state. STALE_BROKER_EPOCH for the whole request when
// the leader is not registered at its epoch. internal/controller's Channel sends it.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

func init() { registerController(kmsg.AlterPartition, 0, 3, (*Broker).serveAlterPartition) }

func (b *Broker) serveAlterPartition(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.AlterPartitionRequest)
	resp := kmsg.NewPtrAlterPartitionResponse()
	resp.SetVersion(r.Version)
	var items []controller.AlterPartitionItem
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			it := controller.AlterPartitionItem{
				Partition: p.Partition, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				LeaderRecoveryState: metadata.LeaderRecoveryState(p.LeaderRecoveryState),
			}
			if r.Version >= 2 {
				it.TopicID = metadata.TopicID(t.TopicID)
			} else {
				it.Topic = t.Topic
			}
			if r.Version >= 3 {
				for _, m := range p.NewEpochISR {
					it.NewISR = append(it.NewISR, controller.ISRMember{BrokerID: m.BrokerID, BrokerEpoch: m.BrokerEpoch})
				}
			} else {
				for _, id := range p.NewISR {
					it.NewISR = append(it.NewISR, controller.ISRMember{BrokerID: id, BrokerEpoch: -1})
				}
			}
			items = append(items, it)
		}
	}
	results, err := b.controller.AlterPartition(ctx, r.BrokerID, r.BrokerEpoch, items)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp
	}
	i := 0
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.Topic, rt.TopidID = t.Topic, t.TopicID
		for range t.Partitions {
			res := results[i]
			i++
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition = res.Partition
			if res.Err != nil {
				rp.ErrorCode = alterPartitionErrorCode(res.Err, r.Version)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			s := res.State
			rp.LeaderID, rp.LeaderEpoch, rp.PartitionEpoch = s.Leader, s.LeaderEpoch, s.PartitionEpoch
			rp.ISR, rp.LeaderRecoveryState = s.ISR, int8(s.LeaderRecoveryState)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// alterPartitionErrorCode uses the codes older versions know, as Kafka does.
func alterPartitionErrorCode(err error, version int16) int16 {
	if version < 2 {
		switch {
		case errors.Is(err, controller.ErrIneligibleReplica):
			return kerr.OperationNotAttempted.Code
		case errors.Is(err, controller.ErrNewLeaderElected):
			return kerr.FencedLeaderEpoch.Code
		case errors.Is(err, controller.ErrUnknownTopicID):
			return kerr.UnknownTopicOrPartition.Code
		}
	}
	return errorCode(err)
}
