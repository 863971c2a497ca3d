package auth

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// ResourceType, PatternType, Operation and Permission carry Kafka's numbering (the
// *Acls messages use it on the wire).
type (
	ResourceType int8
	PatternType  int8
	Operation    int8
	Permission   int8
)

const (
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

const (
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

const (
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

const (
	PermissionAny   Permission = 1
	PermissionDeny  Permission = 2
	PermissionAllow Permission = 3
)

// ClusterName is the name of the one CLUSTER resource.
const ClusterName = "kafka-cluster"

// Wildcard is the resource name (LITERAL) and the host that match everything.
const Wildcard = "*"

var resourceNames = map[ResourceType]string{ResourceAny: "Any", ResourceTopic: "Topic", ResourceGroup: "Group",
	ResourceCluster: "Cluster", ResourceTransactionalID: "TransactionalId", ResourceDelegationToken: "DelegationToken", ResourceUser: "User"}

var operationNames = map[Operation]string{OpAny: "Any", OpAll: "All", OpRead: "Read", OpWrite: "Write", OpCreate: "Create",
	OpDelete: "Delete", OpAlter: "Alter", OpDescribe: "Describe", OpClusterAction: "ClusterAction",
	OpDescribeConfigs: "DescribeConfigs", OpAlterConfigs: "AlterConfigs", OpIdempotentWrite: "IdempotentWrite",
	OpCreateTokens: "CreateTokens", OpDescribeTokens: "DescribeTokens"}

func (r ResourceType) String() string { return nameOr(resourceNames, r) }
func (o Operation) String() string    { return nameOr(operationNames, o) }
func (p PatternType) String() string {
	return nameOr(map[PatternType]string{PatternAny: "Any", PatternMatch: "Match", PatternLiteral: "Literal", PatternPrefixed: "Prefixed"}, p)
}
func (p Permission) String() string {
	return nameOr(map[Permission]string{PermissionAny: "Any", PermissionDeny: "Deny", PermissionAllow: "Allow"}, p)
}

func nameOr[K ~int8](names map[K]string, k K) string {
	if n, ok := names[k]; ok {
		return n
	}
	return fmt.Sprintf("Unknown(%d)", int8(k))
}

// ParseName finds a value by its name, case-insensitively ("topic", "READ",
// "prefixed", "transactional-id"), for the CLI.
func ParseName[K ~int8](names map[K]string, s string) (K, bool) {
	norm := strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(s))
	for k, n := range names {
		if strings.ToLower(n) == norm {
			return k, true
		}
	}
	return 0, false
}

// Names for ParseName.
var (
	ResourceNames   = resourceNames
	OperationNames  = operationNames
	PatternNames    = map[PatternType]string{PatternAny: "Any", PatternMatch: "Match", PatternLiteral: "Literal", PatternPrefixed: "Prefixed"}
	PermissionNames = map[Permission]string{PermissionAny: "Any", PermissionDeny: "Deny", PermissionAllow: "Allow"}
)

// Errors of ACL bindings and filters: INVALID_REQUEST with the message.
var ErrInvalidACL = errors.New("invalid ACL")

// ValidateBinding checks an ACL as CreateAcls receives it (Kafka's rules).
func ValidateBinding(a metadata.ACL) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidACL, fmt.Sprintf(format, args...))
	}
	rt, pt, op, perm := ResourceType(a.ResourceType), PatternType(a.PatternType), Operation(a.Operation), Permission(a.PermissionType)
	switch {
	case rt <= ResourceAny || rt > ResourceUser:
		return bad("resource type %s is not a resource", rt)
	case pt != PatternLiteral && pt != PatternPrefixed:
		return bad("pattern type %s: an ACL is LITERAL or PREFIXED", pt)
	case a.ResourceName == "":
		return bad("empty resource name")
	case pt == PatternPrefixed && a.ResourceName == Wildcard:
		return bad("a PREFIXED ACL cannot name *")
	case rt == ResourceCluster && a.ResourceName != ClusterName:
		return bad("the cluster resource is named %s, not %q", ClusterName, a.ResourceName)
	case op <= OpAny || op > OpDescribeTokens:
		return bad("operation %s is not an operation", op)
	case perm != PermissionAllow && perm != PermissionDeny:
		return bad("permission %s: an ACL is ALLOW or DENY", perm)
	case a.Host == "":
		return bad("empty host: use * for every host")
	case a.Host != Wildcard && net.ParseIP(a.Host) == nil:
		return bad("host %q is not an IP address or *", a.Host)
	}
	if _, err := ParsePrincipal(a.Principal); err != nil {
		return bad("%v", err)
	}
	return nil
}

// Filter selects ACLs (DescribeAcls, DeleteAcls): nil strings and ANY values
// match everything; PatternMatch matches the ACLs that apply to the named resource.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// ValidateFilter checks a filter's enumerations.
func ValidateFilter(f Filter) error {
	switch {
	case f.ResourceType < ResourceAny || f.ResourceType > ResourceUser:
		return fmt.Errorf("%w: unknown resource type %d", ErrInvalidACL, f.ResourceType)
	case f.PatternType < PatternAny || f.PatternType > PatternPrefixed:
		return fmt.Errorf("%w: unknown pattern type %d", ErrInvalidACL, f.PatternType)
	case f.Operation < OpAny || f.Operation > OpDescribeTokens:
		return fmt.Errorf("%w: unknown operation %d", ErrInvalidACL, f.Operation)
	case f.Permission < PermissionAny || f.Permission > PermissionAllow:
		return fmt.Errorf("%w: unknown permission %d", ErrInvalidACL, f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects a.
func (f Filter) Matches(a metadata.ACL) bool {
	if f.ResourceType != ResourceAny && int8(f.ResourceType) != a.ResourceType {
		return false
	}
	switch f.PatternType {
	case PatternAny:
		if f.ResourceName != nil && *f.ResourceName != a.ResourceName {
			return false
		}
	case PatternMatch:
		if f.ResourceName != nil && !patternApplies(a, *f.ResourceName) {
			return false
		}
	default:
		if int8(f.PatternType) != a.PatternType || f.ResourceName != nil && *f.ResourceName != a.ResourceName {
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == a.Principal) &&
		(f.Host == nil || *f.Host == a.Host) &&
		(f.Operation == OpAny || int8(f.Operation) == a.Operation) &&
		(f.Permission == PermissionAny || int8(f.Permission) == a.PermissionType)
}

// patternApplies reports whether ACL a's resource pattern covers resource name.
func patternApplies(a metadata.ACL, name string) bool {
	switch PatternType(a.PatternType) {
	case PatternLiteral:
		return a.ResourceName == name || a.ResourceName == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, a.ResourceName)
	}
	return false
}
