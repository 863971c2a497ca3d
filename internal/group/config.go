package group

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the coordinator settings, named after Kafka's broker properties.
//
// A zero field takes Kafka's default (see DefaultConfig), except InitialRebalanceDelay,
// where zero means no delay, and the assignment intervals, where zero means a new
// target assignment at every change.
type Config struct {
	// NumPartitions is offsets.topic.num.partitions (default 50).
	NumPartitions int32
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (Kafka default 3 s).
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout is group.min.session.timeout.ms (default 6 s).
	MinSessionTimeout time.Duration
	// MaxSessionTimeout is group.max.session.timeout.ms (default 30 min).
	MaxSessionTimeout time.Duration
	// MaxSize is group.max.size (default unlimited).
	MaxSize int32
	// OffsetsRetention is offsets.retention.minutes (default 7 days).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms (default 10 min).
	OffsetsRetentionCheckInterval time.Duration
	// OffsetCommitTimeout is offsets.commit.timeout.ms (default 5 s): how long an append
	// to __consumer_offsets may take.
	OffsetCommitTimeout time.Duration
	// MaxMetadataSize is offset.metadata.max.bytes (default 4096).
	MaxMetadataSize int

	// ConsumerSessionTimeout is group.consumer.session.timeout.ms (default 45 s).
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms (default 5 s).
	ConsumerHeartbeatInterval time.Duration
	// ConsumerMaxSize is group.consumer.max.size (default unlimited).
	ConsumerMaxSize int32
	// ConsumerAssignmentInterval is group.consumer.assignment.interval.ms (Kafka 4.3,
	// KIP-1263; default 1 s): the least time between two target assignments of a group.
	ConsumerAssignmentInterval time.Duration
	// ConsumerAssignors is group.consumer.assignors: "uniform" and/or "range"; the
	// first is the default (default uniform, range).
	ConsumerAssignors []string
	// MigrationPolicy is group.consumer.migration.policy: bidirectional (default),
	// upgrade, downgrade or disabled. It governs converting a group that has members
	// (consumer_classic.go); an empty group changes protocol whatever it says, as in
	// Kafka.
	MigrationPolicy string

	// ShareSessionTimeout is group.share.session.timeout.ms (default 45 s).
	ShareSessionTimeout time.Duration
	// ShareHeartbeatInterval is group.share.heartbeat.interval.ms (default 5 s).
	ShareHeartbeatInterval time.Duration
	// ShareMaxSize is group.share.max.size (default 200).
	ShareMaxSize int32
	// ShareAssignmentInterval is group.share.assignment.interval.ms (default 1 s).
	ShareAssignmentInterval time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		NumPartitions:                 50,
		InitialRebalanceDelay:         3 * time.Second,
		MinSessionTimeout:             6 * time.Second,
		MaxSessionTimeout:             30 * time.Minute,
		MaxSize:                       1<<31 - 1,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		OffsetCommitTimeout:           5 * time.Second,
		MaxMetadataSize:               4096,
		ConsumerSessionTimeout:        45 * time.Second,
		ConsumerHeartbeatInterval:     5 * time.Second,
		ConsumerMaxSize:               1<<31 - 1,
		ConsumerAssignmentInterval:    time.Second,
		ConsumerAssignors:             []string{assignorUniform, assignorRange},
		MigrationPolicy:               "bidirectional",
		ShareSessionTimeout:           45 * time.Second,
		ShareHeartbeatInterval:        5 * time.Second,
		ShareMaxSize:                  200,
		ShareAssignmentInterval:       time.Second,
	}
}

