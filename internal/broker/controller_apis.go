package broker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// The controller listener (the first of controller.listener.names) serves the APIs
// of Kafka's controller: the broker-to-controller ones (BrokerRegistration,
// BrokerHeartbeat, AlterPartition, AllocateProducerIds), the admin requests that
// brokers forward (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments,
// ListPartitionReassignments, DescribeQuorum, UnregisterBroker), ApiVersions, and Samsa's two internal
// requests (Raft messages between voters, metadata fetches by observers). Each API's
// file registers its controller side here, next to its client side. The table that
// ApiVersions answers on this listener is built from these registrations.

type controllerFunc func(b *Broker, ctx context.Context, req kmsg.Request) kmsg.Response

type controllerEntry struct {
	min, max int16
	fn       controllerFunc
}

var controllerRegistry = map[int16]controllerEntry{}

// registerController adds the controller side of an API. Called from init functions.
func registerController[K ~int16](key K, min, max int16, fn controllerFunc) {
	k := int16(key)
	if _, dup := controllerRegistry[k]; dup {
		panic(fmt.Sprintf("broker: controller API %d registered twice", k))
	}
	if req := ControllerNewRequest(k); req == nil || req.MaxVersion() < max {
		panic(fmt.Sprintf("broker: controller API %d served above what can be decoded", k))
	}
	controllerRegistry[k] = controllerEntry{min: min, max: max, fn: fn}
}

// ControllerVersions reports the served version range of an API on the controller
// listener.
func ControllerVersions(key int16) (min, max int16, ok bool) {
	if key == int16(kmsg.ApiVersions) {
		return 0, 4, true
	}
	e, ok := controllerRegistry[key]
	return e.min, e.max, ok
}

// ControllerAPIKeys lists the APIs served on the controller listener, sorted by key.
func ControllerAPIKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := []kmsg.ApiVersionsResponseApiKey{{ApiKey: int16(kmsg.ApiVersions), MinVersion: 0, MaxVersion: 4}}
	for k, e := range controllerRegistry {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: e.min, MaxVersion: e.max})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// ControllerNewRequest returns an empty request for a key served on the controller
// listener (Samsa's internal ones included), nil for any other.
func ControllerNewRequest(key int16) kmsg.Request {
	if r := protocol.NewInternalRequest(key); r != nil {
		return r
	}
	return kmsg.RequestForKey(key)
}

// ControllerHandler returns the protocol.Handler of the controller listener.
func (b *Broker) ControllerHandler() protocol.Handler { return controllerHandler{b} }

type controllerHandler struct{ b *Broker }

// controllerRequestTimeout bounds one request on the controller listener.
const controllerRequestTimeout = 30 * time.Second

func (h controllerHandler) Handle(req *protocol.Request) <-chan protocol.Response {
	b := h.b
	if req.Key == int16(kmsg.ApiVersions) {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(req.Version)
		resp.ApiKeys = ControllerAPIKeys()
		return reply(resp)
	}
	if b.controller == nil {
		return protocol.Ready(protocol.Response{Close: true, None: true})
	}
	// Other nodes — brokers registering, forwarding admin requests, voters — need
	// CLUSTER_ACTION (Kafka's brokers are super users); the requests they forward
	// were authorized for their clients already.
	if !b.authorizeCluster(req, auth.OpClusterAction) {
		b.logger.Warn("a node without CLUSTER_ACTION on the cluster called the controller listener; closing the connection: make the nodes' principal a super user",
			"principal", req.Principal.String(), "remote", req.ClientAddr, "api", kmsg.NameForKey(req.Key))
		return protocol.Ready(protocol.Response{Close: true, None: true})
	}
	if req.Key == protocol.RaftKey {
		// In order, at once: Step only queues the messages for the raft loop.
		ctx, cancel := context.WithTimeout(b.serving, controllerRequestTimeout)
		defer cancel()
		return reply(b.serveRaft(ctx, req.Body))
	}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		ctx, cancel := context.WithTimeout(b.serving, controllerRequestTimeout)
		defer cancel()
		resp, err := b.serveController(ctx, req.Body)
		if err != nil {
			out <- protocol.Response{Close: true, None: true}
			return
		}
		out <- protocol.Response{Body: resp}
	})
	return out
}

// serveController serves a controller API request in process. It is the Local
// function of this node's Channel, used when this node is the active controller.
func (b *Broker) serveController(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	e, ok := controllerRegistry[req.Key()]
	if !ok || b.controller == nil {
		return nil, fmt.Errorf("%s is not a controller API", kmsg.NameForKey(req.Key()))
	}
	return e.fn(b, ctx, req), nil
}
