package group

import (
	"fmt"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe handles a ConsumerGroupDescribe request (v0–v1). A group that
// is unknown, or not a consumer group, answers GROUP_ID_NOT_FOUND.
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeConsumerGroup(req, id))
	}
	return resp
}

// describeConsumerGroup answers ConsumerGroupDescribe for one group.
func (c *Coordinator) describeConsumerGroup(req *kmsg.ConsumerGroupDescribeRequest, id string) kmsg.ConsumerGroupDescribeResponseGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := kmsg.NewConsumerGroupDescribeResponseGroup()
	out.Group = id
	if req.IncludeAuthorizedOperations {
		out.AuthorizedOperations = groupAuthorizedOperations
	}
	g, code, msg := c.groupOfTypeLocked(id, "consumer")
	if code != kerrNone {
		out.ErrorCode, out.ErrorMessage = code, msg
		return out
	}
	topics := c.currentTopics()
	cg := g.consumer
	out.State = cg.stateName()
	out.Epoch = cg.epoch
	out.AssignmentEpoch = cg.targetEpoch
	out.AssignorName = c.groupAssignor(cg)
	for _, mid := range cg.memberIDs() {
		m := cg.members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		if m.static() {
			dm.InstanceID = strPtr(m.instanceID)
		}
		if m.rackID != "" {
			dm.RackID = strPtr(m.rackID)
		}
		dm.MemberEpoch = m.epoch
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.SubscribedTopics = m.subscribedNames
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.subscribedRegex != "" {
			dm.SubscribedTopicRegex = strPtr(m.subscribedRegex)
		}
		dm.Assignment = describedAssignment(m.assigned, topics)
		dm.TargetAssignment = describedAssignment(m.target, topics)
		if req.Version >= 1 {
			dm.MemberType = 1 // consumer protocol (0 would be a classic member)
		}
		out.Members = append(out.Members, dm)
	}
	return out
}
func describedAssignment(a Assignment, topics *Topics) kmsg.Assignment {
	out := kmsg.Assignment{TopicPartitions: []kmsg.AssignmentTopicPartition{}}
	for _, t := range sortedTopicIDs(a) {
		out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{
			TopicID: t, Topic: topics.ByID[t], Partitions: append([]int32(nil), a[t]...),
		})
	}
	return out
}

// groupOfTypeLocked finds a group of a type ("consumer" or "share") for the describe
// APIs: the coordinator's error, or GROUP_ID_NOT_FOUND with a message saying why.
func (c *Coordinator) groupOfTypeLocked(id, typ string) (*group, int16, *string) {
	part, code := c.partitionOfLocked(id)
	if code != kerrNone {
		return nil, code, nil
	}
	g := part.groups[id]
	switch {
	case g == nil:
		return nil, kerrGroupIDNotFound, strPtr(fmt.Sprintf("group %q does not exist", id))
	case typ == "consumer" && g.consumer == nil, typ == "share" && g.share == nil:
		return nil, kerrGroupIDNotFound, strPtr("Group " + id + " is not a " + typ + " group.")
	}
	return g, kerrNone, nil
}
