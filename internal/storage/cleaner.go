package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/record"
)

// CleanerOptions configures the log cleaner; the fields are the broker's
// log.cleaner.* properties.
type CleanerOptions struct {
	// Threads is log.cleaner.threads (default 1): how many logs are cleaned at once.
	Threads int
	// Backoff is log.cleaner.backoff.ms (default 15 s): the pause when no log needs
	// cleaning.
	Backoff time.Duration
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second: bytes read plus
	// written by all cleaner threads together; 0 or less means unlimited (Kafka's
	// default, Double.MaxValue).
	IOMaxBytesPerSecond float64
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size (default 128 MiB), shared by
	// the threads. As in Kafka, a thread's offset map holds at most
	// size / threads / 24 × 0.9 keys; a cleaning whose dirty section has more keys
	// covers only the segments that fit (at least one) and the rest is cleaned next time.
	DedupeBufferSize int64
	Clock            clock.Clock
	Logger           *slog.Logger
	// MaxCleanableOffset optionally bounds cleaning from above for a log (exclusive):
	// the broker may pass the high watermark or last stable offset, which storage does
	// not know. Nothing in a segment reaching that offset is cleaned. Open transactions
	// known to the log's producer table bound it too, with or without this hook.
	MaxCleanableOffset func(*Log) int64
}

const (
	defaultCleanerBackoff   = 15 * time.Second
	defaultDedupeBufferSize = 128 << 20
	dedupeBytesPerEntry     = 24 // Kafka's SkimpyOffsetMap: 16-byte hash + 8-byte offset
	dedupeLoadFactor        = 0.9
)

// Cleaner compacts the logs whose Config.Compact is set (cleanup.policy=compact or
// compact,delete): it keeps the latest record of every key, as Kafka's LogCleaner.
//
// Concurrency: a Cleaner is safe for concurrent use. mu guards the per-log state below;
// it is never held across I/O or while calling into a Log. checkpointMu serializes
// writes of the cleaner-offset-checkpoint files. A log is cleaned by one thread at a
// time (inProgress). Lock order: Cleaner.checkpointMu → Cleaner.mu; Cleaner locks are
// never held while a Log lock is taken.
type Cleaner struct {
	opts     CleanerOptions
	logs     func() []*Log
	throttle *throttler
	// hook is called at each step of a segment swap (tests inject crashes with it).
	hook crashHook

	checkpointMu sync.Mutex

	mu struct {
		sync.Mutex
		// checkpoints: log dir → partition → first dirty offset (loaded lazily from
		// the dir's cleaner-offset-checkpoint).
		checkpoints map[string]map[PartitionKey]int64
		// horizons: earliest delete horizon of the tombstones a log still holds (ms,
		// MaxInt64 for none); the log is cleaned again when it passes even if it is not
		// dirty. Absent: not known yet (read from the batch headers at first sight).
		horizons    map[*Log]int64
		inProgress  map[*Log]bool
		uncleanable map[*Log]bool
	}
}

