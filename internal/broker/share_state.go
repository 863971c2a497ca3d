package broker

// Share-partition state (KIP-932) is kept in the compacted internal topic
// __share_group_state, one record per share partition holding its latest snapshot
// (internal/share). The share partition of (group, topic id, partition) lives in
// partition hash("group:topicId:partition") mod share.coordinator.state.topic.num.partitions,
// Kafka's share-coordinator key; its leader holds the state, as a __consumer_offsets
// partition's leader coordinates its groups. A partition is read once, from its start,
// the first time one of its share partitions is used while this node leads it, and then
// kept in memory until its leader epoch changes.
//
// Record format (Samsa's; Kafka's ShareSnapshot records have no kmsg definition): the
// key is the int16 version 0x5321, the group id as an int16-length string, the topic id
// (16 bytes) and the partition (int32); the value is the JSON snapshot, nil when the
// state was deleted.
//
// Differences from Kafka: the leader of a topic partition serves its share fetches and
// must also lead the __share_group_state partition of the state (Kafka's partition
// leaders reach a remote share coordinator with ReadShareGroupState and
// WriteShareGroupState); on a one-node cluster that always holds.

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/share"
)

const (
	shareStateTopic      = "__share_group_state"
	shareStateKeyVersion = 0x5321
)

// errShareStateNotLocal: this node does not lead the state's partition.
var errShareStateNotLocal = errors.New("the share-partition state is kept on another broker")

// shareStateLog implements share.Store over __share_group_state.
type shareStateLog struct {
	b  *Broker
	mu struct {
		sync.Mutex
		parts map[int32]*shareStatePartition
	}
}

type shareStatePartition struct {
	leaderEpoch int32
	snaps       map[share.Key]share.Snapshot
}

var _ share.Store = (*shareStateLog)(nil)

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

// statePartition is the __share_group_state partition of a share partition.
func (s *shareStateLog) statePartition(k share.Key) int32 {
	coordinatorKey := k.Group + ":" + metadataTopicID(k.TopicID) + ":" + strconv.Itoa(int(k.Partition))
	return group.PartitionOf(coordinatorKey, s.b.cfg.ShareCoordinatorStateTopicNumPartitions)
}

