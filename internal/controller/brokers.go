package controller

import (
	"context"
	"fmt"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// RegisterBroker records broker b (its endpoints, rack, fenced state) in the
// metadata log and returns once it is applied. If b.Epoch is 0 the controller picks
// an epoch greater than any the broker had (the next metadata offset, as KRaft
// does). Re-registering replaces the previous registration.
func (c *Controller) RegisterBroker(ctx context.Context, b metadata.RegisterBrokerRecord) error {
	if b.NodeID < 0 {
		return fmt.Errorf("%w: broker id %d", ErrInvalidRequest, b.NodeID)
	}
	_, err := run(ctx, c, func(ctx context.Context) (struct{}, error) {
		if err := c.requireLeader(); err != nil {
			return struct{}{}, err
		}
		img := c.Image()
		if b.Epoch == 0 {
			b.Epoch = img.Offset() + 1
			if prev, ok := img.Broker(b.NodeID); ok && b.Epoch <= prev.Epoch {
				b.Epoch = prev.Epoch + 1
			}
		}
		if err := c.propose(ctx, []metadata.Record{b}); err != nil {
			return struct{}{}, err
		}
		c.logger.Info("registered broker", "broker", b.NodeID, "epoch", b.Epoch, "fenced", b.Fenced)
		return struct{}{}, nil
	})
	return err
}

// AllocateProducerIDs reserves count consecutive producer ids and returns the first.
// The reservation is in the metadata log before it returns, so ids are never handed
// out twice, across restarts and controller changes.
func (c *Controller) AllocateProducerIDs(ctx context.Context, count int64) (first int64, err error) {
	if count < 1 {
		return -1, fmt.Errorf("%w: producer id block of %d", ErrInvalidRequest, count)
	}
	return run(ctx, c, func(ctx context.Context) (int64, error) {
		if err := c.requireLeader(); err != nil {
			return -1, err
		}
		first := c.Image().NextProducerID()
		if err := c.propose(ctx, []metadata.Record{metadata.ProducerIDsRecord{NextProducerID: first + count}}); err != nil {
			return -1, err
		}
		return first, nil
	})
}
