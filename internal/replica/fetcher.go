package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// A follower replicates by fetching, like a consumer but with a replica id: one fetcher
// per leader broker sends Fetch requests for every partition this node follows from
// that leader, appends what comes back byte for byte and takes the leader's high
// watermark. The requests go through a LeaderClient, which the broker implements with
// the wire protocol; this package never encodes a request.

// Fetch errors a LeaderClient reports per partition (the broker maps Kafka's codes).
var (
	// ErrFetchOffsetOutOfRange: the fetch offset is outside the leader's log.
	ErrFetchOffsetOutOfRange = errors.New("replica: fetch offset out of the leader's range")
	// ErrRetriable: any other error that a later fetch may not meet (the leader not
	// yet aware of its epoch, a storage error, a moved leadership before the metadata
	// here says so).
	ErrRetriable = errors.New("replica: retriable fetch error")
)

// FetchRequest is what a fetcher asks one leader for.
type FetchRequest struct {
	ReplicaID   int32
	BrokerEpoch int64
	MaxWait     time.Duration
	MinBytes    int32
	MaxBytes    int32
	Partitions  []FetchPartition
}

// FetchPartition is one partition of a FetchRequest.
type FetchPartition struct {
	Topic              string
	TopicID            [16]byte
	Partition          int32
	CurrentLeaderEpoch int32
	FetchOffset        int64
	LastFetchedEpoch   int32 // -1 when the log holds no batch
	LogStartOffset     int64
	MaxBytes           int32
}

// FetchResult is one partition of a leader's answer.
type FetchResult struct {
	Topic     string
	Partition int32
	// Err is nil, ErrFencedLeaderEpoch, ErrNotLeader, ErrUnknownLeaderEpoch,
	// ErrFetchOffsetOutOfRange or ErrRetriable.
	Err            error
	HighWatermark  int64
	LogStartOffset int64
	// DivergingEpoch and DivergingEndOffset are set (epoch ≥ 0 or end ≥ 0) when the
	// follower's last fetched epoch diverged from the leader's log.
	DivergingEpoch     int32
	DivergingEndOffset int64
	Records            []byte // whole batches (the last one may be partial)
}

// LeaderClient fetches from one leader. Fetch may return results in any order and
// for a subset of the partitions; the records stay valid until the next Fetch.
type LeaderClient interface {
	Fetch(ctx context.Context, req *FetchRequest) ([]FetchResult, error)
	Close()
}

// FetcherConfig is how followers fetch (Kafka's replica.fetch.* properties).
type FetcherConfig struct {
	LocalNode   int32
	BrokerEpoch func() int64
	// Dial returns a client to a leader broker (its inter-broker listener).
	Dial              func(leader int32) (LeaderClient, error)
	MaxWait           time.Duration // replica.fetch.wait.max.ms
	MinBytes          int32         // replica.fetch.min.bytes
	MaxBytes          int32         // replica.fetch.response.max.bytes
	PartitionMaxBytes int32         // replica.fetch.max.bytes
	Backoff           time.Duration // replica.fetch.backoff.ms
	Clock             clock.Clock
	Logger            *slog.Logger
	// OnTruncate, if set, is told how many offsets a follower dropped from a divergent
	// tail (unclean elections, a leader that failed before replicating).
	OnTruncate func(p *Partition, from, to int64)
	// OnFailure, if set, hears an error of a follower's own (an append or truncation
	// that failed on its disk), before the partition backs off.
	OnFailure func(p *Partition, err error)
}

// FetcherManager runs one fetcher per leader this node follows. It is safe for
// concurrent use.
type FetcherManager struct {
	cfg FetcherConfig
	mu  struct {
		sync.Mutex
		fetchers map[int32]*fetcher
		closed   bool
	}
}

// NewFetcherManager returns a manager with no fetcher running.
func NewFetcherManager(cfg FetcherConfig) *FetcherManager {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &FetcherManager{cfg: cfg}
	m.mu.fetchers = map[int32]*fetcher{}
	return m
}

// Follow makes p fetched from leader in leaderEpoch, moving it off any other leader's
// fetcher. Calling it again with the same leader and epoch does nothing.
func (m *FetcherManager) Follow(p *Partition, leader, leaderEpoch int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return
	}
	for id, f := range m.mu.fetchers {
		if id != leader {
			f.remove(p)
		}
	}
	f := m.mu.fetchers[leader]
	if f == nil {
		f = newFetcher(m.cfg, leader)
		m.mu.fetchers[leader] = f
		go f.run()
	}
	f.add(p, leaderEpoch)
}

// Unfollow stops fetching p (it leads now, has no leader, or is gone).
func (m *FetcherManager) Unfollow(p *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.mu.fetchers {
		f.remove(p)
	}
}

