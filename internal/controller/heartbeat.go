package controller

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// This file holds the pure part of the broker lifecycle (KIP-631): registration,
// the heartbeat state machine and the sessions the active controller keeps. Sessions
// live in the active controller's memory only, as in Kafka: a new active controller
// gives every registered, unfenced broker a fresh session.

// Registration is a broker's BrokerRegistration request.
type Registration struct {
	NodeID int32
	// ClusterID must be the cluster's (it may be empty for a broker that has not
	// stored one yet).
	ClusterID string
	// IncarnationID is random per broker process start (32 hex digits).
	IncarnationID string
	Endpoints     []metadata.Endpoint
	Rack          string
}

// Heartbeat is a broker's BrokerHeartbeat request.
type Heartbeat struct {
	BrokerID       int32
	BrokerEpoch    int64
	MetadataOffset int64 // the highest metadata offset the broker has applied
	WantFence      bool
	WantShutdown   bool
}

// HeartbeatReply is the controller's answer.
type HeartbeatReply struct {
	IsCaughtUp     bool // the broker has applied its own registration
	IsFenced       bool
	ShouldShutdown bool // controlled shutdown is done: the broker may exit
}

// registeredBroker returns the broker registered as id at epoch; ErrStaleBrokerEpoch
// when it is unknown or registered at another epoch (it must register again).
func registeredBroker(img *metadata.Image, id int32, epoch int64) (metadata.Broker, error) {
	b, ok := img.Broker(metadata.NodeID(id))
	if !ok || b.Epoch != epoch {
		return metadata.Broker{}, fmt.Errorf("%w: broker %d is not registered at epoch %d", ErrStaleBrokerEpoch, id, epoch)
	}
	return b, nil
}

// brokerState is Kafka's BrokerControlState.
type brokerState int

const (
	stateFenced brokerState = iota
	stateUnfenced
	stateControlledShutdown
	stateShutdownNow
)

func (s brokerState) String() string {
	return [...]string{"fenced", "unfenced", "controlled shutdown", "shutdown now"}[s]
}

func currentBrokerState(b metadata.Broker) brokerState {
	switch {
	case b.Fenced:
		return stateFenced
	case b.InControlledShutdown:
		return stateControlledShutdown
	}
	return stateUnfenced
}

// nextBrokerState decides what a heartbeat does to its broker. A fenced broker is
// unfenced once it has applied the metadata log up to its own registration. An
// unfenced broker that wants to shut down enters controlled shutdown if it leads
// anything, and may go once it leads nothing and every active broker has applied
// the entries that moved its leaderships (shutdownOffset <= lowestActiveOffset).
func nextBrokerState(cur brokerState, hb Heartbeat, registeredOffset int64, hasLeaderships bool, shutdownOffset, lowestActiveOffset int64) brokerState {
	switch cur {
	case stateFenced:
		switch {
		case hb.WantShutdown:
			return stateShutdownNow
		case !hb.WantFence && hb.MetadataOffset >= registeredOffset:
			return stateUnfenced
		}
		return stateFenced
	case stateUnfenced:
		switch {
		case hb.WantFence && hb.WantShutdown:
			return stateShutdownNow
		case hb.WantFence:
			return stateFenced
		case hb.WantShutdown && hasLeaderships:
			return stateControlledShutdown
		case hb.WantShutdown:
			return stateShutdownNow
		}
		return stateUnfenced
	case stateControlledShutdown:
		if !hasLeaderships && shutdownOffset <= lowestActiveOffset {
			return stateShutdownNow
		}
		return stateControlledShutdown
	}
	return stateShutdownNow
}

// session is what the active controller knows about one broker's heartbeats.
type session struct {
	lastContact    time.Time
	metadataOffset int64
	// inherited: created when this controller became active, not by a heartbeat to
	// it. A new incarnation of the broker may replace it without waiting for it to
	// expire (the previous incarnation may well have died with the old controller).
	inherited bool
	// shutdownOffset is the metadata offset at which the broker's controlled
	// shutdown moved its leaderships (-1 when not shutting down).
	shutdownOffset int64
}

// sessions tracks the heartbeats of registered, unfenced brokers. Not safe for
// concurrent use: the controller's command goroutine owns it — except arrivals,
// which request goroutines record.
type sessions struct {
	timeout time.Duration
	m       map[metadata.NodeID]*session
	arrived arrivals
}

