package broker

// SamsaMetadataFetch (Samsa-internal key 32002), version 0, on the controller
// listener only.
//
// A node that is a broker but not a controller follows the metadata log by fetching
// it from the voters (internal/controller's Observer): committed entries after an
// offset, long-polled, or the whole image as a snapshot when the offset is older
// than the log the voter keeps. INCONSISTENT_CLUSTER_ID when the fetcher stored
// another cluster's id. The wire format is in internal/protocol.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	registerController(protocol.MetadataFetchKey, 0, 0, (*Broker).serveMetadataFetch)
}

func (b *Broker) serveMetadataFetch(ctx context.Context, req kmsg.Request) kmsg.Response {
	return b.controller.ServeMetadataFetch(ctx, req.(*protocol.MetadataFetchRequest))
}
