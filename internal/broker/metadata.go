package broker

// Metadata (key 3), versions 0–13.
//
// Brokers come from the metadata image's registrations (unfenced ones, at their
// endpoint for the listener this node's clients use), topics and partitions (with
// leader epochs and topic IDs) from its topics. The controller id is the active
// controller when it is also a broker, else a live broker, which forwards admin
// requests to it. A null topic list means all topics
// (v1+); an empty list means none, except in v0, where empty means all. A topic named
// more than once is answered once, as Kafka answers the set of the topics named (each
// mention would otherwise cost the topic's whole metadata again). Unknown topics are
// created when auto.create.topics.enable is on and the request allows it (v4+;
// always before v4), with num.partitions and default.replication.factor. As Kafka's
// brokers do (AutoTopicCreationManager), the creation is sent to the active
// controller and not waited for: the topic is answered UNKNOWN_TOPIC_OR_PARTITION
// until a later Metadata finds it, and a topic whose creation is in flight is not
// sent again. v13's top-level error code (KIP-1102: REBOOTSTRAP_REQUIRED) is always
// 0, as on Kafka's brokers, which never ask a client to rebootstrap through Metadata.
//
// With an authorizer, a topic the principal may not DESCRIBE is left out of an
// all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named; auto-creation
// needs CREATE on the cluster or on the topic. A topic named by id (v12+) that the
// principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without its name.
// Authorized operations (topic: v8+, cluster: v8–10, 0 without DESCRIBE on the
// cluster) are computed when asked for, else reported as Kafka reports "not
// requested" (-2147483648).

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

const authorizedOperationsOmitted = -2147483648

func init() { register(kmsg.Metadata, 0, 13, (*Broker).handleMetadata) }

func (b *Broker) handleMetadata(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.MetadataRequest)
	if r.Version == 0 && len(r.Topics) == 0 {
		r.Topics = nil
	}
	r.Topics = distinctTopics(r.Topics)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(req.Version)
	img := b.image()

	if r.Topics != nil && b.cfg.AutoCreateTopicsEnable && (r.Version < 4 || r.AllowAutoTopicCreation) {
		b.autoCreate(img, b.creatable(req, img, r.Topics))
	}

	for _, br := range img.Brokers() {
		ep, ok := b.clientEndpoint(br, req.Listener)
		if br.Fenced || !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID = int32(br.NodeID)
		mb.Host = ep.Host
		mb.Port = ep.Port
		if br.Rack != "" {
			rack := br.Rack
			mb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	clusterID := b.clusterID
	resp.ClusterID = &clusterID
	resp.ControllerID = b.controllerID(img)
	resp.AuthorizedOperations = b.clusterAuthorizedOperations(req, r.IncludeClusterAuthorizedOperations && r.Version <= 10)
	withOps := func(mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		mt.AuthorizedOperations = b.authorizedOperations(req, r.IncludeTopicAuthorizedOperations, auth.ResourceTopic, *mt.Topic)
		return mt
	}

	if r.Topics == nil {
		for _, t := range img.Topics() {
			if b.allowed(req, auth.OpDescribe, auth.ResourceTopic, t.Name) {
				resp.Topics = append(resp.Topics, withOps(b.topicMetadata(img, t)))
			}
		}
		return reply(resp)
	}
	for _, rt := range r.Topics {
		var (
			t  *metadata.Topic
			ok bool
		)
		switch {
		case rt.Topic != nil:
			t, ok = img.Topic(*rt.Topic)
		case rt.TopicID != [16]byte{}:
			t, ok = img.TopicByID(metadata.TopicID(rt.TopicID))
		}
		if rt.Topic != nil && !b.authorize(req, auth.OpDescribe, auth.ResourceTopic, *rt.Topic) ||
			ok && !b.authorize(req, auth.OpDescribe, auth.ResourceTopic, t.Name) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			mt.AuthorizedOperations = authorizedOperationsOmitted
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.TopicID = rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			} else if err := controller.ValidateTopicName(*rt.Topic); err != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			mt.AuthorizedOperations = authorizedOperationsOmitted
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, withOps(b.topicMetadata(img, t)))
	}
	return reply(resp)
}

// creatable keeps the topics a Metadata request may auto-create: all of them with
// CREATE on the cluster, else those with CREATE on the topic.
func (b *Broker) creatable(req *protocol.Request, img *metadata.Image, topics []kmsg.MetadataRequestTopic) []kmsg.MetadataRequestTopic {
	if b.authz == nil || b.allowed(req, auth.OpCreate, auth.ResourceCluster, auth.ClusterName) {
		return topics
	}
	var out []kmsg.MetadataRequestTopic
	for _, rt := range topics {
		if rt.Topic == nil {
			continue
		}
		if _, exists := img.Topic(*rt.Topic); !exists && b.authorize(req, auth.OpCreate, auth.ResourceTopic, *rt.Topic) {
			out = append(out, rt)
		}
	}
	return out
}

