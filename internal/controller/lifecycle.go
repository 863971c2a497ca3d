package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// RegisterBroker registers broker r (BrokerRegistration) and returns its broker
// epoch once the registration is in the metadata log. A new incarnation registers
// fenced; BrokerHeartbeat unfences it once it has caught up.
func (c *Controller) RegisterBroker(ctx context.Context, r Registration) (int64, error) {
	if r.NodeID < 0 {
		return -1, fmt.Errorf("%w: broker id %d", ErrInvalidRequest, r.NodeID)
	}
	return run(ctx, c, func(ctx context.Context) (int64, error) {
		if err := c.requireLeader(); err != nil {
			return -1, err
		}
		img := c.Image()
		now := c.opts.Clock.Now()
		recs, epoch, events, err := registerUpdates(img, r, c.sessions.liveIncarnation(r.NodeID, now), img.Offset()+1, c.uncleanAllowed)
		if err != nil {
			return -1, err
		}
		if len(recs) > 0 {
			if err := c.propose(ctx, recs); err != nil {
				return -1, err
			}
		}
		c.sessions.touch(r.NodeID, now, -1)
		c.logElections(events, fmt.Sprintf("broker %d registered a new incarnation", r.NodeID))
		c.logger.Info("registered broker", "broker", r.NodeID, "epoch", epoch, "incarnation", r.IncarnationID, "rack", r.Rack)
		return epoch, nil
	})
}

// UnregisterBroker removes broker id's registration (UnregisterBroker, API 64) once
// the change is in the metadata log: see unregisterUpdates. ErrBrokerIDNotRegistered
// when no broker id is registered. A broker process that still runs finds out at its
// next heartbeat (STALE_BROKER_EPOCH) and registers again.
func (c *Controller) UnregisterBroker(ctx context.Context, id int32) error {
	_, err := run(ctx, c, func(ctx context.Context) (struct{}, error) {
		if err := c.requireLeader(); err != nil {
			return struct{}{}, err
		}
		img := c.Image()
		b, _ := img.Broker(metadata.NodeID(id))
		recs, events, err := unregisterUpdates(img, id, c.uncleanAllowed)
		if err != nil {
			return struct{}{}, err
		}
		if err := c.propose(ctx, recs); err != nil {
			return struct{}{}, err
		}
		c.sessions.remove(id)
		c.logger.Info("unregistered broker", "broker", id, "epoch", b.Epoch, "state", currentBrokerState(b).String(), "partitions_changed", len(recs)-1)
		c.logElections(events, fmt.Sprintf("broker %d was unregistered", id))
		return struct{}{}, nil
	})
	return err
}

// BrokerHeartbeat records a broker's heartbeat and moves it between fenced,
// unfenced and controlled shutdown as Kafka's controller does (see
// nextBrokerState). Changes are in the metadata log before it returns.
func (c *Controller) BrokerHeartbeat(ctx context.Context, hb Heartbeat) (HeartbeatReply, error) {
	c.sessions.arrived.record(hb.BrokerID, hb.BrokerEpoch, c.opts.Clock.Now())
	return run(ctx, c, func(ctx context.Context) (HeartbeatReply, error) {
		if err := c.requireLeader(); err != nil {
			return HeartbeatReply{}, err
		}
		img := c.Image()
		b, err := registeredBroker(img, hb.BrokerID, hb.BrokerEpoch)
		if err != nil {
			return HeartbeatReply{}, err
		}
		now := c.opts.Clock.Now()
		ss := c.sessions.touch(hb.BrokerID, now, hb.MetadataOffset)
		cur := currentBrokerState(b)
		next := nextBrokerState(cur, hb, b.RegisteredOffset, hasLeaderships(img, hb.BrokerID), ss.shutdownOffset, c.sessions.lowestActiveOffset(img))
		if next != cur {
			recs, events := transitionUpdates(img, b, next, c.uncleanAllowed)
			if len(recs) > 0 {
				if err := c.propose(ctx, recs); err != nil {
					return HeartbeatReply{}, err
				}
			}
			switch next {
			case stateControlledShutdown:
				ss.shutdownOffset = c.Image().Offset()
			case stateFenced, stateShutdownNow:
				c.sessions.remove(hb.BrokerID)
			}
			c.logger.Info("broker state changed", "broker", hb.BrokerID, "from", cur.String(), "to", next.String(), "metadata_offset", hb.MetadataOffset)
			c.logElections(events, fmt.Sprintf("broker %d is %s", hb.BrokerID, next))
		}
		return HeartbeatReply{
			IsCaughtUp:     hb.MetadataOffset >= b.RegisteredOffset,
			IsFenced:       next == stateFenced || next == stateShutdownNow,
			ShouldShutdown: next == stateShutdownNow,
		}, nil
	})
}

