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
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// too when idempotent. It is callEach of one key, run on the caller's goroutine.
func (s *shareStore) call(ctx context.Context, k share.Key, idempotent bool, local func() error, remote func(ctx context.Context, conn *peer.Conn) (int16, error)) error {
	return s.callEach(ctx, []share.Key{k}, idempotent, func(share.Key) error { return local() },
		func(ctx context.Context, conn *peer.Conn, _ []share.Key) (map[share.Key]int16, error) {
			code, err := remote(ctx, conn)
			return map[share.Key]int16{k: code}, err
		})[k]
}

// retriable reports whether an operation that failed with err is worth trying again.
func retriable(err error, idempotent bool) bool {
	return errors.Is(err, errShareCoordinatorUnavailable) || idempotent && errors.Is(err, errShareWriteNotCommitted)
}

// localShareError is the error of an operation this node's share coordinator served.
func localShareError(err error) error {
	switch shareCoordinatorErrorCode(err) {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
		return fmt.Errorf("%w: %w", errShareCoordinatorUnavailable, err)
	case kerr.RequestTimedOut.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code:
		return fmt.Errorf("%w: %w", errShareWriteNotCommitted, err)
	}
	return err
}

// requestFailed is the error of a request to broker node that failed with err: worth
// retrying unless ctx ended.
func requestFailed(ctx context.Context, node metadata.NodeID, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w: broker %d: %v", errShareCoordinatorUnavailable, node, err)
}

// shareBatchMax bounds the partitions of one share-coordinator request callEach sends.
const shareBatchMax = 1000

