package group

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/appendq"
	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/coordkey"
)

// Record is one record of __consumer_offsets. A nil Value is a tombstone. Txn is set
// on the records of a transaction (txn_offsets.go).
type Record struct {
	Key, Value []byte
	Txn        *TxnInfo
}

// Log is the coordinator's view of the __consumer_offsets partitions it leads.
type Log interface {
	// Append writes records to partition p of __consumer_offsets and returns once they
	// are committed (high watermark) — an error otherwise (mapped to
	// COORDINATOR_NOT_AVAILABLE, or NOT_COORDINATOR when it wraps ErrNotCoordinator).
	Append(ctx context.Context, partition int32, records []Record) error
	// Load reads all records of partition p from log start to the end, in order.
	Load(ctx context.Context, partition int32, fn func(Record) error) error
}

// Options configure a Coordinator.
type Options struct {
	Log    Log
	Clock  clock.Clock  // nil: clock.Real
	Logger *slog.Logger // nil: slog.Default()
	Config Config
	// TopicExists reports whether a topic partition exists; OffsetCommit answers
	// UNKNOWN_TOPIC_OR_PARTITION for partitions it rejects. nil accepts everything.
	TopicExists func(topic string, partition int32) bool
	// OnRebalance, if set, is called (with the coordinator's lock held: it must not call
	// back into the coordinator) each time a group starts a rebalance; for metrics.
	OnRebalance func(group string)
	// Topics returns the current topics, for consumer group assignments; it is called
	// with the coordinator's lock held and must not call back. nil: no topics.
	Topics func() *Topics
	// Timeouts returns a group's own session timeouts and heartbeat intervals (its
	// GROUP configs); a zero field, or a nil Timeouts, takes Config's. It is called
	// with the coordinator's lock held and must not call back.
	Timeouts func(group string) Timeouts
	// InitShareState writes the share state of partitions [from, to) of a topic of a
	// share group to start at offset 0, where they have none, and returns once it is
	// durable. The group coordinator calls it, outside its lock, for the partitions a
	// topic gained after the group first assigned it, and assigns them once it
	// returns nil. nil: no share state is initialized; every partition is assigned at
	// once.
	InitShareState func(ctx context.Context, group string, topic TopicID, from, to int32) error
}

// Timeouts are the session timeouts, heartbeat intervals and assignment intervals of
// one group's consumer-protocol and share members.
type Timeouts struct {
	ConsumerSession, ConsumerHeartbeat time.Duration
	ShareSession, ShareHeartbeat       time.Duration
	// The assignment intervals (KIP-1263): nil takes the Config value, as zero is an
	// interval of its own (a new target assignment at every change).
	ConsumerAssignment, ShareAssignment *time.Duration
}

// Coordinator is the group coordinator of one node. It is safe for concurrent use.
type Coordinator struct {
	log         Log
	clock       clock.Clock
	logger      *slog.Logger
	cfg         Config
	topicExists func(topic string, partition int32) bool
	onRebalance func(group string)
	topics      func() *Topics
	timeouts    func(group string) Timeouts
	initShare   func(ctx context.Context, group string, topic TopicID, from, to int32) error
	newID       func() string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		closed      bool
		partitions  map[int32]*partition
		epoch       uint64
		expiryTimer clock.Timer
	}

	// numPartitions is the partition count of the coordinator's topic: the topic's
	// own once it exists (SetNumPartitions), Config.NumPartitions until then.
	numPartitions atomic.Int32
}

// partition is one __consumer_offsets partition this node coordinates.
type partition struct {
	id      int32
	epoch   uint64
	loading bool
	// txnEnds are the transaction markers written while loading (CompleteTxn).
	txnEnds []txnEnd
	// txnWrites counts each producer's TxnOffsetCommit writes handed to the writer and
	// not replayed yet; endsAfterWrites holds a marker of such a producer (commit or
	// not) that CompleteTxn saw meanwhile: it is applied once they are replayed.
	txnWrites       map[int64]int
	endsAfterWrites map[int64]bool
	groups          map[string]*group
	writer          *appendq.Queue[writeJob]
	// queued counts the jobs handed to writer and not replayed yet: while it is not
	// zero, memory may hold what the log does not (yet, or ever).
	queued int
}

// New returns a coordinator that coordinates no partition until LoadPartition.
func New(o Options) *Coordinator {
	c := &Coordinator{
		log:         o.Log,
		clock:       o.Clock,
		logger:      o.Logger,
		cfg:         o.Config.withDefaults(),
		topicExists: o.TopicExists,
		onRebalance: o.OnRebalance,
		topics:      o.Topics,
		timeouts:    o.Timeouts,
		initShare:   o.InitShareState,
		newID:       randomUUID,
	}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.partitions = map[int32]*partition{}
	c.numPartitions.Store(c.cfg.NumPartitions)
	return c
}

