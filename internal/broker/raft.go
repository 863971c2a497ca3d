package broker

// SamsaRaft (Samsa-internal key 32001), version 0, on the controller listener only.
//
// Raft messages from one voter of the metadata quorum to another
// (internal/controller's NetTransport). Requests of one connection are stepped into
// Raft in arrival order, synchronously (see ControllerHandler), so a voter's
// messages keep the order its Raft produced them in. INCONSISTENT_CLUSTER_ID when
// the sender belongs to another cluster. The wire format is in internal/protocol.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { registerController(protocol.RaftKey, 0, 0, (*Broker).serveRaft) }

func (b *Broker) serveRaft(ctx context.Context, req kmsg.Request) kmsg.Response {
	return b.controller.ReceiveRaft(ctx, req.(*protocol.RaftRequest))
}
