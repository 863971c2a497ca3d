package broker

// Authorization of the KIP-848 consumer group and KIP-932 share group APIs, and of
// DescribeTopicPartitions, as hooks run before their handlers (api_auth.go):
//
//	ConsumerGroupHeartbeat, ShareGroupHeartbeat   READ on the group; DESCRIBE on
//	                                              every subscribed topic
//	ConsumerGroupDescribe, ShareGroupDescribe     DESCRIBE on each group; a group
//	                                              whose assignments name a topic the
//	                                              principal may not DESCRIBE answers
//	                                              TOPIC_AUTHORIZATION_FAILED
//	ShareFetch, ShareAcknowledge                  READ on the group; READ on each topic
//	DescribeShareGroupOffsets                     DESCRIBE on each group; DESCRIBE on
//	                                              each topic (an all-topics answer
//	                                              leaves out the others)
//	AlterShareGroupOffsets                        READ on the group; READ on each topic
//	DeleteShareGroupOffsets                       DELETE on the group; READ on each topic
//	DescribeTopicPartitions                       DESCRIBE on each topic

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	authHooks[int16(kmsg.ConsumerGroupHeartbeat)] = (*Broker).authorizeGroupHeartbeat
	authHooks[int16(kmsg.ShareGroupHeartbeat)] = (*Broker).authorizeGroupHeartbeat
	authHooks[int16(kmsg.ConsumerGroupDescribe)] = (*Broker).authorizeGroupDescribe
	authHooks[int16(kmsg.ShareGroupDescribe)] = (*Broker).authorizeGroupDescribe
	authHooks[int16(kmsg.ShareFetch)] = (*Broker).authorizeShareFetch
	authHooks[int16(kmsg.ShareAcknowledge)] = (*Broker).authorizeShareAcknowledge
	authHooks[int16(kmsg.DescribeShareGroupOffsets)] = (*Broker).authorizeDescribeShareGroupOffsets
	authHooks[int16(kmsg.AlterShareGroupOffsets)] = (*Broker).authorizeAlterShareGroupOffsets
	authHooks[int16(kmsg.DeleteShareGroupOffsets)] = (*Broker).authorizeDeleteShareGroupOffsets
	authHooks[int16(kmsg.DescribeTopicPartitions)] = (*Broker).authorizeDescribeTopicPartitions
}

func (b *Broker) authorizeGroupHeartbeat(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	var group string
	var topics []string
	switch r := req.Body.(type) {
	case *kmsg.ConsumerGroupHeartbeatRequest:
		group, topics = r.Group, r.SubscribedTopicNames
	case *kmsg.ShareGroupHeartbeatRequest:
		group, topics = r.GroupID, r.SubscribedTopicNames
	}
	code, msg := int16(0), ""
	if !b.authorize(req, auth.OpRead, auth.ResourceGroup, group) {
		code = kerr.GroupAuthorizationFailed.Code
	} else {
		var denied []string
		for _, t := range topics {
			if !b.authorize(req, auth.OpDescribe, auth.ResourceTopic, t) {
				denied = append(denied, t)
			}
		}
		if len(denied) > 0 {
			code, msg = kerr.TopicAuthorizationFailed.Code, "not authorized to describe the subscribed topics "+strings.Join(denied, ", ")
		}
	}
	if code == 0 {
		return nil, req, nil
	}
	if _, ok := req.Body.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp, nil, nil
	}
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp, nil, nil
}

