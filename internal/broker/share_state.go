package broker

// The share coordinator (KIP-932): share-partition state is kept in the compacted
// internal topic __share_group_state, one record per share partition holding its
// latest snapshot (internal/share). The share partition of (group, topic id,
// partition) lives in partition hash("group:topicId:partition") mod
// share.coordinator.state.topic.num.partitions — Kafka's share-coordinator key — and
// that partition's leader is the share coordinator of the state: it serves
// InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
// DeleteShareGroupState and ReadShareGroupStateSummary (share_state_apis.go) over it.
// The leader of a topic partition keeps its share partitions in memory
// (internal/share's Manager) and reads and writes their state through shareStore
// (share_store.go): directly when it also leads the state's partition, else with
// those requests to the coordinator, which it finds as FindCoordinator does.
//
// A state partition is read once, from its start, the first time one of its share
// partitions is used while this node leads it, and then kept in memory until its
// leader epoch changes. Every change is appended as an acks=all write and applied to
// memory once the high watermark covers it; the operations on one share partition
// are serialised (a key lock), so the log holds them in the order they were answered.
// Fencing follows Kafka's shard: a read or write carrying a topic-partition leader
// epoch older than the one stored is refused (FENCED_LEADER_EPOCH) and a newer one is
// recorded (a read that brings one writes it first), so a deposed leader cannot
// overwrite what its successor does; a write or initialization of an older state
// epoch is refused (FENCED_STATE_EPOCH). A deleted state keeps its epoch, moved on,
// so that a leader that still holds the deleted state in memory is fenced too.
//
// Record format (Samsa's; Kafka's ShareSnapshot records have no kmsg definition): the
// key is the int16 version 0x5321, the group id as an int16-length string, the topic id
// (16 bytes) and the partition (int32); the value is the JSON snapshot — start offset
// -1 when the state was deleted (a nil value, a tombstone, reads as no state).

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/coordkey"
	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/share"
)

const (
	shareStateTopic      = "__share_group_state"
	shareStateKeyVersion = 0x5321
)

// errShareStateNotLocal: this node does not lead the state's partition, or cannot
// write it (NOT_COORDINATOR).
var errShareStateNotLocal = errors.New("the share-partition state cannot be kept on this broker")

// shareStateLog is the share coordinator of the __share_group_state partitions this
// node leads. It is safe for concurrent use: mu guards the partition map and each
// partition's snapshots; loadMu serialises loading a partition (so that no write
// lands between a load's read of the log and its publication); an operation holds
// its key's lock from reading the stored snapshot to applying its change. Lock order:
// key lock, then loadMu, then mu.
type shareStateLog struct {
	b      *Broker
	loadMu sync.Mutex
	mu     struct {
		sync.Mutex
		parts map[int32]*shareStatePartition
	}
	keyLocks [64]sync.Mutex
	seed     maphash.Seed
}

type shareStatePartition struct {
	leaderEpoch int32
	snaps       map[share.Key]share.Snapshot // guarded by shareStateLog.mu
}

func newShareStateLog(b *Broker) *shareStateLog {
	s := &shareStateLog{b: b, seed: maphash.MakeSeed()}
	s.mu.parts = map[int32]*shareStatePartition{}
	return s
}

