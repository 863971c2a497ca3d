package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupAuthorizedOperations is the bit field of the ACL operations on a group (READ,
// DELETE, DESCRIBE), reported when DescribeGroups asks for them.
const groupAuthorizedOperations = 1<<3 | 1<<6 | 1<<8

// DescribeGroups handles a DescribeGroups request (v0–v6). A group this node
// coordinates but does not know is reported Dead, as Kafka does; so is a consumer
// group (KIP-848); both with GROUP_ID_NOT_FOUND from v6.
//
// The lock is taken for one group at a time, so that a request naming many groups
// does not hold off the coordinator's other work until all are described.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeGroup(req, id))
	}
	return resp
}

// describeGroup answers DescribeGroups for one group.
func (c *Coordinator) describeGroup(req *kmsg.DescribeGroupsRequest, id string) kmsg.DescribeGroupsResponseGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := kmsg.NewDescribeGroupsResponseGroup()
	out.Group = id
	if req.Version >= 3 && req.IncludeAuthorizedOperations {
		out.AuthorizedOperations = groupAuthorizedOperations
	}
	part, code := c.partitionOfLocked(id)
	if code != kerrNone {
		out.ErrorCode = code
		return out
	}
	g := part.groups[id]
	if g == nil {
		// Kafka answers Dead, with GROUP_ID_NOT_FOUND from v6 (KIP-1043).
		out.State = StateDead.String()
		if req.Version >= 6 {
			out.ErrorCode = kerrGroupIDNotFound
			out.ErrorMessage = strPtr(fmt.Sprintf("group %q does not exist", id))
		}
		return out
	}
	if g.consumer != nil || g.share != nil {
		// Described by ConsumerGroupDescribe or ShareGroupDescribe; Kafka answers
		// Dead here, with GROUP_ID_NOT_FOUND from v6.
		out.State = StateDead.String()
		if req.Version >= 6 {
			out.ErrorCode = kerrGroupIDNotFound
			out.ErrorMessage = strPtr("Group " + id + " is not a classic group.")
		}
		return out
	}
	out.State = g.state.String()
	out.ProtocolType = g.protocolType
	if g.state == StateStable {
		out.Protocol = g.protocol
	}
	for _, mid := range g.order {
		m := g.members[mid]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		if m.static {
			dm.InstanceID = strPtr(m.instanceID)
		}
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.ProtocolMetadata = []byte{}
		dm.MemberAssignment = []byte{}
		if g.state == StateStable {
			dm.ProtocolMetadata = m.metadataFor(g.protocol)
			if m.assignment != nil {
				dm.MemberAssignment = m.assignment
			}
		}
		out.Members = append(out.Members, dm)
	}
	return out
}

// ListGroups handles a ListGroups request (v0–v5): the groups of every loaded
// partition, filtered by state (v4+) and type (v5+: "classic" or "consumer").
// While a partition loads the answer carries COORDINATOR_LOAD_IN_PROGRESS.
// The lock is taken per chunk of groups (eachGroup).
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	matches := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	if c.eachGroup(func(_ *partition, g *group) {
		lg := listedGroup(g)
		if lg.GroupState == StateDead.String() ||
			req.Version >= 4 && !matches(req.StatesFilter, lg.GroupState) ||
			req.Version >= 5 && !matches(req.TypesFilter, lg.GroupType) {
			return
		}
		resp.Groups = append(resp.Groups, lg)
	}) {
		resp.ErrorCode = kerrCoordinatorLoadInProgress
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return resp
}

// listChunk is how many groups eachGroup visits per taking of the coordinator's lock.
const listChunk = 1000

// eachGroup calls visit, with c.mu held, for each group of every loaded partition,
// once, and answers whether a partition was loading. It takes the lock per partition
// to copy the partition's group ids, then per listChunk groups, so that listing many
// groups does not hold off every other group's requests: a group created meanwhile
// may be missed.
func (c *Coordinator) eachGroup(visit func(part *partition, g *group)) (loading bool) {
	c.mu.Lock()
	parts := slices.Collect(maps.Values(c.mu.partitions))
	c.mu.Unlock()
	for _, part := range parts {
		ids, partLoading := c.groupIDsOf(part)
		loading = loading || partLoading
		for chunk := range slices.Chunk(ids, listChunk) {
			c.mu.Lock()
			for _, id := range chunk {
				if c.mu.partitions[part.id] != part {
					break // unloaded meanwhile: its groups are no longer served here
				}
				if g := part.groups[id]; g != nil {
					visit(part, g)
				}
			}
			c.mu.Unlock()
		}
	}
	return loading
}

// groupIDsOf returns the ids of a partition's groups, or loading when the partition
// is loading (nil when it is no longer served here).
func (c *Coordinator) groupIDsOf(part *partition) (ids []string, loading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.partitions[part.id] != part {
		return nil, false
	}
	if part.loading {
		return nil, true
	}
	return slices.Collect(maps.Keys(part.groups)), false
}

// listedGroup is a group as ListGroups shows it. The caller holds c.mu.
func listedGroup(g *group) kmsg.ListGroupsResponseGroup {
	lg := kmsg.NewListGroupsResponseGroup()
	lg.Group = g.id
	lg.ProtocolType, lg.GroupState, lg.GroupType = g.kind()
	return lg
}

// kind is how ListGroups and the summaries name a group: its protocol type, state and
// type (classic, consumer or share). The caller holds c.mu.
func (g *group) kind() (protocolType, state, typ string) {
	switch {
	case g.consumer != nil:
		return consumerProtocolType, g.consumer.stateName(), "consumer"
	case g.share != nil:
		return "share", g.share.stateName(), "share"
	}
	return g.protocolType, g.state.String(), "classic"
}

