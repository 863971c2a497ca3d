package broker

// Authorization: every handler asks authorize (or, to filter what a response shows,
// allowed) before it serves what Kafka's KafkaApis checks, with the same operation
// and resource. With authorizer.class.name unset, everything is allowed.

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// newAuthorizer builds the authorizer of authorizer.class.name (nil when unset).
func newAuthorizer(cfg *config.Broker, logger *slog.Logger) *auth.Authorizer {
	if cfg.Security.Authorizer == "" {
		return nil
	}
	return auth.NewAuthorizer(auth.AuthorizerOptions{
		SuperUsers:                cfg.Security.SuperUsers,
		AllowEveryoneIfNoACLFound: cfg.Security.AllowEveryoneIfNoACLFound,
		Logger:                    logger,
		LogLevel:                  cfg.Security.AuthorizerLogLevel,
	})
}

func (b *Broker) action(req *protocol.Request, op auth.Operation, rt auth.ResourceType, name string) auth.Action {
	return auth.Action{Principal: req.Principal, ClientAddr: req.ClientAddr, Operation: op, Resource: rt, Name: name,
		API: kmsg.NameForKey(req.Key)}
}

// authorize decides (and logs) one operation of a request.
func (b *Broker) authorize(req *protocol.Request, op auth.Operation, rt auth.ResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	b.authz.Update(b.image())
	return b.authz.Authorize(b.action(req, op, rt, name))
}

// allowed decides without logging a denial: for filtering what a response lists.
func (b *Broker) allowed(req *protocol.Request, op auth.Operation, rt auth.ResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	b.authz.Update(b.image())
	return b.authz.Allowed(b.action(req, op, rt, name))
}

// authorizeCluster decides an operation on the cluster resource.
func (b *Broker) authorizeCluster(req *protocol.Request, op auth.Operation) bool {
	return b.authorize(req, op, auth.ResourceCluster, auth.ClusterName)
}

// authorizedOperations is the authorized-operations bit field of a resource, or
// Kafka's "not requested" value when the client did not ask.
func (b *Broker) authorizedOperations(req *protocol.Request, requested bool, rt auth.ResourceType, name string) int32 {
	if !requested {
		return authorizedOperationsOmitted
	}
	if b.authz == nil {
		return allOperations(rt)
	}
	b.authz.Update(b.image())
	return b.authz.AuthorizedOperations(req.Principal, req.ClientAddr, rt, name)
}

// clusterAuthorizedOperations is the cluster's authorized-operations field of
// Metadata (v8–10) and DescribeCluster as Kafka fills it: "not requested" unless
// asked for, 0 when the principal may not DESCRIBE the cluster.
func (b *Broker) clusterAuthorizedOperations(req *protocol.Request, requested bool) int32 {
	if requested && !b.authorizeCluster(req, auth.OpDescribe) {
		return 0
	}
	return b.authorizedOperations(req, requested, auth.ResourceCluster, auth.ClusterName)
}

// allOperations is the field when everything is allowed (no authorizer).
func allOperations(rt auth.ResourceType) int32 { return everything[rt] }

// everything is every resource type's operations, all allowed.
var everything = func() map[auth.ResourceType]int32 {
	a := auth.NewAuthorizer(auth.AuthorizerOptions{AllowEveryoneIfNoACLFound: true})
	m := map[auth.ResourceType]int32{}
	for _, rt := range []auth.ResourceType{auth.ResourceTopic, auth.ResourceGroup, auth.ResourceCluster} {
		m[rt] = a.AuthorizedOperations(auth.Anonymous, "", rt, "")
	}
	return m
}()

// topicAuthError is TOPIC_AUTHORIZATION_FAILED when the request may not perform op
// on topic, else nil.
func (b *Broker) topicAuthError(req *protocol.Request, op auth.Operation, topic string) error {
	if b.authorize(req, op, auth.ResourceTopic, topic) {
		return nil
	}
	return kerr.TopicAuthorizationFailed
}
