package protocol

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Samsa-internal requests, served only on the controller listener. They use Kafka's
// framing (request header v1, response header v0: never flexible) with API keys
// far above Kafka's, so that no Kafka client or broker sends them by mistake, and
// are listed in docs/compatibility.md. Each is version 0 only.
const (
	// RaftKey carries Raft messages between the voters of the metadata quorum.
	RaftKey int16 = 32001
	// MetadataFetchKey lets a node that is not a voter read the metadata log.
	MetadataFetchKey int16 = 32002
	// ReplicasOfflineKey reports a broker's replicas whose log directory failed.
	ReplicasOfflineKey int16 = 32003
	// DelegationTokenKey asks the active controller to create, renew or expire a
	// delegation token on behalf of a client's principal.
	DelegationTokenKey int16 = 32004
)

// NewInternalRequest returns an empty request for a Samsa-internal key, or nil.
func NewInternalRequest(key int16) kmsg.Request {
	switch key {
	case RaftKey:
		return new(RaftRequest)
	case MetadataFetchKey:
		return new(MetadataFetchRequest)
	case ReplicasOfflineKey:
		return new(ReplicasOfflineRequest)
	case DelegationTokenKey:
		return new(DelegationTokenRequest)
	}
	return nil
}

// RaftRequest carries Raft messages (protobuf-encoded raftpb.Message, in the order
// the sender's Raft produced them) from one voter to another.
//
//	ClusterID string   the sender's cluster id, "" until it knows one
//	From      int32    the sender's node id
//	Messages  [bytes]  int32 count, then int32 length + bytes each
type RaftRequest struct {
	Version   int16
	ClusterID string
	From      int32
	Messages  [][]byte
}

// RaftResponse acknowledges a RaftRequest. ErrorCode is INCONSISTENT_CLUSTER_ID
// (104) when the cluster ids differ, then ClusterID is the receiver's.
//
//	ErrorCode int16
//	ClusterID string
type RaftResponse struct {
	Version   int16
	ErrorCode int16
	ClusterID string
}

// MetadataFetchRequest asks a voter for the committed metadata log after an offset.
//
//	ClusterID  string  the fetcher's stored cluster id, "" if none
//	NodeID     int32   the fetcher
//	FromOffset int64   the first offset wanted
//	MaxWaitMs  int32   how long to wait for that offset to be committed
type MetadataFetchRequest struct {
	Version    int16
	ClusterID  string
	NodeID     int32
	FromOffset int64
	MaxWaitMs  int32
}

// MetadataFetchResponse answers a MetadataFetchRequest with either a snapshot of
// the whole metadata image or the entries from FromOffset on.
//
//	ErrorCode      int16
//	ClusterID      string
//	LeaderID       int32    the active controller as the answering voter knows it, -1 if none
//	HighWatermark  int64    the offset the answering voter has applied
//	SnapshotOffset int64    -1 when Snapshot is null
//	Snapshot       nullable bytes (the image as metadata records)
//	Entries        int32 count, then int64 offset + bytes each (empty bytes: an entry without records)
type MetadataFetchResponse struct {
	Version        int16
	ErrorCode      int16
	ClusterID      string
	LeaderID       int32
	HighWatermark  int64
	SnapshotOffset int64
	Snapshot       []byte
	Entries        []MetadataFetchEntry
}

// MetadataFetchEntry is one metadata log entry.
type MetadataFetchEntry struct {
	Offset int64
	Data   []byte
}

func (*RaftRequest) Key() int16                  { return RaftKey }
func (*RaftRequest) MaxVersion() int16           { return 0 }
func (r *RaftRequest) SetVersion(v int16)        { r.Version = v }
func (r *RaftRequest) GetVersion() int16         { return r.Version }
func (*RaftRequest) IsFlexible() bool            { return false }
func (*RaftRequest) ResponseKind() kmsg.Response { return new(RaftResponse) }

func (r *RaftRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendString(dst, r.ClusterID)
	dst = kbin.AppendInt32(dst, r.From)
	dst = kbin.AppendArrayLen(dst, len(r.Messages))
	for _, m := range r.Messages {
		dst = kbin.AppendBytes(dst, m)
	}
	return dst
}

