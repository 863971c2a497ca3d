package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
)

func newACLCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("acl", "Manage ACLs", `Create, list and delete ACLs (CreateAcls, DescribeAcls, DeleteAcls). The
cluster needs an authorizer (authorizer.class.name); changing ACLs needs ALTER on the
cluster, listing them DESCRIBE.`)
	cmd.AddCommand(newACLCreateCmd(g), newACLListCmd(g), newACLDeleteCmd(g))
	return cmd
}

// aclFlags are the flags naming ACLs (create) or selecting them (list, delete).
type aclFlags struct {
	allow, deny     []string
	hosts           []string
	operations      []string
	topic, group    string
	transactionalID string
	cluster         bool
	prefixed        bool
	pattern         string
}

func (f *aclFlags) add(cmd *cobra.Command, selecting bool) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.allow, "allow", nil, "principal the ACL allows, e.g. User:alice (repeatable)")
	fl.StringArrayVar(&f.deny, "deny", nil, "principal the ACL denies (repeatable)")
	fl.StringArrayVar(&f.hosts, "host", nil, "client address the ACL applies to (repeatable; default *, any)")
	fl.StringSliceVar(&f.operations, "operation", nil, "operations: read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write, all")
	fl.StringVar(&f.topic, "topic", "", "topic name (* for all topics)")
	fl.StringVar(&f.group, "group", "", "consumer group id (* for all groups)")
	fl.StringVar(&f.transactionalID, "transactional-id", "", "transactional id (* for all)")
	fl.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	if selecting {
		fl.StringVar(&f.pattern, "pattern", "any", "which ACLs the resource name selects: any, match (every ACL that applies to it), literal, prefixed")
	} else {
		fl.BoolVar(&f.prefixed, "prefixed", false, "the name is a prefix: the ACL applies to every resource whose name starts with it")
	}
}

// resource returns the one resource the flags name; ok is false when none is named.
func (f *aclFlags) resource() (rt auth.ResourceType, name string, ok bool, err error) {
	n := 0
	for _, r := range []struct {
		set  bool
		rt   auth.ResourceType
		name string
	}{
		{f.topic != "", auth.ResourceTopic, f.topic},
		{f.group != "", auth.ResourceGroup, f.group},
		{f.transactionalID != "", auth.ResourceTransactionalID, f.transactionalID},
		{f.cluster, auth.ResourceCluster, auth.ClusterName},
	} {
		if r.set {
			n++
			rt, name = r.rt, r.name
		}
	}
	if n > 1 {
		return 0, "", false, usagef("name one resource: --topic, --group, --transactional-id or --cluster")
	}
	return rt, name, n == 1, nil
}

