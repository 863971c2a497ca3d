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
// never handed out twice, across restarts included. A broker with no id at hand
// answers COORDINATOR_LOAD_IN_PROGRESS after at most a second (producerIDWait), and
// the client retries.
//
// With a transactional id the request goes to the transaction coordinator
// (internal/txn): a producer id for the transactional id, its epoch bumped at every
// call (fencing the previous producer, whose open transaction is aborted),
// transaction.timeout.ms bounded by transaction.max.timeout.ms. PRODUCER_FENCED is
// answered INVALID_PRODUCER_EPOCH before v4, as Kafka does.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/txn"
)

func init() { register(kmsg.InitProducerID, 0, 5, (*Broker).handleInitProducerID) }

// producerIDs hands out producer ids from the blocks the active controller reserves
// for this broker (AllocateProducerIds). As Kafka's brokers do, the next block is
// asked for in the background once nine tenths of the current one are handed out,
// so that a request seldom waits on the controller; one that finds every id used
// waits for the block being fetched only as long as its context allows. A request
// held for the controller's sake (a quorum without a leader, a controller cut off)
// is one a broker shutting down cuts off unanswered, and a client that sees its
// connection closed before any answer may give up rather than retry (franz-go fails
// the records waiting for a producer id).
type producerIDs struct {
	// fetchBlock asks the controller for a block: its first id and end (exclusive).
	fetchBlock func() (start, end int64, err error)
	logger     *slog.Logger
	wg         sync.WaitGroup // the fetch in flight

	mu        sync.Mutex
	next, end int64         // the block in use: the next id, and its end (exclusive)
	ahead     [2]int64      // a block fetched ahead of need: its first id and end; ahead[1] is 0 when none
	size      int64         // the length of the last block the controller gave
	fetching  chan struct{} // closed when the fetch in flight ends; nil when none
	lastErr   error         // why the last fetch failed; nil after one that did not
	closed    bool          // no fetch starts after close
}

// allocate returns an id never handed out before, or an error when none is at hand
// before ctx ends (the controller has not answered, or answered with an error).
func (p *producerIDs) allocate(ctx context.Context) (int64, error) {
	for waited := false; ; waited = true {
		p.mu.Lock()
		if p.next >= p.end && p.ahead[1] > 0 {
			p.next, p.end, p.ahead = p.ahead[0], p.ahead[1], [2]int64{}
		}
		if p.next < p.end {
			id := p.next
			p.next++
			if (p.end-p.next)*10 <= p.size && p.ahead[1] == 0 {
				p.fetchLocked()
			}
			p.mu.Unlock()
			return id, nil
		}
		if waited {
			err := p.lastErr
			p.mu.Unlock()
			if err == nil {
				err = errors.New("no producer id block yet")
			}
			return -1, err
		}
		done := p.fetchLocked()
		p.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return -1, fmt.Errorf("waiting for a block of producer ids from the controller: %w", ctx.Err())
		}
	}
}

// fetchLocked asks the controller for the next block unless a fetch is in flight,
// and returns what is closed when that fetch ends.
func (p *producerIDs) fetchLocked() <-chan struct{} {
	if p.fetching != nil {
		return p.fetching
	}
	if p.closed {
		p.lastErr = errors.New("the broker is shutting down")
		done := make(chan struct{})
		close(done)
		return done
	}
	done := make(chan struct{})
	p.fetching = done
	p.wg.Go(func() {
		start, end, err := p.fetchBlock()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.fetching, p.lastErr = nil, err
		if err == nil {
			p.ahead, p.size = [2]int64{start, end}, end-start
		} else {
			p.logger.Warn("cannot get a block of producer ids from the controller; InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS until it can", "err", err)
		}
		close(done)
	})
	return done
}

// close waits for the fetch in flight, which ends with the broker's StopServing.
func (p *producerIDs) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}

// fetchProducerIDs asks the active controller for a block of producer ids.
func (b *Broker) fetchProducerIDs() (start, end int64, err error) {
	ctx, cancel := b.requestContext(0)
	defer cancel()
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = b.nodeID, b.BrokerEpoch()
	r, err := b.channel.Send(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	resp := r.(*kmsg.AllocateProducerIDsResponse)
	if err := controller.ErrorForCode(resp.ErrorCode, nil); err != nil {
		return 0, 0, err
	}
	return resp.ProducerIDStart, resp.ProducerIDStart + int64(resp.ProducerIDLen), nil
}

// producerIDWait is how long InitProducerId waits for a block of producer ids
// before it answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry (Kafka answers
// at once; a short wait spares the first producer of a new broker a retry).
const producerIDWait = time.Second

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
	ctx, cancel := context.WithTimeout(b.serving, producerIDWait)
	defer cancel()
	id, err := b.producers.allocate(ctx)
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return reply(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return reply(resp)
}
