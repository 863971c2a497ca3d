package group

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Consumer group records in __consumer_offsets.
//
// Kafka's own KIP-848 records (key versions 3–8) have no definition in kmsg, so Samsa
// writes its own, under key versions Kafka does not use; Kafka tools reading the topic
// skip them as unknown. A key is the big-endian int16 version followed by
// length-prefixed (int16) strings; a value is JSON. Format:
//
//	key 0x5301 group                consumerGroupValue   (group epoch, target epoch)
//	key 0x5302 group, member id     consumerMemberValue  (subscription, epochs,
//	                                                      current and target assignment,
//	                                                      assignment epochs)
//
// A nil value is a tombstone: the member left, or the consumer group is gone (its
// offsets stay in their own records).
const (
	consumerGroupKeyVersion  int16 = 0x5301
	consumerMemberKeyVersion int16 = 0x5302
)

type consumerGroupValue struct {
	Epoch       int32 `json:"epoch"`
	TargetEpoch int32 `json:"target_epoch"`
	// SubscriptionHash hashes the subscribed topics' ids, partitions and racks at
	// Epoch: a change found after a restart or a coordinator move bumps the epoch.
	SubscriptionHash uint64 `json:"subscription_hash"`
	// AssignedAtMs is when the target assignment at TargetEpoch was computed (Unix
	// milliseconds; absent in records written before Samsa kept it).
	AssignedAtMs int64 `json:"assigned_at_ms,omitempty"`
}

// assignmentValue is an Assignment in JSON: topic id (hex) -> partitions.
type assignmentValue map[string][]int32

type consumerMemberValue struct {
	InstanceID         string          `json:"instance_id,omitempty"`
	RackID             string          `json:"rack_id,omitempty"`
	ClientID           string          `json:"client_id"`
	ClientHost         string          `json:"client_host"`
	RebalanceTimeoutMs int64           `json:"rebalance_timeout_ms"`
	SubscribedNames    []string        `json:"subscribed_topic_names,omitempty"`
	SubscribedRegex    string          `json:"subscribed_topic_regex,omitempty"`
	ServerAssignor     string          `json:"server_assignor,omitempty"`
	Epoch              int32           `json:"member_epoch"`
	PreviousEpoch      int32           `json:"previous_member_epoch"`
	State              int8            `json:"state"`
	Assigned           assignmentValue `json:"assigned"`
	Revoking           assignmentValue `json:"revoking,omitempty"`
	Target             assignmentValue `json:"target"`
	// AssignedEpochs and RevokingEpochs give, topic by topic, the assignment epoch
	// (KIP-1251) of each partition of Assigned and Revoking, in the same order, as
	// Kafka's ConsumerGroupCurrentMemberAssignmentValue does in its tagged
	// AssignmentEpochs field. A topic without them (a record written before they were
	// kept, or a list of another length) takes the member epoch, 0 if it is negative,
	// for all its partitions, as Kafka's Utils.assignmentFromTopicPartitions does.
	AssignedEpochs assignmentValue `json:"assigned_epochs,omitempty"`
	RevokingEpochs assignmentValue `json:"revoking_epochs,omitempty"`
	// Classic is set for a member that speaks the classic protocol.
	Classic *classicMemberValue `json:"classic,omitempty"`
}

type classicMemberValue struct {
	SessionTimeoutMs int64                  `json:"session_timeout_ms"`
	Protocols        []classicProtocolValue `json:"protocols"`
}

type classicProtocolValue struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

func appendKeyString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func readKeyString(b []byte) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, fmt.Errorf("%w: short key", ErrCorruptRecord)
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, fmt.Errorf("%w: short key", ErrCorruptRecord)
	}
	return string(b[2 : 2+n]), b[2+n:], nil
}

func consumerGroupKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(consumerGroupKeyVersion))
	return appendKeyString(b, group)
}

func consumerMemberKey(group, member string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(consumerMemberKeyVersion))
	return appendKeyString(appendKeyString(b, group), member)
}

func encodeAssignment(a Assignment) assignmentValue {
	out := assignmentValue{}
	for t, ps := range a {
		if len(ps) > 0 {
			out[hex.EncodeToString(t[:])] = ps
		}
	}
	return out
}

func decodeAssignment(v assignmentValue) (Assignment, error) {
	out := Assignment{}
	for s, ps := range v {
		t, err := decodeTopicID(s)
		if err != nil {
			return nil, err
		}
		ps = slices.Clone(ps)
		slices.Sort(ps)
		out[t] = slices.Compact(ps)
	}
	return out, nil
}