// metadataTopicID formats a topic id as Kafka's Uuid.toString does (base64 URL, no
// padding), so share-coordinator keys are Kafka's.
func metadataTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// loaded returns the state partition's snapshots, reading the partition if needed.
func (s *shareStateLog) loaded(ctx context.Context, p int32) (*shareStatePartition, error) {
	if _, err := s.b.ensureShareStateTopic(); err != nil {
		return nil, err
	}
	part := s.b.replicas.Get(shareStateTopic, p)
	if part == nil || !part.IsLeader() {
		return nil, fmt.Errorf("%s-%d: %w", shareStateTopic, p, errShareStateNotLocal)
	}
	epoch := part.LeaderEpoch()
	s.mu.Lock()
	if s.mu.parts == nil {
		s.mu.parts = map[int32]*shareStatePartition{}
	}
	sp := s.mu.parts[p]
	s.mu.Unlock()
	if sp != nil && sp.leaderEpoch == epoch {
		return sp, nil
	}
	sp = &shareStatePartition{leaderEpoch: epoch, snaps: map[share.Key]share.Snapshot{}}
	err := offsetsLog{s.b}.loadPartition(ctx, part, func(r group.Record) error {
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
		return nil, err
	}
	s.mu.Lock()
	s.mu.parts[p] = sp
	s.mu.Unlock()
	return sp, nil
}

func (s *shareStateLog) Read(ctx context.Context, k share.Key) (share.Snapshot, bool, error) {
	sp, err := s.loaded(ctx, s.statePartition(k))
	if err != nil {
		return share.Snapshot{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := sp.snaps[k]
	return snap, ok, nil
}

func (s *shareStateLog) Write(ctx context.Context, k share.Key, snap share.Snapshot) error {
	return s.write(ctx, k, snap.Encode())
}

// Delete removes a share partition's state (DeleteShareGroupOffsets, DeleteGroups).
func (s *shareStateLog) Delete(ctx context.Context, k share.Key) error {
	return s.write(ctx, k, nil)
}

func (s *shareStateLog) write(ctx context.Context, k share.Key, value []byte) error {
	p := s.statePartition(k)
	sp, err := s.loaded(ctx, p)
	if err != nil {
		return err
	}
	part := s.b.replicas.Get(shareStateTopic, p)
	if part == nil || !part.IsLeader() {
		return fmt.Errorf("%s-%d: %w", shareStateTopic, p, errShareStateNotLocal)
	}
	if err := appendInternal(ctx, s.b, part, []group.Record{{Key: shareStateKey(k), Value: value}}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if value == nil {
		delete(sp.snaps, k)
	} else if snap, err := share.DecodeSnapshot(value); err == nil {
		sp.snaps[k] = snap
	}
	return nil
}

// Snapshots returns the stored state of every share partition of group in the
// __share_group_state partitions this node leads.
func (s *shareStateLog) Snapshots(ctx context.Context, groupID string) (map[share.Key]share.Snapshot, error) {
	out := map[share.Key]share.Snapshot{}
	for p := range s.b.cfg.ShareCoordinatorStateTopicNumPartitions {
		part := s.b.replicas.Get(shareStateTopic, p)
		if part == nil || !part.IsLeader() {
			continue
		}
		sp, err := s.loaded(ctx, p)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		for k, snap := range sp.snaps {
			if k.Group == groupID {
				out[k] = snap
			}
		}
		s.mu.Unlock()
	}
	return out, nil
}

// shareErrorCode maps a share-state failure to the code clients retry on.
func shareErrorCode(err error) int16 {
	if errors.Is(err, errShareStateNotLocal) {
		return kerr.CoordinatorNotAvailable.Code
	}
	return errorCode(err)
}

// ensureShareStateTopic creates __share_group_state on first use.
func (b *Broker) ensureShareStateTopic() (*metadata.Image, error) {
	return b.ensureInternalTopic(shareStateTopic, b.cfg.ShareCoordinatorStateTopicNumPartitions, b.cfg.ShareStateRF(), "share.coordinator.state.topic.replication.factor", map[string]string{
		"cleanup.policy":      "compact",
		"min.insync.replicas": strconv.Itoa(int(b.cfg.ShareStateMinISR())),
	})
}

// ensureInternalTopic creates an internal topic on first use, with rf replicas (never
// fewer: until that many brokers are registered the controller refuses and the callers
// answer COORDINATOR_NOT_AVAILABLE), and returns the image that has it.
func (b *Broker) ensureInternalTopic(name string, partitions int32, rf int16, rfProperty string, configs map[string]string) (*metadata.Image, error) {
	img := b.image()
	if _, ok := img.Topic(name); ok {
		return img, nil
	}
	ctx, cancel := b.requestContext(0)
	defer cancel()
	results, err := b.createTopics(ctx, []kmsg.CreateTopicsRequestTopic{newTopic(name, partitions, rf, configs)})
	if err != nil {
		return nil, err
	}
	if res := results[0]; res.ErrorCode != 0 && res.ErrorCode != kerr.TopicAlreadyExists.Code {
		msg := ""
		if res.ErrorMessage != nil {
			msg = *res.ErrorMessage
		}
		return nil, fmt.Errorf("cannot create %s with replication factor %d (%s): %s", name, rf, rfProperty, msg)
	}
	if _, ok := b.image().Topic(name); !ok {
		return nil, fmt.Errorf("%s is not in this broker's metadata yet", name)
	}
	return b.image(), nil
}

// deleteShareState drops every share partition of a deleted share group.
func (b *Broker) deleteShareState(ctx context.Context, groupID string) {
	snaps, err := b.shareState.Snapshots(ctx, groupID)
	if err != nil {
		b.logger.Warn("deleting share group state failed", "group", groupID, "err", err)
		return
	}
	for k := range snaps {
		b.shares.Forget(k)
		if err := b.shareState.Delete(ctx, k); err != nil {
			b.logger.Warn("deleting share partition state failed", "group", groupID, "partition", k.Partition, "err", err)
		}
	}
}