// Following reports the leader p is fetched from (-1 when none).
func (m *FetcherManager) Following(p *Partition) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, f := range m.mu.fetchers {
		if f.has(p) {
			return id
		}
	}
	return -1
}

// Close stops every fetcher and waits for them.
func (m *FetcherManager) Close() {
	m.mu.Lock()
	m.mu.closed = true
	fetchers := m.mu.fetchers
	m.mu.fetchers = map[int32]*fetcher{}
	m.mu.Unlock()
	for _, f := range fetchers {
		f.stop()
	}
}

// fetcher fetches from one leader in a goroutine of its own.
type fetcher struct {
	cfg    FetcherConfig
	leader int32
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	mu struct {
		sync.Mutex
		parts map[*Partition]*fetchState
	}
}

// fetchState is a followed partition: the leader epoch it is fetched in, and when it
// may be fetched again after errors (failures in a row).
type fetchState struct {
	epoch      int32
	retryAfter time.Time
	// failures is written under fetcher.mu (backoff) and reset after a success
	// without it (apply), so that a fetch that went well takes no lock for it.
	failures atomic.Int32
}

// firstFetchBackoff is the wait after a partition's first failed fetch; it doubles
// with each failure in a row up to replica.fetch.backoff.ms. Most failures last
// milliseconds — a leader that has not applied the metadata making it leader yet
// answers its followers' first fetches NOT_LEADER_OR_FOLLOWER — and a full second
// of backoff then held the high watermark, and every acks=all produce, for a second.
const firstFetchBackoff = 25 * time.Millisecond