func shareStateKey(k share.Key) []byte {
	b := binary.BigEndian.AppendUint16(nil, shareStateKeyVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.TopicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

func decodeShareStateKey(b []byte) (share.Key, bool) {
	if len(b) < 4 || binary.BigEndian.Uint16(b) != shareStateKeyVersion {
		return share.Key{}, false
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	if len(b) != 4+n+16+4 {
		return share.Key{}, false
	}
	var k share.Key
	k.Group = string(b[4 : 4+n])
	copy(k.TopicID[:], b[4+n:])
	k.Partition = int32(binary.BigEndian.Uint32(b[4+n+16:]))
	return k, true
}

// shareCoordinatorKey is Kafka's key of a share partition: "group:topicId:partition".
func shareCoordinatorKey(k share.Key) string {
	return k.Group + ":" + metadataTopicID(k.TopicID) + ":" + strconv.Itoa(int(k.Partition))
}

// statePartition is the __share_group_state partition of a share partition: by the
// topic's partition count once it exists (share.coordinator.state.topic.num.partitions
// only sizes it when it is created), as Kafka's share coordinator takes it from the
// metadata cache.
func (b *Broker) statePartition(k share.Key) int32 {
	return b.shareStatePartitionOf(shareCoordinatorKey(k))
}

// shareStatePartitionOf is the __share_group_state partition of a share-partition key.
func (b *Broker) shareStatePartitionOf(key string) int32 {
	n := b.cfg.ShareCoordinatorStateTopicNumPartitions
	if t, ok := b.image().Topic(shareStateTopic); ok && len(t.Partitions) > 0 {
		n = int32(len(t.Partitions))
	}
	return coordkey.Partition(key, n)
}

// metadataTopicID formats a topic id as Kafka's Uuid.toString does (base64 URL, no
// padding), so share-coordinator keys are Kafka's.
func metadataTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// log is __share_group_state as an internal topic: a leadership moved during a write
// means this node is no longer the share coordinator.
func (s *shareStateLog) log() internalLog {
	return internalLog{b: s.b, topic: shareStateTopic, notCoordinator: errShareStateNotLocal}
}

// keyLock is the lock of one share partition's operations.
func (s *shareStateLog) keyLock(k share.Key) *sync.Mutex {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(k.Group)
	h.Write(k.TopicID[:])
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(k.Partition))
	h.Write(p[:])
	return &s.keyLocks[h.Sum64()%uint64(len(s.keyLocks))]
}

// led returns the state partition p while this node leads it.
func (s *shareStateLog) led(p int32) (*replica.Partition, error) {
	part := s.b.replicas.Get(shareStateTopic, p)
	if part == nil || !part.IsLeader() {
		return nil, fmt.Errorf("%s-%d: %w", shareStateTopic, p, errShareStateNotLocal)
	}
	return part, nil
}

// loaded returns the state partition's snapshots, reading the partition if needed.
func (s *shareStateLog) loaded(ctx context.Context, p int32) (*shareStatePartition, *replica.Partition, error) {
	if _, err := s.b.ensureShareStateTopic(); err != nil {
		return nil, nil, err
	}
	part, err := s.led(p)
	if err != nil {
		return nil, nil, err
	}
	epoch := part.LeaderEpoch()
	s.mu.Lock()
	sp := s.mu.parts[p]
	s.mu.Unlock()
	if sp != nil && sp.leaderEpoch == epoch {
		return sp, part, nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.mu.Lock()
	sp = s.mu.parts[p]
	s.mu.Unlock()
	if sp != nil && sp.leaderEpoch == epoch {
		return sp, part, nil
	}
	sp = &shareStatePartition{leaderEpoch: epoch, snaps: map[share.Key]share.Snapshot{}}
	err = s.log().load(ctx, p, func(_ *record.Header, r *record.Record, _ *record.ControlRecord) error {
		if r == nil { // a transaction marker: the state is not written in transactions
			return nil
		}
		k, ok := decodeShareStateKey(r.Key)
		if !ok {
			return nil
		}
		if r.Value == nil {
			delete(sp.snaps, k)
			return nil
		}
		snap, err := share.DecodeSnapshot(r.Value)
		if err != nil {
			s.b.logger.Warn("skipping corrupt share state record", "partition", p, "group", k.Group, "err", err)
			return nil
		}
		sp.snaps[k] = snap
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if part.LeaderEpoch() != epoch || !part.IsLeader() {
		return nil, nil, fmt.Errorf("%s-%d: leadership moved while loading: %w", shareStateTopic, p, errShareStateNotLocal)
	}
	s.mu.Lock()
	s.mu.parts[p] = sp
	s.mu.Unlock()
	s.b.logger.Info("loaded share-partition state", "partition", p, "epoch", epoch, "share_partitions", len(sp.snaps))
	return sp, part, nil
}

// shareStateOp is one share partition's stored state while its key lock is held.
type shareStateOp struct {
	s    *shareStateLog
	key  share.Key
	sp   *shareStatePartition
	part *replica.Partition
	snap share.Snapshot
	// found: a snapshot is stored (snap is it).
	found bool
}

// lock loads the key's state partition and takes the key's lock; release with unlock.
func (s *shareStateLog) lock(ctx context.Context, k share.Key) (*shareStateOp, error) {
	mu := s.keyLock(k)
	mu.Lock()
	sp, part, err := s.loaded(ctx, s.b.statePartition(k))
	if err != nil {
		mu.Unlock()
		return nil, err
	}
	op := &shareStateOp{s: s, key: k, sp: sp, part: part}
	s.mu.Lock()
	op.snap, op.found = sp.snaps[k]
	s.mu.Unlock()
	return op, nil
}

func (op *shareStateOp) unlock() { op.s.keyLock(op.key).Unlock() }

// store appends the snapshot, waits until it is committed, and applies it to memory.
func (op *shareStateOp) store(ctx context.Context, snap share.Snapshot) error {
	if op.part.LeaderEpoch() != op.sp.leaderEpoch {
		return fmt.Errorf("%s-%d: leadership moved: %w", shareStateTopic, op.part.Index, errShareStateNotLocal)
	}
	if err := op.s.log().append(ctx, op.part.Index, []record.Record{{Key: shareStateKey(op.key), Value: snap.Encode()}}, nil); err != nil {
		return err
	}
	op.s.mu.Lock()
	defer op.s.mu.Unlock()
	op.sp.snaps[op.key] = snap
	op.snap, op.found = snap, true
	return nil
}

// fencedLeader reports whether a request's leader epoch is older than the stored one
// (-1 is not checked).
func (op *shareStateOp) fencedLeader(leaderEpoch int32) bool {
	return op.found && leaderEpoch >= 0 && op.snap.LeaderEpoch > leaderEpoch
}

// readState answers ReadShareGroupState: the stored snapshot, after recording a newer
// leader epoch. found is false for a share partition without state.
func (s *shareStateLog) readState(ctx context.Context, k share.Key, leaderEpoch int32) (share.Snapshot, bool, error) {
	op, err := s.lock(ctx, k)
	if err != nil {
		return share.Snapshot{}, false, err
	}
	defer op.unlock()
	if op.fencedLeader(leaderEpoch) {
		return share.Snapshot{}, false, share.ErrFencedLeaderEpoch
	}
	if op.found && leaderEpoch > op.snap.LeaderEpoch {
		next := op.snap
		next.LeaderEpoch = leaderEpoch
		if err := op.store(ctx, next); err != nil {
			return share.Snapshot{}, false, err
		}
	}
	return op.snap, op.found, nil
}

// writeState answers WriteShareGroupState: start (-1: unchanged) and runs laid over
// the stored state (share.Snapshot.Merge). stateEpoch and leaderEpoch -1 are not
// checked and keep the stored ones.
func (s *shareStateLog) writeState(ctx context.Context, k share.Key, stateEpoch, leaderEpoch int32, start int64, runs []share.StateRun) error {
	op, err := s.lock(ctx, k)
	if err != nil {
		return err
	}
	defer op.unlock()
	if op.fencedLeader(leaderEpoch) {
		return share.ErrFencedLeaderEpoch
	}
	if op.found && stateEpoch >= 0 && op.snap.StateEpoch > stateEpoch {
		return share.ErrFencedStateEpoch
	}
	base := op.snap
	if !op.found {
		base = share.Snapshot{Start: max(start, 0), StateEpoch: max(stateEpoch, 0), LeaderEpoch: max(leaderEpoch, 0)}
		if start < 0 && len(runs) > 0 {
			base.Start = runs[0].First
		}
	}
	next := base.Merge(start, runs)
	if next.End-next.Start > share.MaxWindow {
		return fmt.Errorf("%w: %w: the state batches would widen the window to [%d, %d), more than the %d offsets a share partition holds",
			kerr.InvalidRequest, share.ErrWindowTooWide, next.Start, next.End, share.MaxWindow)
	}
	if stateEpoch >= 0 {
		next.StateEpoch = stateEpoch
	}
	if leaderEpoch >= 0 {
		next.LeaderEpoch = max(next.LeaderEpoch, leaderEpoch)
	}
	return op.store(ctx, next)
}

// initializeState answers InitializeShareGroupState: the stored state is replaced by
// an empty window at start (-1: the start is not known yet) under stateEpoch, which
// must not be older than the stored one.
func (s *shareStateLog) initializeState(ctx context.Context, k share.Key, stateEpoch int32, start int64) error {
	op, err := s.lock(ctx, k)
	if err != nil {
		return err
	}
	defer op.unlock()
	if op.found && op.snap.StateEpoch > stateEpoch {
		return share.ErrFencedStateEpoch
	}
	return op.store(ctx, share.Snapshot{StateEpoch: stateEpoch, LeaderEpoch: op.snap.LeaderEpoch, Start: start, End: max(start, 0)})
}

// deleteState answers DeleteShareGroupState. A stored state is replaced by none under
// the next state epoch (start -1, as InitializeShareGroupState without a start
// offset), not by a tombstone, which would forget the epoch: a leader still holding
// the share partition in memory has its next write fenced (FENCED_STATE_EPOCH) and
// reads the state again, instead of writing back what was deleted.
func (s *shareStateLog) deleteState(ctx context.Context, k share.Key) error {
	op, err := s.lock(ctx, k)
	if err != nil {
		return err
	}
	defer op.unlock()
	if !op.found {
		return nil
	}
	return op.store(ctx, share.Snapshot{StateEpoch: op.snap.StateEpoch + 1, LeaderEpoch: op.snap.LeaderEpoch, Start: -1})
}

// summary answers ReadShareGroupStateSummary: the stored state, found false when
// there is none.
func (s *shareStateLog) summary(ctx context.Context, k share.Key, leaderEpoch int32) (share.Snapshot, bool, error) {
	op, err := s.lock(ctx, k)
	if err != nil {
		return share.Snapshot{}, false, err
	}
	defer op.unlock()
	if op.fencedLeader(leaderEpoch) {
		return share.Snapshot{}, false, share.ErrFencedLeaderEpoch
	}
	return op.snap, op.found, nil
}

// shareCoordinatorErrorCode is the code a share-coordinator request answers for err.
func shareCoordinatorErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, share.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, share.ErrFencedStateEpoch):
		return kerr.FencedStateEpoch.Code
	case errors.Is(err, errShareStateNotLocal), errors.Is(err, group.ErrNotCoordinator), errors.Is(err, replica.ErrNotLeader):
		return kerr.NotCoordinator.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// shareErrorCode maps a share-state failure to the code a ShareFetch or
// ShareAcknowledge partition answers: a fenced leader epoch makes the client look
// for the leader again, a fenced state epoch is final for the records named, and
// a coordinator that cannot be reached or did not answer in time is retried
// (COORDINATOR_NOT_AVAILABLE: the acknowledgement is sent again).
func shareErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, share.ErrFencedLeaderEpoch):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, share.ErrFencedStateEpoch):
		return kerr.FencedStateEpoch.Code
	case errors.Is(err, replica.ErrNotLeader), errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.UnknownTopicOrPartition):
		return errorCode(err)
	}
	return kerr.CoordinatorNotAvailable.Code
}