func (r *RaftRequest) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.ClusterID = b.String()
	r.From = b.Int32()
	n := b.ArrayLen()
	if n < 0 || int(n) > len(b.Src) {
		return fmt.Errorf("raft request: %d messages in %d bytes", n, len(b.Src))
	}
	r.Messages = make([][]byte, 0, n)
	for range n {
		r.Messages = append(r.Messages, b.Bytes())
	}
	return b.Complete()
}

func (*RaftResponse) Key() int16                { return RaftKey }
func (*RaftResponse) MaxVersion() int16         { return 0 }
func (r *RaftResponse) SetVersion(v int16)      { r.Version = v }
func (r *RaftResponse) GetVersion() int16       { return r.Version }
func (*RaftResponse) IsFlexible() bool          { return false }
func (*RaftResponse) RequestKind() kmsg.Request { return new(RaftRequest) }

func (r *RaftResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	return kbin.AppendString(dst, r.ClusterID)
}

func (r *RaftResponse) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.ErrorCode = b.Int16()
	r.ClusterID = b.String()
	return b.Complete()
}

func (*MetadataFetchRequest) Key() int16                  { return MetadataFetchKey }
func (*MetadataFetchRequest) MaxVersion() int16           { return 0 }
func (r *MetadataFetchRequest) SetVersion(v int16)        { r.Version = v }
func (r *MetadataFetchRequest) GetVersion() int16         { return r.Version }
func (*MetadataFetchRequest) IsFlexible() bool            { return false }
func (*MetadataFetchRequest) ResponseKind() kmsg.Response { return new(MetadataFetchResponse) }

func (r *MetadataFetchRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendString(dst, r.ClusterID)
	dst = kbin.AppendInt32(dst, r.NodeID)
	dst = kbin.AppendInt64(dst, r.FromOffset)
	return kbin.AppendInt32(dst, r.MaxWaitMs)
}

func (r *MetadataFetchRequest) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.ClusterID = b.String()
	r.NodeID = b.Int32()
	r.FromOffset = b.Int64()
	r.MaxWaitMs = b.Int32()
	return b.Complete()
}

func (*MetadataFetchResponse) Key() int16                { return MetadataFetchKey }
func (*MetadataFetchResponse) MaxVersion() int16         { return 0 }
func (r *MetadataFetchResponse) SetVersion(v int16)      { r.Version = v }
func (r *MetadataFetchResponse) GetVersion() int16       { return r.Version }
func (*MetadataFetchResponse) IsFlexible() bool          { return false }
func (*MetadataFetchResponse) RequestKind() kmsg.Request { return new(MetadataFetchRequest) }

func (r *MetadataFetchResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	dst = kbin.AppendString(dst, r.ClusterID)
	dst = kbin.AppendInt32(dst, r.LeaderID)
	dst = kbin.AppendInt64(dst, r.HighWatermark)
	dst = kbin.AppendInt64(dst, r.SnapshotOffset)
	dst = kbin.AppendNullableBytes(dst, r.Snapshot)
	dst = kbin.AppendArrayLen(dst, len(r.Entries))
	for _, e := range r.Entries {
		dst = kbin.AppendInt64(dst, e.Offset)
		dst = kbin.AppendBytes(dst, e.Data)
	}
	return dst
}

func (r *MetadataFetchResponse) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.ErrorCode = b.Int16()
	r.ClusterID = b.String()
	r.LeaderID = b.Int32()
	r.HighWatermark = b.Int64()
	r.SnapshotOffset = b.Int64()
	r.Snapshot = b.NullableBytes()
	n := b.ArrayLen()
	if n < 0 || int(n) > len(b.Src) {
		return fmt.Errorf("metadata fetch response: %d entries in %d bytes", n, len(b.Src))
	}
	r.Entries = make([]MetadataFetchEntry, 0, n)
	for range n {
		r.Entries = append(r.Entries, MetadataFetchEntry{Offset: b.Int64(), Data: b.Bytes()})
	}
	return b.Complete()
}

