package config

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Sentinel errors. Every problem Load, Validate, ValidateTopicConfig and
// ResolveTopic report wraps exactly one of them and names the property.
var (
	// ErrUnknownProperty: the name is not a property Samsa knows.
	ErrUnknownProperty = errors.New("unknown property")
	// ErrInvalidValue: the value does not parse or is out of bounds.
	ErrInvalidValue = errors.New("invalid value")
	// ErrUnsupported: a Kafka property for a feature Samsa refuses (ZooKeeper mode).
	ErrUnsupported = errors.New("unsupported property")
	// ErrInvalidConfig: properties that are fine alone but conflict together.
	ErrInvalidConfig = errors.New("invalid configuration")
)

// ControllerListenerName is the default of controller.listener.names: the listener
// that carries the metadata quorum, never advertised to clients.
const ControllerListenerName = "CONTROLLER"

// The values replica.selector.class accepts: Kafka's built-in replica selectors.
const (
	// LeaderSelector keeps every consumer on the leader (Kafka's behaviour without a
	// selector).
	LeaderSelector = "org.apache.kafka.common.replica.LeaderSelector"
	// RackAwareReplicaSelector sends a consumer with a rack to a replica in it.
	RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
)

// Listener is one entry of listeners / advertised.listeners: NAME://host:port.
// An empty Host means every interface (when binding).
type Listener struct {
	Name string // PLAINTEXT, CONTROLLER...; always upper case
	Host string
	Port int
}

// Addr is host:port, suitable for net.Listen.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// String is the listener in Kafka's NAME://host:port form.
func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// ParseListeners parses a comma-separated listener list, e.g.
// "PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093". Names are upper-cased.
func ParseListeners(s string) ([]Listener, error) {
	var out []Listener
	for _, item := range splitList(s) {
		l, err := parseListener(item)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

func parseListener(s string) (Listener, error) {
	name, addr, ok := strings.Cut(s, "://")
	if !ok || name == "" {
		return Listener{}, fmt.Errorf("%q is not NAME://host:port", s)
	}
	for _, r := range name {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return Listener{}, fmt.Errorf("%q: listener name %q has characters other than letters, digits, _ and -", s, name)
		}
	}
	host, port, err := splitHostPort(addr)
	if err != nil {
		return Listener{}, fmt.Errorf("listener %q: %w", s, err)
	}
	return Listener{Name: strings.ToUpper(name), Host: host, Port: port}, nil
}

func formatListeners(ls []Listener) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}

// ParseQuorumVoters parses controller.quorum.voters: "id@host:port,id@host:port".
// An empty string yields an empty map (the node is a quorum of one).
func ParseQuorumVoters(s string) (map[int32]string, error) {
	voters := map[int32]string{}
	for _, item := range splitList(s) {
		idText, addr, ok := strings.Cut(item, "@")
		if !ok {
			return nil, fmt.Errorf("%q is not id@host:port", item)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(idText), 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%q: %q is not a node id", item, idText)
		}
		if err := checkHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		if _, dup := voters[int32(id)]; dup {
			return nil, fmt.Errorf("node id %d appears twice", id)
		}
		voters[int32(id)] = addr
	}
	return voters, nil
}

// Broker is the node's static configuration: Kafka's broker properties, with
// Kafka's names and defaults (see docs/config.md). A Broker is a plain value: it is
// built once by Default or Load and then only read; sharing it between
// goroutines is safe as long as nobody writes to it.
type Broker struct {
	NodeID                 int32    // node.id (Samsa's default 1; Kafka requires it)
	ProcessRoles           []string // process.roles
	ControllerQuorumVoters string   // controller.quorum.voters; "" = this node alone
	LogDirs                []string // log.dirs, falling back to log.dir
	MetadataLogDir         string   // metadata.log.dir: only the first of LogDirs, or ""

	Listeners           []Listener // listeners
	AdvertisedListeners []Listener // advertised.listeners; default = listeners other than the controller ones
	// ControllerListenerNames (controller.listener.names): the first names the
	// listener a controller serves the quorum on; none of them is advertised.
	ControllerListenerNames []string
	// InterBrokerListenerName (inter.broker.listener.name): the advertised listener
	// followers fetch from; default PLAINTEXT if advertised, else the first one.
	InterBrokerListenerName string
	BrokerRack              string // broker.rack; "" = none

	BrokerHeartbeatIntervalMs           int32 // broker.heartbeat.interval.ms
	BrokerSessionTimeoutMs              int32 // broker.session.timeout.ms
	ControllerQuorumElectionTimeoutMs   int32 // controller.quorum.election.timeout.ms
	ControllerQuorumFetchTimeoutMs      int32 // controller.quorum.fetch.timeout.ms
	ControllerQuorumRequestTimeoutMs    int32 // controller.quorum.request.timeout.ms
	ControllerQuorumRetryBackoffMs      int32 // controller.quorum.retry.backoff.ms
	ControlledShutdownEnable            bool  // controlled.shutdown.enable
	AutoLeaderRebalanceEnable           bool  // auto.leader.rebalance.enable
	LeaderImbalanceCheckIntervalSeconds int64 // leader.imbalance.check.interval.seconds
	LeaderImbalancePerBrokerPercentage  int32 // leader.imbalance.per.broker.percentage

	NumPartitions               int32 // num.partitions
	DefaultReplicationFactor    int16 // default.replication.factor
	AutoCreateTopicsEnable      bool  // auto.create.topics.enable
	DeleteTopicEnable           bool  // delete.topic.enable
	LogSegmentBytes             int64 // log.segment.bytes (Kafka INT bounds)
	LogRollMs                   int64 // log.roll.ms, else log.roll.hours
	LogRollJitterMs             int64 // log.roll.jitter.ms, else log.roll.jitter.hours
	LogRetentionMs              int64 // log.retention.ms > .minutes > .hours; -1 unlimited
	LogRetentionBytes           int64 // log.retention.bytes; -1 unlimited
	LogRetentionCheckIntervalMs int64 // log.retention.check.interval.ms
	LogIndexIntervalBytes       int32 // log.index.interval.bytes
	LogIndexSizeMaxBytes        int32 // log.index.size.max.bytes
	LogFlushIntervalMessages    int64 // log.flush.interval.messages
	LogFlushIntervalMs          int64 // log.flush.interval.ms; -1 = not set (then log.flush.scheduler.interval.ms applies)
	LogFlushSchedulerIntervalMs int64 // log.flush.scheduler.interval.ms
	LogPreallocate              bool  // log.preallocate

	LogCleanupPolicy        []string // log.cleanup.policy: delete, compact
	LogMessageTimestampType string   // log.message.timestamp.type: CreateTime | LogAppendTime
	// log.message.timestamp.{before,after,difference}.max.ms: how far a CreateTime
	// record timestamp may be from the broker's clock (math.MaxInt64: any).
	LogMessageTimestampBeforeMaxMs     int64
	LogMessageTimestampAfterMaxMs      int64
	LogMessageTimestampDifferenceMaxMs int64
	CompressionType                    string // compression.type: producer | uncompressed | gzip | snappy | lz4 | zstd
	// compression.{gzip,lz4,zstd}.level: the level the broker compresses at (KIP-390).
	CompressionGzipLevel        int32
	CompressionLz4Level         int32
	CompressionZstdLevel        int32
	MessageMaxBytes             int32 // message.max.bytes
	SocketRequestMaxBytes       int32 // socket.request.max.bytes
	MinInsyncReplicas           int32 // min.insync.replicas
	UncleanLeaderElectionEnable bool  // unclean.leader.election.enable
	LogDeleteDelayMs            int64 // log.segment.delete.delay.ms (topic: file.delete.delay.ms)

	OffsetsTopicNumPartitions       int32 // offsets.topic.num.partitions
	OffsetsTopicReplicationFactor   int16 // offsets.topic.replication.factor; see OffsetsTopicRF
	OffsetsTopicSegmentBytes        int64 // offsets.topic.segment.bytes
	OffsetsRetentionMinutes         int64 // offsets.retention.minutes
	OffsetsRetentionCheckIntervalMs int64 // offsets.retention.check.interval.ms
	OffsetsCommitTimeoutMs          int32 // offsets.commit.timeout.ms
	OffsetMetadataMaxBytes          int32 // offset.metadata.max.bytes

	GroupInitialRebalanceDelayMs int32 // group.initial.rebalance.delay.ms
	GroupMinSessionTimeoutMs     int32 // group.min.session.timeout.ms
	GroupMaxSessionTimeoutMs     int32 // group.max.session.timeout.ms
	GroupMaxSize                 int32 // group.max.size

	GroupConsumerSessionTimeoutMs       int32    // group.consumer.session.timeout.ms
	GroupConsumerMinSessionTimeoutMs    int32    // group.consumer.min.session.timeout.ms
	GroupConsumerMaxSessionTimeoutMs    int32    // group.consumer.max.session.timeout.ms
	GroupConsumerHeartbeatIntervalMs    int32    // group.consumer.heartbeat.interval.ms
	GroupConsumerMinHeartbeatIntervalMs int32    // group.consumer.min.heartbeat.interval.ms
	GroupConsumerMaxHeartbeatIntervalMs int32    // group.consumer.max.heartbeat.interval.ms
	GroupConsumerMaxSize                int32    // group.consumer.max.size
	GroupConsumerAssignors              []string // group.consumer.assignors: "uniform", "range"
	GroupConsumerMigrationPolicy        string   // group.consumer.migration.policy

	GroupConsumerAssignmentIntervalMs    int32 // group.consumer.assignment.interval.ms
	GroupConsumerMinAssignmentIntervalMs int32 // group.consumer.min.assignment.interval.ms
	GroupConsumerMaxAssignmentIntervalMs int32 // group.consumer.max.assignment.interval.ms

	// GroupCoordinatorRebalanceProtocols: group.coordinator.rebalance.protocols, the
	// group protocols served (classic always; consumer, share, streams).
	GroupCoordinatorRebalanceProtocols []string

	GroupShareSessionTimeoutMs        int32 // group.share.session.timeout.ms
	GroupShareMinSessionTimeoutMs     int32 // group.share.min.session.timeout.ms
	GroupShareMaxSessionTimeoutMs     int32 // group.share.max.session.timeout.ms
	GroupShareHeartbeatIntervalMs     int32 // group.share.heartbeat.interval.ms
	GroupShareMinHeartbeatIntervalMs  int32 // group.share.min.heartbeat.interval.ms
	GroupShareMaxHeartbeatIntervalMs  int32 // group.share.max.heartbeat.interval.ms
	GroupShareMaxSize                 int32 // group.share.max.size
	GroupShareRecordLockDurationMs    int32 // group.share.record.lock.duration.ms
	GroupShareMinRecordLockDurationMs int32 // group.share.min.record.lock.duration.ms
	GroupShareMaxRecordLockDurationMs int32 // group.share.max.record.lock.duration.ms
	GroupShareDeliveryCountLimit      int32 // group.share.delivery.count.limit
	GroupShareMinDeliveryCountLimit   int32 // group.share.min.delivery.count.limit
	GroupShareMaxDeliveryCountLimit   int32 // group.share.max.delivery.count.limit
	GroupShareMaxShareSessions        int32 // group.share.max.share.sessions
	GroupSharePartitionMaxRecordLocks int32 // group.share.partition.max.record.locks
	// group.share.min.partition.max.record.locks, group.share.max.partition.max.record.locks
	GroupShareMinPartitionMaxRecordLocks int32
	GroupShareMaxPartitionMaxRecordLocks int32

	GroupShareAssignmentIntervalMs    int32 // group.share.assignment.interval.ms
	GroupShareMinAssignmentIntervalMs int32 // group.share.min.assignment.interval.ms
	GroupShareMaxAssignmentIntervalMs int32 // group.share.max.assignment.interval.ms

	// share.coordinator.state.topic.*: the shape of __share_group_state; see
	// ShareStateRF and ShareStateMinISR.
	ShareCoordinatorStateTopicNumPartitions     int32
	ShareCoordinatorStateTopicReplicationFactor int16
	ShareCoordinatorStateTopicMinIsr            int16
	ShareCoordinatorStateTopicSegmentBytes      int64

	ConnectionsMaxIdleMs int64 // connections.max.idle.ms

	MaxIncrementalFetchSessionCacheSlots int32 // max.incremental.fetch.session.cache.slots
	ReplicaLagTimeMaxMs                  int64 // replica.lag.time.max.ms
	// replica.fetch.*: how followers fetch from leaders.
	ReplicaFetchWaitMaxMs        int32 // replica.fetch.wait.max.ms
	ReplicaFetchMinBytes         int32 // replica.fetch.min.bytes
	FetchMaxBytes                int32 // fetch.max.bytes
	ReplicaFetchMaxBytes         int32 // replica.fetch.max.bytes
	ReplicaFetchResponseMaxBytes int32 // replica.fetch.response.max.bytes
	ReplicaFetchBackoffMs        int32 // replica.fetch.backoff.ms
	ReplicaSocketTimeoutMs       int32 // replica.socket.timeout.ms
	// ReplicaSelectorClass (replica.selector.class): "" or LeaderSelector keeps
	// consumers on the leader; RackAwareReplicaSelector points a consumer with a rack
	// at an in-sync replica in its rack (KIP-392).
	ReplicaSelectorClass        string
	TransactionalIDExpirationMs int32 // transactional.id.expiration.ms
	TransactionMaxTimeoutMs     int32 // transaction.max.timeout.ms
	ProducerIDExpirationMs      int32 // producer.id.expiration.ms
	// transaction.state.log.{num.partitions,replication.factor,min.isr}: the shape
	// of __transaction_state; see TransactionStateRF and TransactionStateMinISR.
	TransactionStateLogNumPartitions     int32
	TransactionStateLogReplicationFactor int16
	TransactionStateLogMinIsr            int32
	TransactionStateLogSegmentBytes      int64 // transaction.state.log.segment.bytes
	// transaction.abort.timed.out.transaction.cleanup.interval.ms and
	// transaction.remove.expired.transaction.cleanup.interval.ms
	TransactionAbortTimedOutCleanupIntervalMs int32
	TransactionRemoveExpiredCleanupIntervalMs int32
	TransactionPartitionVerificationEnable    bool // transaction.partition.verification.enable
	// add.partitions.to.txn.retry.backoff.ms and .max.ms: how a partition leader
	// retries a verification its coordinator answered CONCURRENT_TRANSACTIONS.
	AddPartitionsToTxnRetryBackoffMs    int32
	AddPartitionsToTxnRetryBackoffMaxMs int32

	LogCleanerEnable              bool    // log.cleaner.enable
	LogCleanerThreads             int32   // log.cleaner.threads
	LogCleanerBackoffMs           int64   // log.cleaner.backoff.ms
	LogCleanerMinCleanableRatio   float64 // log.cleaner.min.cleanable.ratio
	LogCleanerDeleteRetentionMs   int64   // log.cleaner.delete.retention.ms
	LogCleanerMinCompactionLagMs  int64   // log.cleaner.min.compaction.lag.ms
	LogCleanerMaxCompactionLagMs  int64   // log.cleaner.max.compaction.lag.ms
	LogCleanerIoMaxBytesPerSecond float64 // log.cleaner.io.max.bytes.per.second

	MetricsListener string // metrics.listener (Samsa's own): "" = off, else host:port
	ConsoleListener string // console.listener (Samsa's own): "" = off, else host:port
	// ConsoleAllowedHosts (console.allowed.hosts, Samsa's own): host names the
	// console answers to besides IP addresses, localhost and its listen host.
	ConsoleAllowedHosts []string

	// Security: listeners' protocols, SASL, the authorizer, quotas, connection
	// limits (security.go).
	Security Security

	// Raw holds every property exactly as it was set in the file or an override
	// (after trimming), keyed by name. It is what DescribeConfigs reports as
	// STATIC_BROKER_CONFIG; properties absent from it are at their default.
	Raw map[string]string
	// DynamicDefault and DynamicBroker are the dynamic configs (KIP-226) in effect,
	// set through the metadata quorum: the cluster-wide defaults (resource "") and
	// this node's own. Both are nil in a static configuration; see WithDynamic.
	DynamicDefault, DynamicBroker map[string]string
}

// Default is the embedded configuration: one combined broker+controller node,
// node.id 1, data under ./samsa-data, PLAINTEXT on 127.0.0.1:9092, and Kafka's
// defaults for everything else.
func Default() *Broker {
	b := &Broker{Raw: map[string]string{}}
	for _, p := range brokerProperties {
		if p.set != nil && !p.null {
			p.set(b, p.def)
		}
	}
	derive(b, nil)
	return b
}

// derive computes the fields that depend on more than one property. set holds the
// properties explicitly set with a valid value (nil: none).
func derive(b *Broker, set map[string]string) {
	// log.retention.ms > log.retention.minutes > log.retention.hours; negative = unlimited.
	switch {
	case has(set, "log.retention.ms"):
		b.LogRetentionMs = mustInt(set["log.retention.ms"])
	case has(set, "log.retention.minutes"):
		b.LogRetentionMs = mustInt(set["log.retention.minutes"]) * 60_000
	default:
		b.LogRetentionMs = intOr(set, "log.retention.hours", 168) * 3_600_000
	}
	if b.LogRetentionMs < 0 {
		b.LogRetentionMs = -1
	}
	// log.roll.ms > log.roll.hours.
	if has(set, "log.roll.ms") {
		b.LogRollMs = mustInt(set["log.roll.ms"])
	} else {
		b.LogRollMs = intOr(set, "log.roll.hours", 168) * 3_600_000
	}
	// log.roll.jitter.ms > log.roll.jitter.hours.
	if has(set, "log.roll.jitter.ms") {
		b.LogRollJitterMs = mustInt(set["log.roll.jitter.ms"])
	} else {
		b.LogRollJitterMs = intOr(set, "log.roll.jitter.hours", 0) * 3_600_000
	}
	// log.flush.interval.ms is null by default: -1 here.
	if !has(set, "log.flush.interval.ms") {
		b.LogFlushIntervalMs = -1
	}
	// log.dirs > log.dir.
	if !has(set, "log.dirs") {
		dir := "./samsa-data"
		if has(set, "log.dir") {
			dir = strings.TrimSpace(set["log.dir"])
		}
		b.LogDirs = []string{dir}
	}
	// broker.id is the old name of node.id; node.id wins when both are set.
	if has(set, "broker.id") && !has(set, "node.id") {
		b.NodeID = int32(mustInt(set["broker.id"]))
	}
	// advertised.listeners defaults to the non-controller listeners.
	if !has(set, "advertised.listeners") {
		b.AdvertisedListeners = nil
		for _, l := range b.Listeners {
			if !contains(b.ControllerListenerNames, l.Name) {
				b.AdvertisedListeners = append(b.AdvertisedListeners, l)
			}
		}
	}
	// inter.broker.listener.name defaults to the listener named by
	// security.inter.broker.protocol, else PLAINTEXT if advertised, else the first
	// advertised listener.
	if has(set, "security.inter.broker.protocol") && !has(set, "inter.broker.listener.name") {
		b.InterBrokerListenerName = strings.ToUpper(strings.TrimSpace(set["security.inter.broker.protocol"]))
	} else if !has(set, "inter.broker.listener.name") {
		b.InterBrokerListenerName = ""
		for _, l := range b.AdvertisedListeners {
			if l.Name == "PLAINTEXT" || b.InterBrokerListenerName == "" {
				b.InterBrokerListenerName = l.Name
			}
		}
	} else {
		b.InterBrokerListenerName = strings.ToUpper(b.InterBrokerListenerName)
	}
}

// alone reports whether this node is the whole quorum and name was not set: then
// the internal topics fit a one-broker cluster, as in Kafka's sample single-node
// configuration.
func (b *Broker) alone(name string) bool {
	voters, err := ParseQuorumVoters(b.ControllerQuorumVoters)
	return err == nil && len(voters) == 0 && !has(b.Raw, name)
}

// OffsetsTopicRF is the replication factor __consumer_offsets is created with:
// offsets.topic.replication.factor, or 1 when this node alone is the quorum and the
// property is not set.
func (b *Broker) OffsetsTopicRF() int16 {
	if b.alone("offsets.topic.replication.factor") {
		return 1
	}
	return b.OffsetsTopicReplicationFactor
}

// TransactionStateRF and TransactionStateMinISR are transaction.state.log.replication.factor
// and .min.isr, or 1 when this node alone is the quorum and they are not set.
func (b *Broker) TransactionStateRF() int16 {
	if b.alone("transaction.state.log.replication.factor") {
		return 1
	}
	return b.TransactionStateLogReplicationFactor
}

// ShareStateRF and ShareStateMinISR are share.coordinator.state.topic.replication.factor
// and .min.isr, or 1 when this node alone is the quorum and they are not set.
func (b *Broker) ShareStateRF() int16 {
	if b.alone("share.coordinator.state.topic.replication.factor") {
		return 1
	}
	return b.ShareCoordinatorStateTopicReplicationFactor
}