// groupTimeouts returns a group's timeouts: its own where it has them, else Config's.
func (c *Coordinator) groupTimeouts(group string) Timeouts {
	var t Timeouts
	if c.timeouts != nil {
		t = c.timeouts(group)
	}
	or := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	or(&t.ConsumerSession, c.cfg.ConsumerSessionTimeout)
	or(&t.ConsumerHeartbeat, c.cfg.ConsumerHeartbeatInterval)
	or(&t.ShareSession, c.cfg.ShareSessionTimeout)
	or(&t.ShareHeartbeat, c.cfg.ShareHeartbeatInterval)
	if t.ConsumerAssignment == nil {
		t.ConsumerAssignment = &c.cfg.ConsumerAssignmentInterval
	}
	if t.ShareAssignment == nil {
		t.ShareAssignment = &c.cfg.ShareAssignmentInterval
	}
	return t
}

func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// SetNumPartitions sets the partition count of __consumer_offsets as the metadata has
// it (n > 0). As in Kafka, the topic's count wins over
// offsets.topic.num.partitions, which only sizes the topic when it is created: a broker
// restarted with another value must find the state where it was written.
func (c *Coordinator) SetNumPartitions(n int32) {
	if n > 0 {
		c.numPartitions.Store(n)
	}
}

// PartitionFor returns the __consumer_offsets partition of a group, as Kafka computes
// it: Utils.abs(groupId.hashCode()) % the topic's partition count
// (offsets.topic.num.partitions until the topic exists; SetNumPartitions).
func (c *Coordinator) PartitionFor(group string) int32 {
	return coordkey.Partition(group, c.numPartitions.Load())
}

// IsCoordinator reports whether this node serves the group: 0, NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) IsCoordinator(group string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, code := c.partitionOfLocked(group)
	return code
}

func (c *Coordinator) partitionOfLocked(group string) (*partition, int16) {
	part := c.mu.partitions[c.PartitionFor(group)]
	switch {
	case part == nil:
		return nil, kerrNotCoordinator
	case part.loading:
		return nil, kerrCoordinatorLoadInProgress
	}
	return part, kerrNone
}

// HasPartition reports whether partition p is loaded or loading here.
func (c *Coordinator) HasPartition(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.partitions[p] != nil
}

// LoadPartition makes this node the coordinator of __consumer_offsets partition p: it
// replays the partition from its start. Groups of p answer COORDINATOR_LOAD_IN_PROGRESS
// until it returns. Loading a partition already loaded is a no-op.
func (c *Coordinator) LoadPartition(ctx context.Context, p int32) error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.mu.partitions[p] != nil {
		c.mu.Unlock()
		return nil
	}
	c.mu.epoch++
	part := &partition{id: p, epoch: c.mu.epoch, loading: true, groups: map[string]*group{}}
	c.mu.partitions[p] = part
	c.mu.Unlock()

	ld := &loader{partition: p, groups: map[string]*group{}, logger: c.logger}
	err := c.log.Load(ctx, p, ld.apply)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.partitions[p] != part {
		return fmt.Errorf("%w: __consumer_offsets-%d unloaded while loading", ErrNotCoordinator, p)
	}
	if err != nil {
		delete(c.mu.partitions, p)
		return fmt.Errorf("group: loading __consumer_offsets-%d: %w", p, err)
	}
	now := c.clock.Now()
	part.groups = ld.finish(now)
	for _, e := range part.txnEnds {
		part.completeTxnLocked(e.producerID, e.commit)
	}
	part.txnEnds = nil
	c.startConsumerSessionsLocked(part, now)
	part.loading = false
	part.writer = c.startWriter(part)
	for _, g := range part.groups {
		if g.consumer == nil && g.share == nil && len(g.members) > int(c.cfg.MaxSize) {
			// group.max.size was lowered: let the members beyond it be turned away
			// when they rejoin (Kafka's GroupMetadataManager.onLoaded).
			c.prepareRebalanceLocked(part, g, now, "group is over group.max.size")
		}
		c.settleGroupLocked(part, g)
	}
	c.armExpiryLocked()
	level := slog.LevelInfo
	if ld.records == 0 {
		level = slog.LevelDebug
	}
	c.logger.Log(context.Background(), level, "loaded group coordinator partition", "partition", p, "groups", len(part.groups), "records", ld.records)
	return nil
}

