package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// ChannelOptions configure a Channel.
type ChannelOptions struct {
	NodeID int32
	// Voters maps node id to the host:port of its controller listener.
	Voters map[int32]string
	// Leader returns the active controller as this node knows it (-1: unknown):
	// Controller.Leader on a voter, Observer.Leader elsewhere.
	Leader func() int32
	// Local, on a node that is a controller, serves a request in process; it is
	// used when this node is the leader. Nil on other nodes.
	Local func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	// RequestTimeout (controller.quorum.request.timeout.ms) bounds one attempt
	// (default 2s) — for a forwarded admin request only on a node not known as the
	// active controller (see giveUp); the caller's context bounds the whole
	// call.
	RequestTimeout time.Duration
	// RetryBackoff (controller.quorum.retry.backoff.ms) is the first pause between
	// attempts (default 20ms), doubling up to 500ms.
	RetryBackoff time.Duration
	Logger       *slog.Logger
	// Security secures the connections to the controllers' listener (TLS, SASL).
	Security peer.Security
	// Downgrade lets this node's own requests fall back to the versions a
	// controller of an older build serves (peer.Options.Downgrade); forwarded
	// requests keep their client's version.
	Downgrade map[int16]int16
}

// Channel is a broker's channel to the active controller: it sends a Kafka request
// (broker registration and heartbeats, AlterPartition, producer-id blocks, and the
// admin requests clients send to any broker) to whichever node is the active
// controller, and retries — on another voter, after a short backoff — when the
// answer is NOT_CONTROLLER or the node cannot be reached, until the context ends.
// When this node itself leads, the request is served in process (Local), so a single
// node never talks to itself over the network.
//
// Safe for concurrent use. Requests to one controller go over two connections, as
// Kafka's brokers keep a channel for their own lifecycle apart from the one that
// forwards clients' requests: responses come back in request order on a
// connection, and a heartbeat must not wait behind an admin request that takes
// seconds to commit (nor, timing out, break the connection that request waits on).
type Channel struct {
	opts   ChannelOptions
	logger *slog.Logger
	voters []int32
	conns  map[int32]*peer.Conn // the broker's own requests (lifecycleRequest)
	admin  map[int32]*peer.Conn // the admin requests forwarded for clients
	mu     sync.Mutex
	next   int // round-robin position among the voters when the leader is unknown
}

// lifecycleRequest reports whether req is one of the broker's own requests
// (registration, heartbeats, ISR changes, producer-id blocks, offline replicas)
// rather than a client's admin request it forwards.
func lifecycleRequest(req kmsg.Request) bool {
	switch req.Key() {
	case int16(kmsg.BrokerRegistration), int16(kmsg.BrokerHeartbeat), int16(kmsg.AlterPartition),
		int16(kmsg.AllocateProducerIDs), protocol.ReplicasOfflineKey:
		return true
	}
	return false
}

// NewChannel returns a channel; connections open on first use.
func NewChannel(o ChannelOptions) *Channel {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 2 * time.Second
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 20 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ch := &Channel{opts: o, logger: o.Logger, voters: slices.Sorted(maps.Keys(o.Voters)), conns: map[int32]*peer.Conn{}, admin: map[int32]*peer.Conn{}}
	for id, addr := range o.Voters {
		if id != o.NodeID || o.Local == nil {
			opts := peer.Options{ClientID: fmt.Sprintf("samsa-broker-%d", o.NodeID), BackoffMin: o.RetryBackoff, DialTimeout: o.RequestTimeout,
				Security: o.Security, Downgrade: o.Downgrade}
			ch.conns[id] = peer.New(addr, opts)
			// Forwarded requests keep the version their client chose.
			opts.ClientID, opts.Downgrade = fmt.Sprintf("samsa-broker-%d-forwarding", o.NodeID), nil
			ch.admin[id] = peer.New(addr, opts)
		}
	}
	return ch
}

// Close closes the connections.
func (ch *Channel) Close() {
	for _, c := range ch.conns {
		c.Close()
	}
	for _, c := range ch.admin {
		c.Close()
	}
}

// target picks the node to try: the known leader, else the voters in turn. Every
// other retry goes to the next voter even when a leader is known, in case this node's
// knowledge of the leader is stale.
func (ch *Channel) target(attempt int) int32 {
	if l := ch.opts.Leader(); l >= 0 && attempt%2 == 0 && (ch.conns[l] != nil || l == ch.opts.NodeID && ch.opts.Local != nil) {
		return l
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.next++
	if len(ch.voters) == 0 {
		return -1
	}
	return ch.voters[ch.next%len(ch.voters)]
}

// Send delivers req (its version set) to the active controller and returns the
// answer. It retries until an answer other than NOT_CONTROLLER arrives or ctx
// ends; then it returns the last NOT_CONTROLLER answer if there was one, else the
// error.
func (ch *Channel) Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var lastResp kmsg.Response
	var lastErr error
	for attempt := 0; ; attempt++ {
		id := ch.target(attempt)
		resp, err := ch.sendTo(ctx, id, req)
		if err == nil && !notController(resp) {
			return resp, nil
		}
		if err == nil {
			lastResp, lastErr = resp, fmt.Errorf("%w: node %d", ErrNotController, id)
		} else {
			lastErr = err
		}
		if attempt == 0 {
			ch.logger.Debug("controller request: retrying on another controller", "api", kmsg.NameForKey(req.Key()), "tried", id, "error", lastErr)
		}
		wait := min(ch.opts.RetryBackoff<<min(attempt, 8), 500*time.Millisecond)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if lastResp != nil {
				return lastResp, nil
			}
			return nil, fmt.Errorf("no active controller answered %s: %w (last: %v)", kmsg.NameForKey(req.Key()), ctx.Err(), lastErr)
		case <-t.C:
		}
	}
}

