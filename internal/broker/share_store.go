package broker

// shareStore is how this broker reads and writes share-partition state: the
// share.Store of its share partitions (the topic partitions it leads) and what the
// share group offset APIs use. Each operation goes to the share coordinator of its
// key, found as FindCoordinator finds it (shareCoordinatorOf): this node's
// shareStateLog when it leads the state's __share_group_state partition, else that
// leader's inter-broker listener, with the share coordinator's requests over the
// broker's peer connections (brokerPeers, which the transaction requests use too).
//
// A coordinator that moved or cannot serve now (NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a broken connection, a
// partition without a leader) is looked up again and retried, with a backoff, until
// the operation's context ends; FENCED_LEADER_EPOCH and FENCED_STATE_EPOCH come back
// as share's sentinel errors. So is a write the coordinator could not commit in time
// (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS: its state partition waits for a replica
// that died to leave the ISR): sending it again is safe, as every operation but
// Delete is idempotent (a snapshot laid over the stored state twice gives the same
// state) and the operations on one share partition are serialised by its lock in
// share.Manager. share.Manager gives an operation shareStoreTimeout, as Kafka's
// persister keeps looking for the coordinator for about 30 s: long enough to outlast
// the failover of a coordinator that died (its fencing after
// broker.session.timeout.ms, a new leader, the state partition loaded there). Only
// when that ends does the operation fail: share.Manager then undoes the change it was
// persisting, and the client is told so (COORDINATOR_NOT_AVAILABLE) and sends its
// acknowledgement again. A shorter wait (offsets.commit.timeout.ms, 5 s) refused the
// acknowledgements sent during a failover whenever it took longer, and franz-go
// (v1.22.3) sends an acknowledgement refused with a retriable error again only with
// its next fetch from that broker or its next FlushAcks: a consumer in FlushAcks
// whose next fetch from that broker was already buffered waited for FlushAcks'
// deadline.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/share"
)

// errShareCoordinatorUnavailable wraps the failures worth retrying after looking the
// coordinator up again.
var errShareCoordinatorUnavailable = errors.New("share coordinator not available")

// errShareWriteNotCommitted wraps a write the coordinator appended but could not
// commit in time, or refused for want of in-sync replicas: an idempotent operation is
// sent again.
var errShareWriteNotCommitted = errors.New("share state write not committed")

// shareStoreTimeout bounds one share-state operation of share.Manager, retries
// included (see the file comment).
const shareStoreTimeout = 30 * time.Second

// shareStore is safe for concurrent use: it reaches other brokers through the
// broker's peer connections (brokerPeers).
type shareStore struct{ b *Broker }

var _ share.Store = (*shareStore)(nil)

func newShareStore(b *Broker) *shareStore { return &shareStore{b: b} }

// conn returns the connection to a broker's inter-broker listener.
func (s *shareStore) conn(br metadata.Broker) (*peer.Conn, error) {
	c, err := s.b.peers.conn(int32(br.NodeID))
	if err != nil && !errors.Is(err, peer.ErrClosed) {
		return nil, fmt.Errorf("%w: %v", errShareCoordinatorUnavailable, err)
	}
	return c, err
}

