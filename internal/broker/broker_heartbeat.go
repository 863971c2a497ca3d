package broker

// BrokerHeartbeat (key 63), versions 0–1, on the controller listener.
//
// A registered broker's heartbeat: it keeps the broker's session alive and moves it
// between fenced, unfenced and controlled shutdown (internal/controller). Answered by
// the active controller only (NOT_CONTROLLER elsewhere); STALE_BROKER_EPOCH when the
// broker is not registered at that epoch. The offline log directories of v1 are
// ignored: a failed directory is reported by its partitions' metadata instead.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
)

func init() { registerController(kmsg.BrokerHeartbeat, 0, 1, (*Broker).serveBrokerHeartbeat) }

func (b *Broker) serveBrokerHeartbeat(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.BrokerHeartbeatRequest)
	resp := kmsg.NewPtrBrokerHeartbeatResponse()
	resp.SetVersion(r.Version)
	reply, err := b.controller.BrokerHeartbeat(ctx, controller.Heartbeat{
		BrokerID: r.BrokerID, BrokerEpoch: r.BrokerEpoch, MetadataOffset: r.CurrentMetadataOffset,
		WantFence: r.WantFence, WantShutdown: r.WantShutdown,
	})
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp
	}
	resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown = reply.IsCaughtUp, reply.IsFenced, reply.ShouldShutdown
	return resp
}