func (ch *Channel) sendTo(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	if id < 0 {
		return nil, errors.New("no controller known")
	}
	if id == ch.opts.NodeID && ch.opts.Local != nil {
		// In process: no peer to give up on, so the request's own deadline bounds it
		// (a CreateTopics of thousands of partitions waits for this node to create
		// their logs before it answers).
		return ch.opts.Local(ctx, req)
	}
	if lifecycleRequest(req) {
		c := ch.conns[id]
		if c == nil {
			return nil, fmt.Errorf("node %d is not a controller", id)
		}
		actx, cancel := context.WithTimeout(ctx, ch.opts.RequestTimeout)
		defer cancel()
		return c.Request(actx, req)
	}
	c := ch.admin[id]
	if c == nil {
		return nil, fmt.Errorf("node %d is not a controller", id)
	}
	gone, stop := ch.giveUp(id)
	defer stop()
	return c.RequestAbandoning(ctx, gone, req)
}

// giveUp bounds one attempt of a forwarded admin request on node id (the broker's
// own requests have RequestTimeout per attempt): gone closes once id has not been
// known as the active controller for RequestTimeout (a node that may be gone or
// deposed: try another), never while it is; stop ends the watch. The active
// controller answers once its change is committed, which can take longer than
// RequestTimeout (a topic of thousands of partitions); giving up on it and sending
// the request again would have the second attempt answered for the first one's
// change (TOPIC_ALREADY_EXISTS for the topic the first attempt created). Kafka's
// forwarding broker, too, sends a request again only on NOT_CONTROLLER or a
// dropped connection.
//
// The caller's context (the client's own timeout) ending abandons the request
// without breaking the connection (peer.Conn.RequestAbandoning): the connection
// carries other clients' forwarded requests, which breaking it would fail and have
// sent again — a CreateTopics answered TOPIC_ALREADY_EXISTS for its own creation.
// Kafka's ForwardingManager does not cancel a forwarded request when its client
// gives up; only the channel's request timeout disconnects.
func (ch *Channel) giveUp(id int32) (gone <-chan struct{}, stop func()) {
	g := make(chan struct{})
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(ch.opts.RequestTimeout)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if ch.opts.Leader() != id {
				close(g)
				return
			}
			t.Reset(min(ch.opts.RequestTimeout, 100*time.Millisecond))
		}
	}()
	return g, func() { close(done) }
}

// notController reports whether an answer says the node is not the active
// controller (so that the request should go elsewhere).
func notController(resp kmsg.Response) bool {
	nc := kerr.NotController.Code
	// anyOf is for the requests the controller carries out in one proposal (a
	// NOT_CONTROLLER anywhere means none of it was done, or it may not have been,
	// and the other items, invalid ones, are answered the same on any controller),
	// and for those whose items apply the same twice. Kafka retries any forwarded
	// answer holding NOT_CONTROLLER. Topic creations and deletions are one proposal
	// per request (as Kafka's atomicOf); partition creations, one proposal per
	// topic and not to be done twice, are retried only when all say it (all).
	anyOf := func(n int, code func(i int) int16) bool {
		for i := range n {
			if code(i) == nc {
				return true
			}
		}
		return false
	}
	all := func(n int, code func(i int) int16) bool {
		if n == 0 {
			return false
		}
		for i := range n {
			if code(i) != nc {
				return false
			}
		}
		return true
	}
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		return anyOf(len(r.Topics), func(i int) int16 { return r.Topics[i].ErrorCode })
	case *kmsg.DeleteTopicsResponse:
		return anyOf(len(r.Topics), func(i int) int16 { return r.Topics[i].ErrorCode })
	case *kmsg.CreatePartitionsResponse:
		return all(len(r.Topics), func(i int) int16 { return r.Topics[i].ErrorCode })
	case *kmsg.AlterConfigsResponse:
		// A config change applies the same twice (SET, DELETE, and APPEND and
		// SUBTRACT of list items): resources done before the leadership moved may
		// be done again.
		return anyOf(len(r.Resources), func(i int) int16 { return r.Resources[i].ErrorCode })
	case *kmsg.IncrementalAlterConfigsResponse:
		return anyOf(len(r.Resources), func(i int) int16 { return r.Resources[i].ErrorCode })
	case *kmsg.CreateACLsResponse:
		return anyOf(len(r.Results), func(i int) int16 { return r.Results[i].ErrorCode })
	case *kmsg.DeleteACLsResponse:
		return anyOf(len(r.Results), func(i int) int16 { return r.Results[i].ErrorCode })
	case *kmsg.AlterClientQuotasResponse:
		return anyOf(len(r.Entries), func(i int) int16 { return r.Entries[i].ErrorCode })
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return anyOf(len(r.Results), func(i int) int16 { return r.Results[i].ErrorCode })
	case *kmsg.ElectLeadersResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterPartitionAssignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.ListPartitionReassignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.DescribeQuorumResponse:
		return r.ErrorCode == nc || len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 &&
			r.Topics[0].Partitions[0].ErrorCode == kerr.NotLeaderForPartition.Code
	case *kmsg.UnregisterBrokerResponse:
		return r.ErrorCode == nc
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode == nc
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode == nc
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode == nc
	case *protocol.ReplicasOfflineResponse:
		return r.ErrorCode == nc
	case *protocol.DelegationTokenResponse:
		// Without it a token request meeting a controller change was answered
		// NOT_CONTROLLER to the client, which neither kadm nor Kafka's admin client
		// retries for these APIs. A create, renewal or expiry that lost the leadership
		// after proposing may still commit; done again it makes a second token (never
		// handed out, it expires), renews again (the expiry answered is the last), or
		// finds the token already gone (DELEGATION_TOKEN_NOT_FOUND) — as a retry after
		// a dropped connection does.
		return r.ErrorCode == nc
	}
	return false
}

