package metadata

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// TopicID is a topic's random 128-bit identifier (Kafka's topic UUID).
type TopicID [16]byte

// NodeID identifies a broker or controller node (Kafka's node.id / broker.id).
type NodeID int32

// Resource types of ConfigRecord, with Kafka's numbering.
const (
	ResourceTopic  int8 = 2
	ResourceBroker int8 = 4
	ResourceGroup  int8 = 32 // share and consumer group configs (KIP-848, KIP-932)
)

// NoLeader is the Leader of a partition that has none (Kafka's -1).
const NoLeader int32 = -1

// Errors returned by Apply and Decode.
var (
	// ErrCorruptRecord: bytes that do not decode to a known record of a known version.
	ErrCorruptRecord = errors.New("metadata: corrupt record")
	// ErrInvalidRecord: a well-formed record that cannot apply to the image.
	ErrInvalidRecord = errors.New("metadata: invalid record")
)

// NewTopicID returns a random, non-zero topic id.
func NewTopicID() TopicID {
	for {
		var id TopicID
		_, _ = rand.Read(id[:])   // crypto/rand.Read never fails (Go ≥ 1.24)
		id[6] = id[6]&0x0f | 0x40 // version 4 UUID
		id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
		if !id.IsZero() {
			return id
		}
	}
}

// IsZero reports whether id is the all-zero id (Kafka's "no topic id").
func (id TopicID) IsZero() bool { return id == TopicID{} }

// String returns id as 32 hex digits.
func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText encodes id as hex.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes 32 hex digits.
func (id *TopicID) UnmarshalText(b []byte) error {
	if len(b) != 32 {
		return fmt.Errorf("%w: topic id %q", ErrCorruptRecord, b)
	}
	var out TopicID
	if _, err := hex.Decode(out[:], b); err != nil {
		return fmt.Errorf("%w: topic id %q: %v", ErrCorruptRecord, b, err)
	}
	*id = out
	return nil
}

// Record is one metadata log record. The set of implementations is closed: the
// record types of this package.
type Record interface {
	recordType() string
}

// Endpoint is one listener of a broker.
type Endpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// RegisterBrokerRecord registers (or re-registers) a broker. IncarnationID is the
// random id the broker process chose at start-up (32 hex digits), so that the
// controller tells a restarted broker from a repeated registration. A new incarnation
// takes the broker out of every partition's OfflineReplicas: the new process reports
// again what it cannot open.
type RegisterBrokerRecord struct {
	NodeID               NodeID     `json:"node_id"`
	Epoch                int64      `json:"epoch"`
	IncarnationID        string     `json:"incarnation_id,omitempty"`
	Endpoints            []Endpoint `json:"endpoints"`
	Rack                 string     `json:"rack,omitempty"`
	Fenced               bool       `json:"fenced,omitempty"`
	InControlledShutdown bool       `json:"in_controlled_shutdown,omitempty"`
}

// BrokerRegistrationChangeRecord fences or unfences a registered broker, or marks it
// as in controlled shutdown (Kafka's BrokerRegistrationChangeRecord). A nil field is
// unchanged. Epoch must be the broker's current epoch.
type BrokerRegistrationChangeRecord struct {
	NodeID               NodeID `json:"node_id"`
	Epoch                int64  `json:"epoch"`
	Fenced               *bool  `json:"fenced,omitempty"`
	InControlledShutdown *bool  `json:"in_controlled_shutdown,omitempty"`
}

// UnregisterBrokerRecord removes a broker's registration (Kafka's
// UnregisterBrokerRecord): the broker is no longer part of the cluster until it
// registers again. Epoch must be the broker's current epoch. Partitions may still
// name it as a replica; it leads none of them and is in no ISR (the controller writes
// those changes before this record), except as the last ISR member of a partition
// without a leader (KIP-841).
type UnregisterBrokerRecord struct {
	NodeID NodeID `json:"node_id"`
	Epoch  int64  `json:"epoch"`
}

// TopicRecord creates a topic with no partitions and no configs.
type TopicRecord struct {
	Name string  `json:"name"`
	ID   TopicID `json:"id"`
}

// PartitionRecord creates partition Partition of a topic (it must be the next one) or
// replaces an existing partition's state wholesale. AddingReplicas and
// RemovingReplicas are set while a reassignment is in progress (see Partition).
type PartitionRecord struct {
	Topic               TopicID             `json:"topic"`
	Partition           int32               `json:"partition"`
	Replicas            []int32             `json:"replicas"`
	ISR                 []int32             `json:"isr"`
	Leader              int32               `json:"leader"`
	LeaderEpoch         int32               `json:"leader_epoch"`
	PartitionEpoch      int32               `json:"partition_epoch"`
	AddingReplicas      []int32             `json:"adding_replicas,omitempty"`
	RemovingReplicas    []int32             `json:"removing_replicas,omitempty"`
	LeaderRecoveryState LeaderRecoveryState `json:"leader_recovery_state,omitempty"`
	OfflineReplicas     []int32             `json:"offline_replicas,omitempty"`
}