// UnloadPartition stops coordinating partition p: its groups answer NOT_COORDINATOR,
// and every waiting request is answered NOT_COORDINATOR.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unloadLocked(p)
}

func (c *Coordinator) unloadLocked(p int32) {
	part := c.mu.partitions[p]
	if part == nil {
		return
	}
	delete(c.mu.partitions, p)
	for _, g := range part.groups {
		stopGroupTimer(g)
		g.failWaiters(kerrNotCoordinator)
	}
	if part.writer != nil {
		part.writer.Stop()
	}
	c.logger.Debug("unloaded group coordinator partition", "partition", p, "groups", len(part.groups))
}

// Close unloads every partition and waits for the writers to finish.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.mu.closed = true
	for p := range c.mu.partitions {
		c.unloadLocked(p)
	}
	if c.mu.expiryTimer != nil {
		c.mu.expiryTimer.Stop()
		c.mu.expiryTimer = nil
	}
	c.mu.Unlock()
	c.cancel() // ends the reloads' waits and the share state initializations
	c.wg.Wait()
}

// --- writes -----------------------------------------------------------------------

type writeJob struct {
	group   *group // settled after the replay; nil when none
	records []Record
	// replay runs under Coordinator.mu once the append finished: err == nil means the
	// records are committed and their effect is applied now.
	replay func(err error)
}

// startWriter starts the goroutine that appends part's records in order; jobs queued
// while an append is in flight are appended together (coalesce).
func (c *Coordinator) startWriter(part *partition) *appendq.Queue[writeJob] {
	return appendq.Start(&c.wg, func(jobs []writeJob) {
		for len(jobs) > 0 {
			n := coalesce(jobs)
			c.write(part, jobs[:n])
			jobs = jobs[n:]
		}
	})
}

// maxCoalescedBytes bounds the records of several jobs appended as one batch (well
// under the default max.message.bytes).
const maxCoalescedBytes = 256 << 10

// coalesce returns how many leading jobs to append together: commits queued while an
// append was in flight share the next one, unless they belong to different producers'
// transactions (a batch has one producer). A job without records (one that only waits
// for the writes before it) goes with any batch.
func coalesce(jobs []writeJob) int {
	size := 0
	var producer *TxnInfo
	found := false // producer is set: a job with records was seen
	for i, j := range jobs {
		if len(j.records) == 0 {
			continue
		}
		for _, r := range j.records {
			size += len(r.Key) + len(r.Value)
		}
		switch txn := j.records[0].Txn; {
		case !found:
			producer, found = txn, true
		case !sameProducer(producer, txn):
			return i
		}
		if i > 0 && size > maxCoalescedBytes {
			return i
		}
	}
	return len(jobs)
}

func sameProducer(a, b *TxnInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ProducerID == b.ProducerID && a.ProducerEpoch == b.ProducerEpoch
}

// write appends the jobs' records to part as one write and replays each job in order.
func (c *Coordinator) write(part *partition, jobs []writeJob) {
	records := jobs[0].records
	if len(jobs) > 1 {
		records = nil
		for _, j := range jobs {
			records = append(records, j.records...)
		}
	}
	// Jobs queued before an unload or Close are still appended (a clean shutdown keeps
	// what was decided); their replay then finds the partition gone and answers
	// NOT_COORDINATOR, which clients retry against the new coordinator.
	var err error
	if len(records) > 0 { // a job without records only waits for the ones before it
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.OffsetCommitTimeout)
		err = c.log.Append(ctx, part.id, records)
		cancel()
	}
	if err != nil {
		c.logger.Warn("append to __consumer_offsets failed", "partition", part.id, "records", len(records), "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && c.mu.partitions[part.id] != part {
		err = ErrNotCoordinator
	}
	for _, j := range jobs {
		part.queued--
		j.replay(err)
		if j.group != nil {
			c.settleGroupLocked(part, j.group)
		}
	}
}

// appendLocked hands records to the partition's writer; replay runs after the append.
// g, when not nil, is the group whose timer the replay may move.
func (c *Coordinator) appendLocked(part *partition, g *group, records []Record, replay func(err error)) {
	if part.writer == nil || c.mu.partitions[part.id] != part {
		replay(ErrNotCoordinator)
		return
	}
	part.queued++
	part.writer.Enqueue(writeJob{group: g, records: records, replay: replay})
}

// answerAfterQueuedWritesLocked calls answer with code once the writes queued on
// groupID's partition are committed (at once when there are none), or with a
// retriable error when one of them failed: an answer read from memory must not act on
// what the log never got.
func (c *Coordinator) answerAfterQueuedWritesLocked(groupID string, code int16, answer func(code int16)) {
	part := c.mu.partitions[c.PartitionFor(groupID)]
	if part == nil || part.queued == 0 {
		answer(code)
		return
	}
	c.appendLocked(part, nil, nil, func(err error) {
		if err != nil {
			code = appendErrorCode(err)
		}
		answer(code)
	})
}

