package broker

// Authorization of the admin requests a broker forwards to the active controller
// (forward.go): the broker checks what Kafka's KafkaApis checks before forwarding,
// sends on only what the principal may do, and adds the refused items to the
// controller's answer.
//
//	CreateTopics             CREATE on the cluster, else on each topic
//	                         (configs in the answer need DESCRIBE_CONFIGS on the topic)
//	DeleteTopics             DELETE on each topic
//	CreatePartitions         ALTER on each topic
//	AlterConfigs,            ALTER_CONFIGS on each topic or group; on the cluster for brokers
//	IncrementalAlterConfigs
//	ElectLeaders,            ALTER on the cluster
//	AlterPartitionAssignments,
//	UnregisterBroker
//	ListPartitionReassignments, DescribeQuorum   DESCRIBE on the cluster
//
// The security APIs (CreateAcls, DeleteAcls, AlterUserScramCredentials,
// AlterClientQuotas) check the cluster themselves before forwarding.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// authorizeForward returns the request to forward (nil when nothing is left) and a
// function that completes the controller's answer with the refused items (nil when
// nothing was refused). Both nil: the cluster operation itself is refused.
func (b *Broker) authorizeForward(req *protocol.Request) (*protocol.Request, func(kmsg.Response)) {
	if b.authz == nil {
		return req, nil
	}
	clusterOnly := func(op auth.Operation) (*protocol.Request, func(kmsg.Response)) {
		if b.authorizeCluster(req, op) {
			return req, nil
		}
		return nil, nil
	}
	switch r := req.Body.(type) {
	case *kmsg.CreateTopicsRequest:
		return b.authorizeCreateTopics(req, r)
	case *kmsg.DeleteTopicsRequest:
		return b.authorizeDeleteTopics(req, r)
	case *kmsg.CreatePartitionsRequest:
		keep := *r
		keep.Topics = nil
		var refused []kmsg.CreatePartitionsResponseTopic
		for _, t := range r.Topics {
			if b.authorize(req, auth.OpAlter, auth.ResourceTopic, t.Topic) {
				keep.Topics = append(keep.Topics, t)
				continue
			}
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
			refused = append(refused, rt)
		}
		return withBody(req, &keep, len(keep.Topics)), addRefused(refused, func(resp kmsg.Response) {
			out := resp.(*kmsg.CreatePartitionsResponse)
			out.Topics = append(out.Topics, refused...)
		})
	case *kmsg.AlterConfigsRequest:
		keep := *r
		keep.Resources = nil
		var refused []kmsg.AlterConfigsResponseResource
		// A resource named twice goes to the controller whatever the ACLs: it is
		// refused for that (INVALID_REQUEST), as Kafka checks it first.
		dup := repeatedResources(r.Resources, func(res kmsg.AlterConfigsRequestResource) configResource {
			return configResource{res.ResourceType, res.ResourceName}
		})
		for _, res := range r.Resources {
			if dup[configResource{res.ResourceType, res.ResourceName}] {
				keep.Resources = append(keep.Resources, res)
				continue
			}
			if code := b.configAuthError(req, res.ResourceType, res.ResourceName, auth.OpAlterConfigs); code != 0 {
				rr := kmsg.NewAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
				refused = append(refused, rr)
				continue
			}
			keep.Resources = append(keep.Resources, res)
		}
		return withBody(req, &keep, len(keep.Resources)), addRefused(refused, func(resp kmsg.Response) {
			out := resp.(*kmsg.AlterConfigsResponse)
			out.Resources = append(out.Resources, refused...)
		})
	case *kmsg.IncrementalAlterConfigsRequest:
		keep := *r
		keep.Resources = nil
		var refused []kmsg.IncrementalAlterConfigsResponseResource
		// A resource named twice goes to the controller whatever the ACLs: it is
		// refused for that (INVALID_REQUEST), as Kafka checks it first.
		dup := repeatedResources(r.Resources, func(res kmsg.IncrementalAlterConfigsRequestResource) configResource {
			return configResource{res.ResourceType, res.ResourceName}
		})
		for _, res := range r.Resources {
			if dup[configResource{res.ResourceType, res.ResourceName}] {
				keep.Resources = append(keep.Resources, res)
				continue
			}
			if code := b.configAuthError(req, res.ResourceType, res.ResourceName, auth.OpAlterConfigs); code != 0 {
				rr := kmsg.NewIncrementalAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
				refused = append(refused, rr)
				continue
			}
			keep.Resources = append(keep.Resources, res)
		}
		return withBody(req, &keep, len(keep.Resources)), addRefused(refused, func(resp kmsg.Response) {
			out := resp.(*kmsg.IncrementalAlterConfigsResponse)
			out.Resources = append(out.Resources, refused...)
		})
	case *kmsg.ElectLeadersRequest, *kmsg.AlterPartitionAssignmentsRequest, *kmsg.UnregisterBrokerRequest:
		return clusterOnly(auth.OpAlter)
	case *kmsg.ListPartitionReassignmentsRequest, *kmsg.DescribeQuorumRequest:
		return clusterOnly(auth.OpDescribe)
	}
	return req, nil
}

