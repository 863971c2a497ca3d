package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/bufpool"
	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/metrics"
	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/share"
	"github.com/samsa-streaming/samsa/internal/storage"
	"github.com/samsa-streaming/samsa/internal/txn"
)

// Options configure a Broker.
type Options struct {
	Config *config.Broker
	Clock  clock.Clock
	Logger *slog.Logger
	// Metrics records broker metrics; nil records nothing.
	Metrics *metrics.Metrics
	// FS opens segment files; nil is the real file system (tests inject I/O errors).
	FS storage.FS
	// AuthorizerLogger receives the authorization log (kafka.authorizer.logger);
	// nil uses Logger.
	AuthorizerLogger *slog.Logger
	// BootstrapScram are SCRAM credentials to create when missing (samsa serve
	// --add-scram).
	BootstrapScram []controller.BootstrapScram
}

// Broker is one Samsa node: its metadata (a Controller when process.roles has
// controller, else an Observer), the controller API surface it serves on its
// controller listener, and — when process.roles has broker — the Kafka API surface
// for clients, its partitions, and its lifecycle towards the active controller
// (registration, heartbeats, controlled shutdown).
type Broker struct {
	cfg       *config.Broker // static: the file and --override (see effectiveConfig)
	dynamic   dynamicConfig
	clock     clock.Clock
	logger    *slog.Logger
	metrics   *metrics.Metrics
	nodeID    int32
	isBroker  bool
	clusterID string // set by Start once the quorum agreed on it

	logs       *storage.Manager
	controller *controller.Controller // nil unless this node is a controller
	transport  *controller.NetTransport
	observer   *controller.Observer // nil unless this node is a broker only
	meta       controller.Metadata
	channel    *controller.Channel
	replicas   *replica.Manager
	fetchers   *replica.FetcherManager // follower fetchers (replication.go)
	// replicaFrames holds the buffers follower fetch responses are read into.
	replicaFrames bufpool.Pool
	// interBroker secures the connections to other brokers' inter-broker listener.
	interBroker peer.Security
	// authz is the ACL authorizer (authorize.go); nil allows everything.
	authz *auth.Authorizer
	// quotas are the client quotas (quotas.go).
	quotas *auth.Quotas
	// ipRates are the IP entities' connection_creation_rate quotas (KIP-612).
	ipRates auth.IPConnectionRates
	// bootstrapScram goes to the controller (Options.BootstrapScram).
	bootstrapScram []controller.BootstrapScram
	shareReads     bufpool.Pool // share-group acquisitions read the log through these
	// shareRecordSizes is, per topic partition (whatever the share group: one entry
	// per partition, not per group), the bytes a record of its log took at its last
	// share acquisition (share_fetch.go): the next one's first read is sized from it.
	shareRecordSizes sync.Map      // shareLogKey → int
	isrWake          chan struct{} // nudges the ISR loop
	// isrWaitLogged is when the ISR loop last said why an ISR change waits, by
	// partition and follower (logISRWait); only that loop uses it.
	isrWaitLogged map[isrWaitKey]time.Time
	failed        chan error // the error the node cannot go on after (Failed)
	failOnce      sync.Once
	groups        *group.Coordinator
	txns          *txn.Coordinator
	peers         brokerPeers // connections to other brokers (transactions, share state)
	producers     producerIDs
	lifecycle     lifecycle
	imageWatch    imageWatch
	// acted is the latest image this node has acted on — its partitions opened,
	// led or followed, deleted (reconcile) — once it serves as a broker; nil before
	// (and on a controller-only node). awaitImage reads it.
	acted atomic.Pointer[metadata.Image]

	// Issue 14: the topics the group coordinator assigns, incremental fetch sessions,
	// share groups' partition state and share sessions.
	groupTops         groupTopics
	fetchSessions     fetchSessions
	shares            *share.Manager
	shareState        *shareStateLog // the share coordinator of the state partitions led here
	shareStore        *shareStore    // share state wherever its coordinator is
	groupAdmin        groupLocks     // share group admin operations, one at a time per group
	shareSessionCache shareSessions

	// reconcileMu serialises applying metadata images to local partitions.
	reconcileMu sync.Mutex
	// unopened holds the partitions the last reconcile could not open because their
	// log directory is offline (replicas_offline.go).
	unopened struct {
		sync.Mutex
		m map[replica.Key]bool
	}

	// autoCreating holds the topics a Metadata request's auto-creation is creating
	// (metadata.go): later requests do not send them to the controller again.
	autoCreating struct {
		sync.Mutex
		m map[string]bool
	}

	// serving ends when the broker stops serving requests (StopServing): the waits of
	// requests still in progress (for replicas, coordinators, the controller) end
	// with it.
	serving     context.Context
	stopServing context.CancelFunc
	// later runs the functions of answerLater.
	later laterWorkers

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// beforeShareRead, when set (by tests, while no share fetch runs), runs before
	// each log read of a share acquisition, under the share partition's hold.
	beforeShareRead func(k share.Key, from int64)
}