// encodeAssignmentEpochs returns the epochs of a's partitions, topic by topic in the
// order encodeAssignment writes them. A topic with a partition without an epoch is
// left out (it would load with the default).
func encodeAssignmentEpochs(a Assignment, epochs partitionEpochs) assignmentValue {
	out := assignmentValue{}
topics:
	for t, ps := range a {
		if len(ps) == 0 {
			continue
		}
		es := make([]int32, len(ps))
		for i, p := range ps {
			e, ok := epochs[t][p]
			if !ok {
				continue topics
			}
			es[i] = e
		}
		out[hex.EncodeToString(t[:])] = es
	}
	return out
}

// decodeOwned decodes an assignment of a member's current one (assigned or pending
// revocation) and records its partitions' epochs into epochs: those of v's topic in
// withEpochs when they are as many as its partitions, otherwise defaultEpoch.
func decodeOwned(v, withEpochs assignmentValue, defaultEpoch int32, epochs partitionEpochs) (Assignment, error) {
	a, err := decodeAssignment(v)
	if err != nil {
		return nil, err
	}
	for s, ps := range v {
		t, _ := decodeTopicID(s) // decodeAssignment checked it
		es := withEpochs[s]
		for i, p := range ps {
			e := defaultEpoch
			if len(es) == len(ps) {
				e = es[i]
			}
			epochs.set(t, p, e)
		}
	}
	return a, nil
}

// decodeTopicID decodes a topic id a record spells in hex.
func decodeTopicID(s string) (TopicID, error) {
	var t TopicID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(t) {
		return t, fmt.Errorf("%w: topic id %q", ErrCorruptRecord, s)
	}
	copy(t[:], b)
	return t, nil
}

func consumerGroupRecord(group string, cg *consumerGroup) Record {
	v, _ := json.Marshal(consumerGroupValue{Epoch: cg.epoch, TargetEpoch: cg.targetEpoch, SubscriptionHash: cg.subscriptionHash,
		AssignedAtMs: max(millis(cg.assignedAt), 0)})
	return Record{Key: consumerGroupKey(group), Value: v}
}

func consumerGroupTombstone(group string) Record {
	return Record{Key: consumerGroupKey(group)}
}

func consumerMemberRecord(group string, m *consumerMember) Record {
	var classic *classicMemberValue
	if m.classic != nil {
		classic = &classicMemberValue{SessionTimeoutMs: m.classic.sessionTimeout.Milliseconds()}
		for _, p := range m.classic.protocols {
			classic.Protocols = append(classic.Protocols, classicProtocolValue{Name: p.name, Metadata: p.metadata})
		}
	}
	v, _ := json.Marshal(consumerMemberValue{
		InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
		RebalanceTimeoutMs: m.rebalanceTimeout.Milliseconds(),
		SubscribedNames:    m.subscribedNames, SubscribedRegex: m.subscribedRegex, ServerAssignor: m.serverAssignor,
		Epoch: m.epoch, PreviousEpoch: m.previousEpoch, State: int8(m.state),
		Assigned: encodeAssignment(m.assigned), Revoking: encodeAssignment(m.revoking), Target: encodeAssignment(m.target),
		AssignedEpochs: encodeAssignmentEpochs(m.assigned, m.assignmentEpochs),
		RevokingEpochs: encodeAssignmentEpochs(m.revoking, m.assignmentEpochs),
		Classic:        classic,
	})
	return Record{Key: consumerMemberKey(group, m.id), Value: v}
}

func consumerMemberTombstone(group, member string) Record {
	return Record{Key: consumerMemberKey(group, member)}
}

// decodeConsumerRecord decodes a record of key version 0x5301 or 0x5302 into d.
func decodeConsumerRecord(version int16, r Record) (decoded, error) {
	group, rest, err := readKeyString(r.Key[2:])
	if err != nil {
		return decoded{}, err
	}
	if version == consumerGroupKeyVersion {
		d := decoded{kind: kindConsumerGroup, group: group}
		if r.Value != nil {
			d.consumerGroup = &consumerGroupValue{}
			if err := json.Unmarshal(r.Value, d.consumerGroup); err != nil {
				return decoded{}, fmt.Errorf("%w: consumer group value: %v", ErrCorruptRecord, err)
			}
		}
		return d, nil
	}
	member, _, err := readKeyString(rest)
	if err != nil {
		return decoded{}, err
	}
	d := decoded{kind: kindConsumerMember, group: group, member: member}
	if r.Value != nil {
		d.consumerMember = &consumerMemberValue{}
		if err := json.Unmarshal(r.Value, d.consumerMember); err != nil {
			return decoded{}, fmt.Errorf("%w: consumer member value: %v", ErrCorruptRecord, err)
		}
	}
	return d, nil
}