// withDefaults fills zero fields with Kafka's defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.NumPartitions <= 0 {
		c.NumPartitions = d.NumPartitions
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = d.MinSessionTimeout
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = d.MaxSessionTimeout
	}
	if c.MaxSize <= 0 {
		c.MaxSize = d.MaxSize
	}
	if c.OffsetsRetention <= 0 {
		c.OffsetsRetention = d.OffsetsRetention
	}
	if c.OffsetsRetentionCheckInterval <= 0 {
		c.OffsetsRetentionCheckInterval = d.OffsetsRetentionCheckInterval
	}
	if c.OffsetCommitTimeout <= 0 {
		c.OffsetCommitTimeout = d.OffsetCommitTimeout
	}
	if c.MaxMetadataSize <= 0 {
		c.MaxMetadataSize = d.MaxMetadataSize
	}
	c.InitialRebalanceDelay = max(c.InitialRebalanceDelay, 0)
	c.ConsumerAssignmentInterval = max(c.ConsumerAssignmentInterval, 0)
	c.ShareAssignmentInterval = max(c.ShareAssignmentInterval, 0)
	if c.ConsumerSessionTimeout <= 0 {
		c.ConsumerSessionTimeout = d.ConsumerSessionTimeout
	}
	if c.ConsumerHeartbeatInterval <= 0 {
		c.ConsumerHeartbeatInterval = d.ConsumerHeartbeatInterval
	}
	if c.ConsumerMaxSize <= 0 {
		c.ConsumerMaxSize = d.ConsumerMaxSize
	}
	if len(c.ConsumerAssignors) == 0 {
		c.ConsumerAssignors = d.ConsumerAssignors
	}
	if c.MigrationPolicy == "" {
		c.MigrationPolicy = d.MigrationPolicy
	}
	if c.ShareSessionTimeout <= 0 {
		c.ShareSessionTimeout = d.ShareSessionTimeout
	}
	if c.ShareHeartbeatInterval <= 0 {
		c.ShareHeartbeatInterval = d.ShareHeartbeatInterval
	}
	if c.ShareMaxSize <= 0 {
		c.ShareMaxSize = d.ShareMaxSize
	}
	return c
}

// Validate reports every out-of-range setting at once, naming the Kafka property.
func (c Config) Validate() error {
	var errs []error
	bad := func(prop string, v any, why string) {
		errs = append(errs, fmt.Errorf("%w: %s=%v %s", ErrInvalidConfig, prop, v, why))
	}
	if c.NumPartitions < 0 {
		bad("offsets.topic.num.partitions", c.NumPartitions, "must be at least 1")
	}
	if c.InitialRebalanceDelay < 0 {
		bad("group.initial.rebalance.delay.ms", c.InitialRebalanceDelay.Milliseconds(), "must not be negative")
	}
	if c.ConsumerAssignmentInterval < 0 {
		bad("group.consumer.assignment.interval.ms", c.ConsumerAssignmentInterval.Milliseconds(), "must not be negative")
	}
	if c.ShareAssignmentInterval < 0 {
		bad("group.share.assignment.interval.ms", c.ShareAssignmentInterval.Milliseconds(), "must not be negative")
	}
	if c.MinSessionTimeout < 0 {
		bad("group.min.session.timeout.ms", c.MinSessionTimeout.Milliseconds(), "must not be negative")
	}
	if c.MaxSessionTimeout < 0 {
		bad("group.max.session.timeout.ms", c.MaxSessionTimeout.Milliseconds(), "must not be negative")
	}
	if c.MinSessionTimeout > 0 && c.MaxSessionTimeout > 0 && c.MinSessionTimeout > c.MaxSessionTimeout {
		bad("group.min.session.timeout.ms", c.MinSessionTimeout.Milliseconds(), "must not exceed group.max.session.timeout.ms")
	}
	if c.MaxSize < 0 {
		bad("group.max.size", c.MaxSize, "must be at least 1")
	}
	if c.OffsetsRetention < 0 {
		bad("offsets.retention.minutes", c.OffsetsRetention.Minutes(), "must not be negative")
	}
	if c.OffsetsRetentionCheckInterval < 0 {
		bad("offsets.retention.check.interval.ms", c.OffsetsRetentionCheckInterval.Milliseconds(), "must not be negative")
	}
	if c.OffsetCommitTimeout < 0 {
		bad("offsets.commit.timeout.ms", c.OffsetCommitTimeout.Milliseconds(), "must not be negative")
	}
	if c.MaxMetadataSize < 0 {
		bad("offset.metadata.max.bytes", c.MaxMetadataSize, "must not be negative")
	}
	for _, a := range c.ConsumerAssignors {
		if a != assignorUniform && a != assignorRange {
			bad("group.consumer.assignors", a, "must be uniform or range")
		}
	}
	switch c.MigrationPolicy {
	case "", "bidirectional", "upgrade", "downgrade", "disabled":
	default:
		bad("group.consumer.migration.policy", c.MigrationPolicy, "must be bidirectional, upgrade, downgrade or disabled")
	}
	if c.ConsumerHeartbeatInterval > 0 && c.ConsumerSessionTimeout > 0 && c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout {
		bad("group.consumer.heartbeat.interval.ms", c.ConsumerHeartbeatInterval.Milliseconds(), "must be below group.consumer.session.timeout.ms")
	}
	return errors.Join(errs...)
}
