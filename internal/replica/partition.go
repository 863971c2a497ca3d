package replica

import (
	"errors"
	"slices"
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
	// ErrNotEnoughReplicasAfterAppend: the batch was appended and reached the high
	// watermark, but the ISR shrank below min.insync.replicas meanwhile; the client
	// retries (an idempotent producer's retry is deduplicated).
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: in-sync replicas fell below min.insync.replicas after the append")
	ErrOffline                      = errors.New("replica: the partition's log directory is offline")
	// ErrNotAssigned: a replica fetch from a broker that holds no replica of the
	// partition.
	ErrNotAssigned = errors.New("replica: the fetching broker is not a replica of this partition")
	// ErrStaleReplicaEpoch: a replica fetch from an older incarnation of the follower
	// than one the leader already heard from (KIP-903); Kafka answers
	// NOT_LEADER_OR_FOLLOWER.
	ErrStaleReplicaEpoch = errors.New("replica: the fetching broker's epoch is older than its latest incarnation's")
	// ErrOffsetNotAvailable: a leader just elected has not yet raised its high
	// watermark to where its leader epoch starts, so it cannot tell the latest
	// committed offset (KIP-207); the client retries.
	ErrOffsetNotAvailable = errors.New("replica: the new leader's high watermark has not caught up with the start of its epoch")
)

// State is a partition's replication state as the metadata image has it.
type State struct {
	Leader         int32 // -1: no leader (offline)
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	// Recovering is set when the leader was elected uncleanly and has not said yet
	// that it recovered (KIP-704's LeaderRecoveryState).
	Recovering bool
}

// Partition is one replica of a topic partition: as leader it appends, tracks its
// followers' positions, advances the high watermark over the ISR and proposes ISR
// changes; as follower it appends what the leader's log holds (see follower.go).
type Partition struct {
	Topic     string
	Index     int32
	TopicID   [16]byte
	Log       *storage.Log
	localNode int32

	highWatermark atomic.Int64
	// lastStable is the last stable offset: the high watermark, or the first offset
	// of the oldest transaction that is open or whose marker is not below it. lsoMu
	// orders its updates (taken before the log's lock).
	lastStable atomic.Int64
	lsoMu      sync.Mutex
	settings   atomic.Pointer[Settings]
	offline    atomic.Bool
	// changes counts the wake-ups of waiters (wake, wakeEnd); see Changes.
	changes atomic.Uint64
	// roleMu orders the follower's writes (AppendAsFollower, TruncateTo, StartOver:
	// read-locked from their leadership check to their last write) before and after
	// a change of role (Apply: locked). Otherwise a follower append that checked before
	// the node became leader lands after the new epoch's start was recorded, and the
	// leader's epoch cache says its epoch starts where older batches lie: followers
	// told to cut back there fetch the same batches and cut them again forever. Taken
	// before mu.
	roleMu sync.RWMutex

	mu struct {
		sync.Mutex
		state State
		// leader state (this node leads): the followers' positions, the ISR change in
		// flight (nil when none) and the offset the current leader epoch started at.
		followers  map[int32]*follower
		pendingISR *ISRChange
		resendISR  bool // send pendingISR again (RetryISR)
		epochStart int64
		// leaderSince is the leader epoch this node leads in without a break: the epoch
		// it became leader in after following or having no leader.
		leaderSince   int32
		waiters       waiterList // woken when the high watermark or leadership moves
		endWaiters    waiterList // woken when the log end moves (follower fetches wait)
		appliedOnce   bool
		followerFetch bool // this node fetches the partition from a leader
	}
}

