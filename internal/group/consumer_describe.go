package group

import (
	"fmt"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe handles a ConsumerGroupDescribe request (v0–v1). A group that
// is unknown, or not a consumer group, answers GROUP_ID_NOT_FOUND. The answer is sent
// once what it shows is committed (committedRead).
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) <-chan *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
	ch := make(chan *kmsg.ConsumerGroupDescribeResponse, 1)
	describeCommitted(c, req.Groups, resp.Groups,
		func(id string) kmsg.ConsumerGroupDescribeResponseGroup { return c.describeConsumerGroupLocked(req, id) },
		func(id, msg string) kmsg.ConsumerGroupDescribeResponseGroup {
			out := kmsg.NewConsumerGroupDescribeResponseGroup()
			out.Group, out.ErrorCode, out.ErrorMessage = id, kerrNotCoordinator, &msg
			return out
		},
		func() { ch <- resp })
	return ch
}

// describeCommitted sets out[i] to describe(ids[i]), under the mutex for one group at
// a time, and calls send once what they show is committed (committedRead); a group
// whose partition failed a write meanwhile is set to failed(id, why) instead.
func describeCommitted[G any](c *Coordinator, ids []string, out []G, describe func(id string) G, failed func(id, why string) G, send func()) {
	r := &committedRead{pending: 1, send: send}
	for i, id := range ids {
		c.mu.Lock()
		out[i] = describe(id)
		c.awaitCommittedLocked(r, id, func(why string) { out[i] = failed(id, why) })
		c.mu.Unlock()
	}
	c.mu.Lock()
	r.doneLocked()
	c.mu.Unlock()
}

// committedRead holds a describe's answer until what it read is committed. The
// describes read a group's state in memory, which a consumer or share group's
// heartbeat changes as soon as its records are queued (consumer_write.go), before they
// are committed; Kafka's describes read the state at the partition's last committed
// offset instead, so that nothing they show is lost by a coordinator failover. Here
// the answer waits for the writes queued on the partitions it read until it read them
// (a write without records waits for the ones before it); a group whose partition
// failed a write in between is answered NOT_COORDINATOR, as what it showed may be
// gone, and clients retry it at the new coordinator.
type committedRead struct {
	pending int // under the coordinator's mutex; the request holds one until it is read
	send    func()
}

// awaitCommittedLocked makes r wait for the writes queued on groupID's partition; failed
// replaces the group's answer when one of them failed.
func (c *Coordinator) awaitCommittedLocked(r *committedRead, groupID string, failed func(msg string)) {
	part := c.mu.partitions[c.PartitionFor(groupID)]
	if part == nil || part.loading {
		return // answered with the coordinator's error: nothing was read
	}
	r.pending++
	c.appendLocked(part, nil, nil, func(err error) {
		if err != nil {
			failed(fmt.Sprintf("group %q changed in a write that was not committed (%v): ask its coordinator again", groupID, err))
		}
		r.doneLocked()
	})
}

func (r *committedRead) doneLocked() {
	if r.pending--; r.pending == 0 {
		r.send()
	}
}

// describeConsumerGroupLocked answers ConsumerGroupDescribe for one group.
func (c *Coordinator) describeConsumerGroupLocked(req *kmsg.ConsumerGroupDescribeRequest, id string) kmsg.ConsumerGroupDescribeResponseGroup {
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
			dm.MemberType = 1 // consumer protocol
			if m.classic != nil {
				dm.MemberType = 0 // classic protocol
			}
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