// NewCleaner returns a cleaner over the logs that logs returns at each pass (the
// broker passes LogsOf(manager)).
func NewCleaner(o CleanerOptions, logs func() []*Log) *Cleaner {
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.Backoff <= 0 {
		o.Backoff = defaultCleanerBackoff
	}
	if o.DedupeBufferSize <= 0 {
		o.DedupeBufferSize = defaultDedupeBufferSize
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Cleaner{opts: o, logs: logs, throttle: &throttler{rate: o.IOMaxBytesPerSecond}}
	c.mu.checkpoints = map[string]map[PartitionKey]int64{}
	c.mu.horizons = map[*Log]int64{}
	c.mu.inProgress = map[*Log]bool{}
	c.mu.uncleanable = map[*Log]bool{}
	return c
}

// LogsOf adapts Manager.Logs to NewCleaner.
func LogsOf(m *Manager) func() []*Log {
	return func() []*Log {
		all := m.Logs()
		out := make([]*Log, 0, len(all))
		for _, l := range all {
			out = append(out, l)
		}
		return out
	}
}

// Run cleans logs with Threads goroutines until ctx ends, pausing Backoff whenever no
// log needs cleaning.
func (c *Cleaner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range c.opts.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, cand := c.grab(nil)
				if l == nil {
					if c.wait(ctx, c.opts.Backoff) != nil {
						return
					}
					continue
				}
				if _, err := c.clean(ctx, l, cand); err != nil && c.wait(ctx, c.opts.Backoff) != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// CleanOnce cleans, one after the other, every log that needs cleaning now (filthiest
// first, each at most once) and returns how many were cleaned. Errors of single logs
// are joined; the other logs are still cleaned.
func (c *Cleaner) CleanOnce(ctx context.Context) (cleanedLogs int, err error) {
	done := map[*Log]bool{}
	var errs []error
	for ctx.Err() == nil {
		l, cand := c.grab(done)
		if l == nil {
			break
		}
		done[l] = true
		ok, err := c.clean(ctx, l, cand)
		if ok {
			cleanedLogs++
		}
		errs = append(errs, err)
	}
	errs = append(errs, ctx.Err())
	return cleanedLogs, errors.Join(errs...)
}

// FirstDirtyOffset is where the next cleaning of l starts (its checkpointed
// "cleaned up to" offset), for metrics and tests.
func (c *Cleaner) FirstDirtyOffset(l *Log) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.firstDirtyLocked(l)
}

// wait pauses for d on the injected clock, or until ctx ends.
func (c *Cleaner) wait(ctx context.Context, d time.Duration) error {
	done := make(chan struct{})
	t := c.opts.Clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// candidate is the cleaner's view of one log when it was selected.
type candidate struct {
	firstDirty       int64
	firstUncleanable int64
	ratio            float64
}

// grab picks the log to clean next (Kafka's grabFilthiestCompactedLog) and marks it in
// progress; nil when no log needs cleaning. Logs in skip are not considered.
func (c *Cleaner) grab(skip map[*Log]bool) (*Log, candidate) {
	logs := c.logs()
	now := c.opts.Clock.Now()
	c.forget(logs)
	var (
		best     *Log
		bestCand candidate
	)
	for _, l := range logs {
		if skip[l] || l.closed.Load() {
			continue
		}
		cfg := l.config()
		if !cfg.Compact {
			continue
		}
		c.mu.Lock()
		busy := c.mu.inProgress[l] || c.mu.uncleanable[l]
		firstDirty := c.firstDirtyLocked(l)
		horizon, known := c.mu.horizons[l]
		c.mu.Unlock()
		if busy {
			continue
		}
		if !known {
			// First sight of the log in this process: find the tombstones kept by
			// earlier cleanings from the batch headers.
			horizon = earliestDeleteHorizon(l)
			c.mu.Lock()
			if _, ok := c.mu.horizons[l]; !ok {
				c.mu.horizons[l] = horizon
			}
			c.mu.Unlock()
		}
		cand, ok := c.evaluate(l, cfg, firstDirty, horizon, now)
		if ok && (best == nil || cand.ratio > bestCand.ratio) {
			best, bestCand = l, cand
		}
	}
	if best == nil {
		return nil, candidate{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.inProgress[best] {
		return nil, candidate{} // another thread took it meanwhile
	}
	c.mu.inProgress[best] = true
	return best, bestCand
}

// evaluate computes a log's cleanable range and dirty ratio (Kafka's
// LogCleanerManager.cleanableOffsets and LogToClean) and says whether it needs cleaning:
// a dirty ratio above min.cleanable.dirty.ratio, dirty records older than
// max.compaction.lag.ms, or kept tombstones whose delete horizon passed.
func (c *Cleaner) evaluate(l *Log, cfg Config, firstDirty, horizon int64, now time.Time) (candidate, bool) {
	v, err := l.cleanerView()
	if err != nil {
		return candidate{}, false
	}
	segs := v.segs
	if len(segs) < 2 {
		return candidate{}, false
	}
	active := segs[len(segs)-1]
	if firstDirty < segs[0].base || firstDirty > active.base {
		firstDirty = segs[0].base
	}
	di := 0
	for di+1 < len(segs) && segs[di+1].base <= firstDirty {
		di++
	}
	firstDirty = segs[di].base
	bound := min(active.base, v.firstUnstable)
	if c.opts.MaxCleanableOffset != nil {
		bound = min(bound, c.opts.MaxCleanableOffset(l))
	}
	nowMs := now.UnixMilli()
	interval := cfg.IndexIntervalBytes
	stop := di
	for stop < len(segs)-1 {
		s := segs[stop]
		if segs[stop+1].base > bound {
			break
		}
		if cfg.MinCompactionLagMs > 0 {
			ts, _, err := s.maxTimestamp(interval)
			if err != nil {
				return candidate{}, false
			}
			if ts < 0 {
				ts = fileModMs(s)
			}
			if ts > nowMs-cfg.MinCompactionLagMs {
				break
			}
		}
		stop++
	}
	var cleanBytes, dirtyBytes int64
	for i, s := range segs[:stop] {
		if i < di {
			cleanBytes += s.size.Load()
		} else {
			dirtyBytes += s.size.Load()
		}
	}
	cand := candidate{firstDirty: firstDirty, firstUncleanable: segs[stop].base}
	if cleanBytes+dirtyBytes > 0 {
		cand.ratio = float64(dirtyBytes) / float64(cleanBytes+dirtyBytes)
	}
	if dirtyBytes > 0 && cand.ratio > cfg.MinCleanableDirtyRatio {
		return cand, true
	}
	if dirtyBytes > 0 && cfg.MaxCompactionLagMs < math.MaxInt64 {
		for _, s := range segs[di:stop] {
			if ts := firstBatchTimestamp(s); ts > 0 && ts < nowMs-cfg.MaxCompactionLagMs {
				return cand, true
			}
		}
	}
	return cand, nowMs >= horizon && (di > 0 || stop > 0)
}

// earliestDeleteHorizon walks the batch headers of l's inactive segments and returns
// the earliest delete horizon stamped by a cleaning (MaxInt64 when none).
func earliestDeleteHorizon(l *Log) int64 {
	horizon := int64(math.MaxInt64)
	segs := l.segs()
	for _, s := range segs[:max(len(segs)-1, 0)] {
		it := newBatchIter(s.file, 0, s.size.Load(), 64<<10)
		for {
			h, _, err := it.next()
			if err != nil {
				break
			}
			if h.Attributes&record.AttrDeleteHorizon != 0 {
				horizon = min(horizon, h.BaseTimestamp)
			}
		}
	}
	return horizon
}

// firstBatchTimestamp is the max timestamp of a segment's first batch (Kafka's
// LogSegment.getFirstBatchTimestamp), -1 when unknown.
func firstBatchTimestamp(s *segment) int64 {
	it := newBatchIter(s.file, 0, s.size.Load(), 0)
	h, _, err := it.next()
	if err != nil {
		return -1
	}
	return h.MaxTimestamp
}

func fileModMs(s *segment) int64 {
	st, err := s.file.Stat()
	if err != nil {
		return math.MaxInt64
	}
	return st.ModTime().UnixMilli()
}

// clean runs one cleaning of l and records its outcome. ok reports a completed
// cleaning.
func (c *Cleaner) clean(ctx context.Context, l *Log, cand candidate) (ok bool, err error) {
	defer func() {
		c.mu.Lock()
		delete(c.mu.inProgress, l)
		c.mu.Unlock()
	}()
	cfg := l.config()
	v, err := l.cleanerView()
	if err != nil {
		return false, nil // closed meanwhile
	}
	capacity := int(float64(c.opts.DedupeBufferSize/int64(c.opts.Threads)/dedupeBytesPerEntry) * dedupeLoadFactor)
	j := &cleanJob{
		ctx: ctx, log: l, cfg: cfg, view: v,
		firstDirty: cand.firstDirty, firstUncleanable: cand.firstUncleanable,
		now: c.opts.Clock.Now().UnixMilli(), mapCapacity: max(capacity, 1),
		throttle: c.throttle, clockWait: c.wait, hook: c.hook,
	}
	start := time.Now()
	err = j.run()
	logger := c.opts.Logger.With("topic", l.topic, "partition", l.partition)
	switch {
	case err == nil:
	case errors.Is(err, errCleanAborted), errors.Is(err, ErrLogClosed), ctx.Err() != nil:
		logger.Debug("cleaning abandoned", "err", err)
		return false, nil
	case errors.Is(err, syscall.ENOSPC):
		// Nothing is wrong with the log: the cleaning is tried again once the disk has
		// room (the .cleaned files were removed).
		logger.Warn("log cleaning failed: no space left on the device; trying again after log.cleaner.backoff.ms", "err", err)
		return false, fmt.Errorf("cleaning %s: %w", l.dir, err)
	default:
		// Kafka marks such a partition uncleanable until restart; so do we.
		c.mu.Lock()
		c.mu.uncleanable[l] = true
		c.mu.Unlock()
		logger.Warn("log cleaning failed, partition marked uncleanable", "err", err)
		return false, fmt.Errorf("cleaning %s: %w", l.dir, err)
	}
	c.mu.Lock()
	c.checkpointLocked(l)[PartitionKey{l.topic, l.partition}] = j.mapEnd
	c.mu.horizons[l] = j.nextHorizon
	c.mu.Unlock()
	if err := c.writeCheckpoint(l); err != nil {
		logger.Warn("writing cleaner checkpoint", "err", err)
	}
	logger.Info("cleaned log", "offset", j.mapEnd, "segments", j.groups,
		"bytes_before", j.bytesIn, "bytes_after", j.bytesOut, "keys", len(j.offsets.m),
		"bytes_read", j.bytesRead, "took", time.Since(start).Round(time.Millisecond))
	return true, nil
}

// forget drops the state of logs that are gone (deleted or closed partitions).
func (c *Cleaner) forget(present []*Log) {
	live := make(map[*Log]bool, len(present))
	for _, l := range present {
		live[l] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for l := range c.mu.horizons {
		if !live[l] {
			delete(c.mu.horizons, l)
		}
	}
	for l := range c.mu.uncleanable {
		if !live[l] {
			delete(c.mu.uncleanable, l)
		}
	}
}