// callEach is call for many keys, as Kafka's persister batches them: the keys this
// node coordinates run through local side by side (forEachShareKey), the others go in
// one request per coordinator and group (up to shareBatchMax partitions each; remote
// gets the keys it carries, all of one group, and returns their error codes). Each key
// that failed in a way worth retrying is looked up and tried again after a backoff,
// until ctx ends. It returns the failures by key. (Read and Write, one share
// partition's at a time, use call.)
func (s *shareStore) callEach(ctx context.Context, keys []share.Key, idempotent bool, local func(k share.Key) error,
	remote func(ctx context.Context, conn *peer.Conn, keys []share.Key) (map[share.Key]int16, error)) map[share.Key]error {
	failed := map[share.Key]error{}
	backoff := 25 * time.Millisecond
	for pending := keys; ; {
		var again []share.Key
		for k, err := range s.tryEach(ctx, pending, local, remote) {
			if err == nil {
				delete(failed, k)
				continue
			}
			failed[k] = err
			if retriable(err, idempotent) {
				again = append(again, k)
			}
		}
		if len(again) == 0 {
			return failed
		}
		ended := func() map[share.Key]error {
			for _, k := range again {
				failed[k] = fmt.Errorf("share coordinator of %s: %w (last: %v)", shareCoordinatorKey(k), ctx.Err(), failed[k])
			}
			return failed
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
		pending, backoff = again, min(2*backoff, 500*time.Millisecond)
	}
}

// tryEach tries each of keys once at its share coordinator (callEach), the
// coordinators side by side, and returns each key's error.
func (s *shareStore) tryEach(ctx context.Context, keys []share.Key, local func(k share.Key) error,
	remote func(ctx context.Context, conn *peer.Conn, keys []share.Key) (map[share.Key]int16, error)) map[share.Key]error {
	errs := make(map[share.Key]error, len(keys))
	var mu sync.Mutex
	set := func(k share.Key, err error) {
		mu.Lock()
		errs[k] = err
		mu.Unlock()
	}
	// A request names one group: the keys go by coordinator and group.
	type dest struct {
		node  metadata.NodeID
		group string
	}
	byDest := map[dest][]share.Key{}
	brokers := map[metadata.NodeID]metadata.Broker{}
	for _, k := range keys {
		br, err := s.b.shareCoordinatorOf(shareCoordinatorKey(k))
		if err != nil {
			errs[k] = fmt.Errorf("%w: %v", errShareCoordinatorUnavailable, err)
			continue
		}
		d := dest{br.NodeID, k.Group}
		byDest[d] = append(byDest[d], k)
		brokers[br.NodeID] = br
	}
	try := func(d dest, destKeys []share.Key) {
		if int32(d.node) == s.b.nodeID {
			forEachShareKey(destKeys, func(k share.Key) { set(k, localShareError(local(k))) })
			return
		}
		conn, connErr := s.conn(brokers[d.node])
		for chunk := range slices.Chunk(destKeys, shareBatchMax) {
			var codes map[share.Key]int16
			var err error
			if connErr == nil {
				codes, err = remote(ctx, conn, chunk)
			}
			for _, k := range chunk {
				code, answered := codes[k]
				switch {
				case connErr != nil:
					set(k, connErr)
				case err != nil:
					set(k, requestFailed(ctx, d.node, err))
				case !answered:
					set(k, fmt.Errorf("%w: broker %d did not answer for partition %d", errShareCoordinatorUnavailable, d.node, k.Partition))
				default:
					set(k, shareCoordinatorError(code))
				}
			}
		}
	}
	var wg sync.WaitGroup
	for d, destKeys := range byDest {
		if len(byDest) == 1 { // one coordinator (a share partition's read or write): no goroutine
			try(d, destKeys)
			break
		}
		wg.Go(func() { try(d, destKeys) })
	}
	wg.Wait()
	return errs
}

// shareRequestTopics lays keys out as a share-coordinator request's topics: newTopic
// makes one for a topic id, and add adds a key's partition to the one at index i.
func shareRequestTopics(keys []share.Key, newTopic func(id [16]byte), add func(i int, k share.Key)) {
	index := map[[16]byte]int{}
	for _, k := range keys {
		i, ok := index[k.TopicID]
		if !ok {
			i = len(index)
			index[k.TopicID] = i
			newTopic(k.TopicID)
		}
		add(i, k)
	}
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

// shareInit is where InitializeEach starts a share partition.
type shareInit struct {
	stateEpoch int32
	start      int64
}

// Initialize replaces key's stored state with an empty window at start.
func (s *shareStore) Initialize(ctx context.Context, k share.Key, stateEpoch int32, start int64) error {
	return s.InitializeEach(ctx, map[share.Key]shareInit{k: {stateEpoch, start}})[k]
}

// InitializeEach is Initialize for many keys, and returns the failures by key.
func (s *shareStore) InitializeEach(ctx context.Context, inits map[share.Key]shareInit) map[share.Key]error {
	keys := slices.SortedFunc(maps.Keys(inits), compareShareKeys)
	return s.callEach(ctx, keys, true, func(k share.Key) error {
		return s.b.shareState.initializeState(ctx, k, inits[k].stateEpoch, inits[k].start)
	}, func(ctx context.Context, conn *peer.Conn, keys []share.Key) (map[share.Key]int16, error) {
		req := kmsg.NewPtrInitializeShareGroupStateRequest()
		req.GroupID = keys[0].Group
		shareRequestTopics(keys, func(id [16]byte) {
			req.Topics = append(req.Topics, kmsg.InitializeShareGroupStateRequestTopic{TopicID: id})
		}, func(i int, k share.Key) {
			rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
			rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, inits[k].stateEpoch, inits[k].start
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		})
		r, err := conn.Request(ctx, req)
		if err != nil {
			return nil, err
		}
		codes := map[share.Key]int16{}
		for _, t := range r.(*kmsg.InitializeShareGroupStateResponse).Topics {
			for _, p := range t.Partitions {
				codes[share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}] = p.ErrorCode
			}
		}
		return codes, nil
	})
}

// Delete removes key's stored state.
func (s *shareStore) Delete(ctx context.Context, k share.Key) error {
	return s.DeleteEach(ctx, []share.Key{k})[k]
}

// DeleteEach is Delete for many keys, and returns the failures by key.
func (s *shareStore) DeleteEach(ctx context.Context, keys []share.Key) map[share.Key]error {
	return s.callEach(ctx, keys, false, func(k share.Key) error {
		return s.b.shareState.deleteState(ctx, k)
	}, func(ctx context.Context, conn *peer.Conn, keys []share.Key) (map[share.Key]int16, error) {
		req := kmsg.NewPtrDeleteShareGroupStateRequest()
		req.GroupID = keys[0].Group
		shareRequestTopics(keys, func(id [16]byte) {
			req.Topics = append(req.Topics, kmsg.DeleteShareGroupStateRequestTopic{TopicID: id})
		}, func(i int, k share.Key) {
			rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
			rp.Partition = k.Partition
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		})
		r, err := conn.Request(ctx, req)
		if err != nil {
			return nil, err
		}
		codes := map[share.Key]int16{}
		for _, t := range r.(*kmsg.DeleteShareGroupStateResponse).Topics {
			for _, p := range t.Partitions {
				codes[share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}] = p.ErrorCode
			}
		}
		return codes, nil
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
	sums, failed := s.SummaryEach(ctx, []share.Key{k})
	return sums[k], failed[k]
}

// SummaryEach is Summary for many keys: the summaries of the keys read, and the
// failures by key.
func (s *shareStore) SummaryEach(ctx context.Context, keys []share.Key) (map[share.Key]shareSummary, map[share.Key]error) {
	var mu sync.Mutex
	sums := make(map[share.Key]shareSummary, len(keys))
	set := func(k share.Key, sum shareSummary) {
		mu.Lock()
		sums[k] = sum
		mu.Unlock()
	}
	failed := s.callEach(ctx, keys, true, func(k share.Key) error {
		snap, found, err := s.b.shareState.summary(ctx, k, -1)
		set(k, shareSummary{found: found && snap.Start >= 0, stateEpoch: snap.StateEpoch, start: snap.Start, deliveryComplete: snap.DeliveryComplete()})
		return err
	}, func(ctx context.Context, conn *peer.Conn, keys []share.Key) (map[share.Key]int16, error) {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.SetVersion(1)
		req.GroupID = keys[0].Group
		shareRequestTopics(keys, func(id [16]byte) {
			req.Topics = append(req.Topics, kmsg.ReadShareGroupStateSummaryRequestTopic{TopicID: id})
		}, func(i int, k share.Key) {
			rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
			rp.Partition, rp.LeaderEpoch = k.Partition, -1
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		})
		r, err := conn.Request(ctx, req)
		if err != nil {
			return nil, err
		}
		codes := map[share.Key]int16{}
		for _, t := range r.(*kmsg.ReadShareGroupStateSummaryResponse).Topics {
			for _, p := range t.Partitions {
				k := share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
				codes[k] = p.ErrorCode
				set(k, shareSummary{found: p.ErrorCode == 0 && p.StartOffset >= 0, stateEpoch: p.StateEpoch, start: p.StartOffset, deliveryComplete: int64(max(p.DeliveryCompleteCount, 0))})
			}
		}
		return codes, nil
	})
	for k := range failed {
		delete(sums, k)
	}
	return sums, failed
}

// compareShareKeys orders keys by group, topic id, then partition.
func compareShareKeys(a, b share.Key) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), bytes.Compare(a.TopicID[:], b.TopicID[:]), cmp.Compare(a.Partition, b.Partition))
}

// forEachShareKey runs fn on keys, up to 32 at a time: the state operations a share
// coordinator serves for many share partitions at once, each waiting for its own
// replicated write.
func forEachShareKey(keys []share.Key, fn func(share.Key)) {
	if len(keys) == 1 { // no goroutine for one
		fn(keys[0])
		return
	}
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

// firstFailure returns the first of keys (in their order) that failed, and its error.
func firstFailure(keys []share.Key, failed map[share.Key]error) (share.Key, error) {
	for _, k := range keys {
		if err := failed[k]; err != nil {
			return k, err
		}
	}
	return share.Key{}, nil
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