func (b *Broker) authorizeGroupDescribe(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	var groups []string
	var includeOps bool
	switch r := req.Body.(type) {
	case *kmsg.ConsumerGroupDescribeRequest:
		groups, includeOps = r.Groups, r.IncludeAuthorizedOperations
	case *kmsg.ShareGroupDescribeRequest:
		groups, includeOps = r.GroupIDs, r.IncludeAuthorizedOperations
	}
	denied := map[string]bool{}
	for _, g := range groups {
		if !b.authorize(req, auth.OpDescribe, auth.ResourceGroup, g) {
			denied[g] = true
		}
	}
	code := kerr.GroupAuthorizationFailed.Code
	ops := func(g string) int32 {
		return b.authorizedOperations(req, includeOps, auth.ResourceGroup, g)
	}
	// A group whose assignments name a topic the principal may not describe is
	// refused whole, as Kafka does: its members would show the topic.
	hidden := func(topics ...string) bool {
		for _, t := range topics {
			if !b.allowed(req, auth.OpDescribe, auth.ResourceTopic, t) {
				return true
			}
		}
		return false
	}
	topicMsg := "The group has described topic(s) that the client is not authorized to describe."
	return nil, req, func(resp kmsg.Response) {
		switch out := resp.(type) {
		case *kmsg.ConsumerGroupDescribeResponse:
			for i := range out.Groups {
				g := &out.Groups[i]
				name := g.Group
				switch {
				case denied[name]:
					*g = kmsg.NewConsumerGroupDescribeResponseGroup()
					g.Group, g.ErrorCode = name, code
				case hidden(consumerGroupTopics(g)...):
					*g = kmsg.NewConsumerGroupDescribeResponseGroup()
					g.Group, g.ErrorCode, g.ErrorMessage = name, kerr.TopicAuthorizationFailed.Code, &topicMsg
				}
				g.AuthorizedOperations = ops(g.Group)
			}
		case *kmsg.ShareGroupDescribeResponse:
			for i := range out.Groups {
				g := &out.Groups[i]
				id := g.GroupID
				switch {
				case denied[id]:
					*g = kmsg.NewShareGroupDescribeResponseGroup()
					g.GroupID, g.ErrorCode = id, code
				case hidden(shareGroupTopics(g)...):
					*g = kmsg.NewShareGroupDescribeResponseGroup()
					g.GroupID, g.ErrorCode, g.ErrorMessage = id, kerr.TopicAuthorizationFailed.Code, &topicMsg
				}
				g.AuthorizedOperations = ops(g.GroupID)
			}
		}
	}
}

// consumerGroupTopics are the topics a described consumer group's members' current
// and target assignments name.
func consumerGroupTopics(g *kmsg.ConsumerGroupDescribeResponseGroup) []string {
	var topics []string
	for _, m := range g.Members {
		for _, a := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
			for _, tp := range a.TopicPartitions {
				topics = append(topics, tp.Topic)
			}
		}
	}
	return topics
}

// shareGroupTopics are the topics a described share group's members' assignments name.
func shareGroupTopics(g *kmsg.ShareGroupDescribeResponseGroup) []string {
	var topics []string
	for _, m := range g.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			topics = append(topics, tp.Topic)
		}
	}
	return topics
}

// topicName is the name of a topic named by id, "" when the image has none.
func (b *Broker) topicName(id [16]byte) string {
	if t, ok := b.image().TopicByID(metadata.TopicID(id)); ok {
		return t.Name
	}
	return ""
}

// readable reports whether a topic named by id may be read (an unknown id is left
// to the handler, which answers UNKNOWN_TOPIC_ID).
func (b *Broker) readable(req *protocol.Request, id [16]byte) bool {
	name := b.topicName(id)
	return name == "" || b.authorize(req, auth.OpRead, auth.ResourceTopic, name)
}

func (b *Broker) authorizeShareFetch(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.ShareFetchRequest)
	if r.GroupID != nil && !b.authorize(req, auth.OpRead, auth.ResourceGroup, *r.GroupID) {
		resp := kmsg.NewPtrShareFetchResponse()
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, nil
	}
	keep := *r
	var refused []kmsg.ShareFetchResponseTopic
	keep.Topics, refused = splitTopics(r.Topics, func(t kmsg.ShareFetchRequestTopic) bool { return b.readable(req, t.TopicID) },
		func(t kmsg.ShareFetchRequestTopic) kmsg.ShareFetchResponseTopic {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewShareFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt
		})
	if len(refused) == 0 {
		return nil, req, nil
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		out := resp.(*kmsg.ShareFetchResponse)
		out.Topics = append(out.Topics, refused...)
	}
}