// AlterPartition sends an AlterPartition request (v3: topic ids and broker epochs,
// KIP-903) to the active controller and returns the outcome per item, with this
// package's errors (ErrFencedLeaderEpoch, ErrInvalidUpdateVersion,
// ErrIneligibleReplica, ErrNewLeaderElected, ErrUnknownTopicID, ErrInvalidRequest …)
// whether the controller answered in process or over the network. The error is for
// the whole request: ErrStaleBrokerEpoch (register again), or no controller
// answered before ctx ended. A successful result's State is the committed partition
// state; the leader should still act on it only once its metadata image shows it.
func (ch *Channel) AlterPartition(ctx context.Context, brokerID int32, brokerEpoch int64, items []AlterPartitionItem) ([]AlterPartitionResult, error) {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.SetVersion(3)
	req.BrokerID, req.BrokerEpoch = brokerID, brokerEpoch
	index := map[metadata.TopicID]int{}
	for _, it := range items {
		i, ok := index[it.TopicID]
		if !ok {
			i = len(req.Topics)
			index[it.TopicID] = i
			t := kmsg.NewAlterPartitionRequestTopic()
			t.TopicID = it.TopicID
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewAlterPartitionRequestTopicPartition()
		p.Partition, p.LeaderEpoch, p.PartitionEpoch = it.Partition, it.LeaderEpoch, it.PartitionEpoch
		p.LeaderRecoveryState = int8(it.LeaderRecoveryState)
		for _, m := range it.NewISR {
			e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			e.BrokerID, e.BrokerEpoch = m.BrokerID, m.BrokerEpoch
			p.NewEpochISR = append(p.NewEpochISR, e)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	r, err := ch.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.AlterPartitionResponse)
	if err := ErrorForCode(resp.ErrorCode, nil); err != nil {
		return nil, err
	}
	type key struct {
		topic     metadata.TopicID
		partition int32
	}
	got := map[key]kmsg.AlterPartitionResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			got[key{metadata.TopicID(t.TopidID), p.Partition}] = p
		}
	}
	results := make([]AlterPartitionResult, len(items))
	for i, it := range items {
		res := AlterPartitionResult{TopicID: it.TopicID, Topic: it.Topic, Partition: it.Partition}
		p, ok := got[key{it.TopicID, it.Partition}]
		switch {
		case !ok:
			res.Err = fmt.Errorf("%w: no answer for this partition", ErrInvalidRequest)
		case p.ErrorCode != 0:
			res.Err = ErrorForCode(p.ErrorCode, nil)
		default:
			res.State = metadata.Partition{
				Partition: p.Partition, Leader: p.LeaderID, LeaderEpoch: p.LeaderEpoch,
				PartitionEpoch: p.PartitionEpoch, ISR: p.ISR,
				LeaderRecoveryState: metadata.LeaderRecoveryState(p.LeaderRecoveryState),
			}
		}
		results[i] = res
	}
	return results, nil
}

// ReplicasOffline reports to the active controller that the broker's replicas of
// offline are offline (see Controller.ReplicasOffline). The error is
// ErrStaleBrokerEpoch (register again), or no controller answered before ctx ended.
func (ch *Channel) ReplicasOffline(ctx context.Context, brokerID int32, brokerEpoch int64, offline []PartitionRef) error {
	req := &protocol.ReplicasOfflineRequest{BrokerID: brokerID, BrokerEpoch: brokerEpoch}
	for _, r := range offline {
		req.Partitions = append(req.Partitions, protocol.ReplicaRef{TopicID: r.TopicID, Partition: r.Partition})
	}
	r, err := ch.Send(ctx, req)
	if err != nil {
		return err
	}
	return ErrorForCode(r.(*protocol.ReplicasOfflineResponse).ErrorCode, nil)
}