// NewPartition wraps an open log. Until a metadata state makes it leader or follower,
// it has no leader. The high watermark starts at the log start; a leader raises it
// over its ISR (at once to the log end when the ISR is the leader alone, as on a
// single node), a follower from the leader's fetch responses.
func NewPartition(topic string, index int32, topicID [16]byte, log *storage.Log, localNode int32) *Partition {
	p := &Partition{Topic: topic, Index: index, TopicID: topicID, Log: log, localNode: localNode}
	p.highWatermark.Store(log.LogStartOffset())
	p.refreshLastStable()
	p.mu.state.Leader = -1
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

// Changes counts the times the partition's waiters were woken (Wait, WaitLogEnd): its
// high watermark, log end or state moved. A fetch that registered to wait (Wait
// returned n) and read the partition after has missed nothing while the count is
// still n; once it moved, the registration may be spent and what was read stale.
func (p *Partition) Changes() uint64 { return p.changes.Load() }

// Change is what applying a metadata state changed for this replica.
type Change struct {
	// BecameLeader: this node leads now in a new leader epoch (it was follower, had
	// no leader, or led in an older epoch).
	BecameLeader bool
	// BecameFollower: another node leads now in a new leader epoch; the follower
	// fetches from it (Leader) from now on.
	BecameFollower bool
	// Leaderless: no node leads in this epoch.
	Leaderless bool
	Leader     int32
	Epoch      int32
}

// Apply makes the partition follow a metadata state (from the metadata log, never
// from another broker) and says how its role changed. A state older than the one
// applied (by leader epoch, then partition epoch) is ignored.
func (p *Partition) Apply(s State, now time.Time) (Change, error) {
	p.roleMu.Lock()
	defer p.roleMu.Unlock()
	p.mu.Lock()
	cur := p.mu.state
	if p.mu.appliedOnce && (s.LeaderEpoch < cur.LeaderEpoch ||
		s.LeaderEpoch == cur.LeaderEpoch && s.PartitionEpoch <= cur.PartitionEpoch) {
		p.mu.Unlock()
		return Change{}, nil
	}
	newEpoch := !p.mu.appliedOnce || s.LeaderEpoch != cur.LeaderEpoch
	wasLeader := p.mu.appliedOnce && cur.Leader == p.localNode
	p.mu.appliedOnce = true
	s.Replicas, s.ISR = slices.Clone(s.Replicas), slices.Clone(s.ISR)
	p.mu.state = s
	ch := Change{Leader: s.Leader, Epoch: s.LeaderEpoch}
	var assignEpoch bool
	switch {
	case s.Leader == p.localNode && newEpoch:
		ch.BecameLeader = true
		assignEpoch = true
		if !wasLeader {
			p.mu.leaderSince = s.LeaderEpoch
		}
		p.mu.epochStart = p.Log.LogEndOffset()
		p.mu.followers = make(map[int32]*follower, len(s.Replicas))
		for _, r := range s.Replicas {
			if r == p.localNode {
				continue
			}
			f := newFollower()
			if slices.Contains(s.ISR, r) {
				// An in-sync follower counts as caught up from the start of the epoch
				// (Kafka does the same), so it is not dropped before it fetches.
				f.lastCaughtUp = now
			}
			p.mu.followers[r] = f
		}
		p.mu.pendingISR = nil
	case s.Leader == p.localNode:
		// Same epoch, new partition epoch: an ISR change (or a reassignment) committed.
		for _, r := range s.Replicas {
			if _, ok := p.mu.followers[r]; !ok && r != p.localNode {
				p.mu.followers[r] = newFollower()
			}
		}
		for r := range p.mu.followers {
			if !slices.Contains(s.Replicas, r) {
				delete(p.mu.followers, r)
			}
		}
		p.mu.pendingISR = nil
	case newEpoch:
		p.mu.followers, p.mu.pendingISR = nil, nil
		if s.Leader < 0 {
			ch.Leaderless = true
		} else {
			ch.BecameFollower = true
		}
	}
	p.mu.Unlock()
	if assignEpoch {
		if err := p.Log.AssignLeaderEpoch(s.LeaderEpoch); err != nil {
			return ch, err
		}
	}
	if s.Leader == p.localNode {
		p.maybeAdvanceHighWatermark()
	}
	if newEpoch {
		p.wakeAll() // produce waits end (NOT_LEADER) or re-check; fetches re-read
	}
	return ch, nil
}

// State returns the state last applied.
func (p *Partition) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.mu.state
	s.Replicas, s.ISR = slices.Clone(s.Replicas), slices.Clone(s.ISR)
	return s
}

