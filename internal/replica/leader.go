package replica

import (
	"math"
	"slices"
	"time"

	"github.com/samsa-streaming/samsa/internal/storage"
)

// follower is what a leader knows of one of its followers, from its fetches.
type follower struct {
	logEnd   int64 // the follower's log end offset (its last fetch offset); -1 unknown
	logStart int64 // the follower's log start offset, from its last fetch; -1 unknown
	// lastCaughtUp is the last time the follower was known to hold everything the
	// leader held at some earlier time (Kafka's lastCaughtUpTimeMs): its fetch offset
	// reached the leader's log end offset of its previous fetch.
	lastCaughtUp time.Time
	lastFetch    time.Time
	// lastFetchLeaderEnd is the leader's log end offset when the previous fetch came.
	lastFetchLeaderEnd int64
	// brokerEpoch is the broker epoch of the incarnation whose fetch set this state
	// (KIP-903: Fetch v15's ReplicaState); -1 unknown (no fetch yet, or one older
	// than v15).
	brokerEpoch int64
}

// newFollower is a follower the leader has not heard from.
func newFollower() *follower { return &follower{logEnd: -1, logStart: -1, brokerEpoch: -1} }

// FollowerFetch records a follower's fetch at fetchOffset (its log end offset) with
// its log start offset, sent by the follower's incarnation at brokerEpoch (-1:
// unknown): its position, whether it is caught up, and the high watermark that
// follows. A fetch of a newer incarnation than the one recorded starts the
// follower's state over (KIP-903: what the previous incarnation fetched says nothing
// of what a restarted broker still holds); one of an older incarnation is refused
// with ErrStaleReplicaEpoch and changes nothing. It returns ErrNotLeader when this
// node does not lead and ErrNotAssigned when replicaID holds no replica of the
// partition.
func (p *Partition) FollowerFetch(replicaID int32, brokerEpoch, fetchOffset, logStartOffset int64, now time.Time) error {
	leaderEnd := p.Log.LogEndOffset()
	p.mu.Lock()
	if p.mu.state.Leader != p.localNode {
		p.mu.Unlock()
		return ErrNotLeader
	}
	f := p.mu.followers[replicaID]
	if f == nil {
		p.mu.Unlock()
		return ErrNotAssigned
	}
	if brokerEpoch >= 0 && f.brokerEpoch >= 0 && brokerEpoch != f.brokerEpoch {
		if brokerEpoch < f.brokerEpoch {
			p.mu.Unlock()
			return ErrStaleReplicaEpoch
		}
		// A new incarnation: the previous one's fetches are no evidence of its log. The
		// last time it was caught up stays, as in Kafka, so that an ISR member is not
		// dropped before replica.lag.time.max.ms for having restarted.
		f.lastFetch, f.lastFetchLeaderEnd = time.Time{}, 0
	}
	f.brokerEpoch = brokerEpoch
	switch {
	case fetchOffset >= leaderEnd:
		f.lastCaughtUp = now
	case fetchOffset >= f.lastFetchLeaderEnd && f.lastFetch.After(f.lastCaughtUp):
		f.lastCaughtUp = f.lastFetch
	}
	f.lastFetchLeaderEnd, f.lastFetch = leaderEnd, now
	moved, startMoved := fetchOffset != f.logEnd, logStartOffset != f.logStart
	f.logEnd, f.logStart = fetchOffset, logStartOffset
	p.mu.Unlock()
	if moved {
		p.maybeAdvanceHighWatermark()
	}
	if startMoved {
		p.wake() // DeleteRecords waits for the low watermark (LowWatermark)
	}
	return nil
}

// LowWatermark returns, on the leader, the smallest log start offset over this
// replica and its followers whose broker alive says is alive (registered and
// unfenced), as their fetches last reported it — a follower that has not fetched in
// this epoch yet counts as -1 — (Kafka's lowWatermarkIfLeader): DeleteRecords answers
// once it reached the offset. Waiters (Wait) are woken when a follower reports a
// new log start. ErrNotLeader when this node does not lead.
func (p *Partition) LowWatermark(alive func(id int32) bool) (int64, error) {
	low := p.Log.LogStartOffset()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state.Leader != p.localNode {
		return 0, ErrNotLeader
	}
	for r, f := range p.mu.followers {
		if slices.Contains(p.mu.state.Replicas, r) && (alive == nil || alive(r)) {
			low = min(low, f.logStart)
		}
	}
	return low, nil
}

// LogStartMoved tells the partition that its log start moved on the leader
// (DeleteRecords): follower fetches waiting for records are answered at once, so that
// the followers learn the new log start (and report theirs) without waiting for
// replica.fetch.wait.max.ms.
func (p *Partition) LogStartMoved() { p.wakeAll() }

// ISRChange is an ISR the leader asks the controller for, in the epochs it acts on.
type ISRChange struct {
	LeaderEpoch, PartitionEpoch int32
	ISR                         []int32
	// Recovered: the leader was elected uncleanly and has its log in order now.
	Recovered bool
	// BrokerEpochs are, by index of ISR, the broker epoch each follower fetched with
	// when its state was last set (KIP-903), -1 unknown, and -1 for the leader itself:
	// the controller refuses a member whose registration is at another epoch.
	BrokerEpochs []int64
	// Added and Removed are the members the change adds and removes (for metrics and
	// logs).
	Added, Removed []int32
}