// ensureShareStateTopic creates __share_group_state on first use, compacted, with
// segments of share.coordinator.state.topic.segment.bytes as in Kafka (without it the
// topic would take log.segment.bytes, 1 GiB, and a partition would grow that much
// before the cleaner could compact any of it).
func (b *Broker) ensureShareStateTopic() (*metadata.Image, error) {
	return b.ensureInternalTopic(shareStateTopic, func() internalTopic {
		return internalTopic{b.cfg.ShareCoordinatorStateTopicNumPartitions, b.cfg.ShareStateRF(), "share.coordinator.state.topic.replication.factor", map[string]string{
			"cleanup.policy":      "compact",
			"segment.bytes":       strconv.FormatInt(b.cfg.ShareCoordinatorStateTopicSegmentBytes, 10),
			"min.insync.replicas": strconv.Itoa(int(b.cfg.ShareStateMinISR())),
		}}
	})
}

// internalTopic is how an internal topic is created: its partitions, its replication
// factor and the property that sets it, and its configs.
type internalTopic struct {
	partitions int32
	rf         int16
	rfProperty string
	configs    map[string]string
}

// ensureInternalTopic creates an internal topic on first use, as spec says, with rf
// replicas (never fewer: until that many brokers are registered the controller
// refuses and the callers answer COORDINATOR_NOT_AVAILABLE), and returns the image
// that has it. Every coordinator lookup calls it: spec is called only to create.
func (b *Broker) ensureInternalTopic(name string, spec func() internalTopic) (*metadata.Image, error) {
	img := b.image()
	if _, ok := img.Topic(name); ok {
		return img, nil
	}
	s := spec()
	ctx, cancel := b.requestContext(0)
	defer cancel()
	results, err := b.createTopics(ctx, []kmsg.CreateTopicsRequestTopic{newTopic(name, s.partitions, s.rf, s.configs)})
	if err != nil {
		return nil, err
	}
	if res := results[0]; res.ErrorCode != 0 && res.ErrorCode != kerr.TopicAlreadyExists.Code {
		msg := ""
		if res.ErrorMessage != nil {
			msg = *res.ErrorMessage
		}
		return nil, fmt.Errorf("cannot create %s with replication factor %d (%s): %s", name, s.rf, s.rfProperty, msg)
	}
	if _, ok := b.image().Topic(name); !ok {
		return nil, fmt.Errorf("%s is not in this broker's metadata yet", name)
	}
	return b.image(), nil
}
