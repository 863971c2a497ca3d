package txn

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/appendq"
	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/coordkey"
)

// Log is the coordinator's view of the __transaction_state partitions it leads.
type Log interface {
	// Append writes records to partition p of __transaction_state and returns once they
	// are committed (high watermark) — an error otherwise (NOT_COORDINATOR when it
	// wraps ErrNotCoordinator, COORDINATOR_NOT_AVAILABLE else).
	Append(ctx context.Context, partition int32, records []Record) error
	// Load reads all records of partition p from log start to the end, in order.
	Load(ctx context.Context, partition int32, fn func(Record) error) error
}

// Marker is what ends a transaction in each of its partitions: a control record of
// ProducerID at ProducerEpoch, commit or abort, written by the coordinator of
// CoordinatorEpoch.
type Marker struct {
	TransactionalID  string
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TopicPartition
	// TransactionVersion is the producer's transaction version: 2 when its epoch was
	// bumped to end the transaction, so the marker's epoch is above its records'.
	TransactionVersion int8
}

// Markers writes markers to the partitions of transactions (WriteTxnMarkers to each
// partition's leader).
type Markers interface {
	// Write returns once every partition of m holds the marker, or no longer exists,
	// or refused it because a newer producer epoch wrote there; it retries the others
	// until ctx ends. ErrFenced: a partition refused the marker because a newer
	// coordinator wrote one.
	Write(ctx context.Context, m Marker) error
}

// Options configure a Coordinator.
type Options struct {
	Log     Log
	Markers Markers
	// ProducerIDs hands out a producer id never handed out before.
	ProducerIDs func(ctx context.Context) (int64, error)
	// OffsetsPartition returns the __consumer_offsets partition of a group
	// (AddOffsetsToTxn adds it to the transaction).
	OffsetsPartition func(group string) int32
	Clock            clock.Clock  // nil: clock.Real
	Logger           *slog.Logger // nil: slog.Default()
	Config           Config
	// OnEnd, if set, is called (with the coordinator's lock held: it must not call
	// back into the coordinator) each time a transaction completes: committed or not,
	// and how long it lasted. For metrics.
	OnEnd func(commit bool, took time.Duration)
}

// OffsetsTopic is Kafka's internal topic for committed offsets, whose partition a
// transaction that commits offsets includes.
const OffsetsTopic = "__consumer_offsets"

// Coordinator is the transaction coordinator of one node. It is safe for concurrent
// use.
type Coordinator struct {
	log              Log
	markers          Markers
	producerIDs      func(ctx context.Context) (int64, error)
	offsetsPartition func(group string) int32
	clock            clock.Clock
	logger           *slog.Logger
	cfg              Config
	onEnd            func(commit bool, took time.Duration)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		closed       bool
		partitions   map[int32]*partition
		abortTimer   clock.Timer
		expireTimer  clock.Timer
		loadSequence uint64
	}

	// numPartitions is the partition count of the coordinator's topic: the topic's
	// own once it exists (SetNumPartitions), Config.NumPartitions until then.
	numPartitions atomic.Int32
}

// partition is one __transaction_state partition this node coordinates.
type partition struct {
	id               int32
	coordinatorEpoch int32
	loading          bool
	txns             map[string]*entry
	writer           *appendq.Queue[writeJob]
	// ctx ends when the partition is unloaded: marker writes stop.
	ctx    context.Context
	cancel context.CancelFunc
}

// entry is one transactional id of a partition.
type entry struct {
	md Metadata // as last written
	// pending is the last transition being appended (nil when none): meanwhile other
	// requests answer CONCURRENT_TRANSACTIONS, except adds of partitions, which may
	// follow one another (inflight counts them).
	pending  *Metadata
	inflight int
	// sending: the markers of the prepared transaction md are being written.
	sending bool
	// allocating: a producer id is being allocated to abort md's timed out
	// transaction at the last epoch.
	allocating bool
}