// maintain is the periodic work of the active controller, on the command goroutine:
// record the cluster id if the log has none, fence brokers whose session expired
// (one proposal each, so that each election sees the previous fencing), run unclean
// elections where topics allow them, remove expired delegation tokens, and rebalance
// leaders.
func (c *Controller) maintain() {
	if c.requireLeader() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), maintenanceProposalTimeout)
	defer cancel()
	if c.Image().ClusterID() == "" {
		id := c.opts.ClusterID
		if id == "" {
			id = NewClusterID()
		}
		if err := c.propose(ctx, []metadata.Record{metadata.ClusterRecord{ClusterID: id}}); err != nil {
			c.logger.Warn("could not record the cluster id", "error", err)
			return
		}
		c.logger.Info("recorded the cluster id", "cluster_id", id)
	}
	if term := c.activeTerm.Load(); len(c.opts.BootstrapScram) > 0 && c.scramTerm != term {
		c.bootstrapScram(ctx)
		c.scramTerm = term
	}
	now := c.opts.Clock.Now()
	for _, id := range c.sessions.stale(c.Image(), now) {
		img := c.Image()
		b, ok := img.Broker(metadata.NodeID(id))
		if !ok || b.Fenced {
			continue
		}
		recs, events := transitionUpdates(img, b, stateFenced, c.uncleanAllowed)
		if err := c.propose(ctx, recs); err != nil {
			c.logger.Warn("could not fence broker", "broker", id, "error", err)
			return
		}
		c.sessions.remove(id)
		c.logger.Warn("fenced broker: no heartbeat within broker.session.timeout.ms", "broker", id, "session_timeout", c.opts.SessionTimeout)
		c.logElections(events, fmt.Sprintf("broker %d was fenced", id))
	}
	if recs, events := uncleanUpdates(c.Image(), c.uncleanAllowed); len(recs) > 0 {
		if err := c.propose(ctx, recs); err != nil {
			c.logger.Warn("could not run unclean leader elections", "error", err)
			return
		}
		c.logElections(events, "offline partitions of topics that allow unclean election")
	}
	if now.Sub(c.lastTokenSweep) >= c.opts.Tokens.CheckInterval {
		c.lastTokenSweep = now
		if !c.sweepTokens(ctx, now) {
			return
		}
	}
	if c.opts.AutoLeaderRebalance && now.Sub(c.lastRebalance) >= c.opts.LeaderImbalanceCheckInterval {
		c.lastRebalance = now
		recs, events := imbalancedUpdates(c.Image(), float64(c.opts.LeaderImbalancePerBroker)/100)
		if len(recs) > 0 {
			if err := c.propose(ctx, recs); err != nil {
				c.logger.Warn("could not rebalance leaders", "error", err)
				return
			}
			c.logElections(events, "auto.leader.rebalance.enable: preferred replicas back to leadership")
		}
	}
}

// logElections logs leadership changes: a summary at info, each unclean election as
// a warning (it may lose acknowledged records).
func (c *Controller) logElections(events []electionEvent, reason string) {
	if len(events) == 0 {
		return
	}
	offline := 0
	for _, e := range events {
		if e.To == metadata.NoLeader {
			offline++
		}
		if e.Unclean {
			c.logger.Warn("unclean leader election: the new leader was not in the ISR; records it lacks that were acknowledged are lost",
				"topic", e.Topic, "partition", e.Partition, "leader", e.To, "previous_leader", e.From, "previous_isr", e.ISR)
		}
		c.logger.Debug("partition leader changed", "topic", e.Topic, "partition", e.Partition, "leader", e.To, "previous_leader", e.From, "reason", reason)
	}
	c.logger.Info("moved partition leaderships", "partitions", len(events), "now_offline", offline, "reason", reason)
}

// NewClusterID returns a random cluster id in Kafka's form (a version-4 UUID in
// URL-safe base64 without padding).
func NewClusterID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// NewIncarnationID returns a random broker incarnation id (32 hex digits).
func NewIncarnationID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

// AlterPartition applies the ISR changes a partition leader asks for (AlterPartition,
// API 56), validated with the leader and partition epochs as Kafka does. The error
// is for the whole request (NOT_CONTROLLER, STALE_BROKER_EPOCH); each result has
// its own error or the committed partition state.
func (c *Controller) AlterPartition(ctx context.Context, brokerID int32, brokerEpoch int64, items []AlterPartitionItem) ([]AlterPartitionResult, error) {
	return run(ctx, c, func(ctx context.Context) ([]AlterPartitionResult, error) {
		if err := c.requireLeader(); err != nil {
			return nil, err
		}
		recs, results, err := alterPartitionUpdates(c.Image(), brokerID, brokerEpoch, items, c.uncleanAllowed)
		if err != nil {
			return nil, err
		}
		if len(recs) > 0 {
			if err := c.propose(ctx, recs); err != nil {
				return nil, err
			}
		}
		for _, r := range results {
			if r.Err == nil {
				c.logger.Debug("ISR changed", "topic", r.Topic, "partition", r.Partition, "isr", r.State.ISR,
					"leader_epoch", r.State.LeaderEpoch, "partition_epoch", r.State.PartitionEpoch)
			}
		}
		return results, nil
	})
}

