package broker

// UnregisterBroker (key 64), version 0; on the client listeners and the controller
// listener.
//
// Removes a decommissioned broker's registration from the cluster (Kafka's
// `kafka-cluster.sh unregister`, Admin.unregisterBroker). A broker forwards the
// request to the active controller, which takes the broker out of every ISR — except
// where it is the last member, as when a broker is fenced — and moves its leaderships
// in the same metadata log entry as the unregistration. Needs ALTER on the cluster
// (CLUSTER_AUTHORIZATION_FAILED). An id that is not registered is
// BROKER_ID_NOT_REGISTERED. The broker need not be fenced or stopped: a process that
// still runs registers again after its next heartbeat fails. Kafka's controller
// answers errors without a message; Samsa's says which broker.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.UnregisterBroker, 0, 0, (*Broker).handleUnregisterBroker)
	registerController(kmsg.UnregisterBroker, 0, 0, (*Broker).serveUnregisterBroker)
}

// handleUnregisterBroker forwards the request and answers once this node's image no
// longer has the registration it had (so that a DescribeCluster sent here next does
// not list the broker), or has a newer one (the broker registered again).
func (b *Broker) handleUnregisterBroker(req *protocol.Request) <-chan protocol.Response {
	id := metadata.NodeID(req.Body.(*kmsg.UnregisterBrokerRequest).BrokerID)
	before, known := b.image().Broker(id)
	return b.forward(req, 0, func(img *metadata.Image, resp kmsg.Response) bool {
		if !known || resp.(*kmsg.UnregisterBrokerResponse).ErrorCode != 0 {
			return true
		}
		now, ok := img.Broker(id)
		return !ok || now.Epoch != before.Epoch
	})
}

func (b *Broker) serveUnregisterBroker(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.UnregisterBrokerRequest)
	resp := kmsg.NewPtrUnregisterBrokerResponse()
	resp.SetVersion(r.Version)
	if err := b.controller.UnregisterBroker(ctx, r.BrokerID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
	}
	return resp
}