// New returns a coordinator that coordinates no partition until LoadPartition.
func New(o Options) *Coordinator {
	c := &Coordinator{
		log:              o.Log,
		markers:          o.Markers,
		producerIDs:      o.ProducerIDs,
		offsetsPartition: o.OffsetsPartition,
		clock:            o.Clock,
		logger:           o.Logger,
		cfg:              o.Config.withDefaults(),
		onEnd:            o.OnEnd,
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

// SetNumPartitions sets the partition count of __transaction_state as the metadata has
// it (n > 0). As in Kafka, the topic's count wins over
// transaction.state.log.num.partitions, which only sizes the topic when it is created: a broker
// restarted with another value must find the state where it was written.
func (c *Coordinator) SetNumPartitions(n int32) {
	if n > 0 {
		c.numPartitions.Store(n)
	}
}

// PartitionFor returns the __transaction_state partition of a transactional id, as
// Kafka computes it: Utils.abs(transactionalId.hashCode()) % the topic's partition
// count (transaction.state.log.num.partitions until the topic exists;
// SetNumPartitions).
func (c *Coordinator) PartitionFor(id string) int32 {
	return coordkey.Partition(id, c.numPartitions.Load())
}

// IsCoordinator reports whether this node serves the transactional id: 0,
// NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) IsCoordinator(id string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, code := c.partitionOfLocked(id)
	return code
}

func (c *Coordinator) partitionOfLocked(id string) (*partition, int16) {
	part := c.mu.partitions[c.PartitionFor(id)]
	switch {
	case part == nil:
		return nil, codeNotCoordinator
	case part.loading:
		return nil, codeLoadInProgress
	}
	return part, 0
}

// PartitionEpoch returns the coordinator epoch partition p is loaded (or loading) at
// here; ok is false when it is not.
func (c *Coordinator) PartitionEpoch(p int32) (epoch int32, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if part := c.mu.partitions[p]; part != nil {
		return part.coordinatorEpoch, true
	}
	return 0, false
}

// LoadPartition makes this node the coordinator of __transaction_state partition p at
// coordinatorEpoch (the partition's leader epoch): it replays the partition from its
// start, then writes the markers of every prepared transaction and completes it (the
// previous coordinator may have stopped half way). Transactional ids of p answer
// COORDINATOR_LOAD_IN_PROGRESS until it returns. Loading a partition already loaded
// at this epoch is a no-op; at another epoch it is reloaded.
func (c *Coordinator) LoadPartition(ctx context.Context, p int32, coordinatorEpoch int32) error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if old := c.mu.partitions[p]; old != nil {
		if old.coordinatorEpoch == coordinatorEpoch {
			c.mu.Unlock()
			return nil
		}
		c.unloadLocked(p)
	}
	part := &partition{id: p, coordinatorEpoch: coordinatorEpoch, loading: true, txns: map[string]*entry{}}
	part.ctx, part.cancel = context.WithCancel(c.ctx)
	c.mu.partitions[p] = part
	c.mu.Unlock()

	txns := map[string]*Metadata{}
	records := 0
	err := c.log.Load(ctx, p, func(r Record) error {
		records++
		id, m, ok, err := decodeRecord(r)
		switch {
		case err != nil:
			c.logger.Warn("skipping corrupt __transaction_state record", "partition", p, "err", err)
		case !ok:
		case m == nil:
			delete(txns, id)
		default:
			txns[id] = m
		}
		return nil
	})

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.partitions[p] != part {
		return fmt.Errorf("%w: __transaction_state-%d unloaded while loading", ErrNotCoordinator, p)
	}
	if err != nil {
		delete(c.mu.partitions, p)
		part.cancel()
		return fmt.Errorf("txn: loading __transaction_state-%d: %w", p, err)
	}
	for id, m := range txns {
		part.txns[id] = &entry{md: *m}
	}
	part.loading = false
	part.writer = c.startWriter(part)
	prepared := 0
	for _, e := range part.txns {
		if e.md.State == StatePrepareCommit || e.md.State == StatePrepareAbort {
			prepared++
			c.sendMarkersLocked(part, e)
		}
	}
	c.armTimersLocked()
	level := slog.LevelInfo
	if records == 0 {
		level = slog.LevelDebug
	}
	c.logger.Log(context.Background(), level, "loaded transaction coordinator partition", "partition", p, "epoch", coordinatorEpoch,
		"transactional_ids", len(part.txns), "prepared", prepared, "records", records)
	return nil
}