func (f *aclFlags) parsedOperations(def auth.Operation) ([]auth.Operation, error) {
	if len(f.operations) == 0 {
		return []auth.Operation{def}, nil
	}
	var ops []auth.Operation
	for _, s := range f.operations {
		op, ok := auth.ParseName(auth.OperationNames, s)
		if !ok || op == auth.OpAny && def != auth.OpAny {
			return nil, usagef("--operation %q: not an operation", s)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func (f *aclFlags) principals() ([]string, []auth.Permission, error) {
	var ps []string
	var perms []auth.Permission
	for _, list := range []struct {
		ps   []string
		perm auth.Permission
	}{{f.allow, auth.PermissionAllow}, {f.deny, auth.PermissionDeny}} {
		for _, p := range list.ps {
			if _, err := auth.ParsePrincipal(p); err != nil {
				return nil, nil, usagef("%v", err)
			}
			ps, perms = append(ps, p), append(perms, list.perm)
		}
	}
	return ps, perms, nil
}

func newACLCreateCmd(g *globals) *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create ACLs: each --allow/--deny principal × each --operation × each --host",
		Example: `  samsa acl create --allow User:alice --operation read,describe --topic orders
  samsa acl create --allow User:alice --operation all --topic logs- --prefixed
  samsa acl create --deny User:bob --operation write --topic orders --host 10.0.0.7
  samsa acl create --allow User:alice --operation read --group billing`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, name, ok, err := f.resource()
			if err != nil {
				return err
			}
			if !ok {
				return usagef("name the resource: --topic, --group, --transactional-id or --cluster")
			}
			principals, perms, err := f.principals()
			if err != nil {
				return err
			}
			if len(principals) == 0 {
				return usagef("name at least one principal with --allow or --deny")
			}
			ops, err := f.parsedOperations(auth.OpAll)
			if err != nil {
				return err
			}
			if len(f.operations) == 0 {
				return usagef("name the operations with --operation (read, write, describe, all, …)")
			}
			hosts := f.hosts
			if len(hosts) == 0 {
				hosts = []string{auth.Wildcard}
			}
			pattern := auth.PatternLiteral
			if f.prefixed {
				pattern = auth.PatternPrefixed
			}
			req := kmsg.NewPtrCreateACLsRequest()
			var made []aclEntry
			for i, p := range principals {
				for _, op := range ops {
					for _, h := range hosts {
						c := kmsg.NewCreateACLsRequestCreation()
						c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(rt), name, kmsg.ACLResourcePatternType(pattern)
						c.Principal, c.Host, c.Operation, c.PermissionType = p, h, kmsg.ACLOperation(op), kmsg.ACLPermissionType(perms[i])
						req.Creations = append(req.Creations, c)
						made = append(made, aclEntry{Resource: rt.String(), Name: name, Pattern: pattern.String(), Principal: p, Host: h,
							Operation: op.String(), Permission: perms[i].String()})
					}
				}
			}
			cl, err := g.newClient()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return g.explain("create ACLs", err)
			}
			for i, r := range resp.Results {
				if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
					return g.explain(fmt.Sprintf("create ACL %s", made[i]), withMessage(err, r.ErrorMessage))
				}
			}
			return renderACLs(g.newOutput(cmd), made)
		},
	}
	f.add(cmd, false)
	return cmd
}

// aclEntry is one ACL as the CLI shows it.
type aclEntry struct {
	Resource   string `json:"resource_type"`
	Name       string `json:"resource_name"`
	Pattern    string `json:"pattern_type"`
	Principal  string `json:"principal"`
	Host       string `json:"host"`
	Operation  string `json:"operation"`
	Permission string `json:"permission"`
}

func (a aclEntry) String() string {
	return fmt.Sprintf("%s %s %s on %s:%s:%s from %s", a.Permission, a.Principal, a.Operation, a.Resource, a.Pattern, a.Name, a.Host)
}

func renderACLs(o *output, acls []aclEntry) error {
	if acls == nil {
		acls = []aclEntry{}
	}
	return o.render(acls, func(w io.Writer) {
		t := newTable(w, "PERMISSION", "PRINCIPAL", "OPERATION", "RESOURCE", "PATTERN", "NAME", "HOST")
		for _, a := range acls {
			t.row(a.Permission, a.Principal, a.Operation, a.Resource, a.Pattern, a.Name, a.Host)
		}
		t.flush()
	})
}

// withMessage is withBrokerMessage for the optional messages of raw kmsg responses.
func withMessage(err error, msg *string) error {
	if msg == nil {
		return err
	}
	return withBrokerMessage(err, *msg)
}

