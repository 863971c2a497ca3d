package broker

// AlterPartitionReassignments (key 45), versions 0–1, and ListPartitionReassignments
// (key 46), version 0; on the client listeners and the controller listener.
//
// A reassignment moves a partition to a new replica list: the controller first adds
// the new replicas to the replica set (they start following and catch up); once all
// of them are in the ISR — the leader reports that with AlterPartition — the next
// ISR change drops the replicas being removed, and a leader that is no longer a
// replica hands over (NEW_LEADER_ELECTED). A null replica list cancels the
// partition's reassignment (NO_REASSIGNMENT_IN_PROGRESS if there is none). In v1,
// AllowReplicationFactorChange=false refuses a replica list of another length
// (INVALID_REPLICATION_FACTOR). ListPartitionReassignments reports the ongoing ones
// with their adding and removing replicas. Brokers forward both to the active
// controller.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.AlterPartitionAssignments, 0, 1, (*Broker).handleAlterPartitionReassignments)
	registerController(kmsg.AlterPartitionAssignments, 0, 1, (*Broker).serveAlterPartitionReassignments)
	register(kmsg.ListPartitionReassignments, 0, 0, (*Broker).handleListPartitionReassignments)
	registerController(kmsg.ListPartitionReassignments, 0, 0, (*Broker).serveListPartitionReassignments)
}

func (b *Broker) handleAlterPartitionReassignments(req *protocol.Request) <-chan protocol.Response {
	return b.forward(req, req.Body.(*kmsg.AlterPartitionAssignmentsRequest).TimeoutMillis, nil)
}

func (b *Broker) handleListPartitionReassignments(req *protocol.Request) <-chan protocol.Response {
	return b.forward(req, req.Body.(*kmsg.ListPartitionReassignmentsRequest).TimeoutMillis, nil)
}

func (b *Broker) serveAlterPartitionReassignments(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	resp.SetVersion(r.Version)
	resp.AllowReplicationFactorChange = r.AllowReplicationFactorChange
	var items []controller.Reassignment
	pre := map[int]error{} // refused before reaching the controller, by item index
	img := b.image()
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if r.Version >= 1 && !r.AllowReplicationFactorChange && p.Replicas != nil {
				if tp, ok := img.Topic(t.Topic); ok && int(p.Partition) < len(tp.Partitions) && p.Partition >= 0 {
					cur := tp.Partitions[p.Partition]
					if rf := len(cur.Replicas) - len(cur.AddingReplicas); rf != len(p.Replicas) {
						pre[len(items)] = fmt.Errorf("%w: %s-%d has %d replicas, the new list %d, and AllowReplicationFactorChange is false",
							controller.ErrInvalidReplicationFactor, t.Topic, p.Partition, rf, len(p.Replicas))
					}
				}
			}
			items = append(items, controller.Reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	var todo []controller.Reassignment
	var todoIndex []int
	for i, it := range items {
		if pre[i] == nil {
			todo = append(todo, it)
			todoIndex = append(todoIndex, i)
		}
	}
	errs := make([]error, len(items))
	for i, err := range pre {
		errs[i] = err
	}
	if len(todo) > 0 {
		results, err := b.controller.AlterReassignments(ctx, todo)
		if err != nil {
			return failedResponse(r, errorCode(err), wireMessage(err))
		}
		for j, e := range results {
			errs[todoIndex[j]] = e
		}
	}
	i := 0
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errorCode(errs[i]), errorMessage(errs[i])
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (b *Broker) serveListPartitionReassignments(_ context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.ListPartitionReassignmentsRequest)
	resp := kmsg.NewPtrListPartitionReassignmentsResponse()
	resp.SetVersion(r.Version)
	var topics map[string][]int32
	if r.Topics != nil {
		topics = map[string][]int32{}
		for _, t := range r.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
	}
	list, err := b.controller.ListReassignments(topics)
	if err != nil {
		return failedResponse(r, errorCode(err), wireMessage(err))
	}
	index := map[string]int{}
	for _, s := range list {
		i := topicSlot(index, &resp.Topics, s.Topic, func() kmsg.ListPartitionReassignmentsResponseTopic {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = s.Topic
			return rt
		})
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = s.Partition, s.Replicas, s.AddingReplicas, s.RemovingReplicas
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
