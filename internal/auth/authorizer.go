package auth

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// Authorizer decides whether a principal may perform an operation on a resource,
// with the semantics of Kafka's StandardAuthorizer (KIP-801):
//
//   - super users may do everything;
//   - the ACLs that apply to a resource are its LITERAL ones, the LITERAL "*" of
//     its type and the PREFIXED ones whose prefix starts its name; an ACL applies to
//     a request when its principal is the request's (or User:*) and its host the
//     client's address (or *);
//   - a DENY ACL for the operation (or ALL) wins over any ALLOW;
//   - an ALLOW for the operation, for ALL, or for an operation that implies it
//     (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
//     DESCRIBE_CONFIGS) allows it;
//   - when no ACL at all applies to the resource, allow.everyone.if.no.acl.found
//     decides (default: deny).
//
// The ACLs come from the metadata image: Update swaps in an index of them when they
// change. Every decision goes to the authorization log (kafka.authorizer.logger):
// denials at level INFO, allowed operations at DEBUG.
type Authorizer struct {
	superUsers   map[string]bool
	allowIfNoACL bool
	logger       *slog.Logger // nil: no authorization log
	logAllowed   bool
	index        atomic.Pointer[aclIndex]
}

// AuthorizerOptions configure an Authorizer.
type AuthorizerOptions struct {
	SuperUsers                []string // principals, Type:Name
	AllowEveryoneIfNoACLFound bool
	// Logger receives the authorization log; LogLevel is OFF, INFO (denials) or
	// DEBUG (everything).
	Logger   *slog.Logger
	LogLevel string
}

// NewAuthorizer returns an authorizer with no ACLs.
func NewAuthorizer(o AuthorizerOptions) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowIfNoACL: o.AllowEveryoneIfNoACLFound}
	for _, u := range o.SuperUsers {
		a.superUsers[u] = true
	}
	if o.Logger != nil && o.LogLevel != "OFF" {
		a.logger = o.Logger.With("logger", "kafka.authorizer.logger")
		a.logAllowed = o.LogLevel == "DEBUG"
	}
	a.index.Store(&aclIndex{}) // version 0: the ACLs of an image no ACL record changed, none
	return a
}

// aclIndex is the ACLs of one image, by resource type.
type aclIndex struct {
	version uint64
	byType  map[ResourceType]*typeACLs
}

type typeACLs struct {
	literal  map[string][]metadata.ACL // including "*"
	prefixed []metadata.ACL
}

// Update indexes the ACLs of img if they changed since the last Update. Requests
// call it concurrently, each with the image it read: an image whose ACLs are older
// than the index (ACL versions only grow along the metadata log) leaves it as it is,
// so a late Update never brings back ACLs a newer image removed.
func (a *Authorizer) Update(img *metadata.Image) {
	cur := a.index.Load()
	if cur.version >= img.ACLsVersion() {
		return
	}
	idx := &aclIndex{version: img.ACLsVersion(), byType: map[ResourceType]*typeACLs{}}
	for _, acl := range img.ACLs() {
		rt := ResourceType(acl.ResourceType)
		t := idx.byType[rt]
		if t == nil {
			t = &typeACLs{literal: map[string][]metadata.ACL{}}
			idx.byType[rt] = t
		}
		if PatternType(acl.PatternType) == PatternPrefixed {
			t.prefixed = append(t.prefixed, acl)
		} else {
			t.literal[acl.ResourceName] = append(t.literal[acl.ResourceName], acl)
		}
	}
	for !a.index.CompareAndSwap(cur, idx) {
		if cur = a.index.Load(); cur.version >= idx.version {
			return
		}
	}
}

// Action is one operation on one resource by a client, for Authorize.
type Action struct {
	Principal Principal
	// ClientAddr is the client's host:port (or bare host).
	ClientAddr string
	Operation  Operation
	Resource   ResourceType
	Name       string
	// API names the request, for the authorization log.
	API string
}

// Authorize decides one action and logs it.
func (a *Authorizer) Authorize(act Action) bool {
	allowed := a.decide(act)
	a.logDecision(act, allowed, true)
	return allowed
}

// Allowed decides one action, logging only when it is allowed and the log level
// asks for that: for filtering (Metadata, ListGroups, authorized operations), where
// Kafka does not log what it leaves out.
func (a *Authorizer) Allowed(act Action) bool {
	allowed := a.decide(act)
	a.logDecision(act, allowed, false)
	return allowed
}