// LeaderEpoch returns the current leader epoch.
func (p *Partition) LeaderEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.state.LeaderEpoch
}

// IsLeader reports whether this node leads the partition.
func (p *Partition) IsLeader() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.state.Leader == p.localNode
}

// Leader returns the leader's node id (-1 when none).
func (p *Partition) Leader() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.state.Leader
}

// ISRSize returns the number of in-sync replicas (committed in the metadata).
func (p *Partition) ISRSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.state.ISR)
}

// Replicas returns the replica list and the ISR.
func (p *Partition) Replicas() (replicas, isr []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.mu.state.Replicas), slices.Clone(p.mu.state.ISR)
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

// CheckHighWatermarkCaughtUp returns ErrOffsetNotAvailable while this node leads with
// a high watermark below the offset its leader epoch started at: a new leader raises
// it only once its followers' positions are known (and after a restart it starts at
// the log start), so until then it would understate the latest offset that was
// committed (Kafka answers ListOffsets so, KIP-207).
func (p *Partition) CheckHighWatermarkCaughtUp() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state.Leader == p.localNode && p.highWatermark.Load() < p.mu.epochStart {
		return ErrOffsetNotAvailable
	}
	return nil
}

// HighWatermark returns the offset below which records are committed and visible.
func (p *Partition) HighWatermark() int64 { return p.highWatermark.Load() }

// LastStableOffset returns the offset below which every transaction is decided: the
// smaller of the high watermark and the first offset of the oldest transaction that
// is open or whose marker the high watermark has not passed yet. read_committed
// consumers read up to it. Like Kafka (UnifiedLog.maybeIncrementFirstUnstableOffset)
// it is never below the log start offset: DeleteRecords or retention may remove the
// start of a transaction still open, and an offset below the log start is one no
// consumer can fetch.
func (p *Partition) LastStableOffset() int64 {
	lso := p.lastStable.Load()
	if hw := p.highWatermark.Load(); lso < hw {
		lso = min(hw, max(lso, p.Log.LogStartOffset()))
	}
	return lso
}

// refreshLastStable recomputes the last stable offset after the high watermark moved
// (it changes only then: a transaction starts above the high watermark and its marker
// counts once the high watermark passed it).
func (p *Partition) refreshLastStable() {
	p.lsoMu.Lock()
	hw := p.highWatermark.Load()
	p.lastStable.Store(min(hw, p.Log.FirstUnstableOffset(hw)))
	p.lsoMu.Unlock()
}

// CheckAppend returns the error an append as leader would be refused with before its
// batch is looked at: ErrOffline, ErrNotLeader, or (requireISR: acks=all)
// ErrNotEnoughReplicas — Kafka's Partition.appendRecordsToLeader checks leadership and
// min.insync.replicas before the log validates the batch, so a client is told what it
// can retry rather than a verdict on a batch this replica would not take anyway.
func (p *Partition) CheckAppend(requireISR bool) error {
	_, err := p.appendEpoch(requireISR)
	return err
}

