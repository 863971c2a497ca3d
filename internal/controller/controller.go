package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

// Options configure a Controller.
type Options struct {
	// Dir holds the metadata log: <log.dirs[0]>/__cluster_metadata-0.
	Dir string
	// NodeID is this node's id (node.id).
	NodeID int32
	// ClusterID is written to the metadata log by the first leader if the log has
	// none yet.
	ClusterID string
	// Voters maps node id to the host:port of its controller listener. Empty, or
	// only this node, is a single-node quorum.
	Voters map[int32]string
	// Clock drives Raft ticks; nil means clock.Real.
	Clock clock.Clock
	// Logger; nil discards.
	Logger *slog.Logger
	// DefaultNumPartitions (num.partitions) is used when CreateTopics asks for -1;
	// 0 means 1.
	DefaultNumPartitions int32
	// DefaultReplicationFactor (default.replication.factor) is used when
	// CreateTopics asks for -1; 0 means 1.
	DefaultReplicationFactor int16
	// ValidateTopicConfig checks one topic config; nil accepts everything.
	ValidateTopicConfig func(name, value string) error

	// Transport carries Raft messages to other voters; required when there are
	// other voters, ignored otherwise.
	Transport Transport
	// SnapshotEvery is how many applied entries trigger a snapshot of the image and
	// compaction of the log; 0 means 10,000.
	SnapshotEvery uint64
	// TickInterval is the Raft tick; 0 means 100ms. Elections time out after 10
	// ticks, heartbeats go every tick.
	TickInterval time.Duration
}

const (
	defaultSnapshotEvery = 10_000
	defaultTickInterval  = 100 * time.Millisecond
	electionTicks        = 10
	heartbeatTicks       = 1
)

// Controller is the metadata quorum member of one node. Its methods are safe for
// concurrent use.
type Controller struct {
	opts   Options
	logger *slog.Logger
	raftID uint64
	single bool // the only voter

	image  atomic.Pointer[metadata.Image]
	leader atomic.Int32 // node id of the current Raft leader, -1 if unknown

	proposeCh chan *proposal
	recvCh    chan *pb.Message
	tickCh    chan struct{}
	cmdCh     chan func()
	stopCh    chan struct{}
	loopDone  chan struct{} // closed when the raft loop exits
	caughtUp  chan struct{} // closed once the image reached the commit index after start
	wg        sync.WaitGroup

	notify notifier

	// Owned by the command goroutine.
	proposalSeq    uint64
	placementStart int

	lifecycle struct {
		sync.Mutex
		started, closed bool
		tick            clock.Timer
	}
	loopErr atomic.Pointer[error] // why the raft loop stopped, if it failed
}