// withBody is req with another body, or nil when it has no items left.
func withBody(req *protocol.Request, body kmsg.Request, items int) *protocol.Request {
	if items == 0 {
		return nil
	}
	r := *req
	r.Body = body
	return &r
}

func addRefused[T any](refused []T, add func(kmsg.Response)) func(kmsg.Response) {
	if len(refused) == 0 {
		return nil
	}
	return add
}

// configAuthError is the code refusing op on a config resource, 0 when allowed.
func (b *Broker) configAuthError(req *protocol.Request, rt kmsg.ConfigResourceType, name string, op auth.Operation) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !b.authorize(req, op, auth.ResourceTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !b.authorizeCluster(req, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !b.authorize(req, op, auth.ResourceGroup, name) {
			return kerr.GroupAuthorizationFailed.Code
		}
	}
	return 0
}

func (b *Broker) authorizeCreateTopics(req *protocol.Request, r *kmsg.CreateTopicsRequest) (*protocol.Request, func(kmsg.Response)) {
	keep := *r
	keep.Topics = nil
	all := b.allowed(req, auth.OpCreate, auth.ResourceCluster, auth.ClusterName)
	var refused []kmsg.CreateTopicsResponseTopic
	for _, t := range r.Topics {
		if all || b.authorize(req, auth.OpCreate, auth.ResourceTopic, t.Topic) {
			keep.Topics = append(keep.Topics, t)
			continue
		}
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		refused = append(refused, rt)
	}
	complete := func(resp kmsg.Response) {
		out := resp.(*kmsg.CreateTopicsResponse)
		for i := range out.Topics {
			t := &out.Topics[i]
			if t.ErrorCode == 0 && !b.allowed(req, auth.OpDescribeConfigs, auth.ResourceTopic, t.Topic) {
				t.ConfigErrorCode, t.Configs = kerr.TopicAuthorizationFailed.Code, nil
			}
		}
		out.Topics = append(out.Topics, refused...)
	}
	return withBody(req, &keep, len(keep.Topics)), complete
}

func (b *Broker) authorizeDeleteTopics(req *protocol.Request, r *kmsg.DeleteTopicsRequest) (*protocol.Request, func(kmsg.Response)) {
	keep := *r
	keep.TopicNames, keep.Topics = nil, nil
	img := b.image()
	var refused []kmsg.DeleteTopicsResponseTopic
	deny := func(name *string, id [16]byte) {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = name, id, kerr.TopicAuthorizationFailed.Code
		refused = append(refused, rt)
	}
	// Entries the controller refuses for their shape (checkDeleteTargets) go to it
	// whatever the ACLs, as Kafka checks the shape first.
	names, ids := map[string]int{}, map[[16]byte]int{}
	for _, n := range r.TopicNames {
		names[n]++
	}
	for _, t := range r.Topics {
		if t.Topic != nil {
			names[*t.Topic]++
		}
		ids[t.TopicID]++
	}
	for _, n := range r.TopicNames {
		if names[n] > 1 || b.authorize(req, auth.OpDelete, auth.ResourceTopic, n) {
			keep.TopicNames = append(keep.TopicNames, n)
		} else {
			deny(kmsg.StringPtr(n), [16]byte{})
		}
	}
	for _, t := range r.Topics {
		zero := t.TopicID == [16]byte{}
		malformed := (t.Topic == nil) == zero || (t.Topic != nil && names[*t.Topic] > 1) || (!zero && ids[t.TopicID] > 1)
		name := t.Topic
		if name == nil {
			if tp, ok := img.TopicByID(metadata.TopicID(t.TopicID)); ok {
				name = &tp.Name
			}
		}
		if malformed || name == nil || b.authorize(req, auth.OpDelete, auth.ResourceTopic, *name) {
			keep.Topics = append(keep.Topics, t)
		} else {
			deny(t.Topic, t.TopicID)
		}
	}
	return withBody(req, &keep, len(keep.TopicNames)+len(keep.Topics)), addRefused(refused, func(resp kmsg.Response) {
		out := resp.(*kmsg.DeleteTopicsResponse)
		out.Topics = append(out.Topics, refused...)
	})
}
