package storage

import (
	"errors"
	"fmt"
	"math"
)

// Config is the per-partition log configuration. Property names are Kafka's topic-level
// names; the broker fills it from the topic's effective configuration.
type Config struct {
	SegmentBytes int64 // segment.bytes, default 1 GiB
	SegmentMs    int64 // segment.ms: roll after this age (default 7 days)
	// SegmentJitterMs is segment.jitter.ms: each segment rolls a random amount below
	// this (and below segment.ms) before segment.ms (default 0).
	SegmentJitterMs       int64
	RetentionMs           int64 // retention.ms, -1 = unlimited, RetainNothing = 0
	RetentionBytes        int64 // retention.bytes, negative = unlimited, RetainNothing = 0
	DeleteRetention       bool  // cleanup.policy contains "delete" (retention applies)
	IndexIntervalBytes    int   // index.interval.bytes, default 4096
	SegmentIndexBytes     int   // segment.index.bytes: max index file size, default 10 MiB
	FlushIntervalMessages int64 // flush.messages: fsync after this many records (default never)
	FlushIntervalMs       int64 // flush.ms: fsync when the oldest unflushed data is older
	LogAppendTime         bool  // message.timestamp.type=LogAppendTime
	FileDeleteDelayMs     int64 // file.delete.delay.ms, default 60000
	// Preallocate is preallocate: the active segment reserves disk blocks ahead of
	// its end once it is large enough (see segment.reserve).
	Preallocate bool
	// ProducerIDExpirationMs is producer.id.expiration.ms (broker-wide in Kafka, default
	// one day): idempotent producers silent for longer are forgotten.
	ProducerIDExpirationMs int64

	// Compact: cleanup.policy contains "compact"; the Cleaner keeps the latest record
	// per key. DeleteRetention (above) may be set too (compact,delete).
	Compact bool
	// DeleteRetentionMs is delete.retention.ms: how long a tombstone stays after the
	// cleaner first saw it (default one day).
	DeleteRetentionMs int64
	// MinCompactionLagMs is min.compaction.lag.ms: records younger than this are not
	// compacted (default 0).
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms: a log whose oldest uncompacted record
	// is older than this is cleaned whatever its dirty ratio (default MaxInt64); it also
	// bounds segment.ms for compacted logs, as in Kafka.
	MaxCompactionLagMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio (default 0.5).
	MinCleanableDirtyRatio float64
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * 60 * 60 * 1000,
		RetentionMs:            7 * 24 * 60 * 60 * 1000,
		RetentionBytes:         -1,
		DeleteRetention:        true,
		IndexIntervalBytes:     4096,
		SegmentIndexBytes:      10 << 20,
		FlushIntervalMessages:  math.MaxInt64,
		FlushIntervalMs:        math.MaxInt64,
		FileDeleteDelayMs:      60000,
		ProducerIDExpirationMs: 24 * 60 * 60 * 1000,
		DeleteRetentionMs:      24 * 60 * 60 * 1000,
		MaxCompactionLagMs:     math.MaxInt64,
		MinCleanableDirtyRatio: 0.5,
	}
}

// withDefaults replaces zero values (an unset field) by the defaults, so a zero Config
// behaves like DefaultConfig except for the boolean fields.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = d.RetentionMs
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = d.RetentionBytes
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.SegmentIndexBytes <= 0 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.FlushIntervalMessages <= 0 {
		c.FlushIntervalMessages = d.FlushIntervalMessages
	}
	if c.FlushIntervalMs <= 0 {
		c.FlushIntervalMs = d.FlushIntervalMs
	}
	if c.FileDeleteDelayMs < 0 {
		c.FileDeleteDelayMs = 0
	}
	if c.ProducerIDExpirationMs <= 0 {
		c.ProducerIDExpirationMs = d.ProducerIDExpirationMs
	}
	if c.DeleteRetentionMs <= 0 {
		c.DeleteRetentionMs = d.DeleteRetentionMs
	}
	if c.MinCompactionLagMs < 0 {
		c.MinCompactionLagMs = 0
	}
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = d.MaxCompactionLagMs
	}
	if c.MinCleanableDirtyRatio <= 0 {
		c.MinCleanableDirtyRatio = d.MinCleanableDirtyRatio
	}
	return c
}

// minSegmentIndexBytes is Kafka's lower bound of segment.index.bytes (LogConfig,
// atLeast(4)): below one index entry, so that every append to a non-empty segment
// rolls it.
const minSegmentIndexBytes = 4

// Validate reports every out-of-bounds field at once, naming Kafka's property.
func (c Config) Validate() error {
	var errs []error
	if c.SegmentBytes != 0 && c.SegmentBytes < 14 {
		errs = append(errs, fmt.Errorf("segment.bytes must be at least 14, got %d", c.SegmentBytes))
	}
	if c.SegmentMs < 0 {
		errs = append(errs, fmt.Errorf("segment.ms must be positive, got %d", c.SegmentMs))
	}
	if c.SegmentJitterMs < 0 {
		errs = append(errs, fmt.Errorf("segment.jitter.ms must be 0 or more, got %d", c.SegmentJitterMs))
	}
	if c.RetentionMs < -1 && c.RetentionMs != RetainNothing {
		errs = append(errs, fmt.Errorf("retention.ms must be -1 or more, got %d", c.RetentionMs))
	}
	if c.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("index.interval.bytes must be positive, got %d", c.IndexIntervalBytes))
	}
	if c.SegmentIndexBytes != 0 && c.SegmentIndexBytes < minSegmentIndexBytes {
		errs = append(errs, fmt.Errorf("segment.index.bytes must be at least %d, got %d", minSegmentIndexBytes, c.SegmentIndexBytes))
	}
	if c.FileDeleteDelayMs < 0 {
		errs = append(errs, fmt.Errorf("file.delete.delay.ms must be 0 or more, got %d", c.FileDeleteDelayMs))
	}
	if c.DeleteRetentionMs < 0 {
		errs = append(errs, fmt.Errorf("delete.retention.ms must be 0 or more, got %d", c.DeleteRetentionMs))
	}
	if c.MinCompactionLagMs < 0 {
		errs = append(errs, fmt.Errorf("min.compaction.lag.ms must be 0 or more, got %d", c.MinCompactionLagMs))
	}
	if c.MaxCompactionLagMs < 0 {
		errs = append(errs, fmt.Errorf("max.compaction.lag.ms must be positive, got %d", c.MaxCompactionLagMs))
	}
	if c.MaxCompactionLagMs > 0 && c.MinCompactionLagMs > c.MaxCompactionLagMs {
		errs = append(errs, fmt.Errorf("min.compaction.lag.ms (%d) must not exceed max.compaction.lag.ms (%d)", c.MinCompactionLagMs, c.MaxCompactionLagMs))
	}
	if c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1 {
		errs = append(errs, fmt.Errorf("min.cleanable.dirty.ratio must be between 0 and 1, got %g", c.MinCleanableDirtyRatio))
	}
	return errors.Join(errs...)
}
