package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// property is one broker property. The brokerProperties table is the single source
// for parsing (Load), bounds (Validate), DescribeConfigs (DescribeBroker) and the
// tables in docs/config.md (generated from it by this package's tests).
type property struct {
	name    string
	spec    valueSpec
	def     string // default as text (Kafka's, unless note says otherwise)
	null    bool   // no default (Kafka's null): unset unless given
	set     func(b *Broker, v string)
	get     func(b *Broker) string // effective value; nil: as set, else def
	doc     string
	note    string // what Samsa does differently, for docs/config.md
	ignored bool   // accepted for compatibility, has no effect
	// listener: the property may also be set for one listener with the prefix
	// listener.name.<listener name in lower case>. (see security.go).
	listener bool
}

// Typed bindings between a property and a Broker field.

type binding struct {
	set func(*Broker, string)
	get func(*Broker) string
}

func (p property) bind(bd binding) property { p.set, p.get = bd.set, bd.get; return p }

func i64(f func(*Broker) *int64) binding {
	return binding{
		set: func(b *Broker, v string) { *f(b) = mustInt(v) },
		get: func(b *Broker) string { return fmtInt(*f(b)) },
	}
}

func i32(f func(*Broker) *int32) binding {
	return binding{
		set: func(b *Broker, v string) { *f(b) = int32(mustInt(v)) },
		get: func(b *Broker) string { return fmtInt(*f(b)) },
	}
}

func i16(f func(*Broker) *int16) binding {
	return binding{
		set: func(b *Broker, v string) { *f(b) = int16(mustInt(v)) },
		get: func(b *Broker) string { return fmtInt(*f(b)) },
	}
}

func f64(f func(*Broker) *float64) binding {
	return binding{
		set: func(b *Broker, v string) { *f(b) = mustFloat(v) },
		get: func(b *Broker) string { return formatFloat(*f(b)) },
	}
}

func boolField(f func(*Broker) *bool) binding {
	return binding{
		set: func(b *Broker, v string) { *f(b) = mustBool(v) },
		get: func(b *Broker) string {
			if *f(b) {
				return "true"
			}
			return "false"
		},
	}
}

func str(f func(*Broker) *string) binding {
	return binding{
		set: func(b *Broker, v string) { *f(b) = strings.TrimSpace(v) },
		get: func(b *Broker) string { return *f(b) },
	}
}

func strs(f func(*Broker) *[]string) binding {
	return binding{
		set: func(b *Broker, v string) { *f(b) = splitList(v) },
		get: func(b *Broker) string { return strings.Join(*f(b), ",") },
	}
}

// assignorList stores assignor names, Kafka's class names reduced to them.
func assignorList(f func(*Broker) *[]string) binding {
	return binding{
		set: func(b *Broker, v string) {
			var names []string
			for _, s := range splitList(v) {
				names = append(names, AssignorName(s))
			}
			*f(b) = names
		},
		get: func(b *Broker) string { return strings.Join(*f(b), ",") },
	}
}

// AssignorName maps a group.consumer.assignors entry to "uniform" or "range" ("" when
// it names neither).
func AssignorName(s string) string {
	switch strings.TrimSpace(s) {
	case "uniform", "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
		return "uniform"
	case "range", "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
		return "range"
	}
	return ""
}

func listeners(f func(*Broker) *[]Listener) binding {
	return binding{
		set: func(b *Broker, v string) { *f(b), _ = ParseListeners(v) },
		get: func(b *Broker) string { return formatListeners(*f(b)) },
	}
}

// upperList is a list of listener names, upper-cased as listeners' names are.
func upperList(f func(*Broker) *[]string) binding {
	return binding{
		set: func(b *Broker, v string) {
			*f(b) = splitList(strings.ToUpper(v))
		},
		get: func(b *Broker) string { return strings.Join(*f(b), ",") },
	}
}

// getOnly reports a field computed by derive from several properties.
func getOnly(bd binding) binding { bd.set = nil; return bd }

var (
	listenerList  = list{nonEmpty: true, item: func(s string) error { _, err := parseListener(s); return err }, valid: "NAME://host:port,..."}
	listenerList0 = list{item: listenerList.item, valid: "NAME://host:port,..."}
	voterList     = text{typ: TypeList, valid: "id@host:port,...", fn: func(s string) error { _, err := ParseQuorumVoters(s); return err }}
	hostPortOrOff = text{valid: "host:port, or empty", fn: func(s string) error {
		if s == "" {
			return nil
		}
		return checkHostPort(s)
	}}
	consoleHosts = list{valid: "host names, or *", item: func(s string) error {
		if strings.ContainsAny(s, ":/ ") {
			return fmt.Errorf("%q is not a host name (no port, no scheme)", s)
		}
		return nil
	}}
	cleanupPolicies  = list{values: []string{"compact", "delete"}, nonEmpty: true}
	timestampTypes   = enum{values: []string{"CreateTime", "LogAppendTime"}}
	compressionTypes = enum{values: []string{"producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd"}}
	// gzipLevels is -1 (the default) or 1–9, as Kafka's compression.gzip.level.
	gzipLevels = text{typ: TypeInt, valid: "-1, [1,...,9]", fn: func(s string) error {
		if n, err := strconv.Atoi(s); err != nil || n != -1 && (n < 1 || n > 9) {
			return errors.New("must be -1 or 1 to 9")
		}
		return nil
	}}
	roles = list{values: []string{"broker", "controller"}, nonEmpty: true}
	// replicaSelectors are the replica.selector.class values: unset, or one of Kafka's
	// built-in selectors.
	replicaSelectors = text{valid: LeaderSelector + ", " + RackAwareReplicaSelector, fn: func(s string) error {
		if s == "" || s == LeaderSelector || s == RackAwareReplicaSelector {
			return nil
		}
		return fmt.Errorf("must be %s or %s (other selector classes are not supported)", LeaderSelector, RackAwareReplicaSelector)
	}}
	// consumerAssignors are the server-side assignors of KIP-848, by name or Kafka class name.
	consumerAssignors = list{nonEmpty: true, valid: "uniform,range", item: func(s string) error {
		if AssignorName(s) == "" {
			return errors.New("unknown assignor " + s + " (uniform or range)")
		}
		return nil
	}}
	// rebalanceProtocols are Kafka's group types; classic must be among them (crossChecks).
	rebalanceProtocols = list{values: []string{"classic", "consumer", "share", "streams"}, nonEmpty: true}
	migrationPolicies  = enum{values: []string{"bidirectional", "upgrade", "downgrade", "disabled"}}
)

const maxLong = "9223372036854775807"

// brokerProperties: every broker property Samsa accepts, in docs order: the core
// ones, then security (security.go).
var brokerProperties = slices.Concat(coreProperties, securityProperties)

