package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// Metadata is the metadata log as a node reads it. A voter reads it through its
// Controller, a broker that is not a controller through an Observer.
type Metadata interface {
	// Image returns the latest applied image; it never blocks.
	Image() *metadata.Image
	// Subscribe registers fn, called after each apply in log order from one
	// goroutine (see Controller.Subscribe).
	Subscribe(fn func(prev, next *metadata.Image))
	// Leader is the node id of the active controller, -1 if unknown.
	Leader() int32
}

var (
	_ Metadata = (*Controller)(nil)
	_ Metadata = (*Observer)(nil)
)

// ObserverOptions configure an Observer.
type ObserverOptions struct {
	NodeID int32
	// ClusterID is the id this node has stored, "" if none.
	ClusterID string
	// Voters maps node id to the host:port of its controller listener.
	Voters map[int32]string
	Clock  clock.Clock
	Logger *slog.Logger
	// FetchWait is how long a voter holds a fetch open waiting for new entries
	// (default 500ms).
	FetchWait time.Duration
	// RequestTimeout (controller.quorum.request.timeout.ms) bounds a fetch beyond
	// FetchWait (default 2s).
	RequestTimeout time.Duration
	// RetryBackoff (controller.quorum.retry.backoff.ms) is the pause before trying
	// another voter after a failure (default 20ms, doubling up to 1s).
	RetryBackoff time.Duration
	// Security secures the connections to the controllers' listener (TLS, SASL).
	Security peer.Security
}

// Observer follows the metadata log of a quorum it does not vote in: the node of a
// broker that is not a controller (process.roles=broker). It fetches committed
// entries from the active controller (any voter if the leader is unknown) with
// Samsa's MetadataFetch request, long-polling, and applies them to its image — a
// snapshot of the whole image first when it is new or too far behind. Nothing is
// kept on disk: a restarted observer fetches the image again, which is small, and
// cannot serve before a voter answers (a broker cannot register without one
// anyway).
//
// Safe for concurrent use. One goroutine fetches; subscribers are called from
// another, as with Controller.
type Observer struct {
	opts   ObserverOptions
	logger *slog.Logger
	conns  map[int32]*peer.Conn

	image  atomic.Pointer[metadata.Image]
	leader atomic.Int32
	notify notifier

	started   atomic.Bool
	caughtUp  chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	err       atomic.Pointer[error] // why fetching stopped for good
}

