package broker

// Authorization of the APIs whose handlers serve the group coordinator, producer
// ids, configs and the cluster's description. Broker.Handle runs the hook of an API
// (when an authorizer is configured) before its handler: the hook refuses the whole
// request, or passes on only what the principal may do and completes the handler's
// answer with the refused items — so the handlers themselves stay as they are.
//
//	JoinGroup, SyncGroup, Heartbeat, LeaveGroup   READ on the group
//	OffsetCommit        READ on the group; READ on each topic
//	OffsetFetch         DESCRIBE on the group; DESCRIBE on each topic (an all-topics
//	                    answer leaves out the others)
//	OffsetDelete        DELETE on the group; READ on each topic
//	DescribeGroups      DESCRIBE on each group (authorized operations when asked)
//	ListGroups          DESCRIBE on the cluster, else only the groups it may DESCRIBE
//	DeleteGroups        DELETE on each group
//	FindCoordinator     DESCRIBE on the group, or on the transactional id; CLUSTER_ACTION
//	                    on the cluster for share-partition keys
//	InitProducerId      WRITE on the transactional id; without one, IDEMPOTENT_WRITE
//	                    on the cluster or WRITE on some topic
//	DescribeConfigs     DESCRIBE_CONFIGS on each topic; on the cluster for brokers
//	DescribeLogDirs     DESCRIBE on the cluster
//	DescribeCluster     nothing for the broker list, fenced brokers (v2) included, as on
//	                    Kafka's brokers; the cluster's authorized operations, when
//	                    asked, need DESCRIBE on the cluster (0 otherwise)
//
// The other transaction APIs check in their handlers (txn_apis.go,
// write_txn_markers.go, describe_producers.go), as Produce and Fetch do.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// authHook decides a request before its handler: refuse is a complete answer; else
// pass is the request to serve and complete, if set, amends the handler's answer.
type authHook func(b *Broker, req *protocol.Request) (refuse kmsg.Response, pass *protocol.Request, complete func(kmsg.Response))

var authHooks = map[int16]authHook{
	int16(kmsg.JoinGroup):       groupWhole(auth.OpRead, func(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).Group }),
	int16(kmsg.SyncGroup):       groupWhole(auth.OpRead, func(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).Group }),
	int16(kmsg.Heartbeat):       groupWhole(auth.OpRead, func(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).Group }),
	int16(kmsg.LeaveGroup):      groupWhole(auth.OpRead, func(r kmsg.Request) string { return r.(*kmsg.LeaveGroupRequest).Group }),
	int16(kmsg.OffsetCommit):    (*Broker).authorizeOffsetCommit,
	int16(kmsg.OffsetFetch):     (*Broker).authorizeOffsetFetch,
	int16(kmsg.OffsetDelete):    (*Broker).authorizeOffsetDelete,
	int16(kmsg.DescribeGroups):  (*Broker).authorizeDescribeGroups,
	int16(kmsg.ListGroups):      (*Broker).authorizeListGroups,
	int16(kmsg.DeleteGroups):    (*Broker).authorizeDeleteGroups,
	int16(kmsg.FindCoordinator): (*Broker).authorizeFindCoordinator,
	int16(kmsg.InitProducerID):  (*Broker).authorizeInitProducerID,
	int16(kmsg.DescribeConfigs): (*Broker).authorizeDescribeConfigs,
	int16(kmsg.DescribeLogDirs): (*Broker).authorizeDescribeLogDirs,
	int16(kmsg.DescribeCluster): (*Broker).authorizeDescribeCluster,
}

// handleAuthorized runs an API's hook around its handler.
func (b *Broker) handleAuthorized(hook authHook, fn handlerFunc, req *protocol.Request) <-chan protocol.Response {
	refuse, pass, complete := hook(b, req)
	if refuse != nil {
		refuse.SetVersion(req.Version)
		return reply(refuse)
	}
	ch := fn(b, pass)
	if complete == nil {
		return ch
	}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		resp, ok := <-ch
		if ok && resp.Body != nil {
			complete(resp.Body)
		}
		out <- resp
	})
	return out
}

func withRequestBody(req *protocol.Request, body kmsg.Request) *protocol.Request {
	r := *req
	r.Body = body
	return &r
}

// groupWhole refuses a request of one group unless op is allowed on it.
func groupWhole(op auth.Operation, group func(kmsg.Request) string) authHook {
	return func(b *Broker, req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
		if b.authorize(req, op, auth.ResourceGroup, group(req.Body)) {
			return nil, req, nil
		}
		code := kerr.GroupAuthorizationFailed.Code
		switch req.Body.(type) {
		case *kmsg.JoinGroupRequest:
			resp := kmsg.NewPtrJoinGroupResponse()
			resp.ErrorCode, resp.Generation = code, -1
			return resp, nil, nil
		case *kmsg.SyncGroupRequest:
			resp := kmsg.NewPtrSyncGroupResponse()
			resp.ErrorCode = code
			return resp, nil, nil
		case *kmsg.HeartbeatRequest:
			resp := kmsg.NewPtrHeartbeatResponse()
			resp.ErrorCode = code
			return resp, nil, nil
		default:
			resp := kmsg.NewPtrLeaveGroupResponse()
			resp.ErrorCode = code
			return resp, nil, nil
		}
	}
}

