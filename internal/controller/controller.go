package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

// Options configure a Controller.
type Options struct {
	// Dir holds the metadata log: <log.dirs[0]>/__cluster_metadata-0.
	Dir string
	// NodeID is this node's id (node.id).
	NodeID int32
	// ClusterID is the cluster id this node has stored (meta.properties), or "" for
	// a node that has none yet. The first active controller of a new quorum writes
	// its own stored id, or a fresh random one, to the metadata log; Start fails
	// with ErrInconsistentClusterID if the log's id differs from a stored one.
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
	// ValidateTopicConfig checks one topic config; its error names the config (the
	// controller passes it on as the message). nil accepts everything.
	ValidateTopicConfig func(name, value string) error
	// ValidateGroupConfigs checks a GROUP resource's configs as a change leaves them
	// (next), changed naming the configs set or deleted; nil: config.ValidateGroupConfigs
	// with Kafka's default broker properties.
	ValidateGroupConfigs func(next map[string]string, changed []string) error
	// ValidateBrokerConfigs checks a BROKER resource's dynamic configs as a change
	// leaves them (next), changed naming the configs set or deleted; its error is
	// answered INVALID_REQUEST, as Kafka does. nil accepts everything.
	ValidateBrokerConfigs func(next map[string]string, changed []string) error

	// Transport carries Raft messages to other voters; required when there are
	// other voters, ignored otherwise.
	Transport Transport
	// SnapshotEvery is how many applied entries trigger a snapshot of the image and
	// compaction of the log; 0 means 10,000.
	SnapshotEvery uint64
	// TickInterval is the Raft tick; 0 means 100ms. Heartbeats go every tick.
	TickInterval time.Duration
	// ElectionTimeout (controller.quorum.election.timeout.ms) is how long a
	// follower waits without hearing from a leader before it campaigns, and how
	// long a leader keeps leading without hearing from a majority (check-quorum);
	// 0 means 1s. Raft randomises it between one and two times this.
	ElectionTimeout time.Duration

	// SessionTimeout (broker.session.timeout.ms) fences a broker whose heartbeats
	// stopped for this long; 0 means 9s.
	SessionTimeout time.Duration
	// UncleanLeaderElection is unclean.leader.election.enable, the default of the
	// topic config of the same name.
	UncleanLeaderElection bool
	// AutoLeaderRebalance (auto.leader.rebalance.enable) moves leaderships back to
	// preferred replicas every LeaderImbalanceCheckInterval for the brokers whose
	// share of partitions led by others is above LeaderImbalancePerBroker percent.
	AutoLeaderRebalance          bool
	LeaderImbalanceCheckInterval time.Duration // 0 means 300s
	LeaderImbalancePerBroker     int           // 0 means 10

	// BootstrapScram are credentials written when this node becomes the active
	// controller and the user has none for the mechanism yet (samsa serve
	// --add-scram): how the first user of a SCRAM-only cluster is created.
	BootstrapScram []BootstrapScram

	// Tokens configures delegation tokens.
	Tokens TokenOptions
}

const (
	defaultSnapshotEvery   = 10_000
	defaultTickInterval    = 100 * time.Millisecond
	defaultElectionTimeout = time.Second
	defaultSessionTimeout  = 9 * time.Second
	heartbeatTicks         = 1
	// maintenanceProposalTimeout bounds one proposal of the periodic work, so that
	// a controller that lost its quorum does not wedge its command goroutine.
	maintenanceProposalTimeout = 5 * time.Second
)