// UnloadPartition stops coordinating partition p: its transactional ids answer
// NOT_COORDINATOR, marker writes stop and waiting requests are answered
// NOT_COORDINATOR.
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
	part.cancel()
	if part.writer != nil {
		part.writer.Stop()
	}
	c.logger.Debug("unloaded transaction coordinator partition", "partition", p, "transactional_ids", len(part.txns))
}

// Close unloads every partition and waits for the writers and marker writes to end.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.mu.closed = true
	for p := range c.mu.partitions {
		c.unloadLocked(p)
	}
	for _, t := range []*clock.Timer{&c.mu.abortTimer, &c.mu.expireTimer} {
		if *t != nil {
			(*t).Stop()
			*t = nil
		}
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

func (c *Coordinator) owns(part *partition) bool {
	return !c.mu.closed && c.mu.partitions[part.id] == part
}

// --- writes -----------------------------------------------------------------------

type writeJob struct {
	records []Record
	// replay runs under Coordinator.mu once the append finished: err == nil means the
	// records are committed.
	replay func(err error)
}

// startWriter starts the goroutine that appends part's records in order; jobs queued
// while an append is in flight share the next one.
func (c *Coordinator) startWriter(part *partition) *appendq.Queue[writeJob] {
	return appendq.Start(&c.wg, func(jobs []writeJob) { c.write(part, jobs) })
}

// write appends the jobs' records to part as one write and replays each job in order. Jobs
// queued before an unload are still appended (a clean shutdown keeps what was
// decided); their replay then answers NOT_COORDINATOR.
func (c *Coordinator) write(part *partition, jobs []writeJob) {
	var records []Record
	for _, j := range jobs {
		records = append(records, j.records...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.WriteTimeout)
	err := c.log.Append(ctx, part.id, records)
	cancel()
	if err != nil {
		c.logger.Warn("append to __transaction_state failed", "partition", part.id, "records", len(records), "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && !c.owns(part) {
		err = ErrNotCoordinator
	}
	for _, j := range jobs {
		j.replay(err)
	}
}

// transitLocked writes next for e and, once it is committed, makes it e's state and
// calls done(nil); on failure e is unchanged and done gets the error. Meanwhile e
// answers CONCURRENT_TRANSACTIONS (see entry.pending).
func (c *Coordinator) transitLocked(part *partition, e *entry, next Metadata, done func(err error)) {
	if part.writer == nil || !c.owns(part) {
		done(ErrNotCoordinator)
		return
	}
	e.pending = &next
	e.inflight++
	part.writer.Enqueue(writeJob{records: []Record{encodeRecord(&next)}, replay: func(err error) {
		if e.inflight--; e.inflight == 0 {
			e.pending = nil
		}
		if err == nil && (!c.owns(part) || part.txns[next.TransactionalID] != e) {
			err = ErrNotCoordinator
		}
		if err == nil {
			c.replayLocked(part, e, next)
		}
		done(err)
	}})
}

// replayLocked makes next e's state and starts what follows from it: the markers of a
// prepared transaction.
func (c *Coordinator) replayLocked(part *partition, e *entry, next Metadata) {
	prev := e.md
	e.md = next
	switch next.State {
	case StateDead:
		delete(part.txns, next.TransactionalID)
	case StatePrepareCommit, StatePrepareAbort:
		c.sendMarkersLocked(part, e)
	case StateCompleteCommit, StateCompleteAbort:
		if c.onEnd != nil && !prev.Started.IsZero() && (prev.State == StatePrepareCommit || prev.State == StatePrepareAbort) {
			c.onEnd(next.State == StateCompleteCommit, next.Updated.Sub(prev.Started))
		}
	}
}
