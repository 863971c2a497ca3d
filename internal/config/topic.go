package config

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Topic is the effective configuration of one topic: each field is the topic's
// override when it has one, else the broker's default for it (see ResolveTopic).
type Topic struct {
	CleanupPolicy        []string // cleanup.policy: delete and/or compact
	RetentionMs          int64    // retention.ms; -1 unlimited
	RetentionBytes       int64    // retention.bytes; negative unlimited
	SegmentBytes         int64    // segment.bytes
	SegmentMs            int64    // segment.ms
	SegmentJitterMs      int64    // segment.jitter.ms
	SegmentIndexBytes    int32    // segment.index.bytes
	IndexIntervalBytes   int32    // index.interval.bytes
	MaxMessageBytes      int32    // max.message.bytes
	MessageTimestampType string   // message.timestamp.type: CreateTime | LogAppendTime
	// message.timestamp.{before,after,difference}.max.ms (math.MaxInt64: any); see
	// TimestampBounds.
	MessageTimestampBeforeMaxMs     int64
	MessageTimestampAfterMaxMs      int64
	MessageTimestampDifferenceMaxMs int64
	MinInsyncReplicas               int32   // min.insync.replicas
	FlushMessages                   int64   // flush.messages
	FlushMs                         int64   // flush.ms (math.MaxInt64: never)
	DeleteRetentionMs               int64   // delete.retention.ms
	MinCompactionLagMs              int64   // min.compaction.lag.ms
	MaxCompactionLagMs              int64   // max.compaction.lag.ms
	MinCleanableDirtyRatio          float64 // min.cleanable.dirty.ratio
	UncleanLeaderElectionEnable     bool    // unclean.leader.election.enable
	Preallocate                     bool    // preallocate
	FileDeleteDelayMs               int64   // file.delete.delay.ms
	// CompressionType is producer (keep the producer's codec), none, gzip, snappy,
	// lz4 or zstd. Kafka's spelling "uncompressed" is normalised to "none".
	CompressionType string
	// compression.{gzip,lz4,zstd}.level; see CompressionLevel.
	CompressionGzipLevel, CompressionLz4Level, CompressionZstdLevel int32
}

// CompressionLevel is the level of the codec compression.type names (KIP-390), 0 for
// producer, none and snappy.
func (t Topic) CompressionLevel() int {
	switch t.CompressionType {
	case "gzip":
		return int(t.CompressionGzipLevel)
	case "lz4":
		return int(t.CompressionLz4Level)
	case "zstd":
		return int(t.CompressionZstdLevel)
	}
	return 0
}

// TimestampBounds returns how far in the past and in the future a record's timestamp
// may be from the broker's clock, in milliseconds (math.MaxInt64: any). As in Kafka
// 3.6+, message.timestamp.difference.max.ms stands in for a bound left at its default,
// and a LogAppendTime topic checks nothing (the broker stamps its own time).
func (t Topic) TimestampBounds() (before, after int64) {
	if t.LogAppendTime() {
		return math.MaxInt64, math.MaxInt64
	}
	before, after = t.MessageTimestampBeforeMaxMs, t.MessageTimestampAfterMaxMs
	if before == math.MaxInt64 {
		before = t.MessageTimestampDifferenceMaxMs
	}
	if after == math.MaxInt64 {
		after = t.MessageTimestampDifferenceMaxMs
	}
	return before, after
}

// LogAppendTime reports whether message.timestamp.type is LogAppendTime: the broker
// stamps its own time on every batch.
func (t Topic) LogAppendTime() bool { return t.MessageTimestampType == "LogAppendTime" }

// Compact reports whether cleanup.policy includes compact.
func (t Topic) Compact() bool { return contains(t.CleanupPolicy, "compact") }

// Delete reports whether cleanup.policy includes delete.
func (t Topic) Delete() bool { return contains(t.CleanupPolicy, "delete") }

// topicProperty is one topic config. topicProperties drives ValidateTopicConfig,
// ResolveTopic, DescribeTopic and the topic table in docs/config.md.
type topicProperty struct {
	name string
	spec valueSpec
	// broker names the broker properties providing the default, the main one
	// first (for the docs) followed by its synonyms (for the config source).
	broker []string
	// fromBroker is the default taken from the broker's effective configuration.
	fromBroker func(b *Broker) string
	set        func(t *Topic, v string) // nil for accepted-but-ignored configs
	doc        string
	ignored    bool
}

// fromBrokerProperty uses a broker property's value as the topic default.
func fromBrokerProperty(name string) func(b *Broker) string {
	return func(b *Broker) string { return brokerValue(b, brokerIndex[name]) }
}

func topicInt64(f func(*Topic) *int64) func(*Topic, string) {
	return func(t *Topic, v string) { *f(t) = mustInt(v) }
}