// appendEpoch is the leader epoch an append as leader goes in, or why it is refused
// (CheckAppend).
func (p *Partition) appendEpoch(requireISR bool) (int32, error) {
	minISR := p.Settings().MinInsyncReplicas
	if p.Offline() {
		return 0, ErrOffline
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state.Leader != p.localNode {
		return 0, ErrNotLeader
	}
	if requireISR && len(p.mu.state.ISR) < minISR {
		return 0, ErrNotEnoughReplicas
	}
	return p.mu.state.LeaderEpoch, nil
}

// AppendAsLeader appends one validated batch. The topic's min.insync.replicas is
// enforced when requireISR (acks=all) is set. It returns the leader epoch the batch
// was appended in, for waitForAcks.
func (p *Partition) AppendAsLeader(batch []byte, requireISR bool, now time.Time) (storage.AppendInfo, error) {
	return p.AppendAsLeaderTxn(batch, requireISR, now, storage.AppendOptions{})
}

// AppendAsLeaderTxn is AppendAsLeader with the transaction fields of the log's
// AppendOptions (Coordinator, TxnGuard); its epoch and time are the partition's.
func (p *Partition) AppendAsLeaderTxn(batch []byte, requireISR bool, now time.Time, txn storage.AppendOptions) (storage.AppendInfo, error) {
	epoch, err := p.appendEpoch(requireISR)
	if err != nil {
		return storage.AppendInfo{}, err
	}
	txn.LeaderEpoch, txn.Now, txn.Follower = epoch, now, false
	info, err := p.Log.Append(batch, txn)
	if err != nil {
		return info, err
	}
	p.wakeEnd()
	p.maybeAdvanceHighWatermark()
	return info, nil
}

// AckState is what an acks=all produce waiting for the high watermark checks each
// time it is woken: whether the partition is still led here without a break since
// the epoch the batch was appended in (a later epoch under the same leader — a
// reassignment dropping a follower — keeps the log as it was, as Kafka's
// checkEnoughReplicasReachOffset asks only whether the log is led here; a node that
// followed in between may have truncated the batch), and whether the ISR is still at
// least min.insync.replicas — the maximal ISR, counting the members an ISR change in
// flight adds (Kafka's partitionState.maximalIsr; the check before the append counts
// the committed ISR alone).
func (p *Partition) AckState(epoch int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state.Leader != p.localNode || epoch < p.mu.leaderSince || epoch > p.mu.state.LeaderEpoch {
		return ErrNotLeader
	}
	if p.maximalISRSizeLocked() < p.Settings().MinInsyncReplicas {
		return ErrNotEnoughReplicasAfterAppend
	}
	return nil
}

// maximalISRSizeLocked is the number of replicas in the committed ISR or in the ISR
// change in flight (Kafka's maximal ISR).
func (p *Partition) maximalISRSizeLocked() int {
	n := len(p.mu.state.ISR)
	if p.mu.pendingISR != nil {
		for _, r := range p.mu.pendingISR.ISR {
			if !slices.Contains(p.mu.state.ISR, r) {
				n++
			}
		}
	}
	return n
}

// maybeAdvanceHighWatermark moves the high watermark of a leader to the smallest log
// end offset over the ISR — the committed ISR and, while an ISR change is in flight,
// the members it adds or keeps until committed (Kafka's maximal ISR). A follower whose
// position is not known yet holds the high watermark where it is.
func (p *Partition) maybeAdvanceHighWatermark() {
	p.mu.Lock()
	if p.mu.state.Leader != p.localNode {
		p.mu.Unlock()
		return
	}
	hw := p.Log.LogEndOffset()
	var pending []int32
	if p.mu.pendingISR != nil {
		pending = p.mu.pendingISR.ISR
	}
	for _, list := range [][]int32{p.mu.state.ISR, pending} {
		for _, r := range list {
			if r == p.localNode {
				continue
			}
			f := p.mu.followers[r]
			if f == nil || f.logEnd < 0 {
				hw = min(hw, p.highWatermark.Load())
				continue
			}
			hw = min(hw, f.logEnd)
		}
	}
	p.mu.Unlock()
	p.raiseHighWatermark(hw)
}

// raiseHighWatermark moves the high watermark up to hw (never down) and wakes its
// waiters when it moved.
func (p *Partition) raiseHighWatermark(hw int64) {
	for {
		cur := p.highWatermark.Load()
		if hw <= cur {
			return
		}
		if p.highWatermark.CompareAndSwap(cur, hw) {
			break
		}
	}
	p.refreshLastStable()
	p.wake()
}

// ResetHighWatermark sets the high watermark to the log end offset after a deletion on
// a partition led here with no other replica (DeleteRecords, the group coordinator's
// tests); replicated partitions keep theirs.
func (p *Partition) ResetHighWatermark() {
	p.mu.Lock()
	alone := p.mu.state.Leader == p.localNode && len(p.mu.state.Replicas) <= 1
	p.mu.Unlock()
	if alone {
		p.highWatermark.Store(p.Log.LogEndOffset())
	} else if hw := p.highWatermark.Load(); hw > p.Log.LogEndOffset() {
		p.highWatermark.Store(p.Log.LogEndOffset())
	}
	p.refreshLastStable()
	p.wake()
}

// Wait registers ch to receive a signal (non-blocking send) the next time the high
// watermark or the leadership moves. The caller re-checks its condition after
// registering, and calls StopWaiting once it no longer waits: a signal ends the
// registration, but on a partition where nothing moves only StopWaiting does.
// Registering a channel already registered does nothing. Wait returns the change
// count (Changes) as of the registration: while Changes still returns it, the
// registration is live.
func (p *Partition) Wait(ch chan struct{}) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.waiters.add(ch)
	return p.changes.Load()
}