// New opens the node's storage and builds its metadata quorum member (or observer);
// Start brings them up.
func New(o Options) (*Broker, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cfg := o.Config
	serving, stopServing := context.WithCancel(context.Background())
	b := &Broker{
		serving:     serving,
		stopServing: stopServing,
		later:       laterWorkers{work: make(chan func()), done: serving.Done()},
		cfg:         cfg,
		clock:       o.Clock,
		logger:      o.Logger,
		metrics:     o.Metrics,
		nodeID:      cfg.NodeID,
		isBroker:    cfg.HasRole("broker"),
		replicas:    replica.NewManager(cfg.NodeID),
	}
	if o.AuthorizerLogger == nil {
		o.AuthorizerLogger = o.Logger
	}
	b.authz = newAuthorizer(cfg, o.AuthorizerLogger)
	b.groupTops.authorizing = b.authz != nil
	b.quotas = auth.NewQuotas(int(cfg.Security.QuotaWindowNum), time.Duration(cfg.Security.QuotaWindowSizeSeconds)*time.Second)
	b.quotas.SetWindow(auth.ControllerMutationRate, int(cfg.Security.ControllerQuotaWindowNum), time.Duration(cfg.Security.ControllerQuotaWindowSizeSeconds)*time.Second)
	b.bootstrapScram = o.BootstrapScram
	b.shareSessionCache.max = int(cfg.GroupShareMaxShareSessions)
	logs, err := storage.NewManager(storage.ManagerOptions{
		Dirs:                   cfg.LogDirs,
		Clock:                  o.Clock,
		Logger:                 o.Logger,
		RetentionCheckInterval: time.Duration(cfg.LogRetentionCheckIntervalMs) * time.Millisecond,
		FlushCheckInterval:     time.Duration(cfg.LogFlushSchedulerIntervalMs) * time.Millisecond,
		FS:                     o.FS,
		HighWatermark:          b.highWatermarkOf,
	})
	if err != nil {
		return nil, err
	}
	b.logs = logs
	if voters, _ := cfg.QuorumVoters(); b.isBroker && len(voters) > 0 {
		if b.interBroker, err = peerSecurity(cfg, cfg.InterBrokerListenerName, cfg.Security.SaslMechanismInterBroker, o.Logger); err != nil {
			logs.Close()
			return nil, err
		}
	}
	storedClusterID, err := logs.ReadMetaProperties(cfg.NodeID)
	if err != nil {
		logs.Close()
		return nil, err
	}
	if err := b.newMetadata(storedClusterID); err != nil {
		logs.Close()
		return nil, err
	}
	b.producers.fetchBlock, b.producers.logger = b.fetchProducerIDs, b.logger
	b.fetchSessions.init(int(cfg.MaxIncrementalFetchSessionCacheSlots))
	b.lifecycle.init()
	b.fetchers = b.newFetchers()
	b.isrWake = make(chan struct{}, 1)
	b.failed = make(chan error, 1)
	b.groups = group.New(group.Options{
		Log:    offsetsLog{b},
		Clock:  o.Clock,
		Logger: o.Logger.With("component", "group"),
		Config: groupConfig(cfg),
		TopicExists: func(topic string, partition int32) bool {
			t, ok := b.image().Topic(topic)
			return ok && partition >= 0 && int(partition) < len(t.Partitions)
		},
		OnRebalance:    o.Metrics.Rebalance,
		Topics:         func() *group.Topics { return b.groupTops.get(b.image()) },
		Timeouts:       b.groupTimeouts,
		InitShareState: b.initNewShareState,
	})
	b.shareState = newShareStateLog(b)
	b.shareStore = newShareStore(b)
	b.shares = share.NewManager(share.Options{
		Store: b.shareStore, Clock: o.Clock, Logger: o.Logger.With("component", "share"),
		Config: b.shareConfig, InitialOffset: b.shareInitialOffset, LeaderEpoch: b.shareLeaderEpoch,
		WriteTimeout: shareStoreTimeout, Context: serving,
		LocksExpired: func(_ share.Key, records int) { o.Metrics.ShareLocksExpired(records) },
	})
	b.peers.b = b
	b.txns = b.newTxnCoordinator()
	return b, nil
}

