package broker

// AllocateProducerIds (key 67), version 0, on the controller listener.
//
// A broker asks the active controller for a block of producer ids, which it hands
// out to idempotent producers (InitProducerId). The block is in the metadata log
// before the answer, so no id is ever handed out twice, across restarts and
// controller changes. Only registered brokers at their current epoch are served
// (STALE_BROKER_EPOCH otherwise).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

func init() {
	registerController(kmsg.AllocateProducerIDs, 0, 0, (*Broker).serveAllocateProducerIDs)
}

// producerIDBlock is how many ids one block holds (Kafka's 1000).
const producerIDBlock = 1000

func (b *Broker) serveAllocateProducerIDs(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.AllocateProducerIDsRequest)
	resp := kmsg.NewPtrAllocateProducerIDsResponse()
	resp.SetVersion(r.Version)
	if !b.controller.Active() {
		resp.ErrorCode = errorCode(controller.ErrNotController)
		return resp
	}
	if br, ok := b.image().Broker(metadata.NodeID(r.BrokerID)); !ok || br.Epoch != r.BrokerEpoch {
		resp.ErrorCode = errorCode(controller.ErrStaleBrokerEpoch)
		return resp
	}
	first, err := b.controller.AllocateProducerIDs(ctx, producerIDBlock)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp
	}
	resp.ProducerIDStart, resp.ProducerIDLen = first, producerIDBlock
	return resp
}