// replayConsumer applies a consumer group record to a partition's groups. A consumer
// record for a group known as a classic one turns it into a consumer group (the
// classic group record was tombstoned with it).
func replayConsumer(groups map[string]*group, partition int32, d decoded) error {
	g := groups[d.group]
	switch d.kind {
	case kindConsumerGroup:
		if d.consumerGroup == nil {
			if g != nil && g.consumer != nil {
				g.consumer = nil
				if len(g.offsets) == 0 && len(g.txnOffsets) == 0 && g.generation == 0 && g.protocolType == "" {
					delete(groups, d.group)
				}
			}
			return nil
		}
		g = consumerGroupOf(groups, partition, d.group)
		g.consumer.epoch = d.consumerGroup.Epoch
		g.consumer.targetEpoch = d.consumerGroup.TargetEpoch
		g.consumer.subscriptionHash = d.consumerGroup.SubscriptionHash
		g.consumer.assignedAt = time.Time{}
		if d.consumerGroup.AssignedAtMs > 0 {
			g.consumer.assignedAt = time.UnixMilli(d.consumerGroup.AssignedAtMs)
		}
	case kindConsumerMember:
		if d.consumerMember == nil {
			if g != nil && g.consumer != nil {
				if m := g.consumer.members[d.member]; m != nil {
					if m.static() && g.consumer.static[m.instanceID] == m.id {
						delete(g.consumer.static, m.instanceID)
					}
					delete(g.consumer.members, d.member)
				}
			}
			return nil
		}
		g = consumerGroupOf(groups, partition, d.group)
		v := d.consumerMember
		m := g.consumer.members[d.member]
		if m == nil {
			m = &consumerMember{id: d.member}
			g.consumer.members[d.member] = m
		}
		var err error
		epochs := partitionEpochs{}
		if m.assigned, err = decodeOwned(v.Assigned, v.AssignedEpochs, max(v.Epoch, 0), epochs); err != nil {
			return err
		}
		if m.revoking, err = decodeOwned(v.Revoking, v.RevokingEpochs, max(v.Epoch, 0), epochs); err != nil {
			return err
		}
		m.assignmentEpochs = epochs
		if m.target, err = decodeAssignment(v.Target); err != nil {
			return err
		}
		if m.static() && m.instanceID != v.InstanceID && g.consumer.static[m.instanceID] == m.id {
			delete(g.consumer.static, m.instanceID)
		}
		m.instanceID, m.rackID, m.clientID, m.clientHost = v.InstanceID, v.RackID, v.ClientID, v.ClientHost
		m.rebalanceTimeout = time.Duration(v.RebalanceTimeoutMs) * time.Millisecond
		m.subscribedNames, m.subscribedRegex, m.serverAssignor = v.SubscribedNames, v.SubscribedRegex, v.ServerAssignor
		m.epoch, m.previousEpoch, m.state = v.Epoch, v.PreviousEpoch, memberState(v.State)
		m.classic = nil
		if v.Classic != nil {
			m.classic = &classicMember{sessionTimeout: time.Duration(v.Classic.SessionTimeoutMs) * time.Millisecond}
			for _, p := range v.Classic.Protocols {
				m.classic.protocols = append(m.classic.protocols, protocol{name: p.Name, metadata: p.Metadata})
			}
		}
		if m.static() {
			g.consumer.static[m.instanceID] = m.id
		}
	}
	return nil
}

// consumerGroupOf returns the group, made a consumer group if it is not one yet.
func consumerGroupOf(groups map[string]*group, partition int32, id string) *group {
	g := groups[id]
	if g == nil {
		g = newGroup(id, partition, time.Time{})
		groups[id] = g
	}
	if g.consumer == nil {
		g.consumer = newConsumerGroup()
		// What was classic about the group went with its tombstone.
		g.protocolType, g.protocol, g.leader, g.generation = "", "", "", 0
		g.members = map[string]*member{}
		g.order = nil
		g.static = map[string]string{}
		g.supported = map[string]int{}
		g.state = StateEmpty
		g.subscribedTopics = nil
	}
	return g
}
