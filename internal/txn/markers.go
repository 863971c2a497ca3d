package txn

import (
	"context"
	"errors"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// sendMarkersLocked writes the markers of e's prepared transaction in the background
// and, once every partition has them, completes it (CompleteCommit or CompleteAbort).
// A failed write or completion is tried again after RetryBackoff while this node still
// coordinates the partition; after a move, the next coordinator does it (it loads the
// prepared state).
func (c *Coordinator) sendMarkersLocked(part *partition, e *entry) {
	if e.sending {
		return
	}
	e.sending = true
	md := e.md.clone()
	m := Marker{
		TransactionalID:  md.TransactionalID,
		ProducerID:       md.ProducerID,
		ProducerEpoch:    md.Epoch,
		Commit:           md.State == StatePrepareCommit,
		CoordinatorEpoch: part.coordinatorEpoch,
		Partitions:       md.Partitions,
	}
	if md.ClientVersion >= 2 {
		m.TransactionVersion = 2
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var err error
		if len(m.Partitions) > 0 {
			err = c.markers.Write(part.ctx, m)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		e.sending = false
		if !c.owns(part) || part.txns[md.TransactionalID] != e || e.md.State != md.State || e.md.Epoch != md.Epoch || e.pending != nil {
			return // unloaded, or the transaction moved on
		}
		switch {
		case errors.Is(err, ErrFenced):
			c.logger.Warn("a newer transaction coordinator wrote markers; leaving the transaction to it", "transactional_id", md.TransactionalID,
				"producer_id", md.ProducerID, "epoch", md.Epoch, "coordinator_epoch", part.coordinatorEpoch)
			return
		case err != nil:
			c.retryMarkersLocked(part, e)
			return
		}
		c.transitLocked(part, e, e.md.complete(c.clock.Now()), func(err error) {
			if err != nil && c.owns(part) && part.txns[md.TransactionalID] == e {
				c.retryMarkersLocked(part, e)
			}
		})
	}()
}

// retryMarkersLocked writes e's markers again after RetryBackoff.
func (c *Coordinator) retryMarkersLocked(part *partition, e *entry) {
	c.clock.AfterFunc(c.cfg.RetryBackoff, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.owns(part) && part.txns[e.md.TransactionalID] == e && e.pending == nil &&
			(e.md.State == StatePrepareCommit || e.md.State == StatePrepareAbort) {
			c.sendMarkersLocked(part, e)
		}
	})
}

// --- timers -------------------------------------------------------------------------
//
// Two coordinator-wide timers, as Kafka's scheduler runs them: one aborts the
// transactions that outlived their timeout (every
// transaction.abort.timed.out.transaction.cleanup.interval.ms), the other forgets the
// transactional ids unused for transactional.id.expiration.ms (every
// transaction.remove.expired.transaction.cleanup.interval.ms).

func (c *Coordinator) armTimersLocked() {
	if c.mu.closed {
		return
	}
	c.armLocked(&c.mu.abortTimer, c.cfg.AbortTimedOutInterval, c.abortTimedOutLocked)
	c.armLocked(&c.mu.expireTimer, c.cfg.RemoveExpiredInterval, c.expireLocked)
}

// armLocked arms *timer, unless armed, to run work under the lock after d and arm
// itself again.
func (c *Coordinator) armLocked(timer *clock.Timer, d time.Duration, work func(now time.Time)) {
	if *timer != nil {
		return
	}
	*timer = c.clock.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		*timer = nil
		if c.mu.closed {
			return
		}
		work(c.clock.Now())
		c.armTimersLocked()
	})
}

// abortTimedOutLocked fences and aborts every Ongoing transaction older than its
// timeout: the epoch is bumped (the producer's next request is fenced) and the
// markers abort it.
func (c *Coordinator) abortTimedOutLocked(now time.Time) {
	for _, part := range c.mu.partitions {
		if part.loading {
			continue
		}
		for _, e := range part.txns {
			if e.pending != nil || e.md.State != StateOngoing || now.Sub(e.md.Started) <= e.md.Timeout {
				continue
			}
			c.logger.Info("aborting a transaction that outlived its timeout", "transactional_id", e.md.TransactionalID,
				"producer_id", e.md.ProducerID, "epoch", e.md.Epoch, "timeout", e.md.Timeout, "age", now.Sub(e.md.Started).Round(time.Millisecond))
			if c.fenceLocked(part, e, -1, now, func(error) {}) && !e.allocating {
				c.fenceWithNewIDLocked(part, e)
			}
		}
	}
}

// fenceWithNewIDLocked allocates, outside the lock, the producer id that the abort of
// e's timed out transaction at the last epoch moves to, and aborts it then, unless
// the transaction ended or moved meanwhile. Should the allocation fail, the next run
// of the timer tries again.
func (c *Coordinator) fenceWithNewIDLocked(part *partition, e *entry) {
	e.allocating = true
	producerID, epoch := e.md.ProducerID, e.md.Epoch
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		allocated, err := c.allocateProducerID()
		c.mu.Lock()
		defer c.mu.Unlock()
		e.allocating = false
		switch {
		case err != nil:
			c.logger.Warn("cannot allocate the producer id to abort a timed out transaction at the last epoch; retrying at the next check",
				"transactional_id", e.md.TransactionalID, "producer_id", producerID, "err", err)
		case c.mu.closed || !c.owns(part) || part.txns[e.md.TransactionalID] != e || e.pending != nil ||
			e.md.State != StateOngoing || e.md.ProducerID != producerID || e.md.Epoch != epoch:
		default:
			c.fenceLocked(part, e, allocated, c.clock.Now(), func(error) {})
		}
	}()
}

// fenceLocked aborts e's Ongoing transaction with the epoch bumped past the producer's
// (Kafka's PrepareEpochFence followed by PrepareAbort, written as one record). A
// transactions v2 transaction is bumped as its own abort would be (LastEpoch is the
// producer's epoch, as in Kafka since KAFKA-19367), and at the last epoch it moves to
// a new producer id when it completes (KAFKA-20090): it needs allocated then, and
// reports needID when allocated < 0.
func (c *Coordinator) fenceLocked(part *partition, e *entry, allocated int64, now time.Time, done func(error)) (needID bool) {
	v2 := e.md.ClientVersion >= 2
	if v2 && epochExhausted(e.md.Epoch) && allocated < 0 {
		return true
	}
	c.transitLocked(part, e, e.md.prepareEnd(false, v2, !v2, allocated, now), done)
	return false
}

// expireLocked forgets the transactional ids without a transaction in progress that
// were not used for transactional.id.expiration.ms (a tombstone in
// __transaction_state).
func (c *Coordinator) expireLocked(now time.Time) {
	for _, part := range c.mu.partitions {
		if part.loading {
			continue
		}
		for _, e := range part.txns {
			switch e.md.State {
			case StateEmpty, StateCompleteCommit, StateCompleteAbort:
			default:
				continue
			}
			if e.pending != nil || now.Sub(e.md.Updated) < c.cfg.IDExpiration {
				continue
			}
			dead := e.md.clone()
			dead.State = StateDead
			id := e.md.TransactionalID
			c.transitLocked(part, e, dead, func(err error) {
				if err == nil {
					c.logger.Info("transactional id expired", "transactional_id", id)
				}
			})
		}
	}
}

// allocateProducerID gets a new producer id (outside the lock: it may ask the
// controller).
func (c *Coordinator) allocateProducerID() (int64, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.WriteTimeout)
	defer cancel()
	return c.producerIDs(ctx)
}