// newMetadata builds the controller (and its Raft transport) or the observer, and
// the channel to the active controller.
func (b *Broker) newMetadata(storedClusterID string) error {
	cfg := b.cfg
	voters, err := cfg.QuorumVoters()
	if err != nil {
		return err
	}
	ms := func(v int32) time.Duration { return time.Duration(v) * time.Millisecond }
	logger := b.logger.With("component", "controller")
	var ctrlSecurity peer.Security
	if len(voters) > 1 || !cfg.HasRole("controller") {
		if ctrlSecurity, err = peerSecurity(cfg, cfg.ControllerListenerNames[0], cfg.Security.SaslMechanismController, logger); err != nil {
			return err
		}
	}
	if cfg.HasRole("controller") {
		if len(voters) > 1 {
			b.transport = controller.NewNetTransport(controller.NetTransportOptions{
				NodeID: cfg.NodeID, Voters: voters, Logger: logger, Security: ctrlSecurity,
				RequestTimeout: ms(cfg.ControllerQuorumRequestTimeoutMs), RetryBackoff: ms(cfg.ControllerQuorumRetryBackoffMs),
			})
		}
		opts := controller.Options{
			Dir:                      filepath.Join(cfg.LogDirs[0], "__cluster_metadata-0"),
			NodeID:                   cfg.NodeID,
			ClusterID:                storedClusterID,
			Voters:                   voters,
			Clock:                    b.clock,
			Logger:                   logger,
			DefaultNumPartitions:     cfg.NumPartitions,
			DefaultReplicationFactor: cfg.DefaultReplicationFactor,
			ValidateTopicConfig:      config.ValidateTopicConfig,
			ValidateGroupConfigs: func(next map[string]string, changed []string) error {
				return config.ValidateGroupConfigs(cfg, next, changed)
			},
			// Each value against its property, then the whole against this node's
			// static properties (cross-property conflicts), as Kafka validates the
			// configuration a change would leave.
			ValidateBrokerConfigs: func(next map[string]string, changed []string) error {
				if err := config.ValidateDynamicBrokerConfigs(next, changed); err != nil {
					return err
				}
				_, err := cfg.WithDynamic(next, nil)
				return err
			},
			ElectionTimeout:              ms(cfg.ControllerQuorumElectionTimeoutMs),
			SessionTimeout:               ms(cfg.BrokerSessionTimeoutMs),
			UncleanLeaderElection:        cfg.UncleanLeaderElectionEnable,
			AutoLeaderRebalance:          cfg.AutoLeaderRebalanceEnable,
			LeaderImbalanceCheckInterval: time.Duration(cfg.LeaderImbalanceCheckIntervalSeconds) * time.Second,
			LeaderImbalancePerBroker:     int(cfg.LeaderImbalancePerBrokerPercentage),
			BootstrapScram:               b.bootstrapScram,
			Tokens: controller.TokenOptions{Secret: cfg.DelegationTokenKey(),
				MaxLifetime:   time.Duration(cfg.Security.DelegationTokenMaxLifetimeMs) * time.Millisecond,
				ExpiryTime:    time.Duration(cfg.Security.DelegationTokenExpiryTimeMs) * time.Millisecond,
				CheckInterval: time.Duration(cfg.Security.DelegationTokenExpiryCheckMs) * time.Millisecond},
		}
		if b.transport != nil {
			opts.Transport = b.transport
		}
		ctrl, err := controller.New(opts)
		if err != nil {
			return err
		}
		if b.transport != nil {
			b.transport.Start(ctrl)
		}
		b.controller, b.meta = ctrl, ctrl
	} else {
		obs, err := controller.NewObserver(controller.ObserverOptions{
			NodeID: cfg.NodeID, ClusterID: storedClusterID, Voters: voters, Clock: b.clock, Logger: logger, Security: ctrlSecurity,
			RequestTimeout: ms(cfg.ControllerQuorumFetchTimeoutMs), RetryBackoff: ms(cfg.ControllerQuorumRetryBackoffMs),
		})
		if err != nil {
			return err
		}
		b.observer, b.meta = obs, obs
	}
	co := controller.ChannelOptions{
		NodeID: cfg.NodeID, Voters: voters, Leader: b.meta.Leader, Logger: b.logger.With("component", "controller-channel"), Security: ctrlSecurity,
		RequestTimeout: ms(cfg.ControllerQuorumRequestTimeoutMs), RetryBackoff: ms(cfg.ControllerQuorumRetryBackoffMs),
		Downgrade: controllerDowngrades,
	}
	if b.controller != nil {
		co.Local = b.serveController
	}
	b.channel = controller.NewChannel(co)
	return nil
}

