package replica

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// Errors returned by Partition methods, mapped to Kafka codes by the broker.
var (
	ErrNotLeader          = errors.New("replica: not the leader for this partition")
	ErrFencedLeaderEpoch  = errors.New("replica: request leader epoch is older than the current one")
	ErrUnknownLeaderEpoch = errors.New("replica: request leader epoch is newer than the current one")
	ErrNotEnoughReplicas  = errors.New("replica: in-sync replicas below min.insync.replicas")
	ErrOffline            = errors.New("replica: the partition's log directory is offline")
)

// Partition is one replica of a topic partition.
type Partition struct {
	Topic     string
	Index     int32
	TopicID   [16]byte
	Log       *storage.Log
	localNode int32

	highWatermark atomic.Int64
	settings      atomic.Pointer[Settings]
	offline       atomic.Bool

	mu struct {
		sync.Mutex
		leader      int32
		leaderEpoch int32
		replicas    []int32
		isr         []int32
		waiters     []chan struct{}
	}
}

// NewPartition wraps an open log. The high watermark starts at the log end offset: with
// a single replica every appended record was acknowledged only once it was in the
// (page-cached) log, so it is the last committed point.
func NewPartition(topic string, index int32, topicID [16]byte, log *storage.Log, localNode int32) *Partition {
	p := &Partition{Topic: topic, Index: index, TopicID: topicID, Log: log, localNode: localNode}
	p.highWatermark.Store(log.LogEndOffset())
	return p
}

// Settings are the topic configs the produce path needs for every batch, resolved once
// per metadata change rather than per request.
type Settings struct {
	MaxMessageBytes   int // max.message.bytes
	MinInsyncReplicas int // min.insync.replicas
	// Recompress is set when compression.type names a codec (not "producer"): batches
	// in another codec are re-encoded with Compression before they are appended.
	Recompress  bool
	Compression record.Compression
	// CompressionLevel is the codec's level for Recompress (compression.*.level).
	CompressionLevel int
	// RequireKeys refuses records without a key (compacted topics, as Kafka does).
	RequireKeys bool
	// Timestamps, when set, bounds how far a record's timestamp may be from the
	// broker's clock (message.timestamp.before.max.ms and .after.max.ms).
	Timestamps *TimestampBounds
}

// TimestampBounds are the milliseconds a record's timestamp may be before (Before) and
// after (After) the broker's clock; math.MaxInt64 is no bound on that side.
type TimestampBounds struct{ Before, After int64 }

// SetSettings replaces the partition's topic settings.
func (p *Partition) SetSettings(s Settings) { p.settings.Store(&s) }

// Settings returns the partition's topic settings.
func (p *Partition) Settings() Settings {
	if s := p.settings.Load(); s != nil {
		return *s
	}
	return Settings{MaxMessageBytes: 1048588, MinInsyncReplicas: 1}
}

// SetOffline marks the replica unavailable: its log directory failed.
func (p *Partition) SetOffline() { p.offline.Store(true) }

// Offline reports whether the replica's log directory failed.
func (p *Partition) Offline() bool { return p.offline.Load() }

// SetLeadership records the partition's leader, leader epoch, replicas and ISR as the
// metadata image has them.
func (p *Partition) SetLeadership(leader, leaderEpoch int32, replicas, isr []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.leader = leader
	p.mu.leaderEpoch = leaderEpoch
	p.mu.replicas = append([]int32(nil), replicas...)
	p.mu.isr = append([]int32(nil), isr...)
}

// LeaderEpoch returns the current leader epoch.
func (p *Partition) LeaderEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.leaderEpoch
}

// IsLeader reports whether this node leads the partition.
func (p *Partition) IsLeader() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.leader == p.localNode
}

// ISRSize returns the number of in-sync replicas.
func (p *Partition) ISRSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.isr)
}

// CheckLeaderEpoch validates a client's CurrentLeaderEpoch (-1 = no check) as Kafka
// does for Fetch, ListOffsets and OffsetForLeaderEpoch.
func (p *Partition) CheckLeaderEpoch(requested int32) error {
	if requested < 0 {
		return nil
	}
	current := p.LeaderEpoch()
	switch {
	case requested < current:
		return ErrFencedLeaderEpoch
	case requested > current:
		return ErrUnknownLeaderEpoch
	}
	return nil
}

// HighWatermark returns the offset below which records are committed and visible.
func (p *Partition) HighWatermark() int64 { return p.highWatermark.Load() }

// LastStableOffset is the high watermark until transactions exist.
func (p *Partition) LastStableOffset() int64 { return p.HighWatermark() }

// AppendAsLeader appends one validated batch. The topic's min.insync.replicas is
// enforced when requireISR (acks=all) is set.
func (p *Partition) AppendAsLeader(batch []byte, requireISR bool, now time.Time) (storage.AppendInfo, error) {
	minISR := p.Settings().MinInsyncReplicas
	if p.Offline() {
		return storage.AppendInfo{}, ErrOffline
	}
	p.mu.Lock()
	if p.mu.leader != p.localNode {
		p.mu.Unlock()
		return storage.AppendInfo{}, ErrNotLeader
	}
	if requireISR && len(p.mu.isr) < minISR {
		p.mu.Unlock()
		return storage.AppendInfo{}, ErrNotEnoughReplicas
	}
	epoch := p.mu.leaderEpoch
	p.mu.Unlock()

	info, err := p.Log.Append(batch, storage.AppendOptions{LeaderEpoch: epoch, Now: now})
	if err != nil {
		return info, err
	}
	p.advanceHighWatermark()
	return info, nil
}

// advanceHighWatermark moves the high watermark to the minimum log end offset over the
// ISR. With the leader as the only replica that is its own log end offset.
func (p *Partition) advanceHighWatermark() {
	leo := p.Log.LogEndOffset()
	for {
		cur := p.highWatermark.Load()
		if leo <= cur {
			return
		}
		if p.highWatermark.CompareAndSwap(cur, leo) {
			break
		}
	}
	p.wake()
}

// ResetHighWatermark sets the high watermark to the log end offset after a truncation
// or deletion that may have moved it backwards.
func (p *Partition) ResetHighWatermark() {
	p.highWatermark.Store(p.Log.LogEndOffset())
	p.wake()
}

// Wait registers ch to receive a signal (non-blocking send) the next time the high
// watermark moves. The caller re-checks its condition after registering.
func (p *Partition) Wait(ch chan struct{}) {
	p.mu.Lock()
	p.mu.waiters = append(p.mu.waiters, ch)
	p.mu.Unlock()
}

func (p *Partition) wake() {
	p.mu.Lock()
	waiters := p.mu.waiters
	p.mu.waiters = nil
	p.mu.Unlock()
	for _, ch := range waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Replicas returns the replica list and the ISR.
func (p *Partition) Replicas() (replicas, isr []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int32(nil), p.mu.replicas...), append([]int32(nil), p.mu.isr...)
}