func (b *Broker) authorizeOffsetCommit(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.OffsetCommitRequest)
	groupOK := b.authorize(req, auth.OpRead, auth.ResourceGroup, r.Group)
	keep := *r
	keep.Topics = nil
	var refused []kmsg.OffsetCommitResponseTopic
	for _, t := range r.Topics {
		name := t.Topic
		if name == "" { // v10 names topics by id
			name = b.topicName(t.TopicID)
		}
		code := int16(0)
		switch {
		case !groupOK:
			code = kerr.GroupAuthorizationFailed.Code
		case name != "" && !b.authorize(req, auth.OpRead, auth.ResourceTopic, name):
			code = kerr.TopicAuthorizationFailed.Code
		}
		if code == 0 {
			keep.Topics = append(keep.Topics, t)
			continue
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	if len(refused) == 0 && groupOK {
		return nil, req, nil
	}
	if len(keep.Topics) == 0 {
		// Every topic refused, or none and the group refused: as in Kafka, the
		// coordinator does not see the request (it would take the member id and
		// generation of a principal that may not READ the group as a sign of life).
		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.Topics = refused
		return resp, nil, nil
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		out := resp.(*kmsg.OffsetCommitResponse)
		out.Topics = append(out.Topics, refused...)
	}
}

func (b *Broker) authorizeOffsetFetch(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.OffsetFetchRequest)
	describe := func(topic string) bool { return b.allowed(req, auth.OpDescribe, auth.ResourceTopic, topic) }
	if r.Version < 8 {
		if !b.authorize(req, auth.OpDescribe, auth.ResourceGroup, r.Group) {
			resp := kmsg.NewPtrOffsetFetchResponse()
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp, nil, nil
		}
		return nil, req, func(resp kmsg.Response) {
			out := resp.(*kmsg.OffsetFetchResponse)
			kept := out.Topics[:0]
			for _, t := range out.Topics {
				if describe(t.Topic) {
					kept = append(kept, t)
				} else if r.Topics != nil {
					for i := range t.Partitions {
						t.Partitions[i].ErrorCode, t.Partitions[i].Offset = kerr.TopicAuthorizationFailed.Code, -1
					}
					kept = append(kept, t)
				}
			}
			out.Topics = kept
		}
	}
	deniedGroups, allTopics := map[string]bool{}, map[string]bool{}
	for _, g := range r.Groups {
		if !b.authorize(req, auth.OpDescribe, auth.ResourceGroup, g.Group) {
			deniedGroups[g.Group] = true
		}
		if g.Topics == nil {
			allTopics[g.Group] = true
		}
	}
	return nil, req, func(resp kmsg.Response) {
		out := resp.(*kmsg.OffsetFetchResponse)
		for i := range out.Groups {
			g := &out.Groups[i]
			if deniedGroups[g.Group] {
				g.ErrorCode, g.Topics = kerr.GroupAuthorizationFailed.Code, nil
				continue
			}
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				name := t.Topic
				if name == "" { // v10 names topics by id
					name = b.topicName(t.TopicID)
				}
				if name == "" || describe(name) {
					kept = append(kept, t)
					continue
				}
				if allTopics[g.Group] { // not named: not shown
					continue
				}
				for j := range t.Partitions {
					t.Partitions[j].ErrorCode, t.Partitions[j].Offset = kerr.TopicAuthorizationFailed.Code, -1
				}
				kept = append(kept, t)
			}
			g.Topics = kept
		}
	}
}