func (a *Authorizer) decide(act Action) bool {
	if a.superUsers[act.Principal.String()] {
		return true
	}
	t := a.index.Load().byType[act.Resource]
	if t == nil {
		return a.allowIfNoACL
	}
	host := clientHost(act.ClientAddr)
	principal := act.Principal.String()
	wildcardPrincipal := act.Principal.Type + ":*"
	found, allowed := false, false
	check := func(acls []metadata.ACL) bool { // reports a DENY
		for _, acl := range acls {
			found = true
			if acl.Principal != principal && acl.Principal != wildcardPrincipal {
				continue
			}
			if acl.Host != Wildcard && acl.Host != host {
				continue
			}
			op := Operation(acl.Operation)
			if Permission(acl.PermissionType) == PermissionDeny {
				if op == OpAll || op == act.Operation {
					return true
				}
				continue
			}
			if op == OpAll || op == act.Operation || implies(op, act.Operation) {
				allowed = true
			}
		}
		return false
	}
	if check(t.literal[act.Name]) || check(t.literal[Wildcard]) {
		return false
	}
	for _, acl := range t.prefixed {
		if strings.HasPrefix(act.Name, acl.ResourceName) && check([]metadata.ACL{acl}) {
			return false
		}
	}
	if !found {
		return a.allowIfNoACL
	}
	return allowed
}

// implies reports whether an ALLOW of have also allows want.
func implies(have, want Operation) bool {
	switch want {
	case OpDescribe:
		return have == OpRead || have == OpWrite || have == OpDelete || have == OpAlter
	case OpDescribeConfigs:
		return have == OpAlterConfigs
	}
	return false
}

func clientHost(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

func (a *Authorizer) logDecision(act Action, allowed, logDenied bool) {
	if a.logger == nil || allowed && !a.logAllowed || !allowed && !logDenied {
		return
	}
	result, level := "Denied", slog.LevelInfo
	if allowed {
		result = "Allowed"
	}
	a.logger.Log(context.Background(), level, "authorization",
		"principal", act.Principal.String(), "operation", act.Operation.String(),
		"resource", act.Resource.String()+":"+act.Name, "host", clientHost(act.ClientAddr),
		"result", result, "api", act.API)
}

// operationsOf lists the operations a resource type has, for the
// authorized-operations fields.
var operationsOf = map[ResourceType][]Operation{
	ResourceTopic:   {OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup:   {OpRead, OpDescribe, OpDelete},
	ResourceCluster: {OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe},
}

// AuthorizedOperations is the bit field of the operations principal may perform on
// a resource (bit n set for operation n), as Metadata, DescribeCluster and
// DescribeGroups report it.
func (a *Authorizer) AuthorizedOperations(p Principal, clientAddr string, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range operationsOf[rt] {
		if a.decide(Action{Principal: p, ClientAddr: clientAddr, Operation: op, Resource: rt, Name: name}) {
			bits |= 1 << op
		}
	}
	return bits
}

// AllowedOnSome reports whether act's operation is allowed on some resource of its
// type (act.Name is ignored), as Kafka's authorizeByResourceType: a super user, an
// ALLOW ACL for the principal and host that no DENY of the wildcard resource
// cancels, or no ACL of that type at all with allow.everyone.if.no.acl.found.
func (a *Authorizer) AllowedOnSome(act Action) bool {
	if a.superUsers[act.Principal.String()] {
		return true
	}
	t := a.index.Load().byType[act.Resource]
	if t == nil {
		return a.allowIfNoACL
	}
	host := clientHost(act.ClientAddr)
	applies := func(acl metadata.ACL) bool {
		return (acl.Principal == act.Principal.String() || acl.Principal == act.Principal.Type+":*") &&
			(acl.Host == Wildcard || acl.Host == host)
	}
	for _, acl := range t.literal[Wildcard] {
		op := Operation(acl.Operation)
		if applies(acl) && Permission(acl.PermissionType) == PermissionDeny && (op == OpAll || op == act.Operation) {
			return false
		}
	}
	check := func(acls []metadata.ACL) bool {
		for _, acl := range acls {
			op := Operation(acl.Operation)
			if applies(acl) && Permission(acl.PermissionType) == PermissionAllow && (op == OpAll || op == act.Operation || implies(op, act.Operation)) {
				return true
			}
		}
		return false
	}
	for _, acls := range t.literal {
		if check(acls) {
			return true
		}
	}
	return check(t.prefixed)
}
