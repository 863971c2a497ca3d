package group

import (
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// loader replays a __consumer_offsets partition from its start.
type loader struct {
	partition int32
	groups    map[string]*group
	logger    *slog.Logger
	records   int
}

func (l *loader) apply(r Record) error {
	l.records++
	if r.Txn != nil && r.Txn.Marker {
		for _, g := range l.groups {
			g.completeTxn(r.Txn.ProducerID, r.Txn.Commit)
		}
		return nil
	}
	d, err := decodeRecord(r)
	if err != nil {
		l.logger.Warn("skipping corrupt __consumer_offsets record", "partition", l.partition, "err", err)
		return nil
	}
	switch {
	case d.kind == kindOffset && r.Txn != nil:
		if d.offset != nil {
			g := l.groups[d.group]
			if g == nil {
				g = newGroup(d.group, l.partition, time.Time{})
				l.groups[d.group] = g
			}
			g.addTxnOffset(r.Txn.ProducerID, d.tp, *d.offset)
		}
	case d.kind == kindOffset:
		replayOffset(l.groups, l.partition, d.group, d.tp, d.offset)
	case d.kind == kindConsumerGroup || d.kind == kindConsumerMember:
		if err := replayConsumer(l.groups, l.partition, d); err != nil {
			l.logger.Warn("skipping corrupt __consumer_offsets record", "partition", l.partition, "err", err)
		}
	case d.kind == kindShareGroup || d.kind == kindShareMember:
		if err := replayShare(l.groups, l.partition, d); err != nil {
			l.logger.Warn("skipping corrupt __consumer_offsets record", "partition", l.partition, "err", err)
		}
	case d.kind == kindGroup:
		g := l.groups[d.group]
		if d.meta == nil {
			if g != nil {
				offsets := g.offsets
				delete(l.groups, d.group)
				if len(offsets) > 0 || len(g.txnOffsets) > 0 {
					ng := newGroup(d.group, l.partition, time.Time{})
					ng.offsets, ng.txnOffsets, ng.txnSeq = offsets, g.txnOffsets, g.txnSeq
					l.groups[d.group] = ng
				}
			}
			return nil
		}
		if g == nil {
			g = newGroup(d.group, l.partition, time.Time{})
			l.groups[d.group] = g
		}
		setGroupFromValue(g, d.meta)
	}
	return nil
}

// finish turns the replayed records into live groups: groups with members are Stable
// and their members must heartbeat within their session timeout from now.
func (l *loader) finish(now time.Time) map[string]*group {
	for _, g := range l.groups {
		if g.consumer != nil || g.share != nil {
			continue // deadlines: see Coordinator.startConsumerSessionsLocked
		}
		if len(g.members) == 0 {
			g.state = StateEmpty
			g.subscribedTopics = g.computeSubscribedTopics()
			continue
		}
		g.state = StateStable
		if g.stateTime.IsZero() {
			g.stateTime = now
		}
		g.subscribedTopics = g.computeSubscribedTopics()
		for _, m := range g.members {
			m.heartbeatDeadline = now.Add(m.sessionTimeout)
		}
	}
	return l.groups
}

// replayOffset applies one offset record (o == nil: tombstone) to a partition's groups;
// an offset of a group not known yet creates the group (a group that only stores
// offsets, or whose metadata record comes later).
func replayOffset(groups map[string]*group, partition int32, id string, tp TopicPartition, o *CommittedOffset) {
	g := groups[id]
	if o == nil {
		if g != nil {
			delete(g.offsets, tp)
			g.overtakeTxnOffsets(tp, true)
		}
		return
	}
	if g == nil {
		g = newGroup(id, partition, time.Time{})
		groups[id] = g
	}
	g.offsets[tp] = *o
	g.overtakeTxnOffsets(tp, false)
}

// setGroupFromValue replaces a group's membership with a GroupMetadataValue's.
func setGroupFromValue(g *group, v *kmsg.GroupMetadataValue) {
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	g.protocol = ""
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	g.leader = ""
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	g.stateTime = fromMillis(v.CurrentStateTimestamp)
	g.members = map[string]*member{}
	g.order = nil
	g.static = map[string]string{}
	g.supported = map[string]int{}
	g.numAwaitingJoin = 0
	for _, vm := range v.Members {
		m := &member{
			id:               vm.MemberID,
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			rebalanceTimeout: ms(vm.RebalanceTimeoutMillis),
			sessionTimeout:   ms(vm.SessionTimeoutMillis),
			protocolType:     v.ProtocolType,
			protocols:        []protocol{{name: g.protocol, metadata: vm.Subscription}},
			assignment:       vm.Assignment,
		}
		if vm.RebalanceTimeoutMillis < 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		if vm.InstanceID != nil {
			m.static = true
			m.instanceID = *vm.InstanceID
		}
		g.add(m, nil)
	}
	if g.leader != "" && g.members[g.leader] == nil && len(g.order) > 0 {
		g.leader = g.order[0]
	}
}

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }
