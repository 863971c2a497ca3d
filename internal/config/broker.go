package config

import (
	"errors"
	"fmt"
	"net"
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

// ControllerListenerName is the listener name Samsa treats as the controller
// listener: it is never advertised to clients by default.
const ControllerListenerName = "CONTROLLER"

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

	Listeners           []Listener // listeners
	AdvertisedListeners []Listener // advertised.listeners; default = listeners other than CONTROLLER

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
	OffsetsTopicReplicationFactor   int16 // offsets.topic.replication.factor (Samsa: min(this, live brokers) at creation)
	OffsetsTopicSegmentBytes        int64 // offsets.topic.segment.bytes
	OffsetsRetentionMinutes         int64 // offsets.retention.minutes
	OffsetsRetentionCheckIntervalMs int64 // offsets.retention.check.interval.ms
	OffsetsCommitTimeoutMs          int32 // offsets.commit.timeout.ms

	GroupInitialRebalanceDelayMs int32 // group.initial.rebalance.delay.ms
	GroupMinSessionTimeoutMs     int32 // group.min.session.timeout.ms
	GroupMaxSessionTimeoutMs     int32 // group.max.session.timeout.ms
	GroupMaxSize                 int32 // group.max.size

	ConnectionsMaxIdleMs        int64 // connections.max.idle.ms
	ReplicaLagTimeMaxMs         int64 // replica.lag.time.max.ms
	TransactionalIDExpirationMs int32 // transactional.id.expiration.ms
	TransactionMaxTimeoutMs     int32 // transaction.max.timeout.ms

	LogCleanerEnable              bool    // log.cleaner.enable
	LogCleanerThreads             int32   // log.cleaner.threads
	LogCleanerBackoffMs           int64   // log.cleaner.backoff.ms
	LogCleanerMinCleanableRatio   float64 // log.cleaner.min.cleanable.ratio
	LogCleanerDeleteRetentionMs   int64   // log.cleaner.delete.retention.ms
	LogCleanerMinCompactionLagMs  int64   // log.cleaner.min.compaction.lag.ms
	LogCleanerMaxCompactionLagMs  int64   // log.cleaner.max.compaction.lag.ms
	LogCleanerIoMaxBytesPerSecond float64 // log.cleaner.io.max.bytes.per.second

	MetricsListener string // metrics.listener (Samsa's own): "" = off, else host:port

	// Raw holds every property exactly as it was set in the file or an override
	// (after trimming), keyed by name. It is what DescribeConfigs reports as
	// STATIC_BROKER_CONFIG; properties absent from it are at their default.
	Raw map[string]string
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
			if l.Name != ControllerListenerName {
				b.AdvertisedListeners = append(b.AdvertisedListeners, l)
			}
		}
	}
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
	if b.HasRole("controller") && len(voters) > 1 && !names[ControllerListenerName] {
		add(conflict("a controller in a multi-node quorum needs a %s listener in listeners", ControllerListenerName))
	}
	for _, l := range b.AdvertisedListeners {
		if !names[l.Name] {
			add(conflict("advertised.listeners names %s, which is not in listeners", l.Name))
		}
		if ip := net.ParseIP(l.Host); ip != nil && ip.IsUnspecified() {
			add(conflict("advertised listener %s uses the non-routable address %s: set advertised.listeners to an address clients can reach", l, l.Host))
		}
	}
	if b.HasRole("broker") && len(b.AdvertisedListeners) == 0 {
		add(conflict("a broker needs at least one advertised listener other than %s", ControllerListenerName))
	}

	if b.GroupMinSessionTimeoutMs > b.GroupMaxSessionTimeoutMs {
		add(conflict("group.min.session.timeout.ms=%d is above group.max.session.timeout.ms=%d", b.GroupMinSessionTimeoutMs, b.GroupMaxSessionTimeoutMs))
	}
	if b.LogCleanerMinCompactionLagMs > b.LogCleanerMaxCompactionLagMs {
		add(conflict("log.cleaner.min.compaction.lag.ms=%d is above log.cleaner.max.compaction.lag.ms=%d", b.LogCleanerMinCompactionLagMs, b.LogCleanerMaxCompactionLagMs))
	}
	if id, ok := b.Raw["broker.id"]; ok && has(b.Raw, "node.id") && mustInt(id) != int64(b.NodeID) {
		add(conflict("broker.id=%s differs from node.id=%d (broker.id is the old name of node.id)", id, b.NodeID))
	}
	return errs
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
