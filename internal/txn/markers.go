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
			c.fenceLocked(part, e, now, func(error) {})
		}
	}
}

// fenceLocked aborts e's Ongoing transaction with the epoch bumped past the producer's
// (Kafka's PrepareEpochFence followed by PrepareAbort, written as one record).
func (c *Coordinator) fenceLocked(part *partition, e *entry, now time.Time, done func(error)) {
	c.transitLocked(part, e, e.md.prepareEnd(false, false, true, -1, now), done)
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