func topicInt32(f func(*Topic) *int32) func(*Topic, string) {
	return func(t *Topic, v string) { *f(t) = int32(mustInt(v)) }
}

var topicProperties = []topicProperty{
	{name: "cleanup.policy", spec: cleanupPolicies, broker: []string{"log.cleanup.policy"},
		set: func(t *Topic, v string) { t.CleanupPolicy = splitList(v) },
		doc: "delete removes old segments by retention.ms / retention.bytes; compact keeps the latest record per key; \"compact,delete\" does both."},
	{name: "compression.type", spec: compressionTypes, broker: []string{"compression.type"},
		set: func(t *Topic, v string) {
			t.CompressionType = strings.TrimSpace(v)
			if t.CompressionType == "uncompressed" {
				t.CompressionType = "none"
			}
		},
		doc: "Codec batches are stored in; producer keeps the producer's, none/uncompressed stores them uncompressed."},
	{name: "compression.gzip.level", spec: gzipLevels, broker: []string{"compression.gzip.level"},
		set: topicInt32(func(t *Topic) *int32 { return &t.CompressionGzipLevel }),
		doc: "gzip level when compression.type is gzip (-1: gzip's default)."},
	{name: "compression.lz4.level", spec: between(TypeInt, 1, 17), broker: []string{"compression.lz4.level"},
		set: topicInt32(func(t *Topic) *int32 { return &t.CompressionLz4Level }),
		doc: "lz4 level when compression.type is lz4 (9, the default, is the fast compressor)."},
	{name: "compression.zstd.level", spec: between(TypeInt, -131072, 22), broker: []string{"compression.zstd.level"},
		set: topicInt32(func(t *Topic) *int32 { return &t.CompressionZstdLevel }),
		doc: "zstd level when compression.type is zstd."},
	{name: "delete.retention.ms", spec: atLeast(TypeLong, 0), broker: []string{"log.cleaner.delete.retention.ms"},
		set: topicInt64(func(t *Topic) *int64 { return &t.DeleteRetentionMs }),
		doc: "How long tombstones are kept on a compacted topic."},
	{name: "file.delete.delay.ms", spec: atLeast(TypeLong, 0), broker: []string{"log.segment.delete.delay.ms"},
		set: topicInt64(func(t *Topic) *int64 { return &t.FileDeleteDelayMs }),
		doc: "Delay before a removed segment's files are deleted."},
	{name: "flush.messages", spec: atLeast(TypeLong, 1), broker: []string{"log.flush.interval.messages"},
		set: topicInt64(func(t *Topic) *int64 { return &t.FlushMessages }),
		doc: "fsync after this many records."},
	{name: "flush.ms", spec: atLeast(TypeLong, 0), broker: []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"},
		fromBroker: func(b *Broker) string {
			if b.LogFlushIntervalMs < 0 {
				return fmtInt(b.LogFlushSchedulerIntervalMs)
			}
			return fmtInt(b.LogFlushIntervalMs)
		},
		set: topicInt64(func(t *Topic) *int64 { return &t.FlushMs }),
		doc: "fsync when the oldest unflushed data is this old."},
	{name: "index.interval.bytes", spec: atLeast(TypeInt, 0), broker: []string{"log.index.interval.bytes"},
		set: topicInt32(func(t *Topic) *int32 { return &t.IndexIntervalBytes }),
		doc: "Bytes between offset-index entries."},
	{name: "max.compaction.lag.ms", spec: atLeast(TypeLong, 1), broker: []string{"log.cleaner.max.compaction.lag.ms"},
		set: topicInt64(func(t *Topic) *int64 { return &t.MaxCompactionLagMs }),
		doc: "Longest a record may stay uncompacted."},
	{name: "max.message.bytes", spec: atLeast(TypeInt, 0), broker: []string{"message.max.bytes"},
		set: topicInt32(func(t *Topic) *int32 { return &t.MaxMessageBytes }),
		doc: "Largest record batch accepted (after compression)."},
	{name: "message.timestamp.after.max.ms", spec: atLeast(TypeLong, 0), broker: []string{"log.message.timestamp.after.max.ms"},
		set: topicInt64(func(t *Topic) *int64 { return &t.MessageTimestampAfterMaxMs }),
		doc: "How far in the future a CreateTime record timestamp may be (INVALID_TIMESTAMP beyond)."},
	{name: "message.timestamp.before.max.ms", spec: atLeast(TypeLong, 0), broker: []string{"log.message.timestamp.before.max.ms"},
		set: topicInt64(func(t *Topic) *int64 { return &t.MessageTimestampBeforeMaxMs }),
		doc: "How far in the past a CreateTime record timestamp may be (INVALID_TIMESTAMP beyond)."},
	{name: "message.timestamp.difference.max.ms", spec: atLeast(TypeLong, 0), broker: []string{"log.message.timestamp.difference.max.ms"},
		set: topicInt64(func(t *Topic) *int64 { return &t.MessageTimestampDifferenceMaxMs }),
		doc: "Deprecated (Kafka 3.6): the bound both ways, for .before.max.ms and .after.max.ms left at their default."},
	{name: "message.timestamp.type", spec: timestampTypes, broker: []string{"log.message.timestamp.type"},
		set: func(t *Topic, v string) { t.MessageTimestampType = strings.TrimSpace(v) },
		doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's time."},
	{name: "min.cleanable.dirty.ratio", spec: double{min: 0, max: 1}, broker: []string{"log.cleaner.min.cleanable.ratio"},
		set: func(t *Topic, v string) { t.MinCleanableDirtyRatio = mustFloat(v) },
		doc: "Share of the log that must be uncompacted before the cleaner compacts it."},
	{name: "min.compaction.lag.ms", spec: atLeast(TypeLong, 0), broker: []string{"log.cleaner.min.compaction.lag.ms"},
		set: topicInt64(func(t *Topic) *int64 { return &t.MinCompactionLagMs }),
		doc: "Records younger than this are not compacted."},
	{name: "min.insync.replicas", spec: atLeast(TypeInt, 1), broker: []string{"min.insync.replicas"},
		set: topicInt32(func(t *Topic) *int32 { return &t.MinInsyncReplicas }),
		doc: "Fewest in-sync replicas for an acks=all write to be accepted."},
	{name: "retention.bytes", spec: anyOf(TypeLong), broker: []string{"log.retention.bytes"},
		set: topicInt64(func(t *Topic) *int64 { return &t.RetentionBytes }),
		doc: "Size per partition above which the oldest segments are deleted; negative unlimited, 0 keeps nothing."},
	{name: "retention.ms", spec: atLeast(TypeLong, -1), broker: []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
		set: topicInt64(func(t *Topic) *int64 { return &t.RetentionMs }),
		doc: "Age after which segments are deleted; -1 unlimited, 0 keeps nothing."},
	{name: "segment.bytes", spec: between(TypeInt, 14, math.MaxInt32), broker: []string{"log.segment.bytes"},
		set: topicInt64(func(t *Topic) *int64 { return &t.SegmentBytes }),
		doc: "Size at which the active segment is rolled."},
	{name: "segment.index.bytes", spec: atLeast(TypeInt, 4), broker: []string{"log.index.size.max.bytes"},
		set: topicInt32(func(t *Topic) *int32 { return &t.SegmentIndexBytes }),
		doc: "Maximum size of a segment's offset and time indexes."},
	{name: "segment.jitter.ms", spec: atLeast(TypeLong, 0), broker: []string{"log.roll.jitter.ms", "log.roll.jitter.hours"},
		set: topicInt64(func(t *Topic) *int64 { return &t.SegmentJitterMs }),
		doc: "Largest random amount a segment rolls before segment.ms."},
	{name: "segment.ms", spec: atLeast(TypeLong, 1), broker: []string{"log.roll.ms", "log.roll.hours"},
		set: topicInt64(func(t *Topic) *int64 { return &t.SegmentMs }),
		doc: "Age at which the active segment is rolled even if not full."},
	{name: "preallocate", spec: boolean{}, broker: []string{"log.preallocate"},
		set: func(t *Topic, v string) { t.Preallocate = mustBool(v) },
		doc: "Reserve disk blocks ahead of the active segment's end (a bounded stretch, not Kafka's whole segment file)."},
	{name: "unclean.leader.election.enable", spec: boolean{}, broker: []string{"unclean.leader.election.enable"},
		set: func(t *Topic, v string) { t.UncleanLeaderElectionEnable = mustBool(v) },
		doc: "Allow an out-of-sync replica to become leader (may lose acknowledged data)."},

	// Accepted, no effect.
	{name: "leader.replication.throttled.replicas", spec: text{typ: TypeList}, fromBroker: constant(""), ignored: true,
		doc: "Kafka's replication throttling; not implemented."},
	{name: "follower.replication.throttled.replicas", spec: text{typ: TypeList}, fromBroker: constant(""), ignored: true,
		doc: "Kafka's replication throttling; not implemented."},
	{name: "message.format.version", spec: text{}, fromBroker: constant("3.0-IV1"), ignored: true,
		doc: "Kafka's message format for old clients (deprecated in Kafka 3, removed in 4); Samsa always stores v2 batches."},
	{name: "message.downconversion.enable", spec: boolean{}, fromBroker: constant("true"), ignored: true,
		doc: "Kafka converts batches for Fetch below v4; Samsa serves Fetch v4 and later, which need no conversion."},
	{name: "local.retention.ms", spec: atLeast(TypeLong, -2), fromBroker: constant("-2"), ignored: true,
		doc: "Tiered storage's local retention; Samsa has no tiered storage."},
	{name: "local.retention.bytes", spec: atLeast(TypeLong, -2), fromBroker: constant("-2"), ignored: true,
		doc: "Tiered storage's local retention; Samsa has no tiered storage."},
	{name: "remote.storage.enable", spec: text{typ: TypeBoolean, valid: "false", fn: func(v string) error {
		if v != "false" {
			return errors.New("must be false: tiered storage is not supported")
		}
		return nil
	}}, fromBroker: constant("false"), ignored: true,
		doc: "Tiered storage; not implemented: only false is accepted."},
}

func constant(v string) func(*Broker) string { return func(*Broker) string { return v } }

var topicIndex = func() map[string]*topicProperty {
	m := make(map[string]*topicProperty, len(topicProperties))
	for i := range topicProperties {
		p := &topicProperties[i]
		if p.fromBroker == nil {
			p.fromBroker = fromBrokerProperty(p.broker[0])
		}
		m[p.name] = p
	}
	return m
}()

// IsTopicConfig reports whether name is a topic config Samsa accepts.
func IsTopicConfig(name string) bool { _, ok := topicIndex[name]; return ok }

// IsListTopicConfig and IsListBrokerProperty report whether name is a topic config
// or broker property whose type is LIST: the configs IncrementalAlterConfigs may
// APPEND to and SUBTRACT from, as Kafka's controller allows only for LIST types.
func IsListTopicConfig(name string) bool {
	p, ok := topicIndex[name]
	return ok && p.spec.kafkaType() == TypeList
}

// IsListBrokerProperty: see IsListTopicConfig.
func IsListBrokerProperty(name string) bool {
	p, ok := brokerIndex[name]
	return ok && p.spec.kafkaType() == TypeList
}

// TopicConfigDefault is Kafka's default for the topic config name (the default of the
// broker property it falls back to, with no property set), "" for an unknown name. It
// is what IncrementalAlterConfigs APPEND and SUBTRACT start from on a topic that does
// not set the config, as Kafka's KafkaConfigSchema.getDefault.
func TopicConfigDefault(name string) string {
	p, ok := topicIndex[name]
	if !ok {
		return ""
	}
	return p.fromBroker(Default())
}

// BrokerPropertyDefault is Kafka's default for the broker property name, "" for one
// without a default or an unknown name; see TopicConfigDefault.
func BrokerPropertyDefault(name string) string {
	if p, ok := brokerIndex[name]; ok && !p.null {
		return p.def
	}
	return ""
}

// ValidateTopicConfig checks one topic config: ErrUnknownProperty for a name that
// is not a topic config, ErrInvalidValue for a value out of its bounds. The
// message names the config and the value.
func ValidateTopicConfig(name, value string) error {
	p, ok := topicIndex[name]
	if !ok {
		if _, isBroker := brokerIndex[name]; isBroker {
			return fmt.Errorf("%w: %s is a broker property, not a topic config", ErrUnknownProperty, name)
		}
		return fmt.Errorf("%w: %s is not a topic config", ErrUnknownProperty, name)
	}
	if err := p.spec.check(value); err != nil {
		return invalidValue(name, value, err)
	}
	return nil
}

// ResolveTopic computes a topic's effective configuration: each config is the
// topic's override when present, else the broker's default for it, as in Kafka.
// Every bad override is reported (joined), as are conflicts such as
// min.compaction.lag.ms > max.compaction.lag.ms.
func ResolveTopic(b *Broker, overrides map[string]string) (Topic, error) {
	var t Topic
	var errs []error
	for name := range overrides {
		if !IsTopicConfig(name) {
			errs = append(errs, ValidateTopicConfig(name, overrides[name]))
		}
	}
	for i := range topicProperties {
		p := &topicProperties[i]
		value, overridden := overrides[p.name]
		if !overridden {
			value = p.fromBroker(b)
		}
		if err := p.spec.check(value); err != nil {
			if !overridden {
				err = fmt.Errorf("broker default for %s (%s): %w", p.name, p.broker[0], err)
			}
			errs = append(errs, invalidValue(p.name, value, err))
			continue
		}
		if p.set != nil {
			p.set(&t, value)
		}
	}
	if t.MinCompactionLagMs > t.MaxCompactionLagMs {
		errs = append(errs, conflict("min.compaction.lag.ms=%d is above max.compaction.lag.ms=%d", t.MinCompactionLagMs, t.MaxCompactionLagMs))
	}
	if err := errors.Join(sortErrors(errs)...); err != nil {
		return Topic{}, err
	}
	return t, nil
}

// sortErrors orders errors by message so joined reports are deterministic.
func sortErrors(errs []error) []error {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}
