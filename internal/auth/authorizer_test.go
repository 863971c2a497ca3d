package auth

import (
	"fmt"
	"testing"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

func acl(rt ResourceType, name string, pt PatternType, principal, host string, op Operation, perm Permission) metadata.ACL {
	return metadata.ACL{ResourceType: int8(rt), ResourceName: name, PatternType: int8(pt), Principal: principal,
		Host: host, Operation: int8(op), PermissionType: int8(perm)}
}

func authorizerWith(t *testing.T, allowIfNone bool, acls ...metadata.ACL) *Authorizer {
	t.Helper()
	var recs []metadata.Record
	for i, a := range acls {
		a.ID = fmt.Sprint(i)
		if err := ValidateBinding(a); err != nil {
			t.Fatalf("ACL %+v: %v", a, err)
		}
		recs = append(recs, metadata.AccessControlEntryRecord(a))
	}
	img, err := metadata.Apply(metadata.EmptyImage(), 1, recs)
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(AuthorizerOptions{SuperUsers: []string{"User:admin"}, AllowEveryoneIfNoACLFound: allowIfNone})
	a.Update(img)
	return a
}

func TestStandardAuthorizerSemantics(t *testing.T) {
	a := authorizerWith(t, false,
		acl(ResourceTopic, "orders", PatternLiteral, "User:alice", "*", OpRead, PermissionAllow),
		acl(ResourceTopic, "orders", PatternLiteral, "User:bob", "*", OpAll, PermissionAllow),
		acl(ResourceTopic, "orders", PatternLiteral, "User:bob", "*", OpWrite, PermissionDeny),
		acl(ResourceTopic, "logs-", PatternPrefixed, "User:*", "*", OpWrite, PermissionAllow),
		acl(ResourceTopic, "logs-secret", PatternPrefixed, "User:carol", "*", OpAll, PermissionDeny),
		acl(ResourceTopic, "*", PatternLiteral, "User:dave", "10.0.0.1", OpDescribe, PermissionAllow),
		acl(ResourceGroup, "g", PatternLiteral, "User:alice", "*", OpRead, PermissionAllow),
		acl(ResourceCluster, ClusterName, PatternLiteral, "User:ops", "*", OpAlterConfigs, PermissionAllow),
	)
	for _, tt := range []struct {
		who  string
		host string
		op   Operation
		rt   ResourceType
		name string
		want bool
	}{
		{"alice", "1.2.3.4", OpRead, ResourceTopic, "orders", true},
		{"alice", "1.2.3.4", OpDescribe, ResourceTopic, "orders", true}, // READ implies DESCRIBE
		{"alice", "1.2.3.4", OpWrite, ResourceTopic, "orders", false},
		{"bob", "1.2.3.4", OpRead, ResourceTopic, "orders", true},   // ALL
		{"bob", "1.2.3.4", OpWrite, ResourceTopic, "orders", false}, // DENY wins over ALL
		{"eve", "1.2.3.4", OpWrite, ResourceTopic, "logs-app", true},
		{"eve", "1.2.3.4", OpDescribe, ResourceTopic, "logs-app", true},
		{"carol", "1.2.3.4", OpWrite, ResourceTopic, "logs-secret-1", false}, // prefixed DENY
		{"carol", "1.2.3.4", OpWrite, ResourceTopic, "logs-app", true},
		{"dave", "10.0.0.1", OpDescribe, ResourceTopic, "anything", true}, // wildcard resource, host
		{"dave", "10.0.0.2", OpDescribe, ResourceTopic, "anything", false},
		{"eve", "1.2.3.4", OpRead, ResourceTopic, "unguarded", false}, // no ACL: deny by default
		{"admin", "1.2.3.4", OpDelete, ResourceTopic, "orders", true}, // super user
		{"alice", "1.2.3.4", OpRead, ResourceGroup, "g", true},
		{"alice", "1.2.3.4", OpDelete, ResourceGroup, "g", false},
		{"ops", "1.2.3.4", OpDescribeConfigs, ResourceCluster, ClusterName, true}, // ALTER_CONFIGS implies it
		{"ops", "1.2.3.4", OpClusterAction, ResourceCluster, ClusterName, false},
	} {
		got := a.Authorize(Action{Principal: User(tt.who), ClientAddr: tt.host + ":5000", Operation: tt.op, Resource: tt.rt, Name: tt.name})
		if got != tt.want {
			t.Errorf("%s from %s: %s %s:%s = %t, want %t", tt.who, tt.host, tt.op, tt.rt, tt.name, got, tt.want)
		}
	}
	open := authorizerWith(t, true, acl(ResourceTopic, "orders", PatternLiteral, "User:alice", "*", OpRead, PermissionAllow))
	if !open.Authorize(Action{Principal: User("eve"), Operation: OpWrite, Resource: ResourceTopic, Name: "other"}) {
		t.Error("allow.everyone.if.no.acl.found: a resource without ACLs is denied")
	}
	if open.Authorize(Action{Principal: User("eve"), Operation: OpRead, Resource: ResourceTopic, Name: "orders"}) {
		t.Error("allow.everyone.if.no.acl.found allowed a resource that has ACLs")
	}
	if ops := a.AuthorizedOperations(User("alice"), "1.2.3.4:1", ResourceTopic, "orders"); ops != 1<<OpRead|1<<OpDescribe {
		t.Errorf("authorized operations %b", ops)
	}
}

func TestFilters(t *testing.T) {
	orders := acl(ResourceTopic, "orders", PatternLiteral, "User:alice", "*", OpRead, PermissionAllow)
	prefixed := acl(ResourceTopic, "ord", PatternPrefixed, "User:bob", "*", OpWrite, PermissionDeny)
	wild := acl(ResourceTopic, "*", PatternLiteral, "User:bob", "*", OpWrite, PermissionAllow)
	name := func(s string) *string { return &s }
	for _, tt := range []struct {
		f    Filter
		want []bool // orders, prefixed, wild
	}{
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, []bool{true, true, true}},
		{Filter{ResourceType: ResourceTopic, ResourceName: name("orders"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, []bool{true, true, true}},
		{Filter{ResourceType: ResourceTopic, ResourceName: name("orders"), PatternType: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, []bool{true, false, false}},
		{Filter{ResourceType: ResourceTopic, PatternType: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}, []bool{false, true, false}},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: name("User:bob"), Operation: OpAny, Permission: PermissionDeny}, []bool{false, true, false}},
		{Filter{ResourceType: ResourceGroup, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, []bool{false, false, false}},
	} {
		for i, a := range []metadata.ACL{orders, prefixed, wild} {
			if got := tt.f.Matches(a); got != tt.want[i] {
				t.Errorf("filter %+v on ACL %d: %t", tt.f, i, got)
			}
		}
	}
}

// A node that falls behind loads the leader's snapshot: an image replayed from
// scratch. Its ACLs must replace the old ones even when as many ACL records went
// into it as into the image it replaces.
func TestAuthorizerFollowsSnapshotImage(t *testing.T) {
	record := func(id, principal string) metadata.AccessControlEntryRecord {
		a := acl(ResourceTopic, "orders", PatternLiteral, principal, "*", OpRead, PermissionAllow)
		a.ID = id
		return metadata.AccessControlEntryRecord(a)
	}
	// The node's image: alice's ACL, created at offset 5.
	img, err := metadata.Apply(metadata.EmptyImage(), 0, []metadata.Record{metadata.ClusterRecord{ClusterID: "c"}})
	if err == nil {
		img, err = metadata.Apply(img, 5, []metadata.Record{record("a", "User:alice")})
	}
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(AuthorizerOptions{})
	read := func(who string) bool {
		return a.Authorize(Action{Principal: Principal{Type: "User", Name: who}, Operation: OpRead, Resource: ResourceTopic, Name: "orders"})
	}
	a.Update(img)
	if !read("alice") || read("bob") {
		t.Fatal("before the snapshot: alice must read, bob not")
	}
	// Meanwhile alice's ACL was deleted and bob's created; the node loads the
	// snapshot taken at offset 40, which holds bob's ACL only.
	snap, err := metadata.Apply(metadata.EmptyImage(), 40, []metadata.Record{metadata.ClusterRecord{ClusterID: "c"}, record("b", "User:bob")})
	if err != nil {
		t.Fatal(err)
	}
	a.Update(snap)
	if read("alice") || !read("bob") {
		t.Fatalf("after the snapshot: alice reads %v (want false), bob reads %v (want true)", read("alice"), read("bob"))
	}
	// Bob's ACL deleted too: the next snapshot holds no ACL record at all.
	empty, err := metadata.Apply(metadata.EmptyImage(), 60, []metadata.Record{metadata.ClusterRecord{ClusterID: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	a.Update(empty)
	if read("bob") {
		t.Fatal("after a snapshot without ACLs: bob still reads")
	}
}

// Requests update the authorizer concurrently, each with the image it read: one that
// read the image before an ACL was deleted must not put the deleted ACL back for
// the requests after the change.
func TestAuthorizerIgnoresOlderImage(t *testing.T) {
	a1 := acl(ResourceTopic, "orders", PatternLiteral, "User:alice", "*", OpRead, PermissionAllow)
	a1.ID = "a1"
	old, err := metadata.Apply(metadata.EmptyImage(), 3, []metadata.Record{metadata.AccessControlEntryRecord(a1)})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := metadata.Apply(old, 4, []metadata.Record{metadata.RemoveAccessControlEntryRecord{ID: "a1"}})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(AuthorizerOptions{})
	a.Update(deleted)
	a.Update(old) // a slower request's Update, with the image it read earlier
	if a.Authorize(Action{Principal: Principal{Type: "User", Name: "alice"}, Operation: OpRead, Resource: ResourceTopic, Name: "orders"}) {
		t.Fatal("alice reads with a deleted ACL")
	}
}
