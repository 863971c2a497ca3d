package broker

// DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31), versions 0–3.
//
// ACLs live in the metadata log (AccessControlEntryRecord), as with Kafka's
// StandardAuthorizer: DescribeAcls is answered from this node's image; CreateAcls
// and DeleteAcls are forwarded to the active controller (and served on the controller
// listener). Describing needs DESCRIBE on the cluster, changing needs ALTER; without
// an authorizer every request is answered SECURITY_DISABLED, as Kafka does. Before
// v1 only LITERAL patterns exist: a v0 request's pattern type is LITERAL (filters:
// ANY).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.DescribeACLs, 0, 3, (*Broker).handleDescribeACLs)
	register(kmsg.CreateACLs, 0, 3, (*Broker).handleCreateACLs)
	register(kmsg.DeleteACLs, 0, 3, (*Broker).handleDeleteACLs)
	registerController(kmsg.CreateACLs, 0, 3, (*Broker).serveCreateACLs)
	registerController(kmsg.DeleteACLs, 0, 3, (*Broker).serveDeleteACLs)
}

var securityDisabled = kmsg.StringPtr("no authorizer is configured (authorizer.class.name)")

func (b *Broker) handleDescribeACLs(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeACLsRequest)
	resp := kmsg.NewPtrDescribeACLsResponse()
	resp.SetVersion(req.Version)
	switch {
	case b.authz == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, securityDisabled
		return reply(resp)
	case !b.authorizeCluster(req, auth.OpDescribe):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	pattern := auth.PatternType(r.ResourcePatternType)
	if r.Version == 0 {
		pattern = auth.PatternLiteral
	}
	f := auth.Filter{ResourceType: auth.ResourceType(r.ResourceType), ResourceName: r.ResourceName, PatternType: pattern,
		Principal: r.Principal, Host: r.Host, Operation: auth.Operation(r.Operation), Permission: auth.Permission(r.PermissionType)}
	if err := auth.ValidateFilter(f); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, errorMessage(err)
		return reply(resp)
	}
	byResource := map[[3]string]int{}
	for _, a := range b.image().ACLs() {
		if !f.Matches(a) {
			continue
		}
		key := [3]string{string(rune(a.ResourceType)), a.ResourceName, string(rune(a.PatternType))}
		i, ok := byResource[key]
		if !ok {
			i = len(resp.Resources)
			byResource[key] = i
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			resp.Resources = append(resp.Resources, res)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.PermissionType)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, e)
	}
	return reply(resp)
}

func (b *Broker) handleCreateACLs(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.CreateACLsRequest)
	code := int16(0)
	switch {
	case b.authz == nil:
		code = kerr.SecurityDisabled.Code
	case !b.authorizeCluster(req, auth.OpAlter):
		code = kerr.ClusterAuthorizationFailed.Code
	}
	if code != 0 {
		resp := kmsg.NewPtrCreateACLsResponse()
		resp.SetVersion(req.Version)
		for range r.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode = code
			if code == kerr.SecurityDisabled.Code {
				res.ErrorMessage = securityDisabled
			}
			resp.Results = append(resp.Results, res)
		}
		return reply(resp)
	}
	return b.forward(req, 0, nil)
}

// serveCreateACLs is the controller side of CreateAcls.
func (b *Broker) serveCreateACLs(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.CreateACLsRequest)
	resp := kmsg.NewPtrCreateACLsResponse()
	resp.SetVersion(r.Version)
	acls := make([]metadata.ACL, len(r.Creations))
	for i, c := range r.Creations {
		pattern := int8(c.ResourcePatternType)
		if r.Version == 0 {
			pattern = int8(auth.PatternLiteral)
		}
		acls[i] = metadata.ACL{ResourceType: int8(c.ResourceType), ResourceName: c.ResourceName, PatternType: pattern,
			Principal: c.Principal, Host: c.Host, Operation: int8(c.Operation), PermissionType: int8(c.PermissionType)}
	}
	errs, err := b.controller.CreateACLs(ctx, acls)
	for i := range r.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		e := err
		if e == nil {
			e = errs[i]
		}
		res.ErrorCode, res.ErrorMessage = errorCode(e), errorMessage(e)
		resp.Results = append(resp.Results, res)
	}
	return resp
}

func deleteFilter(version int16, f kmsg.DeleteACLsRequestFilter) auth.Filter {
	pattern := auth.PatternType(f.ResourcePatternType)
	if version == 0 {
		pattern = auth.PatternAny
	}
	return auth.Filter{ResourceType: auth.ResourceType(f.ResourceType), ResourceName: f.ResourceName, PatternType: pattern,
		Principal: f.Principal, Host: f.Host, Operation: auth.Operation(f.Operation), Permission: auth.Permission(f.PermissionType)}
}

func (b *Broker) handleDeleteACLs(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DeleteACLsRequest)
	code := int16(0)
	switch {
	case b.authz == nil:
		code = kerr.SecurityDisabled.Code
	case !b.authorizeCluster(req, auth.OpAlter):
		code = kerr.ClusterAuthorizationFailed.Code
	}
	if code != 0 {
		resp := kmsg.NewPtrDeleteACLsResponse()
		resp.SetVersion(req.Version)
		for range r.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode = code
			resp.Results = append(resp.Results, res)
		}
		return reply(resp)
	}
	return b.forward(req, 0, nil)
}

// serveDeleteACLs is the controller side of DeleteAcls.
func (b *Broker) serveDeleteACLs(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.DeleteACLsRequest)
	resp := kmsg.NewPtrDeleteACLsResponse()
	resp.SetVersion(r.Version)
	filters := make([]auth.Filter, len(r.Filters))
	bad := make([]error, len(r.Filters))
	var valid []auth.Filter
	for i, f := range r.Filters {
		filters[i] = deleteFilter(r.Version, f)
		if bad[i] = auth.ValidateFilter(filters[i]); bad[i] == nil {
			valid = append(valid, filters[i])
		}
	}
	matched, err := b.controller.DeleteACLs(ctx, valid)
	j := 0
	for i := range r.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		switch {
		case bad[i] != nil:
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, errorMessage(bad[i])
		case err != nil:
			res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
			j++
		default:
			for _, a := range matched[j] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
				m.Principal, m.Host = a.Principal, a.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.PermissionType)
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
			j++
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}
