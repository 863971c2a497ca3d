package broker

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
)

// The broker's side of KIP-631's lifecycle: it registers with the active
// controller (BrokerRegistration, with a fresh incarnation id per process), then
// heartbeats every broker.heartbeat.interval.ms (BrokerHeartbeat) reporting how far
// it has applied the metadata log. The controller unfences it once it has caught up
// and fences it when heartbeats stop for broker.session.timeout.ms. On SIGTERM,
// Shutdown asks for a controlled shutdown (WantShutDown) and waits until the
// controller has moved its leaderships away and says it may go.

type lifecycle struct {
	incarnation  string
	epoch        atomic.Int64
	fenced       atomic.Bool
	wantShutdown atomic.Bool
	poke         chan struct{} // heartbeat now
	unfenced     chan struct{} // closed the first time the controller unfences us
	unfencedOnce sync.Once
	granted      chan struct{} // closed when the controller allows the shutdown
	grantedOnce  sync.Once
}

func (l *lifecycle) init() {
	l.incarnation = controller.NewIncarnationID()
	l.epoch.Store(-1)
	l.fenced.Store(true)
	l.poke = make(chan struct{}, 1)
	l.unfenced = make(chan struct{})
	l.granted = make(chan struct{})
}

// BrokerEpoch returns this broker's epoch as the active controller assigned it
// (-1 before registration). The data plane names it in AlterPartition.
func (b *Broker) BrokerEpoch() int64 { return b.lifecycle.epoch.Load() }

// Fenced reports whether the controller last said this broker is fenced.
func (b *Broker) Fenced() bool { return b.lifecycle.fenced.Load() }

// register sends BrokerRegistration until the active controller accepts it and
// returns the broker epoch. A previous incarnation that still heartbeats
// (DUPLICATE_BROKER_REGISTRATION) is waited out.
func (b *Broker) register(ctx context.Context) (int64, error) {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.SetVersion(4)
	req.BrokerID = b.nodeID
	req.ClusterID = b.clusterID
	if _, err := hex.Decode(req.IncarnationID[:], []byte(b.lifecycle.incarnation)); err != nil {
		return -1, fmt.Errorf("incarnation id %q: %w", b.lifecycle.incarnation, err)
	}
	req.PreviousBrokerEpoch = b.lifecycle.epoch.Load()
	for _, l := range b.cfg.AdvertisedListeners {
		rl := kmsg.NewBrokerRegistrationRequestListener()
		rl.Name, rl.Host, rl.Port = l.Name, l.Host, uint16(l.Port)
		req.Listeners = append(req.Listeners, rl)
	}
	if b.cfg.BrokerRack != "" {
		req.Rack = kmsg.StringPtr(b.cfg.BrokerRack)
	}
	logged := false
	for {
		r, err := b.channel.Send(ctx, req)
		if err != nil {
			return -1, fmt.Errorf("register with the active controller: %w", err)
		}
		resp := r.(*kmsg.BrokerRegistrationResponse)
		err = controller.ErrorForCode(resp.ErrorCode, nil)
		switch {
		case err == nil:
			b.lifecycle.epoch.Store(resp.BrokerEpoch)
			b.lifecycle.fenced.Store(true)
			b.logger.Info("registered with the active controller", "broker_epoch", resp.BrokerEpoch, "incarnation", b.lifecycle.incarnation, "controller", b.meta.Leader())
			return resp.BrokerEpoch, nil
		case errors.Is(err, controller.ErrInconsistentClusterID):
			return -1, fmt.Errorf("register with the active controller: %w", err)
		case !logged:
			logged = true
			b.logger.Warn("registration refused; retrying", "error", err,
				"hint", "DUPLICATE_BROKER_REGISTRATION: another process with this node.id heartbeats, or this node restarted within broker.session.timeout.ms")
		}
		if !b.sleep(ctx, time.Duration(b.cfg.BrokerHeartbeatIntervalMs)*time.Millisecond) {
			return -1, ctx.Err()
		}
	}
}