// ProposeISR returns the ISR change the leader should ask for now, if any:
// followers that have not caught up for lagMax leave, unless their log end is the
// leader's; followers not in the ISR whose
// log end has reached the high watermark and the start of the current leader epoch
// join (Kafka's conditions) if eligible says they may (nil: all may); a leader
// elected uncleanly says it recovered. Only one
// change is in flight at a time: until the metadata brings it (or CancelISR is called
// after the controller refused it), ProposeISR returns nothing but that change again
// after RetryISR, and the high watermark counts the members of both the committed and
// the proposed ISR.
//
// eligible, asked only of followers that caught up, is Kafka's isReplicaIsrEligible,
// given the broker epoch the follower
// fetched with (-1 unknown): a follower that is fenced, shutting down, unregistered,
// offline or known only from another incarnation must not be proposed however caught
// up it is — the
// controller refuses the whole change (INELIGIBLE_REPLICA), so that the members it
// removes for their lag would stay in the ISR, holding the high watermark, for as
// long as that follower fetches.
func (p *Partition) ProposeISR(now time.Time, lagMax time.Duration, eligible func(id int32, brokerEpoch int64) bool) (ISRChange, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.mu.state
	if s.Leader != p.localNode {
		return ISRChange{}, false
	}
	if p.mu.pendingISR != nil {
		resend := p.mu.resendISR
		p.mu.resendISR = false
		return *p.mu.pendingISR, resend
	}
	hw, leaderEnd := p.highWatermark.Load(), p.Log.LogEndOffset()
	var next []int32
	ch := ISRChange{LeaderEpoch: s.LeaderEpoch, PartitionEpoch: s.PartitionEpoch, Recovered: s.Recovering}
	for _, r := range s.ISR {
		// Out of sync: not caught up within lagMax, unless its log end is the leader's
		// (Kafka's isCaughtUp: an idle partition's follower lacks nothing).
		f := p.mu.followers[r]
		if r != p.localNode && (f == nil || f.logEnd != leaderEnd && now.Sub(f.lastCaughtUp) > lagMax) && !s.Recovering {
			ch.Removed = append(ch.Removed, r)
			continue
		}
		next = append(next, r)
	}
	if !s.Recovering {
		for _, r := range s.Replicas {
			f := p.mu.followers[r]
			if r == p.localNode || slices.Contains(s.ISR, r) || f == nil {
				continue
			}
			if f.logEnd >= hw && f.logEnd >= p.mu.epochStart && now.Sub(f.lastCaughtUp) <= lagMax &&
				(eligible == nil || eligible(r, f.brokerEpoch)) {
				next = append(next, r)
				ch.Added = append(ch.Added, r)
			}
		}
	}
	if len(ch.Added) == 0 && len(ch.Removed) == 0 && !ch.Recovered {
		return ISRChange{}, false
	}
	ch.ISR = next
	for _, r := range next {
		epoch := int64(-1)
		if f := p.mu.followers[r]; f != nil && r != p.localNode {
			epoch = f.brokerEpoch
		}
		ch.BrokerEpochs = append(ch.BrokerEpochs, epoch)
	}
	p.mu.pendingISR, p.mu.resendISR = &ch, false
	return ch, true
}

// CancelISR forgets the ISR change in flight, so that the next ProposeISR computes one
// again: only for a change the controller says it did not apply (Kafka rolls back on
// INELIGIBLE_REPLICA and OPERATION_NOT_ATTEMPTED alone).
func (p *Partition) CancelISR() {
	p.mu.Lock()
	p.mu.pendingISR, p.mu.resendISR = nil, false
	p.mu.Unlock()
	p.maybeAdvanceHighWatermark()
}

// RetryISR keeps the ISR change in flight after a request whose outcome is unknown (it
// timed out, the controller could not be reached, or answered with something else
// than a refusal): the controller may have committed it, so the high watermark goes on
// counting the members it adds — forgetting them would let this leader acknowledge
// records a member of the committed ISR does not have, which that member would lose if
// elected — and the next ProposeISR returns it again. New metadata ends it either way.
func (p *Partition) RetryISR() {
	p.mu.Lock()
	p.mu.resendISR = p.mu.pendingISR != nil
	p.mu.Unlock()
}

// FollowerLag returns, for the leader, the largest number of offsets a follower is
// behind the log end (0 when none, or when not leader), in or out of the ISR; a
// follower whose position is not known yet is not counted.
func (p *Partition) FollowerLag() int64 {
	end := p.Log.LogEndOffset()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state.Leader != p.localNode {
		return 0
	}
	var lag int64
	for r, f := range p.mu.followers {
		if f.logEnd >= 0 && slices.Contains(p.mu.state.Replicas, r) {
			lag = max(lag, end-f.logEnd)
		}
	}
	return lag
}