// Controller is the metadata quorum member of one node. Its methods are safe for
// concurrent use.
type Controller struct {
	opts   Options
	logger *slog.Logger
	raftID uint64
	single bool // the only voter

	image atomic.Pointer[metadata.Image]
	// storage is the raft log in memory (safe for concurrent use), for observers'
	// fetches; nil before Start.
	storage atomic.Pointer[raft.MemoryStorage]
	leader  atomic.Int32 // node id of the current Raft leader, -1 if unknown

	proposeCh     chan *proposal
	recvCh        chan *pb.Message
	loopFnCh      chan func(*raftLoop) // run on the raft loop goroutine
	tickCh        chan struct{}
	cmdCh         chan func()
	maintenanceCh chan struct{}
	activatedCh   chan struct{}
	stopCh        chan struct{}
	loopDone      chan struct{} // closed when the raft loop exits
	caughtUp      chan struct{} // closed once the image reached the commit index after start
	wg            sync.WaitGroup

	notify notifier
	// activeTerm is the Raft term in which this node became the active controller
	// (leader, with an entry of its own term applied), 0 when it is not.
	activeTerm atomic.Uint64
	activation struct {
		sync.Mutex
		ch chan struct{} // closed while this node is the active controller
	}
	raftState atomic.Int32 // raft.StateType
	observers observerTable
	refused   sync.Map // node id → true: peers of another cluster already logged

	// Owned by the command goroutine.
	proposalSeq    uint64
	placementStart int
	sessions       *sessions
	sessionsTerm   uint64 // the activeTerm sessions were reset for
	scramTerm      uint64 // the activeTerm the bootstrap SCRAM credentials were checked in
	lastRebalance  time.Time
	lastTokenSweep time.Time // when maintain last removed expired delegation tokens

	lifecycle struct {
		sync.Mutex
		started, closed bool
		tick            clock.Timer
		maintenance     clock.Timer
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
	if o.ValidateBrokerConfigs == nil {
		o.ValidateBrokerConfigs = func(map[string]string, []string) error { return nil }
	}
	if o.ValidateTopicConfig == nil {
		o.ValidateTopicConfig = func(string, string) error { return nil }
	}
	if o.ValidateGroupConfigs == nil {
		defaults := config.Default()
		o.ValidateGroupConfigs = func(next map[string]string, changed []string) error {
			return config.ValidateGroupConfigs(defaults, next, changed)
		}
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = defaultSnapshotEvery
	}
	if o.TickInterval <= 0 {
		o.TickInterval = defaultTickInterval
	}
	if o.ElectionTimeout <= 0 {
		o.ElectionTimeout = defaultElectionTimeout
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = defaultSessionTimeout
	}
	if o.LeaderImbalanceCheckInterval <= 0 {
		o.LeaderImbalanceCheckInterval = 300 * time.Second
	}
	if o.LeaderImbalancePerBroker <= 0 {
		o.LeaderImbalancePerBroker = 10
	}
	o.Tokens.defaults()
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
		loopFnCh:       make(chan func(*raftLoop), 64),
		tickCh:         make(chan struct{}, 1),
		cmdCh:          make(chan func()),
		maintenanceCh:  make(chan struct{}, 1),
		activatedCh:    make(chan struct{}, 1),
		stopCh:         make(chan struct{}),
		loopDone:       make(chan struct{}),
		caughtUp:       make(chan struct{}),
		placementStart: rand.IntN(1 << 16),
		sessions:       newSessions(o.SessionTimeout),
	}
	c.observers.init()
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
	c.scheduleMaintenance()
	return c.awaitClusterID(ctx)
}

