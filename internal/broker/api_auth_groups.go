package broker

// Authorization of the KIP-848 consumer group and KIP-932 share group APIs, and of
// DescribeTopicPartitions, as hooks run before their handlers (api_auth.go):
//
//	ConsumerGroupHeartbeat, ShareGroupHeartbeat   READ on the group; DESCRIBE on
//	                                              every subscribed topic
//	ConsumerGroupDescribe, ShareGroupDescribe     DESCRIBE on each group
//	ShareFetch, ShareAcknowledge                  READ on the group; READ on each topic
//	DescribeShareGroupOffsets                     DESCRIBE on each group
//	AlterShareGroupOffsets                        READ on the group
//	DeleteShareGroupOffsets                       DELETE on the group
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
	return nil, req, func(resp kmsg.Response) {
		switch out := resp.(type) {
		case *kmsg.ConsumerGroupDescribeResponse:
			for i := range out.Groups {
				g := &out.Groups[i]
				if name := g.Group; denied[name] {
					*g = kmsg.NewConsumerGroupDescribeResponseGroup()
					g.Group, g.ErrorCode = name, code
				}
				g.AuthorizedOperations = ops(g.Group)
			}
		case *kmsg.ShareGroupDescribeResponse:
			for i := range out.Groups {
				g := &out.Groups[i]
				if denied[g.GroupID] {
					id := g.GroupID
					*g = kmsg.NewShareGroupDescribeResponseGroup()
					g.GroupID, g.ErrorCode = id, code
				}
				g.AuthorizedOperations = ops(g.GroupID)
			}
		}
	}
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

func (b *Broker) authorizeDescribeShareGroupOffsets(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	denied := map[string]bool{}
	for _, g := range r.Groups {
		if !b.authorize(req, auth.OpDescribe, auth.ResourceGroup, g.GroupID) {
			denied[g.GroupID] = true
		}
	}
	if len(denied) == 0 {
		return nil, req, nil
	}
	return nil, req, func(resp kmsg.Response) {
		out := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
		for i := range out.Groups {
			if g := &out.Groups[i]; denied[g.GroupID] {
				g.ErrorCode, g.ErrorMessage, g.Topics = kerr.GroupAuthorizationFailed.Code, nil, nil
			}
		}
	}
}

func (b *Broker) authorizeAlterShareGroupOffsets(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	if b.authorize(req, auth.OpRead, auth.ResourceGroup, req.Body.(*kmsg.AlterShareGroupOffsetsRequest).GroupID) {
		return nil, req, nil
	}
	resp := kmsg.NewPtrAlterShareGroupOffsetsResponse()
	resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	return resp, nil, nil
}

func (b *Broker) authorizeDeleteShareGroupOffsets(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	if b.authorize(req, auth.OpDelete, auth.ResourceGroup, req.Body.(*kmsg.DeleteShareGroupOffsetsRequest).GroupID) {
		return nil, req, nil
	}
	resp := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
	resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	return resp, nil, nil
}

// authorizeDescribeTopicPartitions answers TOPIC_AUTHORIZATION_FAILED for a named
// topic the principal may not describe and leaves such topics out when all are
// listed.
func (b *Broker) authorizeDescribeTopicPartitions(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	all := len(req.Body.(*kmsg.DescribeTopicPartitionsRequest).Topics) == 0
	return nil, req, func(resp kmsg.Response) {
		out := resp.(*kmsg.DescribeTopicPartitionsResponse)
		kept := out.Topics[:0]
		for _, t := range out.Topics {
			switch {
			case t.Topic == nil || t.ErrorCode != 0:
			case !b.allowed(req, auth.OpDescribe, auth.ResourceTopic, *t.Topic):
				if all {
					continue
				}
				b.authorize(req, auth.OpDescribe, auth.ResourceTopic, *t.Topic) // logs the denial
				t.ErrorCode, t.Partitions, t.AuthorizedOperations = kerr.TopicAuthorizationFailed.Code, nil, authorizedOperationsOmitted
			default:
				t.AuthorizedOperations = b.authorizedOperations(req, true, auth.ResourceTopic, *t.Topic)
			}
			kept = append(kept, t)
		}
		out.Topics = kept
	}
}
