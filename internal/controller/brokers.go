package controller

import (
	"context"
	"fmt"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

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