// --- timers -----------------------------------------------------------------------
//
// Every group has at most one armed timer, for its earliest deadline (join phase end,
// pending SyncGroup expiry, a pending member's or a member's session expiry). An
// operation on a group re-arms that group's timer only, so the cost of an operation does
// not grow with the number of groups. Offset expiry runs on one coordinator-wide timer
// every offsets.retention.check.interval.ms.

// settleLocked runs the group's due deadlines and arms its timer for the next one.
func (c *Coordinator) settleLocked(groupID string) {
	part := c.mu.partitions[c.PartitionFor(groupID)]
	if part == nil || part.loading {
		return
	}
	if g := part.groups[groupID]; g != nil {
		c.settleGroupLocked(part, g)
	}
}

func (c *Coordinator) owns(part *partition, g *group) bool {
	return !c.mu.closed && c.mu.partitions[part.id] == part && part.groups[g.id] == g
}

func (c *Coordinator) settleGroupLocked(part *partition, g *group) {
	if !c.owns(part, g) {
		stopGroupTimer(g)
		return
	}
	now := c.clock.Now()
	for range 16 {
		if next := g.nextDeadline(); next.IsZero() || next.After(now) {
			break
		}
		c.tickGroupLocked(part, g, now)
		if !c.owns(part, g) {
			stopGroupTimer(g)
			return
		}
	}
	next := g.nextDeadline()
	if g.timer != nil && next.Equal(g.timerAt) {
		return
	}
	stopGroupTimer(g)
	if next.IsZero() {
		return
	}
	g.timerAt = next
	g.timerSeq++
	seq := g.timerSeq
	g.timer = c.clock.AfterFunc(max(next.Sub(now), 0), func() { c.onGroupTimer(part, g, seq) })
}

func stopGroupTimer(g *group) {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.timerAt = time.Time{}
}

func (c *Coordinator) onGroupTimer(part *partition, g *group, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq != g.timerSeq {
		return // replaced by a later arming
	}
	g.timer = nil
	g.timerAt = time.Time{}
	if c.owns(part, g) {
		c.tickGroupLocked(part, g, c.clock.Now())
		c.settleGroupLocked(part, g)
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// nextDeadline is the group's earliest pending deadline, zero when none.
func (g *group) nextDeadline() time.Time {
	var next time.Time
	if g.state == StatePreparingRebalance {
		next = g.joinDeadline
	}
	next = earliest(next, g.syncDeadline)
	for _, d := range g.pending {
		next = earliest(next, d)
	}
	for _, m := range g.members {
		next = earliest(next, m.heartbeatDeadline)
	}
	return earliest(earliest(next, g.consumerNextDeadline()), g.shareNextDeadline())
}

func due(deadline, now time.Time) bool { return !deadline.IsZero() && !now.Before(deadline) }

// tickGroupLocked runs every deadline of the group that is due at now.
func (c *Coordinator) tickGroupLocked(part *partition, g *group, now time.Time) {
	for id, deadline := range g.pending {
		if due(deadline, now) {
			c.removePendingMemberLocked(part, g, id, now)
		}
	}
	for _, id := range slices.Clone(g.order) {
		if m := g.members[id]; m != nil && due(m.heartbeatDeadline, now) {
			c.expireHeartbeatLocked(part, g, m, now)
		}
	}
	if g.state == StatePreparingRebalance && due(g.joinDeadline, now) {
		c.onJoinDeadlineLocked(part, g, now)
	}
	if due(g.syncDeadline, now) {
		c.onSyncDeadlineLocked(part, g, now)
	}
	c.expireConsumerMembersLocked(part, g, now)
	if c.owns(part, g) {
		c.expireShareMembersLocked(part, g, now)
	}
}

// armExpiryLocked schedules the next offset expiry check.
func (c *Coordinator) armExpiryLocked() {
	if c.mu.closed || c.mu.expiryTimer != nil {
		return
	}
	c.mu.expiryTimer = c.clock.AfterFunc(c.cfg.OffsetsRetentionCheckInterval, c.onExpiryTimer)
}

func (c *Coordinator) onExpiryTimer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.expiryTimer = nil
	if c.mu.closed {
		return
	}
	now := c.clock.Now()
	for _, part := range c.mu.partitions {
		if !part.loading {
			c.expireOffsetsLocked(part, now)
		}
	}
	c.armExpiryLocked()
}