// StopWaiting ends ch's registration (Wait), if any.
func (p *Partition) StopWaiting(ch chan struct{}) {
	p.mu.Lock()
	p.mu.waiters.remove(ch)
	p.mu.Unlock()
}

// Waiting reports how many channels wait on the partition (Wait and WaitLogEnd).
func (p *Partition) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.waiters) + len(p.mu.endWaiters)
}

// WaitLogEnd registers ch to receive a signal the next time the log end offset moves
// (or the leadership): what a follower's fetch waiting for new records waits on. As
// with Wait, StopWaitingLogEnd ends the registration, and the count returned is live
// while Changes returns it.
func (p *Partition) WaitLogEnd(ch chan struct{}) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.endWaiters.add(ch)
	return p.changes.Load()
}

// StopWaitingLogEnd ends ch's registration (WaitLogEnd), if any.
func (p *Partition) StopWaitingLogEnd(ch chan struct{}) {
	p.mu.Lock()
	p.mu.endWaiters.remove(ch)
	p.mu.Unlock()
}

// The wake-ups count each change (Changes) under the lock that takes the waiters, so
// a registration is spent exactly when the count has moved past what Wait returned.

func (p *Partition) wake() {
	p.mu.Lock()
	p.changes.Add(1)
	waiters := p.mu.waiters
	p.mu.waiters = nil
	p.mu.Unlock()
	signal(waiters)
}

func (p *Partition) wakeEnd() {
	p.mu.Lock()
	p.changes.Add(1)
	waiters := p.mu.endWaiters
	p.mu.endWaiters = nil
	p.mu.Unlock()
	signal(waiters)
}

func (p *Partition) wakeAll() {
	p.mu.Lock()
	p.changes.Add(1)
	waiters, endWaiters := p.mu.waiters, p.mu.endWaiters
	p.mu.waiters, p.mu.endWaiters = nil, nil
	p.mu.Unlock()
	signal(waiters)
	signal(endWaiters)
}

// waiterList is the channels registered to hear of a change, each once.
type waiterList []chan struct{}

func (l *waiterList) add(ch chan struct{}) {
	if !slices.Contains(*l, ch) {
		*l = append(*l, ch)
	}
}

func (l *waiterList) remove(ch chan struct{}) {
	if i := slices.Index(*l, ch); i >= 0 {
		*l = slices.Delete(*l, i, i+1)
	}
}

func signal(waiters waiterList) {
	for _, ch := range waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