// autoCreate starts creating, through the active controller, the requested topics
// that do not exist yet and are not being created already, and returns at once:
// the topics are answered UNKNOWN_TOPIC_OR_PARTITION (they are not in img) until a
// later Metadata finds them created, as Kafka's AutoTopicCreationManager answers
// (it sends the CreateTopics without waiting for it, and a topic already in flight
// is not sent again). Waiting for the creation here held the Metadata — and every
// request after it on the client's connection — for as long as the controller took
// to answer: 30 s when the controllers had no majority.
func (b *Broker) autoCreate(img *metadata.Image, topics []kmsg.MetadataRequestTopic) {
	var create []kmsg.CreateTopicsRequestTopic
	b.autoCreating.Lock()
	for _, rt := range topics {
		if rt.Topic == nil {
			continue
		}
		if _, ok := img.Topic(*rt.Topic); ok || b.autoCreating.m[*rt.Topic] {
			continue
		}
		if controller.ValidateTopicName(*rt.Topic) != nil {
			continue
		}
		if b.autoCreating.m == nil {
			b.autoCreating.m = make(map[string]bool)
		}
		b.autoCreating.m[*rt.Topic] = true
		create = append(create, newTopic(*rt.Topic, -1, -1, nil))
	}
	b.autoCreating.Unlock()
	if len(create) == 0 {
		return
	}
	go func() {
		defer func() {
			b.autoCreating.Lock()
			for _, t := range create {
				delete(b.autoCreating.m, t.Topic)
			}
			b.autoCreating.Unlock()
		}()
		ctx, cancel := b.requestContext(0)
		defer cancel()
		results, err := b.createTopics(ctx, create)
		if err != nil {
			b.logger.Info("auto-create failed", "err", err)
		}
		for _, res := range results {
			if res.ErrorCode != 0 && res.ErrorCode != kerr.TopicAlreadyExists.Code {
				b.logger.Info("auto-create failed", "topic", res.Topic, "err", kerr.ErrorForCode(res.ErrorCode), "message", res.ErrorMessage)
			} else if res.ErrorCode == 0 {
				b.logger.Info("auto-created topic", "topic", res.Topic, "partitions", res.NumPartitions)
			}
		}
	}()
}

// topicMetadata describes a topic as the image has it, with the replicas on brokers
// that are fenced or unregistered, and those whose log directory failed on this
// node, reported offline, as Kafka does (and a partition without a live leader as
// LEADER_NOT_AVAILABLE).
func (b *Broker) topicMetadata(img *metadata.Image, t *metadata.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = [16]byte(t.ID)
	mt.IsInternal = isInternalTopic(t.Name)
	mt.AuthorizedOperations = authorizedOperationsOmitted
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Partition
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = append([]int32(nil), p.Replicas...)
		mp.ISR = append([]int32(nil), p.ISR...)
		mp.OfflineReplicas = []int32{}
		for _, r := range p.Replicas {
			br, ok := img.Broker(metadata.NodeID(r))
			switch {
			case !ok || br.Fenced || slices.Contains(p.OfflineReplicas, r):
			case r == b.nodeID && b.replicaOffline(t.Name, p.Partition):
				if mp.Leader == b.nodeID {
					mp.Leader = -1
				}
			default:
				continue
			}
			mp.OfflineReplicas = append(mp.OfflineReplicas, r)
		}
		if mp.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// clientEndpoint is the endpoint of broker br that a client connected to listener
// uses: the one of the same name (as Kafka answers), else the one named like this
// node's first advertised listener, else br's first.
func (b *Broker) clientEndpoint(br metadata.Broker, listener string) (metadata.Endpoint, bool) {
	if ep, ok := br.Endpoint(listener); ok && listener != "" {
		return ep, true
	}
	if len(b.cfg.AdvertisedListeners) > 0 {
		if ep, ok := br.Endpoint(b.cfg.AdvertisedListeners[0].Name); ok {
			return ep, true
		}
	}
	if len(br.Endpoints) == 0 {
		return metadata.Endpoint{}, false
	}
	return br.Endpoints[0], true
}

// controllerID is the controller Metadata and DescribeCluster name: the active
// controller when it is also a live broker (combined nodes), else a live broker —
// this one if it is live — which forwards admin requests to the active controller,
// as Kafka's brokers answer; -1 when there is none.
func (b *Broker) controllerID(img *metadata.Image) int32 {
	live := func(id int32) bool {
		br, ok := img.Broker(metadata.NodeID(id))
		return ok && !br.Fenced
	}
	if l := b.meta.Leader(); l >= 0 && live(l) {
		return l
	}
	if live(b.nodeID) {
		return b.nodeID
	}
	if ids := img.UnfencedBrokers(); len(ids) > 0 {
		return ids[0]
	}
	return -1
}

func isInternalTopic(name string) bool {
	return name == offsetsTopic || name == "__transaction_state" || name == shareStateTopic
}

// distinctTopics returns topics without the repeats of a name, or of an id for those
// named by id, keeping the first of each in order (topics itself when none repeats).
func distinctTopics(topics []kmsg.MetadataRequestTopic) []kmsg.MetadataRequestTopic {
	if len(topics) < 2 {
		return topics
	}
	names := make(map[string]struct{}, len(topics))
	ids := make(map[[16]byte]struct{})
	var out []kmsg.MetadataRequestTopic
	for i, rt := range topics {
		var seen bool
		if rt.Topic != nil {
			_, seen = names[*rt.Topic]
			names[*rt.Topic] = struct{}{}
		} else {
			_, seen = ids[rt.TopicID]
			ids[rt.TopicID] = struct{}{}
		}
		switch {
		case seen && out == nil:
			out = append(make([]kmsg.MetadataRequestTopic, 0, len(topics)), topics[:i]...)
		case !seen && out != nil:
			out = append(out, rt)
		}
	}
	if out == nil {
		return topics
	}
	return out
}
