package broker

// FindCoordinator (key 10), versions 0–6 (batched keys from v4, share keys from v6).
//
// Group keys (type 0) hash to a __consumer_offsets partition (Kafka's hash of the group
// id modulo offsets.topic.num.partitions), transactional ids (type 1) to a
// __transaction_state partition (modulo transaction.state.log.num.partitions); the
// partition's leader is the coordinator. Each topic is created on first use,
// compacted, as Kafka does. While a partition is still loading, the coordinator's APIs
// answer COORDINATOR_LOAD_IN_PROGRESS. Share keys (type 2, "group:topicId:partition",
// KIP-932) hash the same way to a __share_group_state partition, whose leader keeps
// that share partition's state.

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	var br metadata.Broker
	var err error
	switch keyType {
	case 0:
		br, err = b.coordinatorOf(offsetsTopic, "offsets.topic.num.partitions", b.groups.PartitionFor(key), b.ensureOffsetsTopic)
	case 1:
		if key == "" {
			c.ErrorCode = kerr.InvalidRequest.Code
			return c
		}
		br, err = b.coordinatorOf(transactionStateTopic, "transaction.state.log.num.partitions", b.txns.PartitionFor(key), b.ensureTransactionStateTopic)
	case 2:
		br, err = b.shareCoordinatorOf(key)
	default:
		c.ErrorCode = kerr.InvalidRequest.Code
		c.ErrorMessage = kmsg.StringPtr("coordinator key type " + strconv.Itoa(int(keyType)) + " is not served")
		return c
	}
	if err != nil {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		c.ErrorMessage = errorMessage(err)
		return c
	}
	ep, ok := b.clientEndpoint(br, "")
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
	return b.coordinatorOf(shareStateTopic, "share.coordinator.state.topic.num.partitions",
		b.shareStatePartitionOf(key), b.ensureShareStateTopic)
}

// errNoCoordinator: the coordinator's partition has no live leader now.
var errNoCoordinator = errors.New("the coordinator's partition has no leader")

// coordinatorOf returns the leader of partition p of an internal topic, creating the
// topic first (ensure) if needed; numProperty names its partition count.
func (b *Broker) coordinatorOf(topic, numProperty string, p int32, ensure func() (*metadata.Image, error)) (metadata.Broker, error) {
	img, err := ensure()
	if err != nil {
		return metadata.Broker{}, err
	}
	t, _ := img.Topic(topic)
	if int(p) >= len(t.Partitions) {
		return metadata.Broker{}, fmt.Errorf("%s has fewer partitions than %s; partition %d is missing", topic, numProperty, p)
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
	return b.ensureInternalTopic(offsetsTopic, func() internalTopic {
		return internalTopic{b.cfg.OffsetsTopicNumPartitions, b.cfg.OffsetsTopicRF(), "offsets.topic.replication.factor", map[string]string{
			"cleanup.policy":   "compact",
			"segment.bytes":    strconv.FormatInt(b.cfg.OffsetsTopicSegmentBytes, 10),
			"compression.type": "producer",
		}}
	})
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
