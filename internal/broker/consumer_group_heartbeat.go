package broker

// ConsumerGroupHeartbeat (key 68), versions 0–1: the KIP-848 consumer group protocol.
//
// The coordinator (internal/group) computes assignments with the server-side assignors
// of group.consumer.assignors (uniform, range) and answers once the heartbeat's
// records are committed to __consumer_offsets. v1 (Kafka 4) has the member id chosen by
// the client and adds SubscribedTopicRegex, resolved here against the topics of the
// metadata image (a topic created later is assigned at the next heartbeat, with no
// metadata refresh on the client) that the member may DESCRIBE, as Kafka filters a
// resolved regex. The assignors see topics by id, partition counts
// and the racks of each partition's replicas (broker.rack), for rack-aware placement.
//
// When group.coordinator.rebalance.protocols leaves out consumer, this API and
// ConsumerGroupDescribe answer UNSUPPORTED_VERSION (rebalance_protocols.go).
//
// Differences from Kafka: classic-protocol members cannot join a non-empty consumer
// group (nor the other way round); an empty group changes protocol whatever
// group.consumer.migration.policy says, as in Kafka. A group's own
// consumer.session.timeout.ms and consumer.heartbeat.interval.ms (GROUP config
// resources) are served within the broker's bounds.

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.ConsumerGroupHeartbeat, 0, 1, (*Broker).handleConsumerGroupHeartbeat)
}

func (b *Broker) handleConsumerGroupHeartbeat(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	var describable func(string) bool
	if b.authz != nil { // a regex resolves to the topics the member may describe
		describable = func(topic string) bool { return b.allowed(req, auth.OpDescribe, auth.ResourceTopic, topic) }
	}
	return relayGroupResponse(b.groups.ConsumerGroupHeartbeat(r, req.ClientID, groupClientHost(req.ClientAddr), describable))
}

// groupTopics caches the coordinator's view of the topics for one metadata image.
type groupTopics struct {
	cached      atomic.Pointer[groupTopicsEntry]
	authorizing bool // an authorizer is configured (group.Topics.AuthorizeRegex)
}

type groupTopicsEntry struct {
	img    *metadata.Image
	topics *group.Topics
}

// get returns the topics of img, built once per image.
func (gt *groupTopics) get(img *metadata.Image) *group.Topics {
	if e := gt.cached.Load(); e != nil && e.img == img {
		return e.topics
	}
	racks := map[int32]string{}
	for _, br := range img.Brokers() {
		if br.Rack != "" {
			racks[int32(br.NodeID)] = br.Rack
		}
	}
	out := &group.Topics{Version: img.Offset(), ByName: map[string]group.TopicInfo{}, ByID: map[group.TopicID]string{},
		AuthorizeRegex: gt.authorizing}
	for _, t := range img.Topics() {
		info := group.TopicInfo{Name: t.Name, ID: group.TopicID(t.ID), Partitions: int32(len(t.Partitions))}
		if len(racks) > 0 {
			info.Racks = make([][]string, len(t.Partitions))
			for i, p := range t.Partitions {
				for _, r := range p.Replicas {
					if rack, ok := racks[r]; ok {
						info.Racks[i] = append(info.Racks[i], rack)
					}
				}
			}
		}
		out.ByName[t.Name] = info
		out.ByID[info.ID] = t.Name
		out.Names = append(out.Names, t.Name)
	}
	gt.cached.Store(&groupTopicsEntry{img: img, topics: out})
	return out
}