// DeleteGroups handles a DeleteGroups request (v0–v2). Only groups without members
// can be deleted (NON_EMPTY_GROUP otherwise); their offsets go with them. The channel
// receives exactly one response, once the tombstones are committed.
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest) <-chan *kmsg.DeleteGroupsResponse {
	ch, _ := c.DeleteGroupsWithShareTopics(req)
	return ch
}

// ShareTopics are the topics a share group may hold share state on (ShareStateTopics).
type ShareTopics struct {
	IDs []TopicID
	All bool // a group recorded before Samsa kept them: any topic
}

// DeleteGroupsWithShareTopics is DeleteGroups that also returns, for each share group
// it decided to delete, the topics its share state may be on, as they were when it
// decided (the group takes no change after that).
func (c *Coordinator) DeleteGroupsWithShareTopics(req *kmsg.DeleteGroupsRequest) (<-chan *kmsg.DeleteGroupsResponse, map[string]ShareTopics) {
	ch := make(chan *kmsg.DeleteGroupsResponse, 1)
	shares := map[string]ShareTopics{}
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		r := kmsg.NewDeleteGroupsResponseGroup()
		r.Group = id
		resp.Groups = append(resp.Groups, r)
	}
	now := c.clock.Now()
	pending := 1 // guarded by c.mu; released after the loop
	finish := func() {
		pending--
		if pending == 0 {
			ch <- resp
		}
	}
	// The lock is taken for one group at a time, as DescribeGroups does.
	deleteOne := func(r *kmsg.DeleteGroupsResponseGroup) {
		c.mu.Lock()
		defer c.mu.Unlock()
		id := r.Group
		part, code := c.partitionOfLocked(id)
		if code != kerrNone {
			r.ErrorCode = code
			return
		}
		g := part.groups[id]
		switch {
		case g == nil || g.state == StateDead:
			r.ErrorCode = kerrGroupIDNotFound
		case g.state != StateEmpty || g.consumer != nil && len(g.consumer.members) > 0 || g.share != nil && len(g.share.members) > 0:
			r.ErrorCode = kerrNonEmptyGroup
		default:
			if g.share != nil {
				ids, all := g.share.stateTopics()
				shares[id] = ShareTopics{IDs: ids, All: all}
			}
			pending++
			c.deleteGroupLocked(part, g, now, func(code int16) {
				r.ErrorCode = code
				finish()
			})
		}
	}
	for i := range resp.Groups {
		deleteOne(&resp.Groups[i])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	finish()
	return ch, shares
}

func (c *Coordinator) deleteGroupLocked(part *partition, g *group, now time.Time, done func(code int16)) {
	tps := g.txnPartitions() // deleted with the group, as in Kafka
	for tp := range g.offsets {
		tps = append(tps, tp)
	}
	for tp := range g.queued {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTopicPartition)
	g.pending = map[string]time.Time{}
	c.removeOffsetsLocked(part, g, tps, now, done)
}

// MemberSummary describes one group member.
type MemberSummary struct {
	MemberID   string
	InstanceID string // "" for dynamic members
	ClientID   string
	ClientHost string
}

// GroupSummary describes one group, for metrics, lag and the CLI.
type GroupSummary struct {
	Group        string
	Partition    int32  // of __consumer_offsets
	Type         string // "classic" or "consumer" (KIP-848)
	State        string
	ProtocolType string
	Protocol     string
	Generation   int32
	Members      []MemberSummary
}

// Groups lists the groups of every loaded partition, sorted by name. The lock is
// taken per chunk of groups (eachGroup).
func (c *Coordinator) Groups() []GroupSummary {
	var out []GroupSummary
	c.eachGroup(func(part *partition, g *group) {
		switch {
		case g.consumer != nil:
			out = append(out, consumerSummary(g, part.id))
		case g.share != nil:
			out = append(out, shareSummary(g, part.id))
		default:
			s := GroupSummary{Group: g.id, Partition: part.id, Protocol: g.protocol, Generation: g.generation}
			s.ProtocolType, s.State, s.Type = g.kind()
			for _, id := range g.order {
				m := g.members[id]
				s.Members = append(s.Members, MemberSummary{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost})
			}
			out = append(out, s)
		}
	})
	slices.SortFunc(out, func(a, b GroupSummary) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// CommittedOffsets returns a copy of a group's committed offsets; nil when the group
// is unknown here.
func (c *Coordinator) CommittedOffsets(group string) map[TopicPartition]CommittedOffset {
	c.mu.Lock()
	defer c.mu.Unlock()
	part, code := c.partitionOfLocked(group)
	if code != kerrNone {
		return nil
	}
	g := part.groups[group]
	if g == nil || g.state == StateDead {
		return nil
	}
	out := make(map[TopicPartition]CommittedOffset, len(g.offsets))
	for tp, o := range g.offsets {
		out[tp] = o
	}
	return out
}

func consumerSummary(g *group, partition int32) GroupSummary {
	cg := g.consumer
	s := GroupSummary{Group: g.id, Partition: partition, Generation: cg.epoch}
	s.ProtocolType, s.State, s.Type = g.kind()
	for _, id := range cg.memberIDs() {
		m := cg.members[id]
		s.Members = append(s.Members, MemberSummary{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost})
	}
	return s
}

func shareSummary(g *group, partition int32) GroupSummary {
	sg := g.share
	s := GroupSummary{Group: g.id, Partition: partition, Generation: sg.epoch}
	s.ProtocolType, s.State, s.Type = g.kind()
	for _, id := range slices.Sorted(maps.Keys(sg.members)) {
		m := sg.members[id]
		s.Members = append(s.Members, MemberSummary{MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost})
	}
	return s
}