func (b *Broker) authorizeShareAcknowledge(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.ShareAcknowledgeRequest)
	if r.GroupID != nil && !b.authorize(req, auth.OpRead, auth.ResourceGroup, *r.GroupID) {
		resp := kmsg.NewPtrShareAcknowledgeResponse()
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, nil
	}
	keep := *r
	var refused []kmsg.ShareAcknowledgeResponseTopic
	keep.Topics, refused = splitTopics(r.Topics, func(t kmsg.ShareAcknowledgeRequestTopic) bool { return b.readable(req, t.TopicID) },
		func(t kmsg.ShareAcknowledgeRequestTopic) kmsg.ShareAcknowledgeResponseTopic {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt
		})
	if len(refused) == 0 {
		return nil, req, nil
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		out := resp.(*kmsg.ShareAcknowledgeResponse)
		out.Topics = append(out.Topics, refused...)
	}
}

// splitTopics keeps the items a request may use and makes the answers of the others.
func splitTopics[T, R any](items []T, allowed func(T) bool, refuse func(T) R) (keep []T, refused []R) {
	for _, it := range items {
		if allowed(it) {
			keep = append(keep, it)
		} else {
			refused = append(refused, refuse(it))
		}
	}
	return keep, refused
}

// authorizeDescribeShareGroupOffsets checks DESCRIBE on each group and on each topic:
// a named topic the principal may not describe answers TOPIC_AUTHORIZATION_FAILED
// (and is not looked up), an all-topics answer leaves such topics out.
func (b *Broker) authorizeDescribeShareGroupOffsets(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	describe := func(topic string) bool { return b.allowed(req, auth.OpDescribe, auth.ResourceTopic, topic) }
	denied := map[string]bool{}
	refused := map[string][]kmsg.DescribeShareGroupOffsetsResponseGroupTopic{}
	keep := *r
	keep.Groups = make([]kmsg.DescribeShareGroupOffsetsRequestGroup, 0, len(r.Groups))
	for _, g := range r.Groups {
		if !b.authorize(req, auth.OpDescribe, auth.ResourceGroup, g.GroupID) {
			denied[g.GroupID] = true
			g.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{}
			keep.Groups = append(keep.Groups, g)
			continue
		}
		if g.Topics != nil {
			kept := make([]kmsg.DescribeShareGroupOffsetsRequestGroupTopic, 0, len(g.Topics))
			for _, t := range g.Topics {
				if b.authorize(req, auth.OpDescribe, auth.ResourceTopic, t.Topic) {
					kept = append(kept, t)
					continue
				}
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.StartOffset, rp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				refused[g.GroupID] = append(refused[g.GroupID], rt)
			}
			g.Topics = kept
		}
		keep.Groups = append(keep.Groups, g)
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		out := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
		for i := range out.Groups {
			g := &out.Groups[i]
			if denied[g.GroupID] {
				g.ErrorCode, g.ErrorMessage, g.Topics = kerr.GroupAuthorizationFailed.Code, nil, nil
				continue
			}
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if describe(t.Topic) {
					kept = append(kept, t)
				}
			}
			g.Topics = kept
			if g.ErrorCode == 0 {
				g.Topics = append(g.Topics, refused[g.GroupID]...)
				delete(refused, g.GroupID) // a group named twice gets them once
			}
		}
	}
}