func newSessions(timeout time.Duration) *sessions {
	return &sessions{timeout: timeout, m: map[metadata.NodeID]*session{}, arrived: arrivals{m: map[metadata.NodeID]arrival{}}}
}

// arrivals are the times heartbeats reached the controller, recorded when they
// arrive rather than when the command goroutine gets to them (as Kafka's controller
// does): a heartbeat queued behind long work, such as creating thousands of
// partitions, still counts, so a busy controller does not fence brokers — itself
// included — that did heartbeat in time.
type arrivals struct {
	mu sync.Mutex
	m  map[metadata.NodeID]arrival
}

type arrival struct {
	epoch int64
	at    time.Time
}

// record notes a heartbeat of broker id at epoch arriving at now.
func (a *arrivals) record(id int32, epoch int64, now time.Time) {
	a.mu.Lock()
	a.m[metadata.NodeID(id)] = arrival{epoch: epoch, at: now}
	a.mu.Unlock()
}

// last is when a heartbeat of broker id at epoch last arrived (zero if none did).
func (a *arrivals) last(id metadata.NodeID, epoch int64) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ar, ok := a.m[id]; ok && ar.epoch == epoch {
		return ar.at
	}
	return time.Time{}
}

// reset starts over for a controller that just became active: every unfenced
// broker gets a full session from now.
func (s *sessions) reset(img *metadata.Image, now time.Time) {
	s.m = map[metadata.NodeID]*session{}
	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		ss := &session{lastContact: now, metadataOffset: -1, inherited: true, shutdownOffset: -1}
		if b.InControlledShutdown {
			ss.shutdownOffset = img.Offset()
		}
		s.m[b.NodeID] = ss
	}
}

// touch records a heartbeat.
func (s *sessions) touch(id int32, now time.Time, offset int64) *session {
	ss := s.m[metadata.NodeID(id)]
	if ss == nil {
		ss = &session{shutdownOffset: -1}
		s.m[metadata.NodeID(id)] = ss
	}
	ss.lastContact, ss.metadataOffset, ss.inherited = now, offset, false
	return ss
}

// liveIncarnation reports whether broker id's current incarnation heartbeats to
// this controller within the session timeout.
func (s *sessions) liveIncarnation(id int32, now time.Time) bool {
	ss := s.m[metadata.NodeID(id)]
	return ss != nil && !ss.inherited && now.Sub(ss.lastContact) <= s.timeout
}

func (s *sessions) remove(id int32) { delete(s.m, metadata.NodeID(id)) }

// stale returns the unfenced brokers whose session expired, sorted.
func (s *sessions) stale(img *metadata.Image, now time.Time) []int32 {
	var out []int32
	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		ss := s.m[b.NodeID]
		if ss == nil {
			// Unfenced in the image but unknown here (registered by a previous
			// controller after this one reset): give it a session now.
			s.m[b.NodeID] = &session{lastContact: now, metadataOffset: -1, inherited: true, shutdownOffset: -1}
			continue
		}
		last := ss.lastContact
		if at := s.arrived.last(b.NodeID, b.Epoch); at.After(last) {
			last = at
		}
		if now.Sub(last) > s.timeout {
			out = append(out, int32(b.NodeID))
		}
	}
	return out
}

// lowestActiveOffset is the smallest metadata offset reported by an active broker
// (MaxInt64 when there is none).
func (s *sessions) lowestActiveOffset(img *metadata.Image) int64 {
	low := int64(1<<63 - 1)
	for _, b := range img.Brokers() {
		if !b.Active() {
			continue
		}
		if ss := s.m[b.NodeID]; ss != nil {
			low = min(low, ss.metadataOffset)
		} else {
			low = -1
		}
	}
	return low
}