// NewObserver returns an Observer; Start brings it up.
func NewObserver(o ObserverOptions) (*Observer, error) {
	if len(o.Voters) == 0 {
		return nil, errors.New("controller: an observer needs controller.quorum.voters")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.FetchWait <= 0 {
		o.FetchWait = 500 * time.Millisecond
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 2 * time.Second
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 20 * time.Millisecond
	}
	ob := &Observer{
		opts: o, logger: o.Logger.With("node", o.NodeID), conns: map[int32]*peer.Conn{},
		caughtUp: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	for id, addr := range o.Voters {
		ob.conns[id] = peer.New(addr, peer.Options{ClientID: "samsa-observer", BackoffMin: o.RetryBackoff, DialTimeout: o.RequestTimeout, Security: o.Security})
	}
	ob.leader.Store(-1)
	ob.image.Store(metadata.EmptyImage())
	ob.notify.init()
	return ob, nil
}

// Start fetches until the image has caught up with a voter's and holds the cluster
// id, checks it against the stored one, and keeps following in the background.
func (o *Observer) Start(ctx context.Context) error {
	o.started.Store(true)
	go o.notify.run()
	go o.run()
	select {
	case <-o.caughtUp:
	case <-o.done:
		return o.stoppedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
	got := o.Image().ClusterID()
	if o.opts.ClusterID != "" && got != o.opts.ClusterID {
		return fmt.Errorf("%w: this node's stored cluster id is %s but the metadata quorum's is %s: "+
			"the log directories belong to another cluster; give this node empty log.dirs to join cluster %s",
			ErrInconsistentClusterID, o.opts.ClusterID, got, got)
	}
	o.logger.Info("metadata image caught up", "offset", o.Image().Offset(), "leader", o.Leader())
	return nil
}

// Close stops fetching. Subscribers are not called after Close returns.
func (o *Observer) Close() error {
	o.closeOnce.Do(func() { close(o.stop) })
	for _, c := range o.conns {
		c.Close()
	}
	if !o.started.Load() {
		return nil
	}
	<-o.done
	o.notify.stop()
	<-o.notify.done
	return nil
}

// Image implements Metadata.
func (o *Observer) Image() *metadata.Image { return o.image.Load() }

// Subscribe implements Metadata.
func (o *Observer) Subscribe(fn func(prev, next *metadata.Image)) { o.notify.subscribe(fn) }

// Leader implements Metadata.
func (o *Observer) Leader() int32 { return o.leader.Load() }

// Stopped is closed when the observer stops following the metadata log: after
// Close, or on an error it cannot get past (StopErr).
func (o *Observer) Stopped() <-chan struct{} { return o.done }

// StopErr is why the observer stopped following the metadata log when it failed (a
// quorum of another cluster, an image that does not apply); nil while it follows
// and after Close.
func (o *Observer) StopErr() error {
	if e := o.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (o *Observer) stoppedErr() error {
	if err := o.StopErr(); err != nil {
		return err
	}
	return ErrClosed
}

func (o *Observer) run() {
	defer close(o.done)
	voters := slices.Sorted(maps.Keys(o.opts.Voters))
	next := 0
	failures := 0
	quiet := false // a failure was logged; log the recovery
	for {
		target := o.leader.Load()
		if _, ok := o.conns[target]; !ok {
			target = voters[next%len(voters)]
		}
		err := o.fetch(target)
		var fatal *fatalFetchError
		switch {
		case errors.As(err, &fatal):
			o.logger.Error("metadata observer stopped", "error", fatal.err)
			o.err.Store(&fatal.err)
			return
		case err != nil:
			failures++
			next++
			o.leader.Store(-1)
			if !quiet {
				o.logger.Warn("cannot fetch the metadata log; trying another controller", "controller", target, "error", err)
				quiet = true
			}
			if !o.sleep(min(o.opts.RetryBackoff<<min(failures, 10), time.Second)) {
				return
			}
		default:
			if quiet {
				o.logger.Info("fetching the metadata log again", "controller", target)
				quiet = false
			}
			failures = 0
		}
		select {
		case <-o.stop:
			return
		default:
		}
	}
}

// sleep waits d on the injected clock; false when the observer is closing.
func (o *Observer) sleep(d time.Duration) bool {
	ch := make(chan struct{})
	t := o.opts.Clock.AfterFunc(d, func() { close(ch) })
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-o.stop:
		return false
	}
}

type fatalFetchError struct{ err error }

func (e *fatalFetchError) Error() string { return e.err.Error() }

// fetch does one MetadataFetch round trip with voter id and applies the answer.
func (o *Observer) fetch(id int32) error {
	img := o.Image()
	req := &protocol.MetadataFetchRequest{
		ClusterID: o.clusterID(), NodeID: o.opts.NodeID,
		FromOffset: img.Offset() + 1, MaxWaitMs: int32(o.opts.FetchWait / time.Millisecond),
	}
	if img.Offset() < 0 {
		req.MaxWaitMs = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.opts.FetchWait+o.opts.RequestTimeout)
	defer cancel()
	go func() {
		select {
		case <-o.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	r, err := o.conns[id].Request(ctx, req)
	if err != nil {
		return err
	}
	resp := r.(*protocol.MetadataFetchResponse)
	switch resp.ErrorCode {
	case 0:
	case kerr.InconsistentClusterID.Code:
		return &fatalFetchError{fmt.Errorf("%w: this node's stored cluster id is %s but controller %d belongs to cluster %s: "+
			"the log directories belong to another cluster; give this node empty log.dirs to join cluster %s",
			ErrInconsistentClusterID, o.opts.ClusterID, id, resp.ClusterID, resp.ClusterID)}
	default:
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	o.leader.Store(resp.LeaderID)
	next, err := applyFetched(img, resp)
	if err != nil {
		return &fatalFetchError{err}
	}
	if next != img {
		o.image.Store(next)
		o.notify.push(notification{prev: img, next: next})
	}
	if next.Offset() >= resp.HighWatermark && next.ClusterID() != "" {
		select {
		case <-o.caughtUp:
		default:
			close(o.caughtUp)
		}
	}
	return nil
}

func (o *Observer) clusterID() string {
	if id := o.Image().ClusterID(); id != "" {
		return id
	}
	return o.opts.ClusterID
}

// applyFetched applies a fetch answer to img: the snapshot replaces it, entries
// follow. An entry whose records do not apply is a no-op, as on the voters.
func applyFetched(img *metadata.Image, resp *protocol.MetadataFetchResponse) (*metadata.Image, error) {
	if resp.Snapshot != nil {
		recs, err := metadata.DecodeBatch(resp.Snapshot)
		if err == nil {
			img, err = metadata.Apply(metadata.EmptyImage(), resp.SnapshotOffset, recs)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: metadata snapshot at %d: %v", ErrCorruptLog, resp.SnapshotOffset, err)
		}
	}
	for _, e := range resp.Entries {
		if e.Offset <= img.Offset() {
			continue
		}
		var recs []metadata.Record
		if len(e.Data) > 0 {
			var err error
			if _, _, recs, err = decodeProposal(e.Data); err != nil {
				recs = nil
			}
		}
		next, err := metadata.Apply(img, e.Offset, recs)
		if err != nil {
			if next, err = metadata.Apply(img, e.Offset, nil); err != nil {
				return nil, err
			}
		}
		img = next
	}
	return img, nil
}

// ServeMetadataFetch answers an observer's MetadataFetch request (the controller
// listener's handler calls it).
func (c *Controller) ServeMetadataFetch(ctx context.Context, req *protocol.MetadataFetchRequest) *protocol.MetadataFetchResponse {
	mine := c.ClusterID()
	resp := &protocol.MetadataFetchResponse{ClusterID: mine, LeaderID: c.Leader(), SnapshotOffset: -1}
	if req.ClusterID != "" && mine != "" && req.ClusterID != mine {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	chunk, err := c.FetchMetadata(ctx, req.NodeID, req.FromOffset, time.Duration(req.MaxWaitMs)*time.Millisecond)
	if err != nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	resp.LeaderID, resp.HighWatermark = chunk.LeaderID, chunk.HighWatermark
	if chunk.Snapshot != nil {
		resp.Snapshot, resp.SnapshotOffset = chunk.Snapshot, chunk.SnapshotOffset
	}
	for _, e := range chunk.Entries {
		resp.Entries = append(resp.Entries, protocol.MetadataFetchEntry{Offset: e.Offset, Data: e.Data})
	}
	return resp
}