// ReplicasOffline marks a broker's replicas of the given partitions offline (their
// log directory failed): see offlineReplicaUpdates. Partitions it has no replica of,
// or already marked, or that no longer exist, are left alone. The changes are in the
// metadata log before it returns.
func (c *Controller) ReplicasOffline(ctx context.Context, brokerID int32, brokerEpoch int64, offline []PartitionRef) error {
	_, err := run(ctx, c, func(ctx context.Context) (struct{}, error) {
		if err := c.requireLeader(); err != nil {
			return struct{}{}, err
		}
		img := c.Image()
		if _, err := registeredBroker(img, brokerID, brokerEpoch); err != nil {
			return struct{}{}, err
		}
		recs, events := offlineReplicaUpdates(img, brokerID, offline, c.uncleanAllowed)
		if len(recs) == 0 {
			return struct{}{}, nil
		}
		if err := c.propose(ctx, recs); err != nil {
			return struct{}{}, err
		}
		c.logger.Warn("replicas taken out of their ISRs: their log directory failed", "broker", brokerID, "partitions", len(recs))
		c.logElections(events, fmt.Sprintf("broker %d's replica is offline", brokerID))
		return struct{}{}, nil
	})
	return err
}

// ElectLeaders runs preferred or unclean elections (ElectLeaders, API 43) on the
// named partitions, or on every partition when targets is nil.
func (c *Controller) ElectLeaders(ctx context.Context, typ ElectionType, targets map[string][]int32) ([]ElectionResult, error) {
	if typ != ElectPreferred && typ != ElectUnclean {
		return nil, fmt.Errorf("%w: unknown election type %d", ErrInvalidRequest, typ)
	}
	return run(ctx, c, func(ctx context.Context) ([]ElectionResult, error) {
		if err := c.requireLeader(); err != nil {
			return nil, err
		}
		recs, events, results := electLeadersUpdates(c.Image(), typ, targets)
		if len(recs) > 0 {
			if err := c.propose(ctx, recs); err != nil {
				return nil, err
			}
		}
		c.logElections(events, "ElectLeaders")
		return results, nil
	})
}

// AlterReassignments starts, changes or cancels partition reassignments
// (AlterPartitionReassignments, API 45). The returned errors match items.
func (c *Controller) AlterReassignments(ctx context.Context, items []Reassignment) ([]error, error) {
	return run(ctx, c, func(ctx context.Context) ([]error, error) {
		if err := c.requireLeader(); err != nil {
			return nil, err
		}
		recs, events, errs := reassignUpdates(c.Image(), items, c.uncleanAllowed)
		if len(recs) > 0 {
			if err := c.propose(ctx, recs); err != nil {
				return nil, err
			}
		}
		for i, it := range items {
			if errs[i] == nil {
				c.logger.Info("partition reassignment", "topic", it.Topic, "partition", it.Partition, "replicas", it.Replicas, "cancel", it.Replicas == nil)
			}
		}
		c.logElections(events, "reassignment")
		return errs, nil
	})
}

// ListReassignments reports the ongoing reassignments of the named topics'
// partitions, or of every partition when topics is nil (ListPartitionReassignments,
// API 46). Only the active controller answers.
func (c *Controller) ListReassignments(topics map[string][]int32) ([]ReassignmentStatus, error) {
	if !c.Active() {
		return nil, fmt.Errorf("%w: the active controller is %d", ErrNotController, c.Leader())
	}
	return listReassignments(c.Image(), topics), nil
}

// observerTable tracks the nodes that fetch the metadata log without voting, for
// DescribeQuorum.
type observerTable struct {
	mu struct {
		sync.Mutex
		nodes map[int32]ReplicaStatus
	}
}

func (o *observerTable) init() { o.mu.nodes = map[int32]ReplicaStatus{} }

func (o *observerTable) record(s ReplicaStatus) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.nodes[s.NodeID] = s
}

func (o *observerTable) list() []ReplicaStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]ReplicaStatus, 0, len(o.mu.nodes))
	for _, s := range o.mu.nodes {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ReplicaStatus) int { return int(a.NodeID) - int(b.NodeID) })
	return out
}
