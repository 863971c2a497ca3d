package group

import (
	"errors"
	"time"
)

// Consumer group writes follow Kafka's coordinator runtime: a handler returns records;
// they are replayed into memory at once (so the next request sees them, and memory is
// always exactly what the records say) and the answer waits until they are committed
// to __consumer_offsets, after every earlier write of the partition. A write that
// fails cannot be taken back from memory: the partition is reloaded from its log,
// which holds only what was committed, and the requests in between answer
// NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS and are retried by clients.

// writeConsumerLocked applies records to the partition's groups and appends them;
// done runs under the mutex once they are committed (err == nil) or failed. A write
// without records still waits for the writes queued before it.
func (c *Coordinator) writeConsumerLocked(part *partition, groupID string, records []Record, done func(err error)) {
	if err := c.applyLocked(part, records); err != nil {
		c.logger.Error("consumer group records do not replay; reloading the partition", "partition", part.id, "group", groupID, "err", err)
		c.reloadLocked(part)
		done(ErrNotCoordinator)
		return
	}
	c.appendLocked(part, part.groups[groupID], records, func(err error) {
		if err != nil && c.mu.partitions[part.id] == part {
			c.reloadLocked(part)
		}
		done(err)
	})
}

// applyLocked replays records into the partition's live groups.
func (c *Coordinator) applyLocked(part *partition, records []Record) error {
	for _, r := range records {
		d, err := decodeRecord(r)
		if err != nil {
			return err
		}
		switch d.kind {
		case kindConsumerGroup, kindConsumerMember:
			if err := replayConsumer(part.groups, part.id, d); err != nil {
				return err
			}
		case kindShareGroup, kindShareMember:
			if err := replayShare(part.groups, part.id, d); err != nil {
				return err
			}
		case kindGroup:
			// Written here when a classic group becomes a consumer group (a tombstone:
			// consumerGroupOf clears the classic fields on the records that follow) and
			// when a consumer group goes back to the classic protocol.
			if d.meta != nil {
				g := part.groups[d.group]
				if g == nil {
					g = newGroup(d.group, part.id, time.Time{})
					part.groups[d.group] = g
				}
				setGroupFromValue(g, d.meta)
			}
		case kindOffset:
			replayOffset(part.groups, part.id, d.group, d.tp, d.offset)
		}
	}
	return nil
}

// reloadLocked unloads a partition after a failed write and loads it again from its
// log, retrying while the log says nothing but that it failed.
func (c *Coordinator) reloadLocked(part *partition) {
	if c.mu.partitions[part.id] != part {
		return
	}
	c.unloadLocked(part.id)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for attempt := 0; ; attempt++ {
			err := c.LoadPartition(c.ctx, part.id)
			if err == nil || errors.Is(err, ErrNotCoordinator) || errors.Is(err, ErrClosed) || c.ctx.Err() != nil || attempt == 10 {
				if err != nil {
					c.logger.Warn("reloading group coordinator partition failed", "partition", part.id, "err", err)
				}
				return
			}
			wake := make(chan struct{})
			t := c.clock.AfterFunc(time.Duration(attempt+1)*100*time.Millisecond, func() { close(wake) })
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-wake:
			}
		}
	}()
}

// startConsumerSessionsLocked gives the members of a freshly loaded partition's
// consumer groups a full session (and revocation) timeout from now.
func (c *Coordinator) startConsumerSessionsLocked(part *partition, now time.Time) {
	for name, g := range part.groups {
		if g.share == nil && g.consumer == nil {
			continue
		}
		t := c.groupTimeouts(name)
		if g.share != nil {
			for _, m := range g.share.members {
				m.sessionDeadline = now.Add(t.ShareSession)
			}
		}
		if g.consumer == nil {
			continue
		}
		for _, m := range g.consumer.members {
			m.sessionDeadline = now.Add(t.ConsumerSession)
			if m.classic != nil {
				m.sessionDeadline = now.Add(m.classic.sessionTimeout)
			}
			if m.state == memberUnrevoked {
				m.revokeDeadline = now.Add(max(m.rebalanceTimeout, t.ConsumerHeartbeat))
			}
		}
	}
}

// consumerNextDeadline is the earliest session or revocation deadline of the group's
// consumer members.
func (g *group) consumerNextDeadline() time.Time {
	var next time.Time
	if g.consumer == nil {
		return next
	}
	for _, m := range g.consumer.members {
		next = earliest(next, m.sessionDeadline)
		next = earliest(next, m.revokeDeadline)
		next = earliest(next, m.classicDeadline)
	}
	return next
}

// expireConsumerMembersLocked removes the members whose session expired or who did
// not revoke partitions within their rebalance timeout.
func (c *Coordinator) expireConsumerMembersLocked(part *partition, g *group, now time.Time) {
	if g.consumer == nil {
		return
	}
	for _, id := range g.consumer.memberIDs() {
		m := g.consumer.members[id]
		if m == nil {
			continue
		}
		reason := ""
		switch {
		case due(m.sessionDeadline, now):
			reason = "session timeout expired"
		case due(m.revokeDeadline, now):
			reason = "partitions not revoked within the rebalance timeout"
		case due(m.classicDeadline, now):
			reason = "no JoinGroup or SyncGroup within the rebalance timeout"
		default:
			continue
		}
		m.sessionDeadline, m.revokeDeadline, m.classicDeadline = time.Time{}, time.Time{}, time.Time{}
		c.logger.Info("consumer group member fenced", "group", g.id, "member", id, "instance", m.instanceID, "reason", reason)
		c.removeConsumerMemberLocked(part, g, m, now, func(error) {})
		if part.groups[g.id] != g || g.consumer == nil {
			return
		}
	}
}