// call runs one operation on key's share coordinator: local when this node is it,
// else remote, which sends the request on conn and returns the partition's error
// code. Retriable failures are retried until ctx ends; a write not committed in time
// too when idempotent.
func (s *shareStore) call(ctx context.Context, k share.Key, idempotent bool, local func() error, remote func(ctx context.Context, conn *peer.Conn) (int16, error)) error {
	backoff := 25 * time.Millisecond
	for {
		err := s.try(ctx, k, local, remote)
		retry := errors.Is(err, errShareCoordinatorUnavailable) ||
			idempotent && errors.Is(err, errShareWriteNotCommitted)
		if err == nil || !retry {
			return err
		}
		ended := func() error {
			return fmt.Errorf("share coordinator of %s: %w (last: %v)", shareCoordinatorKey(k), ctx.Err(), err)
		}
		if ctx.Err() != nil { // it ended during the try: said as when it ends during the wait
			return ended()
		}
		wait, stop := s.b.after(backoff)
		select {
		case <-wait:
		case <-ctx.Done():
			stop()
			return ended()
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func (s *shareStore) try(ctx context.Context, k share.Key, local func() error, remote func(ctx context.Context, conn *peer.Conn) (int16, error)) error {
	br, err := s.b.shareCoordinatorOf(shareCoordinatorKey(k))
	if err != nil {
		return fmt.Errorf("%w: %v", errShareCoordinatorUnavailable, err)
	}
	if int32(br.NodeID) == s.b.nodeID {
		err := local()
		switch shareCoordinatorErrorCode(err) {
		case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
			return fmt.Errorf("%w: %w", errShareCoordinatorUnavailable, err)
		case kerr.RequestTimedOut.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code:
			return fmt.Errorf("%w: %w", errShareWriteNotCommitted, err)
		}
		return err
	}
	conn, err := s.conn(br)
	if err != nil {
		return err
	}
	code, err := remote(ctx, conn)
	switch {
	case err != nil && ctx.Err() != nil:
		return err
	case err != nil:
		return fmt.Errorf("%w: broker %d: %v", errShareCoordinatorUnavailable, br.NodeID, err)
	}
	return shareCoordinatorError(code)
}

// shareCoordinatorError is the error for a share coordinator's answer.
func shareCoordinatorError(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.FencedLeaderEpoch.Code:
		return share.ErrFencedLeaderEpoch
	case kerr.FencedStateEpoch.Code:
		return share.ErrFencedStateEpoch
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
		return fmt.Errorf("%w: %w", errShareCoordinatorUnavailable, kerr.ErrorForCode(code))
	case kerr.RequestTimedOut.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code:
		return fmt.Errorf("%w: %w", errShareWriteNotCommitted, kerr.ErrorForCode(code))
	}
	return kerr.ErrorForCode(code)
}

// normalized is a snapshot in the form both paths give: runs sorted and joined, the
// end one past the last run.
func normalized(stateEpoch, leaderEpoch int32, start int64, runs []share.StateRun) share.Snapshot {
	s := share.Snapshot{StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch, Start: start}
	return s.Merge(start, runs)
}

// Read returns key's stored state. A share partition whose start offset is not
// known yet (none stored, or initialized at -1) is not found; its state epoch is
// still returned.
func (s *shareStore) Read(ctx context.Context, k share.Key, leaderEpoch int32) (share.Snapshot, bool, error) {
	var snap share.Snapshot
	var found bool
	err := s.call(ctx, k, true, func() error {
		stored, ok, err := s.b.shareState.readState(ctx, k, leaderEpoch)
		snap, found = normalized(stored.StateEpoch, stored.LeaderEpoch, stored.Start, stored.Runs), ok
		return err
	}, func(ctx context.Context, conn *peer.Conn) (int16, error) {
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.GroupID = k.Group
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := conn.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		resp := r.(*kmsg.ReadShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("ReadShareGroupState answered %d topics", len(resp.Topics))
		}
		p := resp.Topics[0].Partitions[0]
		runs := make([]share.StateRun, 0, len(p.StateBatches))
		for _, sb := range p.StateBatches {
			runs = append(runs, share.StateRun{First: sb.FirstOffset, Last: sb.LastOffset, State: uint8(sb.DeliveryState), Deliveries: sb.DeliveryCount})
		}
		snap, found = normalized(p.StateEpoch, leaderEpoch, p.StartOffset, runs), p.ErrorCode == 0
		return p.ErrorCode, nil
	})
	if err != nil {
		return share.Snapshot{}, false, err
	}
	if snap.Start < 0 {
		return share.Snapshot{StateEpoch: snap.StateEpoch}, false, nil
	}
	return snap, found, nil
}

// Write lays snap's window and runs over key's stored state.
func (s *shareStore) Write(ctx context.Context, k share.Key, leaderEpoch int32, snap share.Snapshot) error {
	return s.call(ctx, k, true, func() error {
		return s.b.shareState.writeState(ctx, k, snap.StateEpoch, leaderEpoch, snap.Start, snap.Runs)
	}, func(ctx context.Context, conn *peer.Conn) (int16, error) {
		req := kmsg.NewPtrWriteShareGroupStateRequest()
		req.GroupID = k.Group
		rt := kmsg.NewWriteShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.Partition, snap.StateEpoch, leaderEpoch, snap.Start
		for _, run := range snap.Runs {
			rp.StateBatches = append(rp.StateBatches, kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
				FirstOffset: run.First, LastOffset: run.Last, DeliveryState: int8(run.State), DeliveryCount: run.Deliveries,
			})
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := conn.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		resp := r.(*kmsg.WriteShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("WriteShareGroupState answered %d topics", len(resp.Topics))
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	})
}

// Initialize replaces key's stored state with an empty window at start.
func (s *shareStore) Initialize(ctx context.Context, k share.Key, stateEpoch int32, start int64) error {
	return s.call(ctx, k, true, func() error {
		return s.b.shareState.initializeState(ctx, k, stateEpoch, start)
	}, func(ctx context.Context, conn *peer.Conn) (int16, error) {
		req := kmsg.NewPtrInitializeShareGroupStateRequest()
		req.GroupID = k.Group
		rt := kmsg.NewInitializeShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, stateEpoch, start
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := conn.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		resp := r.(*kmsg.InitializeShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("InitializeShareGroupState answered %d topics", len(resp.Topics))
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	})
}

// Delete removes key's stored state.
func (s *shareStore) Delete(ctx context.Context, k share.Key) error {
	return s.call(ctx, k, false, func() error {
		return s.b.shareState.deleteState(ctx, k)
	}, func(ctx context.Context, conn *peer.Conn) (int16, error) {
		req := kmsg.NewPtrDeleteShareGroupStateRequest()
		req.GroupID = k.Group
		rt := kmsg.NewDeleteShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
		rp.Partition = k.Partition
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := conn.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		resp := r.(*kmsg.DeleteShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("DeleteShareGroupState answered %d topics", len(resp.Topics))
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	})
}

// shareSummary is a share partition's stored state in short.
type shareSummary struct {
	found            bool
	stateEpoch       int32
	start            int64
	deliveryComplete int64
}

// Summary returns key's stored state in short (ReadShareGroupStateSummary).
func (s *shareStore) Summary(ctx context.Context, k share.Key) (shareSummary, error) {
	var out shareSummary
	err := s.call(ctx, k, true, func() error {
		snap, found, err := s.b.shareState.summary(ctx, k, -1)
		out = shareSummary{found: found && snap.Start >= 0, stateEpoch: snap.StateEpoch, start: snap.Start, deliveryComplete: snap.DeliveryComplete()}
		return err
	}, func(ctx context.Context, conn *peer.Conn) (int16, error) {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.SetVersion(1)
		req.GroupID = k.Group
		rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = k.Partition, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := conn.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		resp := r.(*kmsg.ReadShareGroupStateSummaryResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("ReadShareGroupStateSummary answered %d topics", len(resp.Topics))
		}
		p := resp.Topics[0].Partitions[0]
		out = shareSummary{found: p.ErrorCode == 0 && p.StartOffset >= 0, stateEpoch: p.StateEpoch, start: p.StartOffset, deliveryComplete: int64(max(p.DeliveryCompleteCount, 0))}
		return p.ErrorCode, nil
	})
	return out, err
}

// forEachShareKey runs fn on keys, up to 32 at a time (admin operations over many
// share partitions, each a round trip to its coordinator, a write waiting for its
// replication there: with 8 at a time, resetting 2,000 partitions of a three-node
// cluster took 4.4-5.9 s; with 32, 2.0-3.1 s).
func forEachShareKey(keys []share.Key, fn func(share.Key)) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(k)
		})
	}
	wg.Wait()
}

// shareKeyErrs is forEachShareKey for an fn that can fail: it returns the failures by
// key.
func shareKeyErrs(keys []share.Key, fn func(share.Key) error) map[share.Key]error {
	var mu sync.Mutex
	failed := map[share.Key]error{}
	forEachShareKey(keys, func(k share.Key) {
		if err := fn(k); err != nil {
			mu.Lock()
			failed[k] = err
			mu.Unlock()
		}
	})
	return failed
}

// firstShareKeyErr is shareKeyErrs that returns the failure of the first key (in
// keys' order) that failed.
func firstShareKeyErr(keys []share.Key, fn func(share.Key) error) error {
	failed := shareKeyErrs(keys, fn)
	for _, k := range keys {
		if err := failed[k]; err != nil {
			return err
		}
	}
	return nil
}

// shareKeysOf lists the share partitions of group on topics: every partition of each.
func shareKeysOf(groupID string, topics ...*metadata.Topic) []share.Key {
	var keys []share.Key
	for _, t := range topics {
		for p := range t.Partitions {
			keys = append(keys, share.Key{Group: groupID, TopicID: t.ID, Partition: int32(p)})
		}
	}
	return keys
}

// shareStateKeys lists the share partitions group may hold state on, as
// group.Coordinator.ShareStateTopics returns them (ids, or all for a group recorded
// before they were kept: every topic that is not internal) as img has them.
func shareStateKeys(img *metadata.Image, groupID string, ids []group.TopicID, all bool) []share.Key {
	var topics []*metadata.Topic
	if all {
		for _, t := range img.Topics() {
			if !isInternalTopic(t.Name) {
				topics = append(topics, t)
			}
		}
	} else {
		for _, id := range ids {
			if t, ok := img.TopicByID(metadata.TopicID(id)); ok {
				topics = append(topics, t)
			}
		}
	}
	return shareKeysOf(groupID, topics...)
}
