package broker

// InitProducerId (key 22), versions 0–5.
//
// Without a transactional id this allocates a fresh producer id at epoch 0 for an
// idempotent producer. Ids come from blocks reserved through the metadata log
// (ProducerIDsRecord), so an id is never handed out twice, across restarts included.
// A producer that passes its current id and epoch (v3+, KIP-360) gets the same id with
// the epoch bumped, or a new id when the epoch is exhausted.
//
// Transactional ids are not served yet: such requests fail with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients treat as fatal rather than
// retrying forever.

import (
	"context"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.InitProducerID, 0, 5, (*Broker).handleInitProducerID) }

// producerIDs hands out producer ids from reserved blocks.
type producerIDs struct {
	broker *Broker
	mu     sync.Mutex
	next   int64
	end    int64 // exclusive
}

func (p *producerIDs) allocate(ctx context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		b := p.broker
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID, req.BrokerEpoch = b.nodeID, b.BrokerEpoch()
		r, err := b.channel.Send(ctx, req)
		if err != nil {
			return -1, err
		}
		resp := r.(*kmsg.AllocateProducerIDsResponse)
		if err := controller.ErrorForCode(resp.ErrorCode, nil); err != nil {
			return -1, err
		}
		p.next, p.end = resp.ProducerIDStart, resp.ProducerIDStart+int64(resp.ProducerIDLen)
	}
	id := p.next
	p.next++
	return id, nil
}

func (b *Broker) handleInitProducerID(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.SetVersion(req.Version)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply(resp)
	}
	if r.ProducerID >= 0 && r.ProducerEpoch >= 0 && r.ProducerEpoch < math.MaxInt16-1 {
		resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch+1
		return reply(resp)
	}
	ctx, cancel := b.requestContext(0)
	defer cancel()
	id, err := b.producers.allocate(ctx)
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return reply(resp)
}
