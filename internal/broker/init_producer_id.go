package broker

// InitProducerId (key 22), versions 0–5.
//
// A producer id given without an epoch, or an epoch without an id (v3+), is
// INVALID_REQUEST, as Kafka answers before it looks any further.
//
// Without a transactional id this allocates a fresh producer id at epoch 0 for an
// idempotent producer, whatever id and epoch the request carries (as Kafka's
// TransactionCoordinator does: an id the client names is not its to bump). Ids come
// from blocks reserved through the metadata log (ProducerIDsRecord), so an id is
// never handed out twice, across restarts included.
//
// With a transactional id the request goes to the transaction coordinator
// (internal/txn): a producer id for the transactional id, its epoch bumped at every
// call (fencing the previous producer, whose open transaction is aborted),
// transaction.timeout.ms bounded by transaction.max.timeout.ms. PRODUCER_FENCED is
// answered INVALID_PRODUCER_EPOCH before v4, as Kafka does.

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/txn"
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
	if req.Version >= 3 && (r.ProducerID == -1) != (r.ProducerEpoch == -1) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	if r.TransactionalID != nil {
		expectedID, expectedEpoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			expectedID, expectedEpoch = r.ProducerID, r.ProducerEpoch
		}
		ch := b.txns.InitProducerID(*r.TransactionalID, time.Duration(r.TransactionTimeoutMillis)*time.Millisecond, expectedID, expectedEpoch)
		return relayTxn(ch, func(res txn.ProducerResult) kmsg.Response {
			resp.ErrorCode = fencedCode(res.Code, req.Version >= 4)
			resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.Epoch
			return resp
		})
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
