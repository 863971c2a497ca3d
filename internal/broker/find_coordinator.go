package broker

// FindCoordinator (key 10), versions 0–5 (batched keys from v4).
//
// Group keys hash to a __consumer_offsets partition (Kafka's hash of the group id
// modulo offsets.topic.num.partitions); its leader is the coordinator. The topic is
// created on first use, compacted, with offsets.topic.num.partitions partitions, as
// Kafka does. While a partition's groups are still loading the group APIs answer
// COORDINATOR_LOAD_IN_PROGRESS. Transaction coordinator keys (type 1) are answered with
// COORDINATOR_NOT_AVAILABLE: transactions are not served yet.

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.FindCoordinator, 0, 5, (*Broker).handleFindCoordinator) }

func (b *Broker) handleFindCoordinator(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.SetVersion(req.Version)
	keys := r.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, key := range keys {
		c := b.onListener(b.findCoordinator(key, r.CoordinatorType), req.Listener)
		if req.Version < 4 {
			resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
			resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
			break
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return reply(resp)
}

func (b *Broker) findCoordinator(key string, keyType int8) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key = key
	c.NodeID = -1
	if keyType != 0 {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		c.ErrorMessage = kmsg.StringPtr("transactions are not supported by this broker yet")
		return c
	}
	img, err := b.ensureOffsetsTopic()
	if err != nil {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		c.ErrorMessage = errorMessage(err)
		return c
	}
	t, _ := img.Topic(offsetsTopic)
	p := b.groups.PartitionFor(key)
	if int(p) >= len(t.Partitions) {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		c.ErrorMessage = kmsg.StringPtr(offsetsTopic + " has fewer partitions than offsets.topic.num.partitions; partition " + strconv.Itoa(int(p)) + " is missing")
		return c
	}
	leader := t.Partitions[p].Leader
	br, ok := img.Broker(metadata.NodeID(leader))
	ep, hasEndpoint := b.clientEndpoint(br, "")
	if leader < 0 || !ok || !hasEndpoint {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return c
	}
	c.NodeID = leader
	c.Host, c.Port = ep.Host, ep.Port
	return c
}

// ensureOffsetsTopic creates __consumer_offsets on first use, with
// offsets.topic.replication.factor replicas (never fewer: until that many brokers
// are registered the controller refuses and FindCoordinator answers
// COORDINATOR_NOT_AVAILABLE), and returns the image that has it.
func (b *Broker) ensureOffsetsTopic() (*metadata.Image, error) {
	img := b.image()
	if _, ok := img.Topic(offsetsTopic); ok {
		return img, nil
	}
	ctx, cancel := b.requestContext(0)
	defer cancel()
	results, err := b.createTopics(ctx, []kmsg.CreateTopicsRequestTopic{newTopic(offsetsTopic, b.cfg.OffsetsTopicNumPartitions, b.cfg.OffsetsTopicRF(), map[string]string{
		"cleanup.policy":   "compact",
		"segment.bytes":    strconv.FormatInt(b.cfg.OffsetsTopicSegmentBytes, 10),
		"compression.type": "producer",
	})})
	if err != nil {
		return nil, err
	}
	if res := results[0]; res.ErrorCode != 0 && res.ErrorCode != kerr.TopicAlreadyExists.Code {
		msg := ""
		if res.ErrorMessage != nil {
			msg = *res.ErrorMessage
		}
		return nil, fmt.Errorf("cannot create %s with replication factor %d (offsets.topic.replication.factor): %s", offsetsTopic, b.cfg.OffsetsTopicRF(), msg)
	}
	if _, ok := b.image().Topic(offsetsTopic); !ok {
		return nil, fmt.Errorf("%s is not in this broker's metadata yet", offsetsTopic)
	}
	return b.image(), nil
}

// onListener gives a coordinator the address of its broker on the listener the
// request came in on.
func (b *Broker) onListener(c kmsg.FindCoordinatorResponseCoordinator, listener string) kmsg.FindCoordinatorResponseCoordinator {
	if br, ok := b.image().Broker(metadata.NodeID(c.NodeID)); ok && c.ErrorCode == 0 {
		if ep, ok := br.Endpoint(listener); ok {
			c.Host, c.Port = ep.Host, ep.Port
		}
	}
	return c
}