var coreProperties = []property{
	// Node identity and cluster shape.
	property{name: "node.id", spec: atLeast(TypeInt, 0), def: "1",
		doc:  "Id of this node, unique in the cluster; also written to meta.properties in each log directory.",
		note: "Kafka has no default; Samsa's 1 lets `samsa serve` start without a file."}.
		bind(i32(func(b *Broker) *int32 { return &b.NodeID })),
	{name: "broker.id", spec: atLeast(TypeInt, -1), def: "-1",
		doc:  "Old name of node.id.",
		note: "Used as node.id when node.id is not set; must equal node.id when both are."},
	property{name: "process.roles", spec: roles, def: "broker,controller",
		doc:  "What this node does: broker (serves clients), controller (member of the metadata quorum), or both.",
		note: "Kafka has no default; Samsa's default is one combined node."}.
		bind(strs(func(b *Broker) *[]string { return &b.ProcessRoles })),
	property{name: "controller.quorum.voters", spec: voterList, def: "",
		doc:  "The controller quorum as id@host:port of each voter's CONTROLLER listener.",
		note: "Empty means this node alone is the quorum."}.
		bind(str(func(b *Broker) *string { return &b.ControllerQuorumVoters })),
	{name: "log.dir", spec: text{}, def: "./samsa-data",
		doc:  "Directory holding the data, used when log.dirs is not set.",
		note: "Kafka's default is /tmp/kafka-logs."},
	property{name: "log.dirs", spec: list{nonEmpty: true, valid: "dir,..."}, null: true,
		doc:  "Comma-separated data directories; partitions are spread over them. Overrides log.dir.",
		note: ""}.
		bind(strs(func(b *Broker) *[]string { return &b.LogDirs })),
	property{name: "metadata.log.dir", spec: text{}, null: true,
		doc:  "Directory of the metadata log.",
		note: "Samsa keeps the metadata log in the first of log.dirs (__cluster_metadata-0); the property is accepted only when it names that directory."}.
		bind(str(func(b *Broker) *string { return &b.MetadataLogDir })),
	property{name: "listeners", spec: listenerList, def: "PLAINTEXT://127.0.0.1:9092",
		doc:  "Addresses to listen on, as NAME://host:port; an empty host means every interface, port 0 a free port. Each name's security protocol comes from listener.security.protocol.map.",
		note: "Kafka's default is PLAINTEXT://:9092. The ones in controller.listener.names carry the quorum."}.
		bind(listeners(func(b *Broker) *[]Listener { return &b.Listeners })),
	property{name: "advertised.listeners", spec: listenerList0, null: true,
		doc:  "Addresses given to clients in Metadata responses; each name must be one of listeners.",
		note: "Defaults to listeners without the controller listeners. 0.0.0.0 is refused: clients cannot connect to it."}.
		bind(listeners(func(b *Broker) *[]Listener { return &b.AdvertisedListeners })),
	property{name: "controller.listener.names", spec: list{nonEmpty: true, valid: "NAME,..."}, def: ControllerListenerName,
		doc:  "Listeners that carry the metadata quorum; a controller serves it on the first. They are never advertised to clients.",
		note: "Kafka has no default (it is required in KRaft mode); Samsa's is CONTROLLER."}.
		bind(upperList(func(b *Broker) *[]string { return &b.ControllerListenerNames })),
	property{name: "inter.broker.listener.name", spec: text{}, null: true,
		doc:  "The advertised listener brokers use to reach each other (followers fetch from leaders on it). Not to be set together with security.inter.broker.protocol.",
		note: "Defaults to the listener named by security.inter.broker.protocol when that is set; else PLAINTEXT when it is advertised, else the first advertised listener."}.
		bind(str(func(b *Broker) *string { return &b.InterBrokerListenerName })),
	property{name: "broker.rack", spec: text{}, null: true,
		doc: "Rack (or zone) of this broker; replicas of a partition are spread over racks."}.
		bind(str(func(b *Broker) *string { return &b.BrokerRack })),
	property{name: "broker.heartbeat.interval.ms", spec: atLeast(TypeInt, 1), def: "2000",
		doc: "How often a broker heartbeats to the active controller."}.
		bind(i32(func(b *Broker) *int32 { return &b.BrokerHeartbeatIntervalMs })),
	property{name: "broker.session.timeout.ms", spec: atLeast(TypeInt, 1), def: "9000",
		doc: "A broker without a heartbeat for this long is fenced: its leaderships move and it leaves the ISRs."}.
		bind(i32(func(b *Broker) *int32 { return &b.BrokerSessionTimeoutMs })),
	property{name: "controlled.shutdown.enable", spec: boolean{}, def: "true",
		doc: "On SIGTERM, ask the active controller to move this broker's leaderships away and take it out of the ISRs before stopping (waiting up to broker.session.timeout.ms). " +
			"When false the broker stops at once; its partitions stay led by it until the controller fences it after broker.session.timeout.ms."}.
		bind(boolField(func(b *Broker) *bool { return &b.ControlledShutdownEnable })),
	property{name: "controller.quorum.election.timeout.ms", spec: atLeast(TypeInt, 1), def: "1000",
		doc:  "How long a voter waits without hearing from the leader before it calls an election; a leader that hears from no majority for as long steps down.",
		note: "Raft randomises the timeout between one and two times this value, in ticks of 100 ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.ControllerQuorumElectionTimeoutMs })),
	property{name: "controller.quorum.fetch.timeout.ms", spec: atLeast(TypeInt, 1), def: "2000",
		doc: "How long a node that reads the metadata log without voting waits for the controller before it tries another voter."}.
		bind(i32(func(b *Broker) *int32 { return &b.ControllerQuorumFetchTimeoutMs })),
	property{name: "controller.quorum.request.timeout.ms", spec: atLeast(TypeInt, 1), def: "2000",
		doc: "How long a node waits for a controller to answer a request before it takes the controller as unreachable."}.
		bind(i32(func(b *Broker) *int32 { return &b.ControllerQuorumRequestTimeoutMs })),
	property{name: "controller.quorum.retry.backoff.ms", spec: atLeast(TypeInt, 0), def: "20",
		doc:  "First pause before reconnecting to, or retrying against, a controller after a failure.",
		note: "The pause doubles per consecutive failure up to 1 s."}.
		bind(i32(func(b *Broker) *int32 { return &b.ControllerQuorumRetryBackoffMs })),
	property{name: "auto.leader.rebalance.enable", spec: boolean{}, def: "true",
		doc: "Every leader.imbalance.check.interval.seconds, move leaderships back to preferred replicas for brokers whose imbalance exceeds leader.imbalance.per.broker.percentage."}.
		bind(boolField(func(b *Broker) *bool { return &b.AutoLeaderRebalanceEnable })),
	property{name: "leader.imbalance.check.interval.seconds", spec: atLeast(TypeLong, 1), def: "300",
		doc: "How often the active controller checks the leader balance."}.
		bind(i64(func(b *Broker) *int64 { return &b.LeaderImbalanceCheckIntervalSeconds })),
	property{name: "leader.imbalance.per.broker.percentage", spec: between(TypeInt, 0, 100), def: "10",
		doc: "Share of a broker's preferred partitions that may be led by others before a rebalance moves them back."}.
		bind(i32(func(b *Broker) *int32 { return &b.LeaderImbalancePerBrokerPercentage })),
	property{name: "metrics.listener", spec: hostPortOrOff, def: "",
		doc:  "host:port serving Prometheus metrics at /metrics; empty turns it off.",
		note: "Samsa only, not a Kafka property."}.
		bind(str(func(b *Broker) *string { return &b.MetricsListener })),
	property{name: "console.listener", spec: hostPortOrOff, def: "",
		doc:  "host:port serving the web console (as `samsa console` does) for this node's cluster; empty turns it off. Needs the broker role and a PLAINTEXT client listener, through which it connects as `User:ANONYMOUS` (against SSL and SASL listeners run `samsa console` with its security flags).",
		note: "Samsa only, not a Kafka property."}.
		bind(str(func(b *Broker) *string { return &b.ConsoleListener })),
	property{name: "console.allowed.hosts", spec: consoleHosts, def: "",
		doc:  "Host names the web console of console.listener answers to besides IP addresses, localhost and console.listener's own host; * allows any. Other names are refused (421) against DNS rebinding.",
		note: "Samsa only, not a Kafka property."}.
		bind(strs(func(b *Broker) *[]string { return &b.ConsoleAllowedHosts })),

	// Topic defaults.
	property{name: "num.partitions", spec: atLeast(TypeInt, 1), def: "1",
		doc: "Partitions of a topic created without a count (including auto-created topics)."}.
		bind(i32(func(b *Broker) *int32 { return &b.NumPartitions })),
	property{name: "default.replication.factor", spec: between(TypeInt, 1, math.MaxInt16), def: "1",
		doc: "Replication factor of a topic created without one."}.
		bind(i16(func(b *Broker) *int16 { return &b.DefaultReplicationFactor })),
	property{name: "auto.create.topics.enable", spec: boolean{}, def: "true",
		doc: "Create a topic when a client asks Metadata for one that does not exist."}.
		bind(boolField(func(b *Broker) *bool { return &b.AutoCreateTopicsEnable })),
	property{name: "delete.topic.enable", spec: boolean{}, def: "true",
		doc: "Allow DeleteTopics; when false the request is refused."}.
		bind(boolField(func(b *Broker) *bool { return &b.DeleteTopicEnable })),
	property{name: "min.insync.replicas", spec: atLeast(TypeInt, 1), def: "1",
		doc: "Fewest in-sync replicas for which an acks=all write is accepted (NOT_ENOUGH_REPLICAS otherwise). Topic: min.insync.replicas."}.
		bind(i32(func(b *Broker) *int32 { return &b.MinInsyncReplicas })),
	property{name: "unclean.leader.election.enable", spec: boolean{}, def: "false",
		doc: "Allow an out-of-sync replica to become leader when no in-sync one is left (may lose acknowledged data). Topic: unclean.leader.election.enable."}.
		bind(boolField(func(b *Broker) *bool { return &b.UncleanLeaderElectionEnable })),
	property{name: "message.max.bytes", spec: atLeast(TypeInt, 0), def: "1048588",
		doc: "Largest record batch the broker accepts (after compression). Topic: max.message.bytes."}.
		bind(i32(func(b *Broker) *int32 { return &b.MessageMaxBytes })),
	property{name: "compression.type", spec: compressionTypes, def: "producer",
		doc:  "Codec batches are stored in: producer keeps what the producer sent. Topic: compression.type.",
		note: "none is accepted as a synonym of uncompressed."}.
		bind(str(func(b *Broker) *string { return &b.CompressionType })),
	property{name: "compression.gzip.level", spec: gzipLevels, def: "-1",
		doc: "gzip level the broker compresses at when compression.type is gzip (-1: gzip's default). Topic: compression.gzip.level."}.
		bind(i32(func(b *Broker) *int32 { return &b.CompressionGzipLevel })),
	property{name: "compression.lz4.level", spec: between(TypeInt, 1, 17), def: "9",
		doc:  "lz4 level the broker compresses at when compression.type is lz4. Topic: compression.lz4.level.",
		note: "9 (the default) is lz4's fast compressor, as in Kafka; other levels use its high-compression mode, whose Go codec has nine levels (10–17 act as 9)."}.
		bind(i32(func(b *Broker) *int32 { return &b.CompressionLz4Level })),
	property{name: "compression.zstd.level", spec: between(TypeInt, -131072, 22), def: "3",
		doc:  "zstd level the broker compresses at when compression.type is zstd. Topic: compression.zstd.level.",
		note: "The Go codec has four speeds: below 3 fastest, 3–5 default, 6–9 better, 10 and up best."}.
		bind(i32(func(b *Broker) *int32 { return &b.CompressionZstdLevel })),
	property{name: "log.message.timestamp.type", spec: timestampTypes, def: "CreateTime",
		doc: "Whether record timestamps are the producer's (CreateTime) or the broker's append time (LogAppendTime). Topic: message.timestamp.type."}.
		bind(str(func(b *Broker) *string { return &b.LogMessageTimestampType })),
	property{name: "log.message.timestamp.before.max.ms", spec: atLeast(TypeLong, 0), def: maxLong,
		doc: "How far in the past a CreateTime record timestamp may be; older records are refused with INVALID_TIMESTAMP. Topic: message.timestamp.before.max.ms."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogMessageTimestampBeforeMaxMs })),
	property{name: "log.message.timestamp.after.max.ms", spec: atLeast(TypeLong, 0), def: maxLong,
		doc: "How far in the future a CreateTime record timestamp may be; later records are refused with INVALID_TIMESTAMP. Topic: message.timestamp.after.max.ms."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogMessageTimestampAfterMaxMs })),
	property{name: "log.message.timestamp.difference.max.ms", spec: atLeast(TypeLong, 0), def: maxLong,
		doc:  "Deprecated in Kafka 3.6: the bound both ways, used for .before.max.ms and .after.max.ms while they are at their default. Topic: message.timestamp.difference.max.ms.",
		note: "Removed in Kafka 4."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogMessageTimestampDifferenceMaxMs })),
	property{name: "log.cleanup.policy", spec: cleanupPolicies, def: "delete",
		doc: "delete removes old segments by time/size, compact keeps the last record per key; both may be given. Topic: cleanup.policy."}.
		bind(strs(func(b *Broker) *[]string { return &b.LogCleanupPolicy })),

	// Segments and retention.
	property{name: "log.segment.bytes", spec: between(TypeInt, 14, math.MaxInt32), def: "1073741824",
		doc:  "Size at which the active segment is rolled. Topic: segment.bytes.",
		note: "Minimum 14 as in Kafka 3.x (Kafka 4 raised it to 1 MiB)."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogSegmentBytes })),
	property{name: "log.roll.ms", spec: atLeast(TypeLong, 1), null: true,
		doc: "Age at which the active segment is rolled even if not full; wins over log.roll.hours. Topic: segment.ms."}.
		bind(getOnly(i64(func(b *Broker) *int64 { return &b.LogRollMs }))),
	{name: "log.roll.hours", spec: atLeast(TypeInt, 1), def: "168",
		doc: "log.roll.ms in hours, used when log.roll.ms is not set."},
	property{name: "log.roll.jitter.ms", spec: atLeast(TypeLong, 0), null: true,
		doc: "Largest random amount a segment rolls before its roll age, so that partitions created together do not roll together; wins over log.roll.jitter.hours. Topic: segment.jitter.ms."}.
		bind(getOnly(i64(func(b *Broker) *int64 { return &b.LogRollJitterMs }))),
	{name: "log.roll.jitter.hours", spec: atLeast(TypeInt, 0), def: "0",
		doc: "log.roll.jitter.ms in hours, used when log.roll.jitter.ms is not set."},
	property{name: "log.retention.ms", spec: anyOf(TypeLong), null: true,
		doc: "How long segments are kept before deletion; -1 keeps them forever. Wins over .minutes and .hours. Topic: retention.ms."}.
		bind(getOnly(i64(func(b *Broker) *int64 { return &b.LogRetentionMs }))),
	{name: "log.retention.minutes", spec: anyOf(TypeInt), null: true,
		doc: "log.retention.ms in minutes, used when log.retention.ms is not set; wins over log.retention.hours."},
	{name: "log.retention.hours", spec: anyOf(TypeInt), def: "168",
		doc: "log.retention.ms in hours, used when neither log.retention.ms nor log.retention.minutes is set."},
	property{name: "log.retention.bytes", spec: anyOf(TypeLong), def: "-1",
		doc: "Size a partition may reach before its oldest segments are deleted; -1 is unlimited. Topic: retention.bytes."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogRetentionBytes })),
	property{name: "log.retention.check.interval.ms", spec: atLeast(TypeLong, 1), def: "300000",
		doc: "How often segments are checked for deletion."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogRetentionCheckIntervalMs })),
	property{name: "log.segment.delete.delay.ms", spec: atLeast(TypeLong, 0), def: "60000",
		doc: "Delay between removing a segment from the log and deleting its files. Topic: file.delete.delay.ms."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogDeleteDelayMs })),
	property{name: "log.index.interval.bytes", spec: atLeast(TypeInt, 0), def: "4096",
		doc: "Bytes of batches between two offset-index entries. Topic: index.interval.bytes."}.
		bind(i32(func(b *Broker) *int32 { return &b.LogIndexIntervalBytes })),
	property{name: "log.index.size.max.bytes", spec: atLeast(TypeInt, 4), def: "10485760",
		doc: "Maximum size of an offset or time index; a full index rolls the segment. Topic: segment.index.bytes."}.
		bind(i32(func(b *Broker) *int32 { return &b.LogIndexSizeMaxBytes })),
	property{name: "log.flush.interval.messages", spec: atLeast(TypeLong, 1), def: maxLong,
		doc: "fsync the log after this many records; the default leaves flushing to the OS and replication. Topic: flush.messages."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogFlushIntervalMessages })),
	property{name: "log.flush.interval.ms", spec: atLeast(TypeLong, -1), null: true,
		doc:  "fsync the log when its oldest unflushed data is this old. Topic: flush.ms.",
		note: "Unset (reported as -1) means log.flush.scheduler.interval.ms applies, as in Kafka."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogFlushIntervalMs })),
	property{name: "log.preallocate", spec: boolean{}, def: "false",
		doc:  "Reserve disk blocks ahead of the active segment's end. Topic: preallocate.",
		note: "Not Kafka's whole-file preallocation: once the active segment holds 4 MiB it reserves a quarter of its size ahead (at most 16 MiB, the file's length unchanged) and gives it back on roll; see docs/operations.md."}.
		bind(boolField(func(b *Broker) *bool { return &b.LogPreallocate })),
	property{name: "log.flush.scheduler.interval.ms", spec: atLeast(TypeLong, 0), def: maxLong,
		doc: "How often the flusher checks whether a log needs an fsync; also the flush interval when log.flush.interval.ms is unset."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogFlushSchedulerIntervalMs })),

	// Log cleaner (compaction).
	property{name: "log.cleaner.enable", spec: boolean{}, def: "true",
		doc: "Run the log cleaner, which compacts topics with cleanup.policy=compact."}.
		bind(boolField(func(b *Broker) *bool { return &b.LogCleanerEnable })),
	property{name: "log.cleaner.threads", spec: atLeast(TypeInt, 0), def: "1",
		doc: "Number of concurrent cleaners."}.
		bind(i32(func(b *Broker) *int32 { return &b.LogCleanerThreads })),
	property{name: "log.cleaner.backoff.ms", spec: atLeast(TypeLong, 0), def: "15000",
		doc: "Pause of a cleaner that found nothing to clean."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogCleanerBackoffMs })),
	property{name: "log.cleaner.min.cleanable.ratio", spec: double{min: 0, max: 1}, def: "0.5",
		doc: "Share of a log that must be uncleaned before it is compacted. Topic: min.cleanable.dirty.ratio."}.
		bind(f64(func(b *Broker) *float64 { return &b.LogCleanerMinCleanableRatio })),
	property{name: "log.cleaner.delete.retention.ms", spec: atLeast(TypeLong, 0), def: "86400000",
		doc: "How long tombstones survive compaction, so slow readers still see the delete. Topic: delete.retention.ms."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogCleanerDeleteRetentionMs })),
	property{name: "log.cleaner.min.compaction.lag.ms", spec: atLeast(TypeLong, 0), def: "0",
		doc: "Records younger than this are never compacted. Topic: min.compaction.lag.ms."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogCleanerMinCompactionLagMs })),
	property{name: "log.cleaner.max.compaction.lag.ms", spec: atLeast(TypeLong, 1), def: maxLong,
		doc: "Records older than this make their log eligible for compaction regardless of the dirty ratio. Topic: max.compaction.lag.ms."}.
		bind(i64(func(b *Broker) *int64 { return &b.LogCleanerMaxCompactionLagMs })),
	property{name: "log.cleaner.io.max.bytes.per.second", spec: double{min: 0, max: math.MaxFloat64}, def: "1.7976931348623157e+308",
		doc: "Throttle on the cleaners' combined read and write rate."}.
		bind(f64(func(b *Broker) *float64 { return &b.LogCleanerIoMaxBytesPerSecond })),

	// Requests and connections.
	property{name: "socket.request.max.bytes", spec: atLeast(TypeInt, 1), def: "104857600",
		doc: "Largest request frame accepted; a bigger size prefix closes the connection."}.
		bind(i32(func(b *Broker) *int32 { return &b.SocketRequestMaxBytes })),
	property{name: "connections.max.idle.ms", spec: anyOf(TypeLong), def: "600000",
		doc: "Idle connections are closed after this long."}.
		bind(i64(func(b *Broker) *int64 { return &b.ConnectionsMaxIdleMs })),
	property{name: "replica.lag.time.max.ms", spec: anyOf(TypeLong), def: "30000",
		doc: "A follower that has not caught up with the leader for this long leaves the ISR."}.
		bind(i64(func(b *Broker) *int64 { return &b.ReplicaLagTimeMaxMs })),
	property{name: "replica.fetch.wait.max.ms", spec: atLeast(TypeInt, 0), def: "500",
		doc: "Longest a follower's fetch waits at the leader for new records."}.
		bind(i32(func(b *Broker) *int32 { return &b.ReplicaFetchWaitMaxMs })),
	property{name: "replica.fetch.min.bytes", spec: atLeast(TypeInt, 1), def: "1",
		doc: "Bytes a follower's fetch waits for at the leader (up to replica.fetch.wait.max.ms)."}.
		bind(i32(func(b *Broker) *int32 { return &b.ReplicaFetchMinBytes })),
	property{name: "fetch.max.bytes", spec: atLeast(TypeInt, 1024), def: "57671680",
		doc: "Most bytes a consumer's fetch or share fetch is answered with over all its partitions: a larger MaxBytes is lowered to it (a first batch larger than it still comes whole)."}.
		bind(i32(func(b *Broker) *int32 { return &b.FetchMaxBytes })),
	property{name: "replica.fetch.max.bytes", spec: atLeast(TypeInt, 0), def: "1048576",
		doc: "Bytes a follower asks for per partition in one fetch (a larger first batch still comes whole)."}.
		bind(i32(func(b *Broker) *int32 { return &b.ReplicaFetchMaxBytes })),
	property{name: "replica.fetch.response.max.bytes", spec: atLeast(TypeInt, 0), def: "10485760",
		doc: "Bytes a follower asks for in one fetch over all its partitions."}.
		bind(i32(func(b *Broker) *int32 { return &b.ReplicaFetchResponseMaxBytes })),
	property{name: "replica.fetch.backoff.ms", spec: atLeast(TypeInt, 0), def: "1000",
		doc: "The longest a follower waits after failed fetches of a partition before fetching it again: 25 ms after a first failure, doubling with each failure in a row up to this."}.
		bind(i32(func(b *Broker) *int32 { return &b.ReplicaFetchBackoffMs })),
	property{name: "replica.socket.timeout.ms", spec: anyOf(TypeInt), def: "30000",
		doc: "A follower's fetch with no answer for this long (beyond replica.fetch.wait.max.ms) breaks its connection."}.
		bind(i32(func(b *Broker) *int32 { return &b.ReplicaSocketTimeoutMs })),
	property{name: "replica.selector.class", spec: replicaSelectors, null: true,
		doc: "How a leader picks the replica a consumer should fetch from (KIP-392): unset or " + LeaderSelector + " keeps consumers on the leader; " +
			RackAwareReplicaSelector + " sends a consumer that names its rack (client.rack) to an in-sync replica in that rack.",
		note: "Only Kafka's two built-in selectors; a consumer's fetch (v11+) is served by any replica up to its high watermark, whatever this says, as in Kafka."}.
		bind(str(func(b *Broker) *string { return &b.ReplicaSelectorClass })),

	// Consumer groups and offsets.
	property{name: "offsets.topic.num.partitions", spec: atLeast(TypeInt, 1), def: "50",
		doc: "Partitions of __consumer_offsets; fixed once the topic exists."}.
		bind(i32(func(b *Broker) *int32 { return &b.OffsetsTopicNumPartitions })),
	property{name: "offsets.topic.replication.factor", spec: atLeast(TypeShort, 1), def: "3",
		doc:  "Replication factor of __consumer_offsets; the topic is created once that many brokers are registered (FindCoordinator answers COORDINATOR_NOT_AVAILABLE until then).",
		note: "When controller.quorum.voters is empty (this node alone is the cluster) and the property is not set, 1."}.
		bind(i16(func(b *Broker) *int16 { return &b.OffsetsTopicReplicationFactor })),
	property{name: "offsets.topic.segment.bytes", spec: atLeast(TypeInt, 1), def: "104857600",
		doc: "segment.bytes of __consumer_offsets."}.
		bind(i64(func(b *Broker) *int64 { return &b.OffsetsTopicSegmentBytes })),
	property{name: "offsets.retention.minutes", spec: atLeast(TypeInt, 1), def: "10080",
		doc: "Committed offsets of a group that has been empty this long are deleted."}.
		bind(i64(func(b *Broker) *int64 { return &b.OffsetsRetentionMinutes })),
	property{name: "offsets.retention.check.interval.ms", spec: atLeast(TypeLong, 1), def: "600000",
		doc: "How often expired offsets are looked for."}.
		bind(i64(func(b *Broker) *int64 { return &b.OffsetsRetentionCheckIntervalMs })),
	property{name: "offsets.commit.timeout.ms", spec: atLeast(TypeInt, 1), def: "5000",
		doc: "How long an offset commit waits for its write to __consumer_offsets to be replicated."}.
		bind(i32(func(b *Broker) *int32 { return &b.OffsetsCommitTimeoutMs })),
	property{name: "offset.metadata.max.bytes", spec: atLeast(TypeInt, 1), def: "4096",
		doc: "Largest metadata an offset commit may carry (OFFSET_METADATA_TOO_LARGE above it)."}.
		bind(i32(func(b *Broker) *int32 { return &b.OffsetMetadataMaxBytes })),
	property{name: "group.initial.rebalance.delay.ms", spec: atLeast(TypeInt, 0), def: "3000",
		doc: "How long the first rebalance of an empty group waits for more members to join."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupInitialRebalanceDelayMs })),
	property{name: "group.min.session.timeout.ms", spec: anyOf(TypeInt), def: "6000",
		doc: "Smallest session timeout a member may ask for."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupMinSessionTimeoutMs })),
	property{name: "group.max.session.timeout.ms", spec: anyOf(TypeInt), def: "1800000",
		doc: "Largest session timeout a member may ask for."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupMaxSessionTimeoutMs })),
	property{name: "group.max.size", spec: atLeast(TypeInt, 1), def: "2147483647",
		doc: "Most members one group may have."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupMaxSize })),
	property{name: "max.incremental.fetch.session.cache.slots", spec: atLeast(TypeInt, 0), def: "1000",
		doc: "Most incremental fetch sessions (KIP-227) the broker keeps; 0 declines sessions."}.
		bind(i32(func(b *Broker) *int32 { return &b.MaxIncrementalFetchSessionCacheSlots })),
	property{name: "group.share.session.timeout.ms", spec: atLeast(TypeInt, 1), def: "45000",
		doc: "Session timeout of share group members."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareSessionTimeoutMs })),
	property{name: "group.share.min.session.timeout.ms", spec: atLeast(TypeInt, 1), def: "45000",
		doc: "Lower bound of group.share.session.timeout.ms and of the group config share.session.timeout.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMinSessionTimeoutMs })),
	property{name: "group.share.max.session.timeout.ms", spec: atLeast(TypeInt, 1), def: "60000",
		doc: "Upper bound of group.share.session.timeout.ms and of the group config share.session.timeout.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMaxSessionTimeoutMs })),
	property{name: "group.share.heartbeat.interval.ms", spec: atLeast(TypeInt, 1), def: "5000",
		doc: "Heartbeat interval the coordinator hands share group members."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareHeartbeatIntervalMs })),
	property{name: "group.share.min.heartbeat.interval.ms", spec: atLeast(TypeInt, 1), def: "5000",
		doc: "Lower bound of group.share.heartbeat.interval.ms and of the group config share.heartbeat.interval.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMinHeartbeatIntervalMs })),
	property{name: "group.share.max.heartbeat.interval.ms", spec: atLeast(TypeInt, 1), def: "15000",
		doc: "Upper bound of group.share.heartbeat.interval.ms and of the group config share.heartbeat.interval.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMaxHeartbeatIntervalMs })),
	property{name: "group.share.assignment.interval.ms", spec: atLeast(TypeInt, 0), def: "1000",
		doc:  "Least time between two target assignments of a share group (Kafka 4.3, KIP-1263): changes within it are assigned together once it has passed, at the next heartbeat of a member; 0 assigns at every change. A member whose group waits for its next assignment is asked to heartbeat again when it is due.",
		note: "Not dynamic. Kafka keeps the member's heartbeat interval while its group waits."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareAssignmentIntervalMs })),
	property{name: "group.share.min.assignment.interval.ms", spec: atLeast(TypeInt, 0), def: "0",
		doc: "Lower bound of group.share.assignment.interval.ms and of the group config share.assignment.interval.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMinAssignmentIntervalMs })),
	property{name: "group.share.max.assignment.interval.ms", spec: atLeast(TypeInt, 0), def: "15000",
		doc: "Upper bound of group.share.assignment.interval.ms and of the group config share.assignment.interval.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMaxAssignmentIntervalMs })),
	property{name: "group.share.max.size", spec: atLeast(TypeInt, 1), def: "200",
		doc: "Most members one share group may have."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMaxSize })),
	property{name: "group.share.record.lock.duration.ms", spec: between(TypeInt, 1000, 3600000), def: "30000",
		doc: "How long a share consumer holds the records it acquired before they go back (the default of the group config share.record.lock.duration.ms)."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareRecordLockDurationMs })),
	property{name: "group.share.min.record.lock.duration.ms", spec: between(TypeInt, 1000, 30000), def: "15000",
		doc: "Lower bound of group.share.record.lock.duration.ms and of the group config share.record.lock.duration.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMinRecordLockDurationMs })),
	property{name: "group.share.max.record.lock.duration.ms", spec: between(TypeInt, 30000, 3600000), def: "60000",
		doc: "Upper bound of group.share.record.lock.duration.ms and of the group config share.record.lock.duration.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMaxRecordLockDurationMs })),
	property{name: "group.share.delivery.count.limit", spec: between(TypeInt, 2, 10), def: "5",
		doc: "How many times a record is delivered to share consumers before it is archived (the default of the group config share.delivery.count.limit)."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareDeliveryCountLimit })),
	property{name: "group.share.min.delivery.count.limit", spec: between(TypeInt, 2, 10), def: "2",
		doc: "Lower bound of group.share.delivery.count.limit and of the group config share.delivery.count.limit (Kafka 4.3, KIP-1240)."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMinDeliveryCountLimit })),
	property{name: "group.share.max.delivery.count.limit", spec: between(TypeInt, 2, 10), def: "10",
		doc: "Upper bound of group.share.delivery.count.limit and of the group config share.delivery.count.limit (Kafka 4.3, KIP-1240)."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMaxDeliveryCountLimit })),
	property{name: "group.share.max.share.sessions", spec: atLeast(TypeInt, 1), def: "2000",
		doc: "Most share sessions open on this broker at once; a share consumer opening one more is answered SHARE_SESSION_LIMIT_REACHED (a session ends when its member closes it, opens a new one, or its connection closes)."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMaxShareSessions })),
	property{name: "group.share.partition.max.record.locks", spec: between(TypeInt, 100, 10000), def: "2000",
		doc: "Most records of one share partition in flight (acquired or waiting for redelivery) at once; as in Kafka, the batch that reaches the limit is acquired whole (the default of the group config share.partition.max.record.locks)."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupSharePartitionMaxRecordLocks })),
	property{name: "group.share.min.partition.max.record.locks", spec: between(TypeInt, 100, 2000), def: "100",
		doc: "Lower bound of group.share.partition.max.record.locks and of the group config share.partition.max.record.locks (Kafka 4.3, KIP-1240)."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMinPartitionMaxRecordLocks })),
	property{name: "group.share.max.partition.max.record.locks", spec: between(TypeInt, 2000, 10000), def: "4000",
		doc: "Upper bound of group.share.partition.max.record.locks and of the group config share.partition.max.record.locks (Kafka 4.3, KIP-1240)."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupShareMaxPartitionMaxRecordLocks })),
	property{name: "share.coordinator.state.topic.num.partitions", spec: atLeast(TypeInt, 1), def: "50",
		doc: "Partitions of __share_group_state, where share-partition state is kept."}.
		bind(i32(func(b *Broker) *int32 { return &b.ShareCoordinatorStateTopicNumPartitions })),
	property{name: "share.coordinator.state.topic.replication.factor", spec: atLeast(TypeShort, 1), def: "3",
		doc:  "Replication factor of __share_group_state; the topic is created once that many brokers are registered.",
		note: "When controller.quorum.voters is empty and the property is not set, 1."}.
		bind(i16(func(b *Broker) *int16 { return &b.ShareCoordinatorStateTopicReplicationFactor })),
	property{name: "share.coordinator.state.topic.min.isr", spec: atLeast(TypeShort, 1), def: "2",
		doc:  "min.insync.replicas of __share_group_state.",
		note: "When controller.quorum.voters is empty and the property is not set, 1."}.
		bind(i16(func(b *Broker) *int16 { return &b.ShareCoordinatorStateTopicMinIsr })),
	property{name: "share.coordinator.state.topic.segment.bytes", spec: atLeast(TypeInt, 1), def: "104857600",
		doc: "segment.bytes of __share_group_state."}.
		bind(i64(func(b *Broker) *int64 { return &b.ShareCoordinatorStateTopicSegmentBytes })),
	property{name: "group.consumer.session.timeout.ms", spec: atLeast(TypeInt, 1), def: "45000",
		doc: "Session timeout of consumer-protocol (KIP-848) members: one that does not heartbeat for this long is removed."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerSessionTimeoutMs })),
	property{name: "group.consumer.min.session.timeout.ms", spec: atLeast(TypeInt, 1), def: "45000",
		doc: "Lower bound of group.consumer.session.timeout.ms and of the group config consumer.session.timeout.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerMinSessionTimeoutMs })),
	property{name: "group.consumer.max.session.timeout.ms", spec: atLeast(TypeInt, 1), def: "60000",
		doc: "Upper bound of group.consumer.session.timeout.ms and of the group config consumer.session.timeout.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerMaxSessionTimeoutMs })),
	property{name: "group.consumer.heartbeat.interval.ms", spec: atLeast(TypeInt, 1), def: "5000",
		doc: "Heartbeat interval the coordinator hands consumer-protocol members."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerHeartbeatIntervalMs })),
	property{name: "group.consumer.min.heartbeat.interval.ms", spec: atLeast(TypeInt, 1), def: "5000",
		doc: "Lower bound of group.consumer.heartbeat.interval.ms and of the group config consumer.heartbeat.interval.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerMinHeartbeatIntervalMs })),
	property{name: "group.consumer.max.heartbeat.interval.ms", spec: atLeast(TypeInt, 1), def: "15000",
		doc: "Upper bound of group.consumer.heartbeat.interval.ms and of the group config consumer.heartbeat.interval.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerMaxHeartbeatIntervalMs })),
	property{name: "group.consumer.assignment.interval.ms", spec: atLeast(TypeInt, 0), def: "1000",
		doc:  "Least time between two target assignments of a consumer-protocol group (Kafka 4.3, KIP-1263): changes within it are assigned together once it has passed, at the next heartbeat of a member; 0 assigns at every change. A member whose group waits for its next assignment is asked to heartbeat again when it is due.",
		note: "Not dynamic. Kafka keeps the member's heartbeat interval while its group waits."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerAssignmentIntervalMs })),
	property{name: "group.consumer.min.assignment.interval.ms", spec: atLeast(TypeInt, 0), def: "0",
		doc: "Lower bound of group.consumer.assignment.interval.ms and of the group config consumer.assignment.interval.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerMinAssignmentIntervalMs })),
	property{name: "group.consumer.max.assignment.interval.ms", spec: atLeast(TypeInt, 0), def: "15000",
		doc: "Upper bound of group.consumer.assignment.interval.ms and of the group config consumer.assignment.interval.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerMaxAssignmentIntervalMs })),
	property{name: "group.consumer.max.size", spec: atLeast(TypeInt, 1), def: "2147483647",
		doc: "Most members one consumer-protocol group may have."}.
		bind(i32(func(b *Broker) *int32 { return &b.GroupConsumerMaxSize })),
	property{name: "group.consumer.assignors", spec: consumerAssignors, def: "uniform,range",
		doc:  "Server-side assignors of consumer-protocol groups; the first is used when a member names none.",
		note: "Kafka's class names (org.apache.kafka.coordinator.group.assignor.UniformAssignor, ...RangeAssignor) are accepted for the two names."}.
		bind(assignorList(func(b *Broker) *[]string { return &b.GroupConsumerAssignors })),
	property{name: "group.consumer.migration.policy", spec: migrationPolicies, def: "bidirectional",
		doc: "Whether a group with members may be converted between the classic and the consumer protocol: bidirectional, upgrade (classic to consumer), downgrade or disabled. " +
			"An upgrade happens when a consumer-protocol member joins a classic group with members, a downgrade when only classic members are left in a consumer group (after a leave, a fencing, or a classic static member replacing the last consumer-protocol one). " +
			"An empty group changes protocol, its committed offsets kept, whatever the policy (as in Kafka)."}.
		bind(str(func(b *Broker) *string { return &b.GroupConsumerMigrationPolicy })),
	property{name: "group.coordinator.rebalance.protocols", spec: rebalanceProtocols, def: "classic,consumer,streams",
		doc: "Group protocols the coordinator serves. classic cannot be left out. Without consumer, ConsumerGroupHeartbeat and ConsumerGroupDescribe " +
			"answer UNSUPPORTED_VERSION (still listed by ApiVersions, as in Kafka), so a KIP-848 client falls back to the classic protocol or fails as it does against Kafka.",
		note: "Kafka 4.2's default. share is accepted and changes nothing: share groups are served whether it is listed or not, as Kafka 4.1 and later gate them on the share.version feature instead. " +
			"streams is accepted; Samsa serves no streams group APIs (KIP-1071) either way."}.
		bind(strs(func(b *Broker) *[]string { return &b.GroupCoordinatorRebalanceProtocols })),

	// Transactions.
	property{name: "transactional.id.expiration.ms", spec: atLeast(TypeInt, 1), def: "604800000",
		doc: "A transactional id unused for this long is forgotten."}.
		bind(i32(func(b *Broker) *int32 { return &b.TransactionalIDExpirationMs })),
	property{name: "producer.id.expiration.ms", spec: atLeast(TypeInt, 1), def: "86400000",
		doc:  "A producer id with no open transaction whose last batch in a partition is older than this is forgotten by the partition; its next batch there is accepted at any sequence.",
		note: "Checked every log.retention.check.interval.ms (Kafka: producer.id.expiration.check.interval.ms, 10 minutes); not dynamic."}.
		bind(i32(func(b *Broker) *int32 { return &b.ProducerIDExpirationMs })),
	property{name: "transaction.max.timeout.ms", spec: atLeast(TypeInt, 1), def: "900000",
		doc: "Largest transaction timeout a producer may ask for."}.
		bind(i32(func(b *Broker) *int32 { return &b.TransactionMaxTimeoutMs })),
	property{name: "transaction.state.log.num.partitions", spec: atLeast(TypeInt, 1), def: "50",
		doc:  "Partitions of __transaction_state.",
		note: "Read when __transaction_state is created; it must not change afterwards."}.
		bind(i32(func(b *Broker) *int32 { return &b.TransactionStateLogNumPartitions })),
	property{name: "transaction.state.log.replication.factor", spec: atLeast(TypeShort, 1), def: "3",
		doc:  "Replication factor of __transaction_state; the topic is created once that many brokers are registered.",
		note: "When controller.quorum.voters is empty and the property is not set, 1."}.
		bind(i16(func(b *Broker) *int16 { return &b.TransactionStateLogReplicationFactor })),
	property{name: "transaction.state.log.min.isr", spec: atLeast(TypeInt, 1), def: "2",
		doc:  "min.insync.replicas of __transaction_state.",
		note: "When controller.quorum.voters is empty and the property is not set, 1."}.
		bind(i32(func(b *Broker) *int32 { return &b.TransactionStateLogMinIsr })),
	property{name: "transaction.state.log.segment.bytes", spec: atLeast(TypeInt, 1), def: "104857600",
		doc: "segment.bytes of __transaction_state."}.
		bind(i64(func(b *Broker) *int64 { return &b.TransactionStateLogSegmentBytes })),
	property{name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", spec: atLeast(TypeInt, 1), def: "10000",
		doc: "How often the coordinator aborts the transactions that outlived their transaction.timeout.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.TransactionAbortTimedOutCleanupIntervalMs })),
	property{name: "transaction.remove.expired.transaction.cleanup.interval.ms", spec: atLeast(TypeInt, 1), def: "3600000",
		doc: "How often the coordinator forgets the transactional ids unused for transactional.id.expiration.ms."}.
		bind(i32(func(b *Broker) *int32 { return &b.TransactionRemoveExpiredCleanupIntervalMs })),
	property{name: "transaction.partition.verification.enable", spec: boolean{}, def: "true",
		doc: "Whether a partition leader verifies with the transaction coordinator that a transaction's first batch belongs to it (KIP-890)."}.
		bind(boolField(func(b *Broker) *bool { return &b.TransactionPartitionVerificationEnable })),
	property{name: "add.partitions.to.txn.retry.backoff.ms", spec: atLeast(TypeInt, 1), def: "20",
		doc: "How long a partition leader waits before asking the transaction coordinator again when it answered CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written)."}.
		bind(i32(func(b *Broker) *int32 { return &b.AddPartitionsToTxnRetryBackoffMs })),
	property{name: "add.partitions.to.txn.retry.backoff.max.ms", spec: atLeast(TypeInt, 0), def: "100",
		doc: "How long a partition leader keeps asking before answering the producer with a retriable error."}.
		bind(i32(func(b *Broker) *int32 { return &b.AddPartitionsToTxnRetryBackoffMaxMs })),

	// Accepted, no effect: found in Kafka's sample server.properties and common
	// deployments. Their values are type-checked and reported, never used.
	{name: "num.network.threads", spec: atLeast(TypeInt, 1), def: "3", ignored: true,
		doc: "Kafka's network thread count.", note: "Samsa reads, handles and answers each connection's requests on a goroutine of its own, with a second one for responses that are not ready at once."},
	{name: "num.io.threads", spec: atLeast(TypeInt, 1), def: "8", ignored: true,
		doc: "Kafka's request handler thread count.", note: "Requests are handled by goroutines."},
	{name: "background.threads", spec: atLeast(TypeInt, 1), def: "10", ignored: true,
		doc: "Kafka's background task threads.", note: "Background work runs in goroutines."},
	{name: "queued.max.requests", spec: atLeast(TypeInt, 1), def: "500", ignored: true,
		doc: "Kafka's request queue bound.", note: "Samsa bounds in-flight requests per connection instead."},
	{name: "num.replica.fetchers", spec: anyOf(TypeInt), def: "1", ignored: true,
		doc: "Kafka's follower fetcher thread count.", note: "Not used."},
	{name: "num.recovery.threads.per.data.dir", spec: atLeast(TypeInt, 1), def: "2", ignored: true,
		doc: "Kafka's log recovery thread count.", note: "Not used."},
	{name: "socket.send.buffer.bytes", spec: anyOf(TypeInt), def: "102400", ignored: true,
		doc: "Kafka's SO_SNDBUF.", note: "The operating system's default is used."},
	{name: "socket.receive.buffer.bytes", spec: anyOf(TypeInt), def: "102400", ignored: true,
		doc: "Kafka's SO_RCVBUF.", note: "The operating system's default is used."},
	{name: "controller.quorum.bootstrap.servers", spec: text{typ: TypeList}, def: "", ignored: true,
		doc: "Kafka 4's dynamic quorum bootstrap list.", note: "Use controller.quorum.voters."},
	{name: "socket.listen.backlog.size", spec: atLeast(TypeInt, 1), def: "50", ignored: true,
		doc: "Kafka's listen(2) backlog.", note: "The operating system's limit (net.core.somaxconn) is used."},
	{name: "fetch.purgatory.purge.interval.requests", spec: anyOf(TypeInt), def: "1000", ignored: true,
		doc: "Kafka's purge interval of completed delayed fetches.", note: "A delayed fetch is dropped when it completes; there is nothing to purge."},
	{name: "producer.purgatory.purge.interval.requests", spec: anyOf(TypeInt), def: "1000", ignored: true,
		doc: "Kafka's purge interval of completed delayed produces.", note: "A delayed produce is dropped when it completes; there is nothing to purge."},
	{name: "delete.records.purgatory.purge.interval.requests", spec: anyOf(TypeInt), def: "1", ignored: true,
		doc: "Kafka's purge interval of completed delayed DeleteRecords.", note: "Nothing to purge, as for fetches."},
	{name: "group.coordinator.threads", spec: atLeast(TypeInt, 1), def: "4", ignored: true,
		doc: "Kafka's group coordinator thread count.", note: "The coordinator's requests run on goroutines."},
	{name: "group.coordinator.append.linger.ms", spec: atLeast(TypeInt, -1), def: "5", ignored: true,
		doc:  "How long Kafka's group coordinator waits to batch its writes to __consumer_offsets.",
		note: "Samsa appends each coordinator write at once; answers still wait for its replication (offsets.commit.timeout.ms)."},
	{name: "offsets.load.buffer.size", spec: atLeast(TypeInt, 1), def: "5242880", ignored: true,
		doc: "Kafka's read size when loading __consumer_offsets into the coordinator.", note: "Samsa reads the log batch by batch; the whole log is still loaded."},
	{name: "offsets.topic.compression.codec", spec: between(TypeInt, 0, 4), def: "0", ignored: true,
		doc: "Kafka's codec (by id) for the coordinator's batches in __consumer_offsets.", note: "Samsa writes them uncompressed (Kafka's default, 0)."},
	{name: "transaction.state.log.load.buffer.size", spec: atLeast(TypeInt, 1), def: "5242880", ignored: true,
		doc: "Kafka's read size when loading __transaction_state.", note: "Samsa reads the log batch by batch; the whole log is still loaded."},
	{name: "share.coordinator.threads", spec: atLeast(TypeInt, 1), def: "1", ignored: true,
		doc: "Kafka's share coordinator thread count.", note: "The share coordinator's requests run on goroutines."},
	{name: "share.coordinator.load.buffer.size", spec: atLeast(TypeInt, 1), def: "5242880", ignored: true,
		doc: "Kafka's read size when loading __share_group_state.", note: "Samsa reads the log batch by batch; the whole log is still loaded."},
	{name: "share.coordinator.append.linger.ms", spec: atLeast(TypeInt, -1), def: "10", ignored: true,
		doc: "How long Kafka's share coordinator waits to batch its writes to __share_group_state.", note: "Samsa appends each write at once."},
	{name: "share.coordinator.state.topic.compression.codec", spec: between(TypeInt, 0, 4), def: "0", ignored: true,
		doc: "Kafka's codec (by id) for the share coordinator's batches.", note: "Samsa writes them uncompressed (Kafka's default, 0)."},
	{name: "eligible.leader.replicas.enable", spec: text{typ: TypeBoolean, valid: "false", fn: func(s string) error {
		if strings.EqualFold(s, "false") {
			return nil
		}
		return errors.New("Samsa keeps no eligible leader replicas (KIP-966): it elects leaders from the ISR only (never an out-of-sync replica unless unclean.leader.election.enable), and min.insync.replicas guards acks=all writes; remove the property or set it to false")
	}}, def: "false", ignored: true,
		doc: "Kafka's eligible leader replicas (KIP-966).", note: "Only false is accepted: true asks for a durability mechanism Samsa does not have, so it is refused rather than ignored."},

	// Accepted, no effect: Kafka 4.1 broker and controller properties that tune a
	// mechanism Samsa does not have, or that Kafka's KRaft mode no longer reads.
	{name: "controlled.shutdown.max.retries", spec: anyOf(TypeInt), def: "3", ignored: true,
		doc: "Retries of the ZooKeeper-mode controlled shutdown.", note: "Kafka's KRaft brokers do not read it either: the controlled shutdown (controlled.shutdown.enable) waits for the controller up to broker.session.timeout.ms."},
	{name: "controlled.shutdown.retry.backoff.ms", spec: anyOf(TypeLong), def: "5000", ignored: true,
		doc: "Pause between ZooKeeper-mode controlled shutdown retries.", note: "Kafka's KRaft brokers do not read it either; see controlled.shutdown.max.retries."},
	{name: "replica.high.watermark.checkpoint.interval.ms", spec: anyOf(TypeLong), def: "5000", ignored: true,
		doc: "How often Kafka writes each log directory's replication-offset-checkpoint.", note: "Samsa keeps no high-watermark checkpoint: a restarted replica starts its high watermark at the log start; as leader it raises it over its ISR, as follower from its leader's answers."},
	{name: "log.flush.offset.checkpoint.interval.ms", spec: atLeast(TypeInt, 0), def: "60000", ignored: true,
		doc: "How often Kafka writes the recovery-point-offset-checkpoint.", note: "Samsa writes each partition's recovery point and log start offset (log-state) on every flush check (log.flush.scheduler.interval.ms), on flush and on close."},
	{name: "log.flush.start.offset.checkpoint.interval.ms", spec: atLeast(TypeInt, 0), def: "60000", ignored: true,
		doc: "How often Kafka writes the log-start-offset-checkpoint.", note: "Samsa writes the log start offset to log-state before a deletion takes effect, and with the recovery point (see log.flush.offset.checkpoint.interval.ms)."},
	{name: "log.initial.task.delay.ms", spec: atLeast(TypeLong, 0), def: "30000", ignored: true,
		doc: "Kafka's delay before the first retention and flush checks after start-up.", note: "Not used: the checks run every log.retention.check.interval.ms and log.flush.scheduler.interval.ms."},
	{name: "log.dir.failure.timeout.ms", spec: atLeast(TypeLong, 1), def: "30000", ignored: true,
		doc: "How long a Kafka broker waits for the controller to take a failed log directory offline before it shuts down.", note: "Samsa stops the node at once when a log directory fails."},
	{name: "log.message.format.version", spec: text{}, def: "3.0-IV1", ignored: true,
		doc: "Kafka's message format for old clients (removed in Kafka 4).", note: "Samsa always stores v2 batches."},
	{name: "log.message.downconversion.enable", spec: boolean{}, def: "true", ignored: true,
		doc: "Whether Kafka converts batches for Fetch below v4 (removed in Kafka 4).", note: "Samsa serves Fetch v4 and later, which need no conversion."},
	{name: "producer.id.expiration.check.interval.ms", spec: atLeast(TypeInt, 1), def: "600000", ignored: true,
		doc: "How often Kafka looks for producer ids past producer.id.expiration.ms.", note: "Samsa looks every log.retention.check.interval.ms."},
	{name: "metadata.log.segment.bytes", spec: atLeast(TypeInt, 12), def: "1073741824", ignored: true,
		doc: "Size at which Kafka rolls a segment of the metadata log.", note: "Samsa starts a new metadata log segment at each snapshot (every 10,000 applied entries) and deletes the segments the snapshot covers; see internal/controller."},
	{name: "metadata.log.segment.min.bytes", spec: atLeast(TypeInt, 12), def: "8388608", ignored: true,
		doc: "Kafka's internal floor of metadata.log.segment.bytes.", note: "See metadata.log.segment.bytes."},
	{name: "metadata.log.segment.ms", spec: anyOf(TypeLong), def: "604800000", ignored: true,
		doc: "Age at which Kafka rolls a segment of the metadata log.", note: "See metadata.log.segment.bytes."},
	{name: "metadata.log.max.record.bytes.between.snapshots", spec: atLeast(TypeLong, 1), def: "20971520", ignored: true,
		doc: "Bytes of new metadata records after which Kafka snapshots the metadata image.", note: "Samsa snapshots every 10,000 applied entries."},
	{name: "metadata.log.max.snapshot.interval.ms", spec: atLeast(TypeLong, 0), def: "3600000", ignored: true,
		doc: "Longest Kafka goes without a metadata snapshot when records were applied.", note: "Samsa snapshots by entry count only (every 10,000 applied entries)."},
	{name: "metadata.max.retention.bytes", spec: anyOf(TypeLong), def: "104857600", ignored: true,
		doc: "Size of old metadata log segments and snapshots Kafka keeps.", note: "Samsa keeps the newest snapshot and the entries after it, deleting older segments as soon as a snapshot covers them."},
	{name: "metadata.max.retention.ms", spec: anyOf(TypeLong), def: "604800000", ignored: true,
		doc: "Age of old metadata log segments and snapshots Kafka keeps.", note: "See metadata.max.retention.bytes."},
	{name: "metadata.max.idle.interval.ms", spec: atLeast(TypeInt, 0), def: "500", ignored: true,
		doc: "How often Kafka's active controller writes a no-op record to an idle metadata log.", note: "Raft heartbeats (every 100 ms tick) show the leader alive; nothing is written to an idle log."},
	{name: "controller.quorum.append.linger.ms", spec: anyOf(TypeInt), def: "25", ignored: true,
		doc: "How long Kafka's quorum leader waits to batch metadata records.", note: "Samsa proposes each controller write at once; Raft batches what is pending."},
	{name: "controller.quorum.election.backoff.max.ms", spec: anyOf(TypeInt), def: "1000", ignored: true,
		doc: "Kafka's longest pause before a new election after a failed one.", note: "Raft randomises each election timeout between one and two controller.quorum.election.timeout.ms, with pre-vote."},
	{name: "initial.broker.registration.timeout.ms", spec: anyOf(TypeInt), def: "60000", ignored: true,
		doc: "How long a Kafka broker waits for its first registration before it gives up.", note: "Samsa keeps retrying the registration (controller.quorum.retry.backoff.ms) until it is stopped."},
	{name: "unclean.leader.election.interval.ms", spec: atLeast(TypeLong, 1), def: "300000", ignored: true,
		doc: "How often Kafka's controller looks for partitions an unclean election could bring back.", note: "Not used: Samsa has no periodic pass of its own for unclean elections."},
	{name: "server.max.startup.time.ms", spec: atLeast(TypeLong, 0), def: maxLong, ignored: true,
		doc: "Longest a Kafka broker waits to catch up with the metadata log at start-up.", note: "Not used: Samsa sets no bound on start-up."},
	{name: "controller.socket.timeout.ms", spec: anyOf(TypeInt), def: "30000", ignored: true,
		doc: "Socket timeout of the ZooKeeper-era controller-to-broker channel.", note: "Requests to the controller are bounded by controller.quorum.request.timeout.ms."},
	{name: "control.plane.listener.name", spec: text{}, null: true, ignored: true,
		doc: "ZooKeeper-era listener for controller-to-broker requests (removed in Kafka 4).", note: "The quorum uses controller.listener.names."},
	{name: "broker.id.generation.enable", spec: boolean{}, def: "true", ignored: true,
		doc: "ZooKeeper-era broker id generation.", note: "node.id (or broker.id) names the node."},
	{name: "reserved.broker.max.id", spec: atLeast(TypeInt, 0), def: "1000", ignored: true,
		doc: "ZooKeeper-era bound of configured broker ids.", note: "node.id may be any non-negative int."},
	{name: "inter.broker.protocol.version", spec: text{}, def: "3.9-IV0", ignored: true,
		doc: "Kafka's inter-broker protocol version (removed in Kafka 4; KRaft reads metadata.version).", note: "Samsa nodes speak the versions they negotiate through ApiVersions."},
	{name: "early.start.listeners", spec: text{}, null: true, ignored: true,
		doc: "Listeners Kafka opens before its authorizer has loaded.", note: "Not used: Samsa opens all its listeners together."},
	{name: "request.timeout.ms", spec: anyOf(TypeInt), def: "30000", ignored: true,
		doc: "Timeout of Kafka's inter-broker client requests.", note: "Followers use replica.socket.timeout.ms; requests to the controller controller.quorum.request.timeout.ms."},
	{name: "socket.connection.setup.timeout.ms", spec: anyOf(TypeLong), def: "10000", ignored: true,
		doc: "Connect timeout of Kafka's inter-broker clients.", note: "See request.timeout.ms."},
	{name: "socket.connection.setup.timeout.max.ms", spec: anyOf(TypeLong), def: "30000", ignored: true,
		doc: "Longest connect timeout of Kafka's inter-broker clients.", note: "See request.timeout.ms."},
	{name: "replica.socket.receive.buffer.bytes", spec: anyOf(TypeInt), def: "65536", ignored: true,
		doc: "SO_RCVBUF of Kafka's follower connections.", note: "The operating system's default is used."},
	{name: "queued.max.request.bytes", spec: anyOf(TypeLong), def: "-1", ignored: true,
		doc: "Kafka's bound on the bytes of queued requests.", note: "Samsa bounds in-flight requests per connection instead."},
	{name: "max.request.partition.size.limit", spec: atLeast(TypeInt, 1), def: "2000", ignored: true,
		doc: "Most partitions Kafka serves in one request of the APIs that apply it.", note: "Samsa serves every partition a request names."},
	{name: "num.replica.alter.log.dirs.threads", spec: anyOf(TypeInt), null: true, ignored: true,
		doc: "Kafka's thread count for moving replicas between log directories.", note: "Not used."},
	{name: "replication.quota.window.num", spec: atLeast(TypeInt, 1), def: "11", ignored: true,
		doc: "Samples Kafka's replication throttle is measured over.", note: "Samsa does not throttle replication (leader/follower.replication.throttled.rate are refused)."},
	{name: "replication.quota.window.size.seconds", spec: atLeast(TypeInt, 1), def: "1", ignored: true,
		doc: "Length of one replication-throttle sample.", note: "See replication.quota.window.num."},
	{name: "alter.log.dirs.replication.quota.window.num", spec: atLeast(TypeInt, 1), def: "11", ignored: true,
		doc: "Samples Kafka's log-directory move throttle is measured over.", note: "Samsa does not throttle moves between log directories."},
	{name: "alter.log.dirs.replication.quota.window.size.seconds", spec: atLeast(TypeInt, 1), def: "1", ignored: true,
		doc: "Length of one log-directory move throttle sample.", note: "See alter.log.dirs.replication.quota.window.num."},
	{name: "metric.reporters", spec: text{typ: TypeList}, def: "", ignored: true,
		doc: "Kafka's metrics reporter classes.", note: "Samsa serves Prometheus metrics on metrics.listener."},
	{name: "metrics.num.samples", spec: atLeast(TypeInt, 1), def: "2", ignored: true,
		doc: "Samples of Kafka's metrics.", note: "See metric.reporters."},
	{name: "metrics.sample.window.ms", spec: atLeast(TypeLong, 1), def: "30000", ignored: true,
		doc: "Window of one sample of Kafka's metrics.", note: "See metric.reporters."},
	{name: "metrics.recording.level", spec: text{}, def: "INFO", ignored: true,
		doc: "Detail of Kafka's metrics.", note: "See metric.reporters."},
	{name: "kafka.metrics.reporters", spec: text{typ: TypeList}, def: "", ignored: true,
		doc: "Kafka's Yammer metrics reporter classes.", note: "See metric.reporters."},
	{name: "kafka.metrics.polling.interval.secs", spec: atLeast(TypeInt, 1), def: "10", ignored: true,
		doc: "Polling interval of Kafka's Yammer metrics reporters.", note: "See metric.reporters."},
	{name: "telemetry.max.bytes", spec: atLeast(TypeInt, 1), def: "1048576", ignored: true,
		doc: "Largest client telemetry payload Kafka accepts (KIP-714).", note: "Samsa does not collect client telemetry."},
	{name: "unstable.api.versions.enable", spec: boolean{}, def: "false", ignored: true,
		doc: "Kafka's switch to advertise unreleased API versions (for its own tests).", note: "Samsa advertises the versions it serves."},
	{name: "unstable.feature.versions.enable", spec: boolean{}, def: "false", ignored: true,
		doc: "Kafka's switch to allow unreleased feature versions (for its own tests).", note: "Not used."},
	{name: "group.coordinator.new.enable", spec: boolean{}, def: "true", ignored: true,
		doc: "Kafka 3.x switch to the new group coordinator (removed in Kafka 4).", note: "Samsa has one group coordinator, serving the classic and the consumer protocol."},
	{name: "group.share.enable", spec: boolean{}, def: "false", ignored: true,
		doc: "Kafka 4.0's switch for share groups.", note: "Samsa serves share groups whatever it says, as Kafka 4.1 gates them on the share.version feature instead."},
	{name: "group.share.max.groups", spec: between(TypeShort, 1, 100), def: "10", ignored: true,
		doc: "Kafka 4.0's limit on the number of share groups (removed in 4.1).", note: "As in Kafka 4.1, no limit."},
	{name: "share.fetch.purgatory.purge.interval.requests", spec: anyOf(TypeInt), def: "1000", ignored: true,
		doc: "Kafka's purge interval of completed delayed share fetches.", note: "Nothing to purge, as for fetches."},
	{name: "share.fetch.max.fetch.records", spec: anyOf(TypeInt), def: "2147483647", ignored: true,
		doc: "Kafka's internal bound on the records of one share fetch.", note: "Share fetches are bounded by their bytes and by group.share.partition.max.record.locks."},
	{name: "share.coordinator.snapshot.update.records.per.snapshot", spec: atLeast(TypeInt, 0), def: "500", ignored: true,
		doc: "Updates after which Kafka's share coordinator writes a full snapshot of a share partition.", note: "Not used."},
	{name: "share.coordinator.write.timeout.ms", spec: atLeast(TypeInt, 1), def: "5000", ignored: true,
		doc: "How long Kafka's share coordinator waits for a write to replicate.", note: "Samsa waits as long as offsets.commit.timeout.ms."},
	{name: "group.share.persister.class.name", spec: text{valid: defaultPersister, fn: func(s string) error {
		if s == "" || s == defaultPersister {
			return nil
		}
		return errors.New("Samsa keeps share-partition state in __share_group_state only; remove the property or set it to " + defaultPersister)
	}}, def: defaultPersister, ignored: true,
		doc: "Kafka's pluggable share-state persister.", note: "Only Kafka's default is accepted: another persister would keep share state elsewhere, which Samsa cannot do."},
}

// defaultPersister is Kafka's group.share.persister.class.name default.
const defaultPersister = "org.apache.kafka.server.share.persister.DefaultStatePersister"

var brokerIndex = func() map[string]*property {
	m := make(map[string]*property, len(brokerProperties))
	for i := range brokerProperties {
		m[brokerProperties[i].name] = &brokerProperties[i]
	}
	return m
}()

// brokerValue is the text value of a broker property: its effective field value
// when it has one, else its dynamic config (this node's, then the cluster default's),
// else what was set, else its default ("" for none).
func brokerValue(b *Broker, p *property) string {
	if p.get != nil {
		return p.get(b)
	}
	if v, src := dynamicSource(b, p.name); src != 0 {
		return v
	}
	if v, ok := b.Raw[p.name]; ok {
		return v
	}
	return p.def
}