func (b *Broker) authorizeOffsetDelete(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.OffsetDeleteRequest)
	if !b.authorize(req, auth.OpDelete, auth.ResourceGroup, r.Group) {
		resp := kmsg.NewPtrOffsetDeleteResponse()
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, nil
	}
	keep := *r
	keep.Topics = nil
	var refused []kmsg.OffsetDeleteResponseTopic
	for _, t := range r.Topics {
		if b.authorize(req, auth.OpRead, auth.ResourceTopic, t.Topic) {
			keep.Topics = append(keep.Topics, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	if len(refused) == 0 {
		return nil, req, nil
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		out := resp.(*kmsg.OffsetDeleteResponse)
		out.Topics = append(out.Topics, refused...)
	}
}

func (b *Broker) authorizeDescribeGroups(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	keep := *r
	keep.Groups = nil
	var refused []kmsg.DescribeGroupsResponseGroup
	for _, g := range r.Groups {
		if b.authorize(req, auth.OpDescribe, auth.ResourceGroup, g) {
			keep.Groups = append(keep.Groups, g)
			continue
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		rg.AuthorizedOperations = authorizedOperationsOmitted
		refused = append(refused, rg)
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		out := resp.(*kmsg.DescribeGroupsResponse)
		for i := range out.Groups {
			g := &out.Groups[i]
			g.AuthorizedOperations = b.authorizedOperations(req, r.IncludeAuthorizedOperations, auth.ResourceGroup, g.Group)
		}
		out.Groups = append(out.Groups, refused...)
	}
}

func (b *Broker) authorizeListGroups(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	if b.allowed(req, auth.OpDescribe, auth.ResourceCluster, auth.ClusterName) {
		return nil, req, nil
	}
	return nil, req, func(resp kmsg.Response) {
		out := resp.(*kmsg.ListGroupsResponse)
		kept := out.Groups[:0]
		for _, g := range out.Groups {
			if b.allowed(req, auth.OpDescribe, auth.ResourceGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		out.Groups = kept
	}
}

func (b *Broker) authorizeDeleteGroups(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DeleteGroupsRequest)
	keep := *r
	keep.Groups = nil
	var refused []kmsg.DeleteGroupsResponseGroup
	for _, g := range r.Groups {
		if b.authorize(req, auth.OpDelete, auth.ResourceGroup, g) {
			keep.Groups = append(keep.Groups, g)
			continue
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		refused = append(refused, rg)
	}
	if len(refused) == 0 {
		return nil, req, nil
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		out := resp.(*kmsg.DeleteGroupsResponse)
		out.Groups = append(out.Groups, refused...)
	}
}

func (b *Broker) authorizeFindCoordinator(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	// Group keys need DESCRIBE on the group, transactional ids DESCRIBE on the id,
	// share-partition keys (only brokers look them up) CLUSTER_ACTION on the cluster.
	op, rt, code := auth.OpDescribe, auth.ResourceGroup, kerr.GroupAuthorizationFailed.Code
	switch r.CoordinatorType {
	case 1:
		rt, code = auth.ResourceTransactionalID, kerr.TransactionalIDAuthorizationFailed.Code
	case 2:
		op, rt, code = auth.OpClusterAction, auth.ResourceCluster, kerr.ClusterAuthorizationFailed.Code
	}
	allowed := func(key string) bool {
		if rt == auth.ResourceCluster {
			return b.authorize(req, op, rt, auth.ClusterName)
		}
		return b.authorize(req, op, rt, key)
	}
	if req.Version < 4 {
		if allowed(r.CoordinatorKey) {
			return nil, req, nil
		}
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.ErrorCode, resp.NodeID = code, -1
		return resp, nil, nil
	}
	denied := map[string]bool{}
	for _, k := range r.CoordinatorKeys {
		if !allowed(k) {
			denied[k] = true
		}
	}
	if len(denied) == 0 {
		return nil, req, nil
	}
	return nil, req, func(resp kmsg.Response) {
		out := resp.(*kmsg.FindCoordinatorResponse)
		for i := range out.Coordinators {
			if c := &out.Coordinators[i]; denied[c.Key] {
				c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port = code, nil, -1, "", -1
			}
		}
	}
}

func (b *Broker) authorizeInitProducerID(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		if b.authorize(req, auth.OpWrite, auth.ResourceTransactionalID, *r.TransactionalID) {
			return nil, req, nil
		}
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil, nil
	}
	b.authz.Update(b.image())
	if b.allowed(req, auth.OpIdempotentWrite, auth.ResourceCluster, auth.ClusterName) ||
		b.authz.AllowedOnSome(b.action(req, auth.OpWrite, auth.ResourceTopic, "")) {
		return nil, req, nil
	}
	b.authorizeCluster(req, auth.OpIdempotentWrite) // logs the denial
	resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	return resp, nil, nil
}

func (b *Broker) authorizeDescribeConfigs(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DescribeConfigsRequest)
	keep := *r
	keep.Resources = nil
	var refused []kmsg.DescribeConfigsResponseResource
	for _, res := range r.Resources {
		if code := b.configAuthError(req, res.ResourceType, res.ResourceName, auth.OpDescribeConfigs); code != 0 {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			refused = append(refused, rr)
			continue
		}
		keep.Resources = append(keep.Resources, res)
	}
	if len(refused) == 0 {
		return nil, req, nil
	}
	return nil, withRequestBody(req, &keep), func(resp kmsg.Response) {
		out := resp.(*kmsg.DescribeConfigsResponse)
		out.Resources = append(out.Resources, refused...)
	}
}

func (b *Broker) authorizeDescribeLogDirs(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	if b.authorizeCluster(req, auth.OpDescribe) {
		return nil, req, nil
	}
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	if req.Version >= 3 {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	return resp, nil, nil
}

func (b *Broker) authorizeDescribeCluster(req *protocol.Request) (kmsg.Response, *protocol.Request, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DescribeClusterRequest)
	return nil, req, func(resp kmsg.Response) {
		out := resp.(*kmsg.DescribeClusterResponse)
		out.ClusterAuthorizedOperations = b.clusterAuthorizedOperations(req, r.IncludeClusterAuthorizedOperations)
	}
}
