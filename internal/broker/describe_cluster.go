package broker

// DescribeCluster (key 60), versions 0–2.
//
// The registered, unfenced brokers (and from v2, when IncludeFencedBrokers is set, the
// fenced ones too, marked IsFenced: KIP-1073), the cluster id and the active controller (when it
// is also a broker; else a live broker, which forwards to it, as Kafka does). Only the
// broker endpoint type (1) is served; asking for controllers (2) is
// UNSUPPORTED_ENDPOINT_TYPE, as on a Kafka broker.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.DescribeCluster, 0, 2, (*Broker).handleDescribeCluster) }

func (b *Broker) handleDescribeCluster(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.SetVersion(req.Version)
	resp.EndpointType = 1
	if req.Version >= 1 && r.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("only broker endpoints (type 1) are served")
		resp.EndpointType = r.EndpointType
		return reply(resp)
	}
	img := b.image()
	resp.ClusterID = b.clusterID
	resp.ControllerID = b.controllerID(img)
	resp.ClusterAuthorizedOperations = authorizedOperationsOmitted
	for _, br := range img.Brokers() {
		ep, ok := b.clientEndpoint(br)
		if !ok || br.Fenced && !(req.Version >= 2 && r.IncludeFencedBrokers) {
			continue
		}
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID = int32(br.NodeID)
		db.Host = ep.Host
		db.Port = ep.Port
		db.IsFenced = br.Fenced
		if br.Rack != "" {
			rack := br.Rack
			db.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, db)
	}
	return reply(resp)
}