// ReadReplica is a follower a leader may send a consumer to (KIP-392), as the leader
// knows it from the follower's fetches.
type ReadReplica struct {
	ID           int32
	LogEnd       int64
	LastCaughtUp time.Time
}

// ReadReplicas returns, on the leader, the followers that can serve a consumer's
// fetch at fetchOffset: in the committed ISR (one out of it may stay behind for
// good) and holding that offset — their log start at or below it, their log end at
// or above it. Nil when this node does not lead.
func (p *Partition) ReadReplicas(fetchOffset int64) []ReadReplica {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state.Leader != p.localNode {
		return nil
	}
	var out []ReadReplica
	for _, r := range p.mu.state.ISR {
		f := p.mu.followers[r]
		if r == p.localNode || f == nil || f.logEnd < fetchOffset || f.logStart < 0 || f.logStart > fetchOffset {
			continue
		}
		out = append(out, ReadReplica{ID: r, LogEnd: f.logEnd, LastCaughtUp: f.lastCaughtUp})
	}
	return out
}

// FollowerRead is a leader's answer to one partition of a follower's fetch.
type FollowerRead struct {
	HighWatermark  int64
	LogStartOffset int64
	// DivergingEpoch and DivergingEndOffset are ≥ 0 (or both -1 for an epoch the
	// leader does not know) when the follower's last fetched epoch diverged: the
	// follower truncates and nothing else is returned.
	Diverging          bool
	DivergingEpoch     int32
	DivergingEndOffset int64
	// Ranges (size bytes) are the batches from the fetch offset on, up to the log end
	// (followers read past the high watermark).
	Ranges []storage.FileRange
	Size   int64
}

// ServeFollower answers one partition of a follower's fetch on the leader: the
// follower's last fetched epoch is checked against the leader's log (KIP-320: a
// divergence is answered with where that epoch ends here, and the follower's position
// is not taken), its fetch offset becomes its known position (moving the high
// watermark), and the batches from there on are read, appended to ranges.
func (p *Partition) ServeFollower(replicaID int32, brokerEpoch int64, fp FetchPartition, maxBytes int, minOneBatch bool, ranges []storage.FileRange, now time.Time) (FollowerRead, []storage.FileRange, error) {
	res := FollowerRead{HighWatermark: p.HighWatermark(), LogStartOffset: p.Log.LogStartOffset(), DivergingEpoch: -1, DivergingEndOffset: -1}
	if p.Offline() {
		return res, ranges, ErrOffline
	}
	if err := p.CheckLeaderEpoch(fp.CurrentLeaderEpoch); err != nil {
		return res, ranges, err
	}
	if fp.LastFetchedEpoch >= 0 {
		epoch, end := p.Log.EndOffsetForEpoch(fp.LastFetchedEpoch)
		if epoch < 0 || epoch < fp.LastFetchedEpoch || end < fp.FetchOffset {
			res.Diverging, res.DivergingEpoch, res.DivergingEndOffset = true, epoch, end
			return res, ranges, p.checkLeader()
		}
	}
	if fp.FetchOffset < res.LogStartOffset || fp.FetchOffset > p.Log.LogEndOffset() {
		return res, ranges, ErrFetchOffsetOutOfRange
	}
	if err := p.FollowerFetch(replicaID, brokerEpoch, fp.FetchOffset, fp.LogStartOffset, now); err != nil {
		return res, ranges, err
	}
	res.HighWatermark = p.HighWatermark()
	read, all, err := p.Log.ReadAppend(ranges, fp.FetchOffset, maxBytes, math.MaxInt64, minOneBatch)
	if err != nil {
		return res, all, err
	}
	res.Ranges, res.Size = read.Ranges, read.Size
	return res, all, nil
}

// ConsumerDivergence checks a consumer's last fetched epoch (KIP-320; -1: none)
// against this replica's log, as Kafka's Partition.readRecords does for every fetch:
// when that epoch ends here before fetchOffset (or this log's epoch at or below it is
// an older one), the consumer's log diverged and is told the epoch and where it ends
// here (diverging, with nothing read); an epoch this log cannot place, or a fetch
// offset below the log start, is ErrFetchOffsetOutOfRange.
func (p *Partition) ConsumerDivergence(lastFetchedEpoch int32, fetchOffset int64) (diverging bool, epoch int32, end int64, err error) {
	if lastFetchedEpoch < 0 {
		return false, -1, -1, nil
	}
	epoch, end = p.Log.EndOffsetForEpoch(lastFetchedEpoch)
	switch {
	case epoch < 0 || end < 0, fetchOffset < p.Log.LogStartOffset():
		return false, -1, -1, ErrFetchOffsetOutOfRange
	case epoch < lastFetchedEpoch || end < fetchOffset:
		return true, epoch, end, nil
	}
	return false, -1, -1, nil
}

func (p *Partition) checkLeader() error {
	if !p.IsLeader() {
		return ErrNotLeader
	}
	return nil
}

// InISR reports whether replica id is in the committed ISR.
func (p *Partition) InISR(id int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.mu.state.ISR, id)
}
