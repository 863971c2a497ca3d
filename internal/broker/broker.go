package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/metrics"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/storage"
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
}

// Broker serves the Kafka API of one node.
type Broker struct {
	cfg       *config.Broker
	clock     clock.Clock
	logger    *slog.Logger
	metrics   *metrics.Metrics
	nodeID    int32
	clusterID string

	logs       *storage.Manager
	controller *controller.Controller
	replicas   *replica.Manager
	groups     *group.Coordinator
	producers  producerIDs

	// reconcileMu serialises applying metadata images to local partitions.
	reconcileMu sync.Mutex

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New opens the node's storage and metadata and returns a broker ready to Start.
func New(o Options) (*Broker, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cfg := o.Config
	b := &Broker{
		cfg:      cfg,
		clock:    o.Clock,
		logger:   o.Logger,
		metrics:  o.Metrics,
		nodeID:   cfg.NodeID,
		replicas: replica.NewManager(cfg.NodeID),
	}
	logs, err := storage.NewManager(storage.ManagerOptions{
		Dirs:                   cfg.LogDirs,
		Clock:                  o.Clock,
		Logger:                 o.Logger,
		RetentionCheckInterval: time.Duration(cfg.LogRetentionCheckIntervalMs) * time.Millisecond,
		FlushCheckInterval:     time.Duration(cfg.LogFlushSchedulerIntervalMs) * time.Millisecond,
		FS:                     o.FS,
	})
	if err != nil {
		return nil, err
	}
	b.logs = logs
	clusterID, err := logs.EnsureMetaProperties(cfg.NodeID)
	if err != nil {
		logs.Close()
		return nil, err
	}
	b.clusterID = clusterID
	ctrl, err := controller.New(controller.Options{
		Dir:                      filepath.Join(cfg.LogDirs[0], "__cluster_metadata-0"),
		NodeID:                   cfg.NodeID,
		ClusterID:                clusterID,
		Clock:                    o.Clock,
		Logger:                   o.Logger.With("component", "controller"),
		DefaultNumPartitions:     cfg.NumPartitions,
		DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		ValidateTopicConfig:      config.ValidateTopicConfig,
	})
	if err != nil {
		logs.Close()
		return nil, err
	}
	b.controller = ctrl
	b.producers.broker = b
	b.groups = group.New(group.Options{
		Log:    offsetsLog{b},
		Clock:  o.Clock,
		Logger: o.Logger.With("component", "group"),
		Config: groupConfig(cfg),
		TopicExists: func(topic string, partition int32) bool {
			t, ok := b.image().Topic(topic)
			return ok && partition >= 0 && int(partition) < len(t.Partitions)
		},
		OnRebalance: o.Metrics.Rebalance,
	})
	return b, nil
}

// Start replays metadata, registers this node, opens its partitions and starts the
// background work (retention, flushing). The advertised listener is the address
// clients are told to use.
func (b *Broker) Start(ctx context.Context, advertised config.Listener) error {
	if err := b.controller.Start(ctx); err != nil {
		return fmt.Errorf("start metadata quorum: %w", err)
	}
	reg := controller.Registration{
		NodeID:        b.nodeID,
		IncarnationID: controller.NewIncarnationID(),
		Endpoints: []metadata.Endpoint{{
			Name: advertised.Name, Host: advertised.Host, Port: int32(advertised.Port),
		}},
	}
	epoch, err := b.controller.RegisterBroker(ctx, reg)
	if err != nil {
		return fmt.Errorf("register broker: %w", err)
	}
	if _, err := b.controller.BrokerHeartbeat(ctx, controller.Heartbeat{BrokerID: b.nodeID, BrokerEpoch: epoch, MetadataOffset: b.controller.Image().Offset()}); err != nil {
		return fmt.Errorf("unfence broker: %w", err)
	}
	img := b.controller.Image()
	b.removeOrphanLogs(img)
	// Open the logs already on disk in parallel before reconciling, so that a node with
	// many partitions starts quickly.
	if err := b.logs.LoadExisting(func(k storage.PartitionKey) storage.Config {
		return b.logConfig(img, k.Topic)
	}); err != nil {
		b.logger.Error("some partition logs could not be opened", "err", err)
	}
	b.reconcile(img)
	// From now on every metadata change is applied as it commits (the controller calls
	// subscribers before the command that caused the change returns, so a handler that
	// created a topic finds its partitions); reconcile once more for anything committed
	// between the image read above and the subscription.
	b.controller.Subscribe(func(prev, next *metadata.Image) { b.reconcile(next) })
	b.reconcile(b.controller.Image())

	runCtx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.logs.Run(runCtx)
	}()
	if b.cfg.LogCleanerEnable {
		cleaner := storage.NewCleaner(storage.CleanerOptions{
			Threads:             int(b.cfg.LogCleanerThreads),
			Backoff:             time.Duration(b.cfg.LogCleanerBackoffMs) * time.Millisecond,
			IOMaxBytesPerSecond: b.cfg.LogCleanerIoMaxBytesPerSecond,
			Clock:               b.clock,
			Logger:              b.logger.With("component", "cleaner"),
			MaxCleanableOffset:  b.highWatermarkOf,
		}, storage.LogsOf(b.logs))
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			cleaner.Run(runCtx)
		}()
	}
	return nil
}

// Close stops background work, the metadata quorum and flushes and closes every log.
func (b *Broker) Close() error {
	if b.cancel != nil {
		b.cancel()
	}
	b.wg.Wait()
	b.groups.Close()
	errs := []error{b.controller.Close(), b.logs.Close()}
	return errors.Join(errs...)
}

// highWatermarkOf bounds the cleaner to committed data.
func (b *Broker) highWatermarkOf(l *storage.Log) int64 {
	if p := b.replicas.Get(l.Topic(), l.Partition()); p != nil && p.Log == l {
		return p.HighWatermark()
	}
	return l.LogStartOffset() // not a partition served here: clean nothing
}

// ClusterID returns the cluster id from meta.properties.
func (b *Broker) ClusterID() string { return b.clusterID }

// Handle implements protocol.Handler.
func (b *Broker) Handle(req *protocol.Request) <-chan protocol.Response {
	e, ok := registry[req.Key]
	if !ok {
		// The server only passes served keys; be defensive anyway.
		return protocol.Ready(protocol.Response{Close: true, None: true})
	}
	return e.fn(b, req)
}

// after returns a channel closed once d has passed on the broker's clock, and a
// function that cancels it. Delayed operations wait on it, so tests can drive them.
func (b *Broker) after(d time.Duration) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	t := b.clock.AfterFunc(d, func() { close(ch) })
	return ch, func() { t.Stop() }
}

// image returns the current metadata image.
func (b *Broker) image() *metadata.Image { return b.controller.Image() }

// requestContext bounds work done on behalf of one request.
func (b *Broker) requestContext(timeoutMs int32) (context.Context, context.CancelFunc) {
	d := time.Duration(timeoutMs) * time.Millisecond
	if d <= 0 || d > time.Minute {
		d = 30 * time.Second
	}
	return context.WithTimeout(context.Background(), d)
}

var (
	_ protocol.Handler = (*Broker)(nil)
	_ metrics.Source   = (*Broker)(nil)
)