// registerUpdates returns the records registering r, and its broker epoch. A new
// incarnation replaces the previous one: that one leaves every ISR and leadership
// (it may have lost unflushed data) and the broker registers fenced, to be unfenced
// once it has caught up. The same incarnation registering again keeps its epoch and
// state. epoch is the epoch to give a new incarnation.
func registerUpdates(img *metadata.Image, r Registration, previousAlive bool, epoch int64, unclean uncleanPolicy) ([]metadata.Record, int64, []electionEvent, error) {
	if r.ClusterID != "" && r.ClusterID != img.ClusterID() {
		return nil, -1, nil, fmt.Errorf("%w: broker %d belongs to cluster %s, this is cluster %s", ErrInconsistentClusterID, r.NodeID, r.ClusterID, img.ClusterID())
	}
	prev, registered := img.Broker(metadata.NodeID(r.NodeID))
	if registered && prev.IncarnationID == r.IncarnationID {
		rec := metadata.RegisterBrokerRecord{
			NodeID: prev.NodeID, Epoch: prev.Epoch, IncarnationID: prev.IncarnationID,
			Endpoints: r.Endpoints, Rack: r.Rack, Fenced: prev.Fenced, InControlledShutdown: prev.InControlledShutdown,
		}
		if prev.Rack == r.Rack && slices.Equal(prev.Endpoints, r.Endpoints) {
			return nil, prev.Epoch, nil, nil
		}
		return []metadata.Record{rec}, prev.Epoch, nil, nil
	}
	if registered && previousAlive {
		return nil, -1, nil, fmt.Errorf("%w: node %d is registered by another process (incarnation %s) that still heartbeats; retry once its session of the broker session timeout expires",
			ErrDuplicateBrokerRegistration, r.NodeID, prev.IncarnationID)
	}
	var recs []metadata.Record
	var events []electionEvent
	if registered {
		epoch = max(epoch, prev.Epoch+1)
		recs, events = removeBrokerUpdates(img, r.NodeID, unclean)
	}
	recs = append(recs, metadata.RegisterBrokerRecord{
		NodeID: metadata.NodeID(r.NodeID), Epoch: epoch, IncarnationID: r.IncarnationID,
		Endpoints: r.Endpoints, Rack: r.Rack, Fenced: true,
	})
	return recs, epoch, events, nil
}

// unregisterUpdates returns the records removing broker id's registration, as
// Kafka's ReplicationControlManager.handleBrokerUnregistered does: first the
// partition changes that take it out of every ISR, unless it is the last member
// (KIP-841, as when it is fenced), and move its leaderships to other in-sync
// replicas, then the UnregisterBrokerRecord — one entry, so no image has the broker
// gone while it still leads. The broker need not be fenced first.
func unregisterUpdates(img *metadata.Image, id int32, unclean uncleanPolicy) ([]metadata.Record, []electionEvent, error) {
	b, ok := img.Broker(metadata.NodeID(id))
	if !ok {
		return nil, nil, fmt.Errorf("%w: broker %d is not registered", ErrBrokerIDNotRegistered, id)
	}
	recs, events := removeBrokerUpdates(img, id, unclean)
	return append(recs, metadata.UnregisterBrokerRecord{NodeID: b.NodeID, Epoch: b.Epoch}), events, nil
}

// hasLeaderships reports whether broker leads any partition in img.
func hasLeaderships(img *metadata.Image, broker int32) bool {
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if p.Leader == broker {
				return true
			}
		}
	}
	return false
}

// transitionUpdates returns the records that move broker b from its current state
// to next.
func transitionUpdates(img *metadata.Image, b metadata.Broker, next brokerState, unclean uncleanPolicy) ([]metadata.Record, []electionEvent) {
	id := int32(b.NodeID)
	yes, no := true, false
	switch next {
	case stateFenced, stateShutdownNow:
		recs, events := removeBrokerUpdates(img, id, unclean)
		if b.Fenced { // a fenced broker that asks to shut down: nothing more to record
			return recs, events
		}
		return append(recs, metadata.BrokerRegistrationChangeRecord{NodeID: b.NodeID, Epoch: b.Epoch, Fenced: &yes}), events
	case stateUnfenced:
		recs, events := unfenceUpdates(img, id, unclean)
		return append([]metadata.Record{metadata.BrokerRegistrationChangeRecord{NodeID: b.NodeID, Epoch: b.Epoch, Fenced: &no}}, recs...), events
	case stateControlledShutdown:
		recs, events := removeBrokerUpdates(img, id, unclean)
		return append([]metadata.Record{metadata.BrokerRegistrationChangeRecord{NodeID: b.NodeID, Epoch: b.Epoch, InControlledShutdown: &yes}}, recs...), events
	}
	return nil, nil
}