// filter builds a DeleteAcls filter from selecting flags.
func (f *aclFlags) filter() (kmsg.DeleteACLsRequestFilter, error) {
	flt := kmsg.NewDeleteACLsRequestFilter()
	rt, name, ok, err := f.resource()
	if err != nil {
		return flt, err
	}
	flt.ResourceType, flt.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	if ok {
		flt.ResourceType, flt.ResourceName = kmsg.ACLResourceType(rt), kmsg.StringPtr(name)
	}
	pattern, okp := auth.ParseName(auth.PatternNames, f.pattern)
	if !okp {
		return flt, usagef("--pattern %q: any, match, literal or prefixed", f.pattern)
	}
	flt.ResourcePatternType = kmsg.ACLResourcePatternType(pattern)
	principals, perms, err := f.principals()
	if err != nil {
		return flt, err
	}
	switch {
	case len(principals) > 1 || len(f.hosts) > 1:
		return flt, usagef("select at most one principal and one host")
	case len(principals) == 1:
		flt.Principal, flt.PermissionType = kmsg.StringPtr(principals[0]), kmsg.ACLPermissionType(perms[0])
	default:
		flt.PermissionType = kmsg.ACLPermissionTypeAny
	}
	if len(f.hosts) == 1 {
		flt.Host = kmsg.StringPtr(f.hosts[0])
	}
	ops, err := f.parsedOperations(auth.OpAny)
	if err != nil {
		return flt, err
	}
	if len(ops) > 1 {
		return flt, usagef("select at most one --operation")
	}
	flt.Operation = kmsg.ACLOperation(ops[0])
	return flt, nil
}

func (f *aclFlags) any() bool {
	return f.topic != "" || f.group != "" || f.transactionalID != "" || f.cluster || len(f.allow)+len(f.deny)+len(f.hosts)+len(f.operations) > 0
}

func newACLListCmd(g *globals) *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List ACLs, all of them or those the flags select",
		Example: `  samsa acl list
  samsa acl list --topic orders --pattern match
  samsa acl list --allow User:alice -o json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			flt, err := f.filter()
			if err != nil {
				return err
			}
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourceName, req.ResourcePatternType = flt.ResourceType, flt.ResourceName, flt.ResourcePatternType
			req.Principal, req.Host, req.Operation, req.PermissionType = flt.Principal, flt.Host, flt.Operation, flt.PermissionType
			cl, err := g.newClient()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			resp, err := req.RequestWith(ctx, cl)
			if err == nil {
				err = withMessage(kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
			}
			if err != nil {
				return g.explain("list ACLs", err)
			}
			var acls []aclEntry
			for _, r := range resp.Resources {
				for _, a := range r.ACLs {
					acls = append(acls, aclEntry{Resource: auth.ResourceType(r.ResourceType).String(), Name: r.ResourceName,
						Pattern: auth.PatternType(r.ResourcePatternType).String(), Principal: a.Principal, Host: a.Host,
						Operation: auth.Operation(a.Operation).String(), Permission: auth.Permission(a.PermissionType).String()})
				}
			}
			return renderACLs(g.newOutput(cmd), acls)
		},
	}
	f.add(cmd, true)
	return cmd
}

func newACLDeleteCmd(g *globals) *cobra.Command {
	var f aclFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete the ACLs the flags select (--all for every ACL)",
		Example: `  samsa acl delete --allow User:alice --topic orders --pattern literal
  samsa acl delete --topic logs- --pattern prefixed
  samsa acl delete --all`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !f.any() && !all {
				return usagef("select the ACLs to delete with --topic, --group, --allow … or delete every ACL with --all")
			}
			flt, err := f.filter()
			if err != nil {
				return err
			}
			req := kmsg.NewPtrDeleteACLsRequest()
			req.Filters = append(req.Filters, flt)
			cl, err := g.newClient()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			resp, err := req.RequestWith(ctx, cl)
			if err == nil && len(resp.Results) == 1 {
				err = withMessage(kerr.ErrorForCode(resp.Results[0].ErrorCode), resp.Results[0].ErrorMessage)
			}
			if err != nil {
				return g.explain("delete ACLs", err)
			}
			var acls []aclEntry
			for _, a := range resp.Results[0].MatchingACLs {
				acls = append(acls, aclEntry{Resource: auth.ResourceType(a.ResourceType).String(), Name: a.ResourceName,
					Pattern: auth.PatternType(a.ResourcePatternType).String(), Principal: a.Principal, Host: a.Host,
					Operation: auth.Operation(a.Operation).String(), Permission: auth.Permission(a.PermissionType).String()})
			}
			return renderACLs(g.newOutput(cmd), acls)
		},
	}
	f.add(cmd, true)
	cmd.Flags().BoolVar(&all, "all", false, "delete every ACL")
	return cmd
}