func newFetcher(cfg FetcherConfig, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fetcher{cfg: cfg, leader: leader, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	f.mu.parts = map[*Partition]*fetchState{}
	return f
}

func (f *fetcher) add(p *Partition, epoch int32) {
	f.mu.Lock()
	st := f.mu.parts[p]
	if st == nil || st.epoch != epoch {
		f.mu.parts[p] = &fetchState{epoch: epoch}
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) remove(p *Partition) {
	f.mu.Lock()
	delete(f.mu.parts, p)
	f.mu.Unlock()
}

// stateOf returns p's fetch state, nil when p is not followed here.
func (f *fetcher) stateOf(p *Partition) *fetchState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.parts[p]
}

func (f *fetcher) has(p *Partition) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.mu.parts[p]
	return ok
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

// run fetches until stopped: it builds a request for the partitions due, sends it
// (the leader holds it up to MaxWait for new records) and applies the answer.
func (f *fetcher) run() {
	defer close(f.done)
	var client LeaderClient
	defer func() {
		if client != nil {
			client.Close()
		}
	}()
	for f.ctx.Err() == nil {
		req, parts := f.request()
		if len(parts) == 0 {
			f.idle()
			continue
		}
		if client == nil {
			c, err := f.cfg.Dial(f.leader)
			if err != nil {
				f.cfg.Logger.Debug("cannot reach the leader to fetch from", "leader", f.leader, "err", err)
				f.backoff(parts)
				continue
			}
			client = c
		}
		results, err := client.Fetch(f.ctx, req)
		if err != nil {
			if f.ctx.Err() == nil {
				f.cfg.Logger.Debug("fetch from the leader failed", "leader", f.leader, "err", err)
			}
			f.backoff(parts)
			continue
		}
		f.apply(parts, results)
	}
}

// idle waits until a partition is added or one in backoff is due.
func (f *fetcher) idle() {
	wait := f.cfg.Backoff
	f.mu.Lock()
	now := f.cfg.Clock.Now()
	for _, st := range f.mu.parts {
		if d := st.retryAfter.Sub(now); d > 0 && d < wait {
			wait = d
		}
	}
	f.mu.Unlock()
	due := make(chan struct{})
	t := f.cfg.Clock.AfterFunc(max(wait, time.Millisecond), func() { close(due) })
	defer t.Stop()
	select {
	case <-f.ctx.Done():
	case <-f.wake:
	case <-due:
	}
}

// request builds the fetch for the partitions not in backoff.
func (f *fetcher) request() (*FetchRequest, map[fetchKey]*Partition) {
	now := f.cfg.Clock.Now()
	req := &FetchRequest{ReplicaID: f.cfg.LocalNode, MaxWait: f.cfg.MaxWait, MinBytes: f.cfg.MinBytes, MaxBytes: f.cfg.MaxBytes}
	if f.cfg.BrokerEpoch != nil {
		req.BrokerEpoch = f.cfg.BrokerEpoch()
	}
	parts := map[fetchKey]*Partition{}
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, st := range f.mu.parts {
		if now.Before(st.retryAfter) || p.Offline() {
			continue // an offline replica fetches nothing: the leader must not count it caught up
		}
		req.Partitions = append(req.Partitions, FetchPartition{
			Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, CurrentLeaderEpoch: st.epoch,
			FetchOffset: p.Log.LogEndOffset(), LastFetchedEpoch: p.Log.LatestEpoch(),
			LogStartOffset: p.Log.LogStartOffset(), MaxBytes: f.cfg.PartitionMaxBytes,
		})
		parts[fetchKey{p.Topic, p.Index}] = p
	}
	return req, parts
}

type fetchKey struct {
	topic     string
	partition int32
}

// backoff delays the next fetch of parts: firstFetchBackoff after a first failure,
// doubling with each failure in a row, at most replica.fetch.backoff.ms.
func (f *fetcher) backoff(parts map[fetchKey]*Partition) {
	now := f.cfg.Clock.Now()
	f.mu.Lock()
	for _, p := range parts {
		if st := f.mu.parts[p]; st != nil {
			d := f.cfg.Backoff
			if shift := st.failures.Add(1) - 1; shift < 16 {
				d = min(d, firstFetchBackoff<<shift)
			}
			st.retryAfter = now.Add(d)
		}
	}
	f.mu.Unlock()
}

// apply takes one response: records appended, high watermark and log start taken,
// divergent tails truncated, failed partitions backed off.
func (f *fetcher) apply(parts map[fetchKey]*Partition, results []FetchResult) {
	for i := range results {
		r := &results[i]
		p := parts[fetchKey{r.Topic, r.Partition}]
		var st *fetchState
		if p != nil {
			st = f.stateOf(p)
		}
		if st == nil || st.epoch != p.LeaderEpoch() || p.IsLeader() {
			continue // no longer followed from here, or in another epoch since the request
		}
		if err := f.applyOne(p, r); err != nil {
			if !errors.Is(err, ErrRetriable) && !errors.Is(err, ErrFencedLeaderEpoch) && !errors.Is(err, ErrNotLeader) &&
				!errors.Is(err, ErrUnknownLeaderEpoch) {
				f.cfg.Logger.Warn("replicating from the leader failed", "topic", p.Topic, "partition", p.Index,
					"leader", f.leader, "err", err)
				if f.cfg.OnFailure != nil {
					f.cfg.OnFailure(p, err)
				}
			}
			f.backoff(map[fetchKey]*Partition{{p.Topic, p.Index}: p})
			continue
		}
		if st.failures.Load() != 0 {
			st.failures.Store(0)
		}
	}
}

func (f *fetcher) applyOne(p *Partition, r *FetchResult) error {
	switch {
	case errors.Is(r.Err, ErrFetchOffsetOutOfRange):
		return f.outOfRange(p, r)
	case r.Err != nil:
		return r.Err
	case r.DivergingEpoch >= 0 || r.DivergingEndOffset >= 0:
		return f.truncate(p, p.DivergingEnd(r.DivergingEpoch, r.DivergingEndOffset))
	}
	if _, err := p.AppendAsFollower(r.Records); err != nil {
		return err
	}
	p.SetFollowerHighWatermark(r.HighWatermark)
	if r.LogStartOffset >= 0 {
		return p.MaybeIncrementLogStart(r.LogStartOffset)
	}
	return nil
}

// outOfRange handles a fetch offset the leader does not have: below its log start,
// the follower starts over at the leader's log start; above its end (the leader lost
// records, or was elected uncleanly), the follower cuts back to the leader's high
// watermark and fetches on from there.
func (f *fetcher) outOfRange(p *Partition, r *FetchResult) error {
	end := p.Log.LogEndOffset()
	if r.LogStartOffset >= 0 && end < r.LogStartOffset {
		from := end
		if err := p.StartOver(r.LogStartOffset); err != nil {
			return err
		}
		f.cfg.Logger.Info("follower behind the leader's log start starts over there", "topic", p.Topic,
			"partition", p.Index, "leader", f.leader, "from", from, "to", r.LogStartOffset)
		return nil
	}
	if r.HighWatermark >= 0 && r.HighWatermark < end {
		return f.truncate(p, r.HighWatermark)
	}
	return ErrRetriable
}

func (f *fetcher) truncate(p *Partition, to int64) error {
	from := p.Log.LogEndOffset()
	dropped, err := p.TruncateTo(to) // records may be gone even when it failed part way
	if dropped > 0 {
		f.cfg.Logger.Warn("follower truncated a divergent tail", "topic", p.Topic, "partition", p.Index,
			"leader", f.leader, "from", from, "to", p.Log.LogEndOffset(), "offsets_dropped", dropped)
		if f.cfg.OnTruncate != nil {
			f.cfg.OnTruncate(p, from, p.Log.LogEndOffset())
		}
	}
	return err
}
