package broker

// FindCoordinator (key 10), versions 0–6 (batched keys from v4, share keys from v6).
//
// Group keys hash to a __consumer_offsets partition (Kafka's hash of the group id
// modulo offsets.topic.num.partitions); its leader is the coordinator. The topic is
// created on first use, compacted, with offsets.topic.num.partitions partitions, as
// Kafka does. While a partition's groups are still loading the group APIs answer
// COORDINATOR_LOAD_IN_PROGRESS. Share keys (type 2, "group:topicId:partition", KIP-932)
// hash the same way to a __share_group_state partition, whose leader keeps that share
// partition's state. Transaction coordinator keys (type 1) are answered with
// COORDINATOR_NOT_AVAILABLE: transactions are not served yet.

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.FindCoordinator, 0, 6, (*Broker).handleFindCoordinator) }

func (b *Broker) handleFindCoordinator(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.SetVersion(req.Version)
	keys := r.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, key := range keys {
		c := b.findCoordinator(key, r.CoordinatorType)
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
	var br metadata.Broker
	var err error
	switch keyType {
	case 0:
		br, err = b.coordinatorOf(offsetsTopic, b.groups.PartitionFor(key), b.ensureOffsetsTopic)
	case 2:
		br, err = b.shareCoordinatorOf(key)
	default:
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		c.ErrorMessage = kmsg.StringPtr("transactions are not supported by this broker yet")
		return c
	}
	if err != nil {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		c.ErrorMessage = errorMessage(err)
		return c
	}
	ep, ok := b.clientEndpoint(br)
	if !ok {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return c
	}
	c.NodeID = int32(br.NodeID)
	c.Host, c.Port = ep.Host, ep.Port
	return c
}

// shareCoordinatorOf returns the share coordinator of a share-partition key
// ("group:topicId:partition"): the leader of its __share_group_state partition.
func (b *Broker) shareCoordinatorOf(key string) (metadata.Broker, error) {
	return b.coordinatorOf(shareStateTopic, group.PartitionOf(key, b.cfg.ShareCoordinatorStateTopicNumPartitions), b.ensureShareStateTopic)
}

// errNoCoordinator: the coordinator's partition has no live leader now.
var errNoCoordinator = errors.New("the coordinator's partition has no leader")

// coordinatorOf returns the leader of partition p of an internal topic, creating the
// topic first (ensure) if needed.
func (b *Broker) coordinatorOf(topic string, p int32, ensure func() (*metadata.Image, error)) (metadata.Broker, error) {
	img, err := ensure()
	if err != nil {
		return metadata.Broker{}, err
	}
	t, _ := img.Topic(topic)
	if int(p) >= len(t.Partitions) {
		return metadata.Broker{}, fmt.Errorf("%s has fewer partitions than configured; partition %d is missing", topic, p)
	}
	leader := t.Partitions[p].Leader
	br, ok := img.Broker(metadata.NodeID(leader))
	if leader < 0 || !ok {
		return metadata.Broker{}, fmt.Errorf("%s-%d: %w", topic, p, errNoCoordinator)
	}
	return br, nil
}

// ensureOffsetsTopic creates __consumer_offsets on first use, with
// offsets.topic.replication.factor replicas (never fewer: until that many brokers
// are registered the controller refuses and FindCoordinator answers
// COORDINATOR_NOT_AVAILABLE), and returns the image that has it.
func (b *Broker) ensureOffsetsTopic() (*metadata.Image, error) {
	return b.ensureInternalTopic(offsetsTopic, b.cfg.OffsetsTopicNumPartitions, b.cfg.OffsetsTopicRF(), "offsets.topic.replication.factor", map[string]string{
		"cleanup.policy":   "compact",
		"segment.bytes":    strconv.FormatInt(b.cfg.OffsetsTopicSegmentBytes, 10),
		"compression.type": "producer",
	})
}