// Start joins the metadata quorum (or starts following it) and waits until this
// node's image has caught up and holds the cluster id, which it then stores in every
// log directory. A broker then registers with the active controller, opens its
// partitions, and returns once the controller has unfenced it. The controller
// listener must be serving before Start is called: the quorum forms through it.
func (b *Broker) Start(ctx context.Context) error {
	var err error
	if b.controller != nil {
		err = b.controller.Start(ctx)
	} else {
		err = b.observer.Start(ctx)
	}
	if err != nil {
		if _, ok := failedFile(err); ok {
			return fmt.Errorf("start metadata quorum: %w; repair or free the disk of %s and restart", err, b.cfg.LogDirs[0])
		}
		return fmt.Errorf("start metadata quorum: %w", err)
	}
	b.clusterID = b.meta.Image().ClusterID()
	if err := b.logs.WriteMetaProperties(b.nodeID, b.clusterID); err != nil {
		return fmt.Errorf("store the cluster id: %w", err)
	}
	b.meta.Subscribe(func(_, _ *metadata.Image) { b.imageWatch.changed() })
	b.quotas.Update(b.meta.Image())
	b.meta.Subscribe(func(_, next *metadata.Image) { b.quotas.Update(next) })
	runCtx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	// Deleted topics (Kafka's onPartitionsDeleted): the groups' offsets on them are
	// removed, and the share state the share groups held on them deleted.
	deletedShares := &deletedShareTopics{wake: make(chan struct{}, 1)}
	b.meta.Subscribe(func(prev, next *metadata.Image) {
		if deleted := deletedTopics(prev, next); len(deleted) > 0 {
			names := make(map[string]bool, len(deleted))
			for _, t := range deleted {
				names[t.Name] = true
			}
			b.groups.RemoveTopicOffsets(names)
			deletedShares.add(deleted)
		}
	})
	b.wg.Go(func() { deletedShares.run(runCtx, b.deleteDeletedShareStates) })
	if voters, _ := b.cfg.QuorumVoters(); b.controller != nil && len(voters) > 1 {
		b.wg.Go(func() {
			b.watchMetadataLog(runCtx, b.controller, func(err error) error {
				return fmt.Errorf("the metadata log in %s stopped: %w; free space or repair the disk and restart", b.cfg.LogDirs[0], err)
			})
		})
	} else if b.observer != nil {
		b.wg.Go(func() {
			b.watchMetadataLog(runCtx, b.observer, func(err error) error {
				return fmt.Errorf("stopped following the metadata log: %w", err)
			})
		})
	}
	if !b.isBroker {
		return nil
	}

	epoch, err := b.register(ctx)
	if err != nil {
		return err
	}
	// Act on no partition before this node's image holds its own registration, as
	// Kafka's broker waits for its initial catch-up: the same commit moves away the
	// leaderships a controller gave this broker while it was down, and an older image
	// would make it lead them for a moment and assign a leader epoch nobody else has.
	b.awaitImage(ctx, func(img *metadata.Image) bool {
		r, ok := img.Broker(metadata.NodeID(b.nodeID))
		return ok && r.Epoch >= epoch
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	img := b.meta.Image()
	b.removeOrphanLogs(img)
	// Open the logs already on disk in parallel before reconciling, so that a node with
	// many partitions starts quickly.
	if err := b.logs.LoadExisting(func(k storage.PartitionKey) storage.Config {
		return b.logConfig(img, k.Topic)
	}); err != nil {
		b.logger.Error("some partition logs could not be opened", "err", err)
		// A log that failed on a file error takes its directory offline now, so that
		// reconcile does not open (and recover) it a second time on the same disk.
		b.openFailed(err)
	}
	b.reconcile(img)
	// From now on every metadata change is applied as it commits (a controller calls
	// subscribers before the command that caused the change returns, so a handler that
	// created a topic finds its partitions); reconcile once more for anything committed
	// between the image read above and the subscription.
	b.meta.Subscribe(func(prev, next *metadata.Image) { b.reconcile(next) })
	// Subscribed after reconcile, so called after it for each image.
	b.meta.Subscribe(func(_, next *metadata.Image) {
		b.acted.Store(next)
		b.imageWatch.changed()
	})
	now := b.meta.Image()
	b.reconcile(now)
	b.acted.CompareAndSwap(nil, now)
	b.imageWatch.changed()

	b.wg.Go(func() { b.heartbeatLoop(runCtx, epoch) })
	b.wg.Go(func() { b.isrLoop(runCtx) })
	b.wg.Go(func() { b.logs.Run(runCtx) })
	if b.cfg.LogCleanerEnable {
		cleaner := storage.NewCleaner(storage.CleanerOptions{
			Threads:             int(b.cfg.LogCleanerThreads),
			Backoff:             time.Duration(b.cfg.LogCleanerBackoffMs) * time.Millisecond,
			IOMaxBytesPerSecond: b.cfg.LogCleanerIoMaxBytesPerSecond,
			Clock:               b.clock,
			Logger:              b.logger.With("component", "cleaner"),
			MaxCleanableOffset:  b.highWatermarkOf,
		}, storage.LogsOf(b.logs))
		b.wg.Go(func() { cleaner.Run(runCtx) })
	}
	return b.awaitUnfenced(ctx)
}

// Close stops background work, the metadata quorum and flushes and closes every log.
// For a controlled shutdown call Shutdown first.
func (b *Broker) Close() error {
	b.StopServing()
	if b.cancel != nil {
		b.cancel()
	}
	b.wg.Wait()
	b.producers.close()
	b.fetchers.Close()
	b.txns.Close()
	b.groups.Close()
	b.shares.Close()
	b.peers.close() // after the share manager's last writes to other brokers' share state
	b.channel.Close()
	var errs []error
	if b.controller != nil {
		errs = append(errs, b.controller.Close())
	}
	if b.transport != nil {
		b.transport.Close()
	}
	if b.observer != nil {
		errs = append(errs, b.observer.Close())
	}
	errs = append(errs, b.logs.Close())
	return errors.Join(errs...)
}

// highWatermarkOf bounds the cleaner to committed data.
func (b *Broker) highWatermarkOf(l *storage.Log) int64 {
	if p := b.replicas.Get(l.Topic(), l.Partition()); p != nil && p.Log == l {
		return p.HighWatermark()
	}
	return l.LogStartOffset() // not a partition served here: clean nothing
}

// actedImage is the latest image this node has acted on (Broker.acted), or before it
// serves as a broker (and on a controller-only node) the latest one published.
func (b *Broker) actedImage() *metadata.Image {
	if img := b.acted.Load(); img != nil {
		return img
	}
	return b.image()
}

// ClusterID returns the cluster id the metadata quorum agreed on ("" before Start).
func (b *Broker) ClusterID() string { return b.clusterID }

// Controller returns this node's controller, nil if it is not one.
func (b *Broker) Controller() *controller.Controller { return b.controller }

// Metadata returns the metadata log as this node reads it.
func (b *Broker) Metadata() controller.Metadata { return b.meta }

// Channel returns this node's channel to the active controller.
func (b *Broker) Channel() *controller.Channel { return b.channel }

// Handle implements protocol.Handler.
func (b *Broker) Handle(req *protocol.Request) <-chan protocol.Response {
	e, ok := registry[req.Key]
	if !ok {
		// The server only passes served keys; be defensive anyway.
		return protocol.Ready(protocol.Response{Close: true, None: true})
	}
	if b.quotas.Enabled() {
		return b.handleMetered(e.fn, req)
	}
	return b.serve(e.fn, req)
}

// Failed receives the error the node cannot go on after — every log directory has
// failed, or in a cluster its metadata log stopped on an error — once. The process should then stop at once, without a clean shutdown
// (nothing more is written to the failed disks), as Kafka halts: in a cluster the
// node's session expires and its leaderships move to in-sync followers.
func (b *Broker) Failed() <-chan error { return b.failed }

func (b *Broker) fail(err error) {
	b.failOnce.Do(func() {
		b.logger.Error("the node cannot go on", "err", err)
		b.failed <- err
	})
}

// metadataFollower is the part of a Controller or an Observer that tells whether it
// still follows the metadata log.
type metadataFollower interface {
	Stopped() <-chan struct{}
	StopErr() error
}

// watchMetadataLog gives up (fail) when this node stops following the metadata log
// on an error — a voter's write to log.dirs[0] failed, or an observer met a quorum
// of another cluster — as Kafka halts: a node of a cluster whose metadata stopped
// would go on serving a view of the cluster that no longer holds. A single node
// keeps serving its partitions instead (it has no other view to be behind of;
// docs/operations.md, a full disk under the metadata log).
func (b *Broker) watchMetadataLog(ctx context.Context, m metadataFollower, describe func(error) error) {
	select {
	case <-ctx.Done():
	case <-m.Stopped():
		if err := m.StopErr(); err != nil {
			b.fail(describe(err))
		}
	}
}

// ConnClosed drops what the broker keeps for a client connection that closed
// (server.Config.ConnClosed): the share sessions it opened.
func (b *Broker) ConnClosed(connID uint64) { b.endShareSessions(connID) }

// serve runs a request's handler, behind its authorization hook when there is an
// authorizer (api_auth.go).
func (b *Broker) serve(fn handlerFunc, req *protocol.Request) <-chan protocol.Response {
	if out, ok := b.protocolDisabled(req); ok {
		return out
	}
	if b.authz != nil {
		if hook, ok := authHooks[req.Key]; ok {
			return b.handleAuthorized(hook, fn, req)
		}
	}
	return fn(b, req)
}

// after returns a channel closed once d has passed on the broker's clock, and a
// function that cancels it. Delayed operations wait on it, so tests can drive them.
func (b *Broker) after(d time.Duration) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	t := b.clock.AfterFunc(d, func() { close(ch) })
	return ch, func() { t.Stop() }
}

// image returns the current metadata image.
func (b *Broker) image() *metadata.Image { return b.meta.Image() }

// topicReplica returns this node's replica of partition of the topic with id, nil
// when it has none, or when the one it has is of another topic of the same name: a
// handler's image can already hold a topic deleted and created again while reconcile
// (which runs after the image is published) has not replaced the old topic's local
// partition yet, and reading or writing that one would serve the old log as the new
// topic's — a write acknowledged there is deleted with it.
func (b *Broker) topicReplica(topic string, id metadata.TopicID, partition int32) *replica.Partition {
	p := b.replicas.Get(topic, partition)
	if p == nil || id.IsZero() || p.TopicID != [16]byte(id) {
		return nil
	}
	return p
}

// namedReplica is topicReplica for a topic named in a request: the topic of that
// name in img, nil if img has none.
func (b *Broker) namedReplica(img *metadata.Image, topic string, partition int32) *replica.Partition {
	t, ok := img.Topic(topic)
	if !ok {
		return nil
	}
	return b.topicReplica(topic, t.ID, partition)
}

// requestContext bounds work done on behalf of one request; it ends at StopServing
// too.
func (b *Broker) requestContext(timeoutMs int32) (context.Context, context.CancelFunc) {
	d := time.Duration(timeoutMs) * time.Millisecond
	if d <= 0 || d > time.Minute {
		d = 30 * time.Second
	}
	return context.WithTimeout(b.serving, d)
}

// StopServing ends the requests still in progress: what they wait for (replicas,
// share-state writes retried while a coordinator moves, the controller) ends at
// once, so that closing the server, which waits for them once it closed their
// connections (server.Config.Closed), does not wait out their timeouts (up to 30 s).
// Close calls it too.
func (b *Broker) StopServing() { b.stopServing() }

var (
	_ protocol.Handler          = (*Broker)(nil)
	_ metrics.Source            = (*Broker)(nil)
	_ metrics.QuorumSource      = (*Broker)(nil)
	_ metrics.TransactionSource = (*Broker)(nil)
	_ metrics.ShareSource       = (*Broker)(nil)
)
