package broker

// ListConfigResources (key 74), versions 0–1. Version 0 was ListClientMetricsResources
// (KIP-714); KIP-1142 renamed it and let version 1 ask for resource types.
//
// Version 0 lists the client-metrics resources: none, since Samsa serves no client
// telemetry. Version 1 lists the resources of the types asked, all five when none
// are: topics (every topic, the internal ones included), brokers and broker loggers
// (the registered brokers with an endpoint on the request's listener, fenced ones
// included, as Kafka's metadata cache lists them), client metrics (none) and the
// groups that have a config set. As in Kafka, a type outside those five
// makes the whole answer UNSUPPORTED_VERSION, and the request needs DESCRIBE_CONFIGS
// on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.ListConfigResources, 0, 1, (*Broker).handleListConfigResources) }

// listableConfigTypes are the resource types ListConfigResources v1 lists, in the
// order Kafka lists them.
var listableConfigTypes = []kmsg.ConfigResourceType{
	kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeClientMetrics,
	kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeTopic,
}

func (b *Broker) handleListConfigResources(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ListConfigResourcesRequest)
	resp := kmsg.NewPtrListConfigResourcesResponse()
	resp.SetVersion(req.Version)
	if !b.authorizeCluster(req, auth.OpDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	asked := make([]kmsg.ConfigResourceType, 0, len(r.ResourceTypes))
	for _, t := range r.ResourceTypes {
		asked = append(asked, kmsg.ConfigResourceType(t))
	}
	switch {
	case req.Version == 0:
		asked = []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics}
	case len(asked) == 0:
		asked = listableConfigTypes
	}
	for _, t := range asked {
		if !slices.Contains(listableConfigTypes, t) {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return reply(resp)
		}
	}
	img := b.image()
	add := func(t kmsg.ConfigResourceType, name string) {
		res := kmsg.NewListConfigResourcesResponseConfigResource()
		res.Name, res.Type = name, int8(t)
		resp.ConfigResources = append(resp.ConfigResources, res)
	}
	for _, t := range listableConfigTypes {
		if !slices.Contains(asked, t) {
			continue
		}
		switch t {
		case kmsg.ConfigResourceTypeGroupConfig:
			for _, g := range img.ConfiguredGroups() {
				add(t, g)
			}
		case kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeBroker:
			for _, br := range img.Brokers() {
				if _, ok := b.clientEndpoint(br, req.Listener); ok {
					add(t, strconv.Itoa(int(br.NodeID)))
				}
			}
		case kmsg.ConfigResourceTypeTopic:
			for _, topic := range img.Topics() {
				add(t, topic.Name)
			}
		}
	}
	return reply(resp)
}