// ReplicasOfflineRequest tells the active controller that a broker's replicas of
// some partitions are offline: the log directory holding them failed. The controller
// takes the broker out of those partitions' ISRs and moves their leadership, as
// Kafka's controller does for the offline log directories of a heartbeat (KIP-858),
// which it can map to partitions because it records each replica's directory.
//
//	BrokerID    int32
//	BrokerEpoch int64
//	Partitions  [topic_id uuid, partition int32]
type ReplicasOfflineRequest struct {
	Version     int16
	BrokerID    int32
	BrokerEpoch int64
	Partitions  []ReplicaRef
}

// ReplicaRef names a partition by its topic id.
type ReplicaRef struct {
	TopicID   [16]byte
	Partition int32
}

// ReplicasOfflineResponse answers a ReplicasOfflineRequest: NOT_CONTROLLER,
// STALE_BROKER_EPOCH, or 0 once the changes are in the metadata log.
//
//	ErrorCode int16
type ReplicasOfflineResponse struct {
	Version   int16
	ErrorCode int16
}

func (*ReplicasOfflineRequest) Key() int16                  { return ReplicasOfflineKey }
func (*ReplicasOfflineRequest) MaxVersion() int16           { return 0 }
func (r *ReplicasOfflineRequest) SetVersion(v int16)        { r.Version = v }
func (r *ReplicasOfflineRequest) GetVersion() int16         { return r.Version }
func (*ReplicasOfflineRequest) IsFlexible() bool            { return false }
func (*ReplicasOfflineRequest) ResponseKind() kmsg.Response { return new(ReplicasOfflineResponse) }

func (r *ReplicasOfflineRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, r.BrokerID)
	dst = kbin.AppendInt64(dst, r.BrokerEpoch)
	dst = kbin.AppendArrayLen(dst, len(r.Partitions))
	for _, p := range r.Partitions {
		dst = kbin.AppendUuid(dst, p.TopicID)
		dst = kbin.AppendInt32(dst, p.Partition)
	}
	return dst
}

func (r *ReplicasOfflineRequest) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.BrokerID = b.Int32()
	r.BrokerEpoch = b.Int64()
	n := b.ArrayLen()
	if n < 0 || int(n) > len(b.Src)/20 {
		return fmt.Errorf("replicas offline request: %d partitions in %d bytes", n, len(b.Src))
	}
	r.Partitions = make([]ReplicaRef, 0, n)
	for range n {
		r.Partitions = append(r.Partitions, ReplicaRef{TopicID: b.Uuid(), Partition: b.Int32()})
	}
	return b.Complete()
}

func (*ReplicasOfflineResponse) Key() int16                { return ReplicasOfflineKey }
func (*ReplicasOfflineResponse) MaxVersion() int16         { return 0 }
func (r *ReplicasOfflineResponse) SetVersion(v int16)      { r.Version = v }
func (r *ReplicasOfflineResponse) GetVersion() int16       { return r.Version }
func (*ReplicasOfflineResponse) IsFlexible() bool          { return false }
func (*ReplicasOfflineResponse) RequestKind() kmsg.Request { return new(ReplicasOfflineRequest) }

func (r *ReplicasOfflineResponse) AppendTo(dst []byte) []byte {
	return kbin.AppendInt16(dst, r.ErrorCode)
}

func (r *ReplicasOfflineResponse) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.ErrorCode = b.Int16()
	return b.Complete()
}

// Delegation token operations (DelegationTokenRequest.Op).
const (
	TokenCreate int8 = 1
	TokenRenew  int8 = 2
	TokenExpire int8 = 3
)