// awaitClusterID waits until the metadata log holds the cluster id (the first active
// controller writes it) and checks it against the one this node has stored.
func (c *Controller) awaitClusterID(ctx context.Context) error {
	if c.Image().ClusterID() == "" {
		c.logger.Info("waiting for the active controller to record the cluster id")
	}
	agreed := make(chan struct{})
	var once sync.Once
	c.Subscribe(func(_, next *metadata.Image) {
		if next.ClusterID() != "" {
			once.Do(func() { close(agreed) })
		}
	})
	if c.Image().ClusterID() == "" {
		select {
		case <-agreed:
		case <-c.loopDone:
			return c.stoppedErr()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if got := c.Image().ClusterID(); c.opts.ClusterID != "" && got != c.opts.ClusterID {
		return fmt.Errorf("%w: this node's stored cluster id is %s but the metadata quorum's is %s: "+
			"the log directories belong to another cluster (or were copied); give this node empty log.dirs to join cluster %s",
			ErrInconsistentClusterID, c.opts.ClusterID, got, got)
	}
	return nil
}

// Close stops Raft and the command loop, fails pending calls with ErrClosed and
// closes the log. Subscribers are not called after Close returns.
func (c *Controller) Close() error {
	c.handOverLeadership()
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
	if c.lifecycle.maintenance != nil {
		c.lifecycle.maintenance.Stop()
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

// Stopped is closed when the metadata log stops: after Close, or on an error
// (StopErr).
func (c *Controller) Stopped() <-chan struct{} { return c.loopDone }

// StopErr is why the metadata log stopped when it failed (a write to its directory
// failed, for one); nil while it runs and after Close.
func (c *Controller) StopErr() error {
	if errp := c.loopErr.Load(); errp != nil && !errors.Is(*errp, ErrClosed) {
		return *errp
	}
	return nil
}

// handOverLeadership makes the most up-to-date other voter the leader when this node,
// the active controller, closes, so that the quorum has a leader again within a
// round trip instead of an election timeout. It waits at most one election timeout.
func (c *Controller) handOverLeadership() {
	c.lifecycle.Lock()
	running := c.lifecycle.started && !c.lifecycle.closed
	c.lifecycle.Unlock()
	if !running || c.single || !c.Active() {
		return
	}
	c.onLoop(func(l *raftLoop) {
		st := l.node.Status()
		var best uint64
		var bestMatch uint64
		for id, pr := range st.Progress {
			if id != c.raftID && (best == 0 || pr.Match > bestMatch) {
				best, bestMatch = id, pr.Match
			}
		}
		if best != 0 {
			l.logger.Info("handing the metadata quorum leadership over before closing", "to", NodeIDOf(best))
			l.node.TransferLeader(best)
		}
	})
	deadline := time.Now().Add(c.opts.ElectionTimeout)
	for c.Leader() == c.opts.NodeID && time.Now().Before(deadline) {
		select {
		case <-c.loopDone:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
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
// The periodic work (fencing brokers whose session expired, unclean elections,
// leader rebalancing) and the first steps of a new active controller run here too.
func (c *Controller) runCommands() {
	for {
		select {
		case fn := <-c.cmdCh:
			fn()
		case <-c.activatedCh:
			c.maintain()
		case <-c.maintenanceCh:
			c.maintain()
		case <-c.loopDone:
			return
		}
	}
}

// scheduleMaintenance arms the timer of the periodic work. The callback only
// signals the command goroutine: with a fake clock it runs inside Advance.
func (c *Controller) scheduleMaintenance() {
	interval := max(50*time.Millisecond, min(c.opts.SessionTimeout/8, 500*time.Millisecond))
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	if c.lifecycle.closed {
		return
	}
	c.lifecycle.maintenance = c.opts.Clock.AfterFunc(interval, func() {
		select {
		case c.maintenanceCh <- struct{}{}:
		default:
		}
		c.scheduleMaintenance()
	})
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

// requireLeader is checked by every command that writes: this node must be the
// active controller, that is the Raft leader with an entry of its own term applied
// (so that its image holds everything earlier leaders committed). On the command
// goroutine it also starts the sessions over when this node has just become active.
func (c *Controller) requireLeader() error {
	if c.activeTerm.Load() == 0 && c.Leader() == c.opts.NodeID {
		// Elected, not yet active: a write now would only be refused.
		c.waitActive(c.opts.ElectionTimeout)
	}
	term := c.activeTerm.Load()
	if term == 0 || c.Leader() != c.opts.NodeID {
		return fmt.Errorf("%w: the active controller is %d", ErrNotController, c.Leader())
	}
	if c.sessionsTerm != term {
		c.sessionsTerm = term
		c.sessions.reset(c.Image(), c.opts.Clock.Now())
		c.lastRebalance = c.opts.Clock.Now()
	}
	return nil
}

// RaftState is this node's role in the metadata quorum: leader, follower,
// candidate or pre-candidate.
func (c *Controller) RaftState() string {
	switch raft.StateType(c.raftState.Load()) {
	case raft.StateLeader:
		return "leader"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "pre-candidate"
	}
	return "follower"
}

// setActive records that this node became (or stopped being) the active controller.
func (c *Controller) setActive(term uint64) {
	c.activeTerm.Store(term)
	c.activation.Lock()
	defer c.activation.Unlock()
	if c.activation.ch == nil {
		c.activation.ch = make(chan struct{})
	}
	select {
	case <-c.activation.ch:
		if term == 0 {
			c.activation.ch = make(chan struct{})
		}
	default:
		if term != 0 {
			close(c.activation.ch)
		}
	}
}

// waitActive waits up to d for this node to become the active controller.
func (c *Controller) waitActive(d time.Duration) {
	c.activation.Lock()
	if c.activation.ch == nil {
		c.activation.ch = make(chan struct{})
	}
	ch := c.activation.ch
	c.activation.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-c.loopDone:
	}
}

// Active reports whether this node is the active controller.
func (c *Controller) Active() bool {
	return c.activeTerm.Load() != 0 && c.Leader() == c.opts.NodeID
}

// uncleanAllowed is the effective unclean.leader.election.enable of a topic: its
// override, else the dynamic config of this controller's node, else the cluster-wide
// dynamic default, else the static property (Kafka's controller reads it so).
func (c *Controller) uncleanAllowed(t *metadata.Topic) bool {
	const name = "unclean.leader.election.enable"
	if v, ok := t.Configs[name]; ok {
		return strings.EqualFold(strings.TrimSpace(v), "true")
	}
	img := c.Image()
	for _, res := range []string{strconv.Itoa(int(c.opts.NodeID)), ""} {
		if v, ok := img.BrokerConfigs(res)[name]; ok {
			return strings.EqualFold(strings.TrimSpace(v), "true")
		}
	}
	return c.opts.UncleanLeaderElection
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
			// The entry is in the Raft log and may still commit. Until it has, or
			// has failed with the leadership, the image lacks it, and a command
			// computing changes from that image could undo part of it when both
			// apply (a partition led by a replica its ISR no longer holds). So
			// the command goroutine waits for the outcome (bounded: a leader that
			// cannot commit loses its quorum within an election timeout); the
			// caller of run has its answer (the context's error) already.
			select {
			case errs[i] = <-p.done:
			case <-c.loopDone:
				errs[i] = c.stoppedErr()
			}
		}
	}
	return errs
}

// newRaftConfig is shared by start-up and tests.
func (c *Controller) newRaftConfig(storage *raft.MemoryStorage, applied uint64) *raft.Config {
	return &raft.Config{
		ID:              c.raftID,
		ElectionTick:    max(2, int(c.opts.ElectionTimeout/c.opts.TickInterval)),
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