// sleep waits d on the broker's clock; false if ctx ended first.
func (b *Broker) sleep(ctx context.Context, d time.Duration) bool {
	ch, stop := b.after(d)
	defer stop()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// heartbeatLoop heartbeats until ctx ends or the controller grants the controlled
// shutdown: every broker.heartbeat.interval.ms, or every 100ms while fenced or
// shutting down so that those states end quickly.
func (b *Broker) heartbeatLoop(ctx context.Context, epoch int64) {
	l := &b.lifecycle
	interval := time.Duration(b.cfg.BrokerHeartbeatIntervalMs) * time.Millisecond
	timeout := time.Duration(b.cfg.ControllerQuorumRequestTimeoutMs) * time.Millisecond
	failing := false
	for {
		req := b.heartbeatRequest(epoch)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		r, err := b.channel.Send(hctx, req)
		cancel()
		if err == nil {
			resp := r.(*kmsg.BrokerHeartbeatResponse)
			err = controller.ErrorForCode(resp.ErrorCode, nil)
			if err == nil {
				if failing {
					b.logger.Info("heartbeats reach the active controller again", "controller", b.meta.Leader())
					failing = false
				}
				b.heartbeatAnswered(resp)
				if resp.ShouldShutdown {
					return // as Kafka's broker: the controller let it go; it only has to close
				}
				if !resp.IsFenced && !req.WantShutdown {
					b.reportOfflineReplicas(ctx, epoch, timeout)
				}
			} else if errors.Is(err, controller.ErrStaleBrokerEpoch) {
				b.logger.Warn("the active controller does not know this broker epoch; registering again", "broker_epoch", epoch)
				if epoch, err = b.register(ctx); err != nil {
					return
				}
				continue
			}
		}
		if err != nil && ctx.Err() == nil && !failing {
			failing = true
			b.logger.Warn("heartbeat failed", "error", err)
		}
		wait := interval
		if l.fenced.Load() || l.wantShutdown.Load() {
			wait = min(interval, 100*time.Millisecond)
		}
		tick, stop := b.after(wait)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-tick:
		case <-l.poke:
			stop()
		}
	}
}

// heartbeatRequest is the next heartbeat of broker epoch epoch. Its metadata
// offset is that of the image this node has acted on (reconcile opened, led and
// followed its partitions), not the latest one published, as Kafka's broker reports
// the metadata loader's last applied offset, which the loader advances only once
// its publishers (the replica manager among them) have run
// (MetadataLoader.maybePublishMetadata): the controller unfences a broker, and lets
// a broker in controlled shutdown go, on the strength of that offset — the new
// leaders must lead before the old one leaves.
func (b *Broker) heartbeatRequest(epoch int64) *kmsg.BrokerHeartbeatRequest {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(1)
	req.BrokerID, req.BrokerEpoch = b.nodeID, epoch
	req.CurrentMetadataOffset = b.actedImage().Offset()
	req.WantShutdown = b.lifecycle.wantShutdown.Load()
	return req
}

// pokeHeartbeat has the heartbeat loop send its next heartbeat now.
func (b *Broker) pokeHeartbeat() {
	select {
	case b.lifecycle.poke <- struct{}{}:
	default:
	}
}

func (b *Broker) heartbeatAnswered(resp *kmsg.BrokerHeartbeatResponse) {
	l := &b.lifecycle
	if was := l.fenced.Swap(resp.IsFenced); was != resp.IsFenced {
		switch {
		case resp.IsFenced && l.wantShutdown.Load():
			b.logger.Info("the active controller fenced this broker for its shutdown")
		case resp.IsFenced:
			b.logger.Warn("the active controller fenced this broker")
		default:
			b.logger.Info("the active controller unfenced this broker", "metadata_offset", b.meta.Image().Offset())
		}
	}
	if !resp.IsFenced {
		l.unfencedOnce.Do(func() { close(l.unfenced) })
	}
	if resp.ShouldShutdown {
		l.grantedOnce.Do(func() { close(l.granted) })
	}
}

// awaitUnfenced waits until the controller has unfenced this broker once.
func (b *Broker) awaitUnfenced(ctx context.Context) error {
	select {
	case <-b.lifecycle.unfenced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the active controller did not unfence this broker: %w", ctx.Err())
	}
}

// Shutdown is the controlled shutdown: it asks the active controller to move this
// broker's leaderships away and take it out of the ISRs (BrokerHeartbeat with
// WantShutDown), and returns once the controller says it may go, or with ctx's
// error. Clients keep being served meanwhile; call Close afterwards.
func (b *Broker) Shutdown(ctx context.Context) error {
	if !b.isBroker || b.lifecycle.epoch.Load() < 0 {
		return nil
	}
	l := &b.lifecycle
	l.wantShutdown.Store(true)
	b.pokeHeartbeat()
	b.logger.Info("controlled shutdown: asking the active controller to move this broker's leaderships")
	select {
	case <-l.granted:
		b.logger.Info("controlled shutdown: the active controller moved every leadership away")
		return nil
	case <-ctx.Done():
		return fmt.Errorf("controlled shutdown not confirmed by the active controller: %w", ctx.Err())
	}
}