// PartitionChangeRecord changes some fields of an existing partition. A nil field is
// unchanged (an empty, non-nil AddingReplicas, RemovingReplicas or OfflineReplicas
// clears it). Any change bumps PartitionEpoch; a change of leader, or BumpLeaderEpoch,
// also bumps LeaderEpoch (the controller sets BumpLeaderEpoch when replicas leave the
// replica set, so that they stop following).
type PartitionChangeRecord struct {
	Topic               TopicID              `json:"topic"`
	Partition           int32                `json:"partition"`
	ISR                 []int32              `json:"isr"`
	Leader              *int32               `json:"leader,omitempty"`
	Replicas            []int32              `json:"replicas"`
	AddingReplicas      []int32              `json:"adding_replicas"`
	RemovingReplicas    []int32              `json:"removing_replicas"`
	LeaderRecoveryState *LeaderRecoveryState `json:"leader_recovery_state,omitempty"`
	BumpLeaderEpoch     bool                 `json:"bump_leader_epoch,omitempty"`
	// OfflineReplicas replaces Partition.OfflineReplicas.
	OfflineReplicas []int32 `json:"offline_replicas"`
}

// LeaderRecoveryState says whether a partition's leader was elected uncleanly and has
// not yet told the controller it recovered (KIP-704). Kafka's numbering.
type LeaderRecoveryState int8

const (
	// Recovered is the normal state.
	Recovered LeaderRecoveryState = 0
	// Recovering: the leader was elected from outside the ISR; until it reports
	// Recovered (AlterPartition) the ISR stays the leader alone.
	Recovering LeaderRecoveryState = 1
)

// ConfigRecord sets (Value non-nil) or deletes (Value nil) one config of a resource.
// ResourceType is ResourceTopic (ResourceName = topic name) or ResourceBroker
// (ResourceName = node id in decimal, or "" for the cluster-wide default).
type ConfigRecord struct {
	ResourceType int8    `json:"resource_type"`
	ResourceName string  `json:"resource_name"`
	Name         string  `json:"name"`
	Value        *string `json:"value"`
}

// RemoveTopicRecord deletes a topic, its partitions and its configs.
type RemoveTopicRecord struct {
	ID TopicID `json:"id"`
}

// ProducerIDsRecord raises the next producer id to hand out. Ids below it have been
// allocated (in blocks) and are never reused; it never goes backwards.
type ProducerIDsRecord struct {
	NextProducerID int64 `json:"next_producer_id"`
}

// ClusterRecord sets the cluster id.
type ClusterRecord struct {
	ClusterID string `json:"cluster_id"`
}

func (RegisterBrokerRecord) recordType() string { return "register_broker" }
func (BrokerRegistrationChangeRecord) recordType() string {
	return "broker_registration_change"
}
func (UnregisterBrokerRecord) recordType() string { return "unregister_broker" }
func (TopicRecord) recordType() string            { return "topic" }
func (PartitionRecord) recordType() string        { return "partition" }
func (PartitionChangeRecord) recordType() string  { return "partition_change" }
func (ConfigRecord) recordType() string           { return "config" }
func (RemoveTopicRecord) recordType() string      { return "remove_topic" }
func (ProducerIDsRecord) recordType() string      { return "producer_ids" }
func (ClusterRecord) recordType() string          { return "cluster" }

// formatVersion is the version written in every envelope.
const formatVersion = 1

var decoders = map[string]func(json.RawMessage) (Record, error){
	"register_broker":            decodeAs[RegisterBrokerRecord],
	"broker_registration_change": decodeAs[BrokerRegistrationChangeRecord],
	"unregister_broker":          decodeAs[UnregisterBrokerRecord],
	"topic":                      decodeAs[TopicRecord],
	"partition":                  decodeAs[PartitionRecord],
	"partition_change":           decodeAs[PartitionChangeRecord],
	"config":                     decodeAs[ConfigRecord],
	"remove_topic":               decodeAs[RemoveTopicRecord],
	"producer_ids":               decodeAs[ProducerIDsRecord],
	"cluster":                    decodeAs[ClusterRecord],
}

func decodeAs[T Record](raw json.RawMessage) (Record, error) {
	var r T
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	return r, nil
}

type envelope struct {
	Version int             `json:"v"`
	Type    string          `json:"type"`
	Record  json.RawMessage `json:"record"`
}

func toEnvelope(r Record) envelope {
	raw, err := json.Marshal(r)
	if err != nil {
		// Records hold only strings, integers, slices and pointers to them.
		panic(fmt.Sprintf("metadata: cannot encode %T: %v", r, err))
	}
	return envelope{Version: formatVersion, Type: r.recordType(), Record: raw}
}

func fromEnvelope(e envelope) (Record, error) {
	if e.Version != formatVersion {
		return nil, fmt.Errorf("%w: unsupported version %d", ErrCorruptRecord, e.Version)
	}
	dec, ok := decoders[e.Type]
	if !ok {
		return nil, fmt.Errorf("%w: unknown record type %q", ErrCorruptRecord, e.Type)
	}
	return dec(e.Record)
}

// Encode encodes one record.
func Encode(r Record) []byte {
	b, _ := json.Marshal(toEnvelope(r))
	return b
}

// Decode decodes one record written by Encode.
func Decode(b []byte) (Record, error) {
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	return fromEnvelope(e)
}

// EncodeBatch encodes records as one unit (a JSON array of envelopes).
func EncodeBatch(recs []Record) []byte {
	envs := make([]envelope, len(recs))
	for i, r := range recs {
		envs[i] = toEnvelope(r)
	}
	b, _ := json.Marshal(envs)
	return b
}

// DecodeBatch decodes what EncodeBatch wrote.
func DecodeBatch(b []byte) ([]Record, error) {
	var envs []envelope
	if err := json.Unmarshal(b, &envs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	recs := make([]Record, len(envs))
	for i, e := range envs {
		r, err := fromEnvelope(e)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		recs[i] = r
	}
	return recs, nil
}