// DelegationTokenRequest carries a client's CreateDelegationToken,
// RenewDelegationToken or ExpireDelegationToken from the broker that authorized it to
// the active controller, with the principal it was made by: the forwarded Kafka
// request does not name it (Kafka wraps it in an Envelope with the principal).
//
//	Op        int8      TokenCreate, TokenRenew or TokenExpire
//	Requester string    the client's principal, "User:alice"
//	Owner     string    create: the token's owner
//	Renewers  [string]  create: principals that may renew it
//	PeriodMs  int64     create: the most lifetime asked for; renew: the renewal
//	                    asked for; expire: the time left asked for (< 0: at once);
//	                    0 or less for create and renew: the broker's default
//	HMAC      bytes     renew, expire: the token's HMAC
type DelegationTokenRequest struct {
	Version   int16
	Op        int8
	Requester string
	Owner     string
	Renewers  []string
	PeriodMs  int64
	HMAC      []byte
}

// DelegationTokenResponse answers a DelegationTokenRequest.
//
//	ErrorCode    int16
//	ErrorMessage string
//	TokenID      string   create: the new token's id
//	HMAC         bytes    create: its HMAC
//	IssueMs      int64    create
//	ExpiryMs     int64    the token's expiry (renew, expire: the new one)
//	MaxMs        int64    create
type DelegationTokenResponse struct {
	Version      int16
	ErrorCode    int16
	ErrorMessage string
	TokenID      string
	HMAC         []byte
	IssueMs      int64
	ExpiryMs     int64
	MaxMs        int64
}

func (*DelegationTokenRequest) Key() int16                  { return DelegationTokenKey }
func (*DelegationTokenRequest) MaxVersion() int16           { return 0 }
func (r *DelegationTokenRequest) SetVersion(v int16)        { r.Version = v }
func (r *DelegationTokenRequest) GetVersion() int16         { return r.Version }
func (*DelegationTokenRequest) IsFlexible() bool            { return false }
func (*DelegationTokenRequest) ResponseKind() kmsg.Response { return new(DelegationTokenResponse) }

func (r *DelegationTokenRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt8(dst, r.Op)
	dst = kbin.AppendString(dst, r.Requester)
	dst = kbin.AppendString(dst, r.Owner)
	dst = kbin.AppendArrayLen(dst, len(r.Renewers))
	for _, p := range r.Renewers {
		dst = kbin.AppendString(dst, p)
	}
	dst = kbin.AppendInt64(dst, r.PeriodMs)
	return kbin.AppendBytes(dst, r.HMAC)
}

func (r *DelegationTokenRequest) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.Op = b.Int8()
	r.Requester = b.String()
	r.Owner = b.String()
	n := b.ArrayLen()
	if n < 0 || int(n) > len(b.Src)/2 {
		return fmt.Errorf("delegation token request: %d renewers in %d bytes", n, len(b.Src))
	}
	r.Renewers = make([]string, 0, n)
	for range n {
		r.Renewers = append(r.Renewers, b.String())
	}
	r.PeriodMs = b.Int64()
	r.HMAC = b.Bytes()
	return b.Complete()
}

func (*DelegationTokenResponse) Key() int16                { return DelegationTokenKey }
func (*DelegationTokenResponse) MaxVersion() int16         { return 0 }
func (r *DelegationTokenResponse) SetVersion(v int16)      { r.Version = v }
func (r *DelegationTokenResponse) GetVersion() int16       { return r.Version }
func (*DelegationTokenResponse) IsFlexible() bool          { return false }
func (*DelegationTokenResponse) RequestKind() kmsg.Request { return new(DelegationTokenRequest) }

func (r *DelegationTokenResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	dst = kbin.AppendString(dst, r.ErrorMessage)
	dst = kbin.AppendString(dst, r.TokenID)
	dst = kbin.AppendBytes(dst, r.HMAC)
	dst = kbin.AppendInt64(dst, r.IssueMs)
	dst = kbin.AppendInt64(dst, r.ExpiryMs)
	return kbin.AppendInt64(dst, r.MaxMs)
}

func (r *DelegationTokenResponse) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.ErrorCode = b.Int16()
	r.ErrorMessage = b.String()
	r.TokenID = b.String()
	r.HMAC = b.Bytes()
	r.IssueMs = b.Int64()
	r.ExpiryMs = b.Int64()
	r.MaxMs = b.Int64()
	return b.Complete()
}