// authorizeAlterShareGroupOffsets checks READ on the group and on each topic: a topic
// the principal may not read answers TOPIC_AUTHORIZATION_FAILED and is not altered.
func (b *Broker) authorizeAlterShareGroupOffsets(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	if !b.authorize(req, auth.OpRead, auth.ResourceGroup, r.GroupID) {
		resp := kmsg.NewPtrAlterShareGroupOffsetsResponse()
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, nil
	}
	keep := *r
	var refused []kmsg.AlterShareGroupOffsetsResponseTopic
	keep.Topics, refused = splitTopics(r.Topics, func(t kmsg.AlterShareGroupOffsetsRequestTopic) bool {
		return b.authorize(req, auth.OpRead, auth.ResourceTopic, t.Topic)
	}, func(t kmsg.AlterShareGroupOffsetsRequestTopic) kmsg.AlterShareGroupOffsetsResponseTopic {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	if len(refused) == 0 {
		return nil, req, nil
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		if out := resp.(*kmsg.AlterShareGroupOffsetsResponse); out.ErrorCode == 0 {
			out.Topics = append(out.Topics, refused...)
		}
	}
}

// authorizeDeleteShareGroupOffsets checks DELETE on the group and READ on each topic:
// a topic the principal may not read answers TOPIC_AUTHORIZATION_FAILED and keeps its
// state.
func (b *Broker) authorizeDeleteShareGroupOffsets(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	if !b.authorize(req, auth.OpDelete, auth.ResourceGroup, r.GroupID) {
		resp := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, nil
	}
	keep := *r
	var refused []kmsg.DeleteShareGroupOffsetsResponseTopic
	keep.Topics, refused = splitTopics(r.Topics, func(t kmsg.DeleteShareGroupOffsetsRequestTopic) bool {
		return b.authorize(req, auth.OpRead, auth.ResourceTopic, t.Topic)
	}, func(t kmsg.DeleteShareGroupOffsetsRequestTopic) kmsg.DeleteShareGroupOffsetsResponseTopic {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
		return rt
	})
	if len(refused) == 0 {
		return nil, req, nil
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		if out := resp.(*kmsg.DeleteShareGroupOffsetsResponse); out.ErrorCode == 0 {
			out.Topics = append(out.Topics, refused...)
		}
	}
}

// authorizeDescribeTopicPartitions answers TOPIC_AUTHORIZATION_FAILED (without the
// topic id) for a named topic the principal may not describe, whether or not it
// exists, as Kafka does; such a topic is not looked up. When all topics are listed,
// the handler itself leaves them out before paging (so that neither the page nor
// the cursor reveals one).
func (b *Broker) authorizeDescribeTopicPartitions(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DescribeTopicPartitionsRequest)
	keep := *r
	var refused []kmsg.DescribeTopicPartitionsResponseTopic
	keep.Topics, refused = splitTopics(r.Topics, func(t kmsg.DescribeTopicPartitionsRequestTopic) bool {
		return b.authorize(req, auth.OpDescribe, auth.ResourceTopic, t.Topic)
	}, func(t kmsg.DescribeTopicPartitionsRequestTopic) kmsg.DescribeTopicPartitionsResponseTopic {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		name := t.Topic
		rt.Topic, rt.ErrorCode, rt.AuthorizedOperations = &name, kerr.TopicAuthorizationFailed.Code, authorizedOperationsOmitted
		return rt
	})
	if len(refused) > 0 && len(keep.Topics) == 0 { // an empty list would be all topics
		resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
		resp.Topics = refused
		return resp, nil, nil
	}
	complete := func(resp kmsg.Response) {
		out := resp.(*kmsg.DescribeTopicPartitionsResponse)
		for i := range out.Topics {
			if t := &out.Topics[i]; t.Topic != nil && t.ErrorCode == 0 {
				t.AuthorizedOperations = b.authorizedOperations(req, true, auth.ResourceTopic, *t.Topic)
			}
		}
		out.Topics = append(out.Topics, refused...)
	}
	if len(refused) == 0 {
		return nil, req, complete
	}
	return nil, withRequestBody(req, &keep), complete
}
