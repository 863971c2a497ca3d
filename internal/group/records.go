package group

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record key and value versions written to __consumer_offsets (Kafka's schema).
const (
	offsetKeyVersion         = 1 // OffsetCommitKey: versions 0 and 1 are offset keys
	groupKeyVersion          = 2 // GroupMetadataKey
	offsetValueVersion       = 3 // OffsetCommitValue with leader epoch, no expire timestamp
	offsetValueExpireVersion = 1 // OffsetCommitValue with an explicit expire timestamp
	groupValueVersion        = 3 // GroupMetadataValue with static members
)

func millis(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func offsetKey(group string, tp TopicPartition) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.Topic, Partition: tp.Partition}
	return k.AppendTo(nil)
}

func offsetValue(o CommittedOffset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset = o.Offset
	v.LeaderEpoch = o.LeaderEpoch
	v.Metadata = o.Metadata
	v.CommitTimestamp = millis(o.CommitTime)
	if !o.ExpireTime.IsZero() {
		v.Version = offsetValueExpireVersion
		v.ExpireTimestamp = millis(o.ExpireTime)
	}
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func offsetRecord(group string, tp TopicPartition, o CommittedOffset) Record {
	return Record{Key: offsetKey(group, tp), Value: offsetValue(o)}
}

func offsetTombstone(group string, tp TopicPartition) Record {
	return Record{Key: offsetKey(group, tp)}
}

func groupTombstone(group string) Record {
	return Record{Key: groupKey(group)}
}

// groupRecord encodes the group's current membership with the given assignment.
func groupRecord(g *group, assignment map[string][]byte) Record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = millis(g.stateTime)
	for _, id := range g.order {
		m := g.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		if m.static {
			s := m.instanceID
			vm.InstanceID = &s
		}
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		vm.Subscription = m.metadataFor(g.protocol)
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		vm.Assignment = assignment[m.id]
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return Record{Key: groupKey(g.id), Value: v.AppendTo(nil)}
}

type recordKind int8

const (
	kindUnknown recordKind = iota
	kindOffset
	kindGroup
	kindConsumerGroup
	kindConsumerMember
	kindShareGroup
	kindShareMember
)

// decoded is one __consumer_offsets record.
type decoded struct {
	kind   recordKind
	group  string
	tp     TopicPartition
	offset *CommittedOffset         // nil: tombstone (kindOffset)
	meta   *kmsg.GroupMetadataValue // nil: tombstone (kindGroup)

	member         string               // kindConsumerMember
	consumerGroup  *consumerGroupValue  // nil: tombstone (kindConsumerGroup)
	consumerMember *consumerMemberValue // nil: tombstone (kindConsumerMember)
	shareGroup     *shareGroupValue     // nil: tombstone (kindShareGroup)
	shareMember    *shareMemberValue    // nil: tombstone (kindShareMember)
}

// decodeRecord parses a record; records of kinds this coordinator does not know (for
// example Kafka's own KIP-848 or share group records) decode as kindUnknown and are
// skipped.
func decodeRecord(r Record) (decoded, error) {
	if len(r.Key) < 2 {
		return decoded{}, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(r.Key))
	}
	switch version := int16(binary.BigEndian.Uint16(r.Key)); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			return decoded{}, fmt.Errorf("%w: offset key: %v", ErrCorruptRecord, err)
		}
		d := decoded{kind: kindOffset, group: k.Group, tp: TopicPartition{Topic: k.Topic, Partition: k.Partition}}
		if r.Value == nil {
			return d, nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(r.Value); err != nil {
			return decoded{}, fmt.Errorf("%w: offset value: %v", ErrCorruptRecord, err)
		}
		leaderEpoch := v.LeaderEpoch
		if v.Version < 3 {
			leaderEpoch = -1
		}
		o := CommittedOffset{
			Offset:      v.Offset,
			LeaderEpoch: leaderEpoch,
			Metadata:    v.Metadata,
			CommitTime:  fromMillis(v.CommitTimestamp),
		}
		if v.Version == 1 {
			o.ExpireTime = fromMillis(v.ExpireTimestamp)
		}
		d.offset = &o
		return d, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			return decoded{}, fmt.Errorf("%w: group key: %v", ErrCorruptRecord, err)
		}
		d := decoded{kind: kindGroup, group: k.Group}
		if r.Value == nil {
			return d, nil
		}
		v := kmsg.NewGroupMetadataValue()
		if err := v.ReadFrom(r.Value); err != nil {
			return decoded{}, fmt.Errorf("%w: group value: %v", ErrCorruptRecord, err)
		}
		d.meta = &v
		return d, nil
	case consumerGroupKeyVersion, consumerMemberKeyVersion:
		return decodeConsumerRecord(version, r)
	case shareGroupKeyVersion, shareMemberKeyVersion:
		return decodeShareRecord(version, r)
	default:
		return decoded{kind: kindUnknown}, nil
	}
}