// New validates o and returns a controller; Start brings it up.
func New(o Options) (*Controller, error) {
	if o.Dir == "" {
		return nil, errors.New("controller: Dir is required")
	}
	if o.NodeID < 0 {
		return nil, fmt.Errorf("controller: invalid node id %d", o.NodeID)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.DefaultNumPartitions <= 0 {
		o.DefaultNumPartitions = 1
	}
	if o.DefaultReplicationFactor <= 0 {
		o.DefaultReplicationFactor = 1
	}
	if o.ValidateTopicConfig == nil {
		o.ValidateTopicConfig = func(string, string) error { return nil }
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = defaultSnapshotEvery
	}
	if o.TickInterval <= 0 {
		o.TickInterval = defaultTickInterval
	}
	single := len(o.Voters) == 0
	if !single {
		if _, ok := o.Voters[o.NodeID]; !ok {
			return nil, fmt.Errorf("controller: node %d is not among the voters", o.NodeID)
		}
		single = len(o.Voters) == 1
	}
	if !single && o.Transport == nil {
		return nil, errors.New("controller: a quorum of several voters needs a Transport")
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c := &Controller{
		opts:           o,
		logger:         o.Logger.With("node", o.NodeID),
		raftID:         RaftID(o.NodeID),
		single:         single,
		proposeCh:      make(chan *proposal),
		recvCh:         make(chan *pb.Message, 256),
		tickCh:         make(chan struct{}, 1),
		cmdCh:          make(chan func()),
		stopCh:         make(chan struct{}),
		loopDone:       make(chan struct{}),
		caughtUp:       make(chan struct{}),
		placementStart: rand.IntN(1 << 16),
	}
	c.leader.Store(-1)
	c.image.Store(metadata.EmptyImage())
	c.notify.init()
	return c, nil
}

// Start replays the persisted snapshot and log into the image, starts Raft and
// returns once the image has caught up with the quorum's commit index (for a single
// voter: once it has elected itself and applied everything it had). It fails if ctx
// ends first. Call Close after a failed Start too.
func (c *Controller) Start(ctx context.Context) error {
	c.lifecycle.Lock()
	if c.lifecycle.started || c.lifecycle.closed {
		c.lifecycle.Unlock()
		return errors.New("controller: Start called twice or after Close")
	}
	c.lifecycle.started = true
	c.lifecycle.Unlock()

	loop, err := c.newRaftLoop()
	if err != nil {
		close(c.loopDone)
		return err
	}
	c.wg.Add(3)
	go func() { defer c.wg.Done(); c.notify.run() }()
	go func() { defer c.wg.Done(); c.runCommands() }()
	go func() { defer c.wg.Done(); loop.run() }()
	c.scheduleTick()

	select {
	case <-c.caughtUp:
	case <-c.loopDone:
		return c.stoppedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
	c.logger.Info("metadata image caught up", "offset", c.Image().Offset(), "leader", c.Leader())

	img := c.Image()
	switch {
	case c.opts.ClusterID == "":
	case img.ClusterID() == "" && c.Leader() == c.opts.NodeID:
		_, err := run(ctx, c, func(ctx context.Context) (struct{}, error) {
			if c.Image().ClusterID() != "" {
				return struct{}{}, nil
			}
			return struct{}{}, c.propose(ctx, []metadata.Record{metadata.ClusterRecord{ClusterID: c.opts.ClusterID}})
		})
		switch {
		case errors.Is(err, ErrNotController):
			// Leadership moved meanwhile; the next leader records it.
			c.logger.Warn("could not record the cluster id", "error", err)
		case err != nil:
			return fmt.Errorf("controller: record cluster id: %w", err)
		}
	case img.ClusterID() != "" && img.ClusterID() != c.opts.ClusterID:
		c.logger.Warn("cluster id in the metadata log differs from the configured one",
			"log_cluster_id", img.ClusterID(), "cluster_id", c.opts.ClusterID)
	}
	return nil
}

// Close stops Raft and the command loop, fails pending calls with ErrClosed and
// closes the log. Subscribers are not called after Close returns.
func (c *Controller) Close() error {
	c.lifecycle.Lock()
	if c.lifecycle.closed {
		c.lifecycle.Unlock()
		return nil
	}
	c.lifecycle.closed = true
	started := c.lifecycle.started
	if c.lifecycle.tick != nil {
		c.lifecycle.tick.Stop()
	}
	c.lifecycle.Unlock()
	close(c.stopCh)
	if !started {
		return nil
	}
	<-c.loopDone
	c.notify.stop()
	c.wg.Wait()
	if errp := c.loopErr.Load(); errp != nil && !errors.Is(*errp, ErrClosed) {
		return *errp
	}
	return nil
}

// Image returns the latest applied metadata image. It never blocks.
func (c *Controller) Image() *metadata.Image { return c.image.Load() }

// Subscribe registers fn to be called after each apply with the image before and
// after it. Calls come in log order from a single goroutine, before the controller
// call that caused the change returns. fn must not block on this controller's
// methods (other than Image and Leader): that would deadlock.
func (c *Controller) Subscribe(fn func(prev, next *metadata.Image)) {
	c.notify.subscribe(fn)
}

// Leader returns the node id of the active controller, -1 if none is known.
func (c *Controller) Leader() int32 { return c.leader.Load() }

// Step hands the controller a Raft message received from another voter (the
// receiving half of a Transport).
func (c *Controller) Step(ctx context.Context, m *pb.Message) error {
	select {
	case c.recvCh <- m:
		return nil
	case <-c.loopDone:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Controller) scheduleTick() {
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	if c.lifecycle.closed {
		return
	}
	c.lifecycle.tick = c.opts.Clock.AfterFunc(c.opts.TickInterval, func() {
		select {
		case c.tickCh <- struct{}{}:
		default:
		}
		c.scheduleTick()
	})
}

func (c *Controller) stoppedErr() error {
	if errp := c.loopErr.Load(); errp != nil {
		return *errp
	}
	return ErrClosed
}

// runCommands is the command goroutine: every state-changing call runs here, one at
// a time, so each validates against an image that includes every earlier command.
func (c *Controller) runCommands() {
	for {
		select {
		case fn := <-c.cmdCh:
			fn()
		case <-c.loopDone:
			return
		}
	}
}

// run executes fn on the command goroutine and returns its result. If ctx ends
// first, run returns ctx.Err(); fn may still complete.
func run[T any](ctx context.Context, c *Controller, fn func(ctx context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	var zero T
	done := make(chan result, 1)
	cmd := func() {
		if ctx.Err() != nil {
			done <- result{zero, ctx.Err()}
			return
		}
		v, err := fn(ctx)
		done <- result{v, err}
	}
	select {
	case c.cmdCh <- cmd:
	case <-c.loopDone:
		return zero, c.stoppedErr()
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case r := <-done:
		return r.v, r.err
	case <-c.loopDone:
		return zero, c.stoppedErr()
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// requireLeader is checked by every command that writes.
func (c *Controller) requireLeader() error {
	if l := c.Leader(); l != c.opts.NodeID {
		return fmt.Errorf("%w: the active controller is %d", ErrNotController, l)
	}
	return nil
}

// proposal is one metadata log entry on its way through Raft.
type proposal struct {
	seq  uint64
	data []byte
	done chan error // buffered; receives the outcome once applied (or dropped)
}

// propose appends recs as one entry and waits until it is applied here. It runs on
// the command goroutine.
func (c *Controller) propose(ctx context.Context, recs []metadata.Record) error {
	return c.proposeAll(ctx, [][]metadata.Record{recs})[0]
}

// proposeAll appends one entry per element of batches, then waits for all of them.
func (c *Controller) proposeAll(ctx context.Context, batches [][]metadata.Record) []error {
	errs := make([]error, len(batches))
	props := make([]*proposal, len(batches))
	for i, recs := range batches {
		c.proposalSeq++
		p := &proposal{seq: c.proposalSeq, done: make(chan error, 1)}
		p.data = encodeProposal(c.opts.NodeID, p.seq, recs)
		select {
		case c.proposeCh <- p:
			props[i] = p
		case <-c.loopDone:
			errs[i] = c.stoppedErr()
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
	}
	for i, p := range props {
		if p == nil {
			continue
		}
		select {
		case errs[i] = <-p.done:
		case <-c.loopDone:
			errs[i] = c.stoppedErr()
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
	}
	return errs
}

// newRaftConfig is shared by start-up and tests.
func (c *Controller) newRaftConfig(storage *raft.MemoryStorage, applied uint64) *raft.Config {
	return &raft.Config{
		ID:              c.raftID,
		ElectionTick:    electionTicks,
		HeartbeatTick:   heartbeatTicks,
		Storage:         storage,
		Applied:         applied,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		CheckQuorum:     true,
		PreVote:         true,
		Logger:          raftLogger{c.logger.With("component", "raft")},
	}
}