func (b *Broker) ShareStateMinISR() int16 {
	if b.alone("share.coordinator.state.topic.min.isr") {
		return 1
	}
	return b.ShareCoordinatorStateTopicMinIsr
}

func (b *Broker) TransactionStateMinISR() int32 {
	if b.alone("transaction.state.log.min.isr") {
		return 1
	}
	return b.TransactionStateLogMinIsr
}

// ControllerListener returns the listener a controller serves the quorum on (the
// first of controller.listener.names), if listeners has it.
func (b *Broker) ControllerListener() (Listener, bool) {
	for _, l := range b.Listeners {
		if len(b.ControllerListenerNames) > 0 && l.Name == b.ControllerListenerNames[0] {
			return l, true
		}
	}
	return Listener{}, false
}

// ClientListeners returns the listeners that serve clients: every listener that is
// not a controller listener.
func (b *Broker) ClientListeners() []Listener {
	var out []Listener
	for _, l := range b.Listeners {
		if !contains(b.ControllerListenerNames, l.Name) {
			out = append(out, l)
		}
	}
	return out
}

func has(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func intOr(m map[string]string, k string, def int64) int64 {
	if v, ok := m[k]; ok {
		return mustInt(v)
	}
	return def
}

// QuorumVoters returns controller.quorum.voters parsed (empty: this node alone).
// It returns an error only for a Broker that fails Validate.
func (b *Broker) QuorumVoters() (map[int32]string, error) {
	v, err := ParseQuorumVoters(b.ControllerQuorumVoters)
	if err != nil {
		return nil, fmt.Errorf("%w: controller.quorum.voters=%q: %v", ErrInvalidValue, b.ControllerQuorumVoters, err)
	}
	return v, nil
}

// ConsumerProtocolEnabled reports whether group.coordinator.rebalance.protocols
// lists consumer: the KIP-848 consumer group protocol is served.
func (b *Broker) ConsumerProtocolEnabled() bool {
	return contains(b.GroupCoordinatorRebalanceProtocols, "consumer")
}

// HasRole reports whether process.roles contains role ("broker" or "controller").
func (b *Broker) HasRole(role string) bool { return contains(b.ProcessRoles, role) }

// Validate checks every field against its property's bounds, then the rules that
// span several properties. It reports all problems at once (errors.Join), each
// wrapping ErrInvalidValue or ErrInvalidConfig and naming the property.
func (b *Broker) Validate() error {
	var errs []error
	for _, p := range brokerProperties {
		if p.get == nil {
			continue
		}
		v := p.get(b)
		if err := p.spec.check(v); err != nil {
			errs = append(errs, invalidValue(p.name, v, err))
		}
	}
	return errors.Join(append(errs, b.crossChecks()...)...)
}

func invalidValue(name, value string, why error) error {
	return fmt.Errorf("%w: %s=%q: %v", ErrInvalidValue, name, value, why)
}

func conflict(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

func (b *Broker) crossChecks() []error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }

	if len(b.ProcessRoles) == 0 {
		add(conflict("process.roles must name broker, controller or both"))
	}
	if dup := firstDuplicate(b.ProcessRoles); dup != "" {
		add(conflict("process.roles=%q names %q twice", strings.Join(b.ProcessRoles, ","), dup))
	}
	voters, err := ParseQuorumVoters(b.ControllerQuorumVoters)
	if err == nil {
		if b.HasRole("controller") && len(voters) > 0 {
			if _, ok := voters[b.NodeID]; !ok {
				add(conflict("node.id=%d is a controller but not in controller.quorum.voters=%q", b.NodeID, b.ControllerQuorumVoters))
			}
		}
		if !b.HasRole("controller") && len(voters) == 0 {
			add(conflict("process.roles=broker needs controller.quorum.voters to name the controllers"))
		}
	}
	if dup := firstDuplicate(b.LogDirs); dup != "" {
		add(conflict("log.dirs names %q twice", dup))
	}
	if !contains(b.GroupCoordinatorRebalanceProtocols, "classic") {
		add(conflict("group.coordinator.rebalance.protocols=%q leaves out classic, which cannot be disabled (as in Kafka)",
			strings.Join(b.GroupCoordinatorRebalanceProtocols, ",")))
	}

	names := map[string]bool{}
	ports := map[string]string{}
	for _, l := range b.Listeners {
		if names[l.Name] {
			add(conflict("listeners=%q names listener %s twice", formatListeners(b.Listeners), l.Name))
		}
		names[l.Name] = true
		if l.Port != 0 {
			if other, ok := ports[strconv.Itoa(l.Port)+"/"+l.Host]; ok {
				add(conflict("listeners %s and %s use the same address", other, l.Name))
			}
			ports[strconv.Itoa(l.Port)+"/"+l.Host] = l.Name
		}
	}
	controllerNames := strings.Join(b.ControllerListenerNames, ",")
	if len(b.ControllerListenerNames) == 0 && b.HasRole("controller") {
		add(conflict("a controller needs controller.listener.names"))
	}
	if b.HasRole("controller") && len(voters) > 1 && len(b.ControllerListenerNames) > 0 && !names[b.ControllerListenerNames[0]] {
		add(conflict("a controller in a multi-node quorum needs its %s listener in listeners (controller.listener.names=%s)", b.ControllerListenerNames[0], controllerNames))
	}
	if !b.HasRole("broker") {
		for _, l := range b.Listeners {
			if !contains(b.ControllerListenerNames, l.Name) {
				add(conflict("process.roles=controller: listener %s is not a controller listener (controller.listener.names=%s); a controller-only node serves only the quorum", l.Name, controllerNames))
			}
		}
	}
	if !b.HasRole("controller") {
		for _, l := range b.Listeners {
			if contains(b.ControllerListenerNames, l.Name) {
				add(conflict("process.roles=broker: listener %s is a controller listener (controller.listener.names=%s), but this node is not a controller", l.Name, controllerNames))
			}
		}
	}
	for _, l := range b.AdvertisedListeners {
		if !names[l.Name] {
			add(conflict("advertised.listeners names %s, which is not in listeners", l.Name))
		}
		if contains(b.ControllerListenerNames, l.Name) {
			add(conflict("advertised.listeners names the controller listener %s: clients and brokers do not use it", l.Name))
		}
		if ip := net.ParseIP(l.Host); ip != nil && ip.IsUnspecified() {
			add(conflict("advertised listener %s uses the non-routable address %s: set advertised.listeners to an address clients can reach", l, l.Host))
		}
	}
	if b.HasRole("broker") && len(b.AdvertisedListeners) == 0 {
		add(conflict("a broker needs at least one advertised listener other than the controller listeners (%s)", controllerNames))
	}
	if b.HasRole("broker") && len(b.AdvertisedListeners) > 0 {
		found := false
		for _, l := range b.AdvertisedListeners {
			found = found || l.Name == b.InterBrokerListenerName
		}
		if !found {
			add(conflict("inter.broker.listener.name=%s is not an advertised listener (advertised.listeners=%s)", b.InterBrokerListenerName, formatListeners(b.AdvertisedListeners)))
		}
	}
	if b.BrokerHeartbeatIntervalMs >= b.BrokerSessionTimeoutMs {
		add(conflict("broker.heartbeat.interval.ms=%d must be below broker.session.timeout.ms=%d, or every broker is fenced between two heartbeats", b.BrokerHeartbeatIntervalMs, b.BrokerSessionTimeoutMs))
	}

	if b.GroupMinSessionTimeoutMs > b.GroupMaxSessionTimeoutMs {
		add(conflict("group.min.session.timeout.ms=%d is above group.max.session.timeout.ms=%d", b.GroupMinSessionTimeoutMs, b.GroupMaxSessionTimeoutMs))
	}
	if b.GroupConsumerSessionTimeoutMs < b.GroupConsumerMinSessionTimeoutMs || b.GroupConsumerSessionTimeoutMs > b.GroupConsumerMaxSessionTimeoutMs {
		add(conflict("group.consumer.session.timeout.ms=%d is outside [group.consumer.min.session.timeout.ms=%d, group.consumer.max.session.timeout.ms=%d]", b.GroupConsumerSessionTimeoutMs, b.GroupConsumerMinSessionTimeoutMs, b.GroupConsumerMaxSessionTimeoutMs))
	}
	if b.GroupConsumerHeartbeatIntervalMs < b.GroupConsumerMinHeartbeatIntervalMs || b.GroupConsumerHeartbeatIntervalMs > b.GroupConsumerMaxHeartbeatIntervalMs {
		add(conflict("group.consumer.heartbeat.interval.ms=%d is outside [group.consumer.min.heartbeat.interval.ms=%d, group.consumer.max.heartbeat.interval.ms=%d]", b.GroupConsumerHeartbeatIntervalMs, b.GroupConsumerMinHeartbeatIntervalMs, b.GroupConsumerMaxHeartbeatIntervalMs))
	}
	if b.GroupConsumerHeartbeatIntervalMs >= b.GroupConsumerSessionTimeoutMs {
		add(conflict("group.consumer.heartbeat.interval.ms=%d must be below group.consumer.session.timeout.ms=%d", b.GroupConsumerHeartbeatIntervalMs, b.GroupConsumerSessionTimeoutMs))
	}
	if b.GroupConsumerAssignmentIntervalMs < b.GroupConsumerMinAssignmentIntervalMs || b.GroupConsumerAssignmentIntervalMs > b.GroupConsumerMaxAssignmentIntervalMs {
		add(conflict("group.consumer.assignment.interval.ms=%d is outside [group.consumer.min.assignment.interval.ms=%d, group.consumer.max.assignment.interval.ms=%d]", b.GroupConsumerAssignmentIntervalMs, b.GroupConsumerMinAssignmentIntervalMs, b.GroupConsumerMaxAssignmentIntervalMs))
	}
	if b.GroupShareAssignmentIntervalMs < b.GroupShareMinAssignmentIntervalMs || b.GroupShareAssignmentIntervalMs > b.GroupShareMaxAssignmentIntervalMs {
		add(conflict("group.share.assignment.interval.ms=%d is outside [group.share.min.assignment.interval.ms=%d, group.share.max.assignment.interval.ms=%d]", b.GroupShareAssignmentIntervalMs, b.GroupShareMinAssignmentIntervalMs, b.GroupShareMaxAssignmentIntervalMs))
	}
	if b.GroupShareSessionTimeoutMs < b.GroupShareMinSessionTimeoutMs || b.GroupShareSessionTimeoutMs > b.GroupShareMaxSessionTimeoutMs {
		add(conflict("group.share.session.timeout.ms=%d is outside [group.share.min.session.timeout.ms=%d, group.share.max.session.timeout.ms=%d]", b.GroupShareSessionTimeoutMs, b.GroupShareMinSessionTimeoutMs, b.GroupShareMaxSessionTimeoutMs))
	}
	if b.GroupShareHeartbeatIntervalMs < b.GroupShareMinHeartbeatIntervalMs || b.GroupShareHeartbeatIntervalMs > b.GroupShareMaxHeartbeatIntervalMs {
		add(conflict("group.share.heartbeat.interval.ms=%d is outside [group.share.min.heartbeat.interval.ms=%d, group.share.max.heartbeat.interval.ms=%d]", b.GroupShareHeartbeatIntervalMs, b.GroupShareMinHeartbeatIntervalMs, b.GroupShareMaxHeartbeatIntervalMs))
	}
	if b.GroupShareHeartbeatIntervalMs >= b.GroupShareSessionTimeoutMs {
		add(conflict("group.share.heartbeat.interval.ms=%d must be below group.share.session.timeout.ms=%d", b.GroupShareHeartbeatIntervalMs, b.GroupShareSessionTimeoutMs))
	}
	if b.MetadataLogDir != "" && len(b.LogDirs) > 0 && filepath.Clean(b.MetadataLogDir) != filepath.Clean(b.LogDirs[0]) {
		add(conflict("metadata.log.dir=%s is not the first of log.dirs (%s): Samsa keeps the metadata log in %s; remove metadata.log.dir or list its directory first in log.dirs",
			b.MetadataLogDir, b.LogDirs[0], filepath.Join(b.LogDirs[0], "__cluster_metadata-0")))
	}
	if b.GroupShareRecordLockDurationMs < b.GroupShareMinRecordLockDurationMs || b.GroupShareRecordLockDurationMs > b.GroupShareMaxRecordLockDurationMs {
		add(conflict("group.share.record.lock.duration.ms=%d is outside [group.share.min.record.lock.duration.ms=%d, group.share.max.record.lock.duration.ms=%d]", b.GroupShareRecordLockDurationMs, b.GroupShareMinRecordLockDurationMs, b.GroupShareMaxRecordLockDurationMs))
	}
	if b.GroupShareDeliveryCountLimit < b.GroupShareMinDeliveryCountLimit || b.GroupShareDeliveryCountLimit > b.GroupShareMaxDeliveryCountLimit {
		add(conflict("group.share.delivery.count.limit=%d is outside [group.share.min.delivery.count.limit=%d, group.share.max.delivery.count.limit=%d]", b.GroupShareDeliveryCountLimit, b.GroupShareMinDeliveryCountLimit, b.GroupShareMaxDeliveryCountLimit))
	}
	if b.GroupSharePartitionMaxRecordLocks < b.GroupShareMinPartitionMaxRecordLocks || b.GroupSharePartitionMaxRecordLocks > b.GroupShareMaxPartitionMaxRecordLocks {
		add(conflict("group.share.partition.max.record.locks=%d is outside [group.share.min.partition.max.record.locks=%d, group.share.max.partition.max.record.locks=%d]", b.GroupSharePartitionMaxRecordLocks, b.GroupShareMinPartitionMaxRecordLocks, b.GroupShareMaxPartitionMaxRecordLocks))
	}
	if b.LogRetentionMs == 0 {
		// Kafka's KafkaConfig: "log.retention.ms must be unlimited (-1) or, greater than
		// or equal to 1" (retention.ms=0 is a topic's choice, not every topic's default).
		add(conflict("log.retention.ms (or .minutes, .hours) is 0: it must be -1 (unlimited) or at least 1 ms"))
	}
	if b.LogCleanerMinCompactionLagMs > b.LogCleanerMaxCompactionLagMs {
		add(conflict("log.cleaner.min.compaction.lag.ms=%d is above log.cleaner.max.compaction.lag.ms=%d", b.LogCleanerMinCompactionLagMs, b.LogCleanerMaxCompactionLagMs))
	}
	if id, ok := b.Raw["broker.id"]; ok && has(b.Raw, "node.id") && mustInt(id) != int64(b.NodeID) {
		add(conflict("broker.id=%s differs from node.id=%d (broker.id is the old name of node.id)", id, b.NodeID))
	}
	return append(errs, b.securityChecks()...)
}

func firstDuplicate(xs []string) string {
	seen := map[string]bool{}
	for _, x := range xs {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
