package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func TestSecurityRecordsApplyAndSnapshot(t *testing.T) {
	alice := "alice"
	recs := []Record{
		UserScramCredentialRecord{Name: "alice", Mechanism: 1, Salt: []byte("s"), StoredKey: []byte("k1"), ServerKey: []byte("k2"), Iterations: 4096},
		UserScramCredentialRecord{Name: "bob", Mechanism: 2, Salt: []byte("t"), StoredKey: []byte("k3"), ServerKey: []byte("k4"), Iterations: 8192},
		AccessControlEntryRecord{ID: "a1", ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 3, PermissionType: 3},
		AccessControlEntryRecord{ID: "a2", ResourceType: 3, ResourceName: "g", PatternType: 4, Principal: "User:*", Host: "*", Operation: 2, PermissionType: 2},
		ClientQuotaRecord{Entity: []QuotaEntity{{Type: "user", Name: &alice}}, Key: "producer_byte_rate", Value: 1024},
		ClientQuotaRecord{Entity: []QuotaEntity{{Type: "client-id"}}, Key: "consumer_byte_rate", Value: 2048},
	}
	img, err := Apply(EmptyImage(), 1, recs)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := img.ScramCredential(1, "alice"); !ok || c.Iterations != 4096 || string(c.StoredKey) != "k1" {
		t.Errorf("alice's credential %+v %t", c, ok)
	}
	if img.ACLCount() != 2 || img.ACLsVersion() != 2 || img.QuotasVersion() != 2 {
		t.Errorf("%d ACLs, versions %d %d", img.ACLCount(), img.ACLsVersion(), img.QuotasVersion())
	}
	// The snapshot (Records) rebuilds the same credentials, ACLs and quotas, also
	// through the encoding.
	rebuilt, err := Apply(EmptyImage(), 1, mustDecode(t, EncodeBatch(img.Records())))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rebuilt.sec.scram, img.sec.scram) || !reflect.DeepEqual(rebuilt.ACLs(), img.ACLs()) ||
		!reflect.DeepEqual(rebuilt.Quotas(), img.Quotas()) {
		t.Errorf("rebuilt image differs:\n%+v\n%+v", rebuilt.sec, img.sec)
	}
	next, err := Apply(img, 2, []Record{
		RemoveUserScramCredentialRecord{Name: "alice", Mechanism: 1},
		RemoveAccessControlEntryRecord{ID: "a1"},
		ClientQuotaRecord{Entity: []QuotaEntity{{Type: "user", Name: &alice}}, Key: "producer_byte_rate", Remove: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := next.ScramCredential(1, "alice"); ok || next.ACLCount() != 1 || len(next.Quotas()) != 1 {
		t.Errorf("after removal: %+v", next.sec)
	}
	if _, ok := img.ScramCredential(1, "alice"); !ok || img.ACLCount() != 2 {
		t.Error("Apply changed its input image")
	}
	for _, bad := range []Record{
		RemoveAccessControlEntryRecord{ID: "nope"},
		AccessControlEntryRecord{ID: "a2"},
		UserScramCredentialRecord{Name: "x", Mechanism: 3, Iterations: 4096},
		RemoveUserScramCredentialRecord{Name: "nobody", Mechanism: 1},
	} {
		if _, err := Apply(img, 3, []Record{bad}); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func mustDecode(t *testing.T, b []byte) []Record {
	recs, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestDelegationTokenRecords: tokens are created, renewed (the same record with a
// later expiry) and removed by records, and a snapshot rebuilds them.
func TestDelegationTokenRecords(t *testing.T) {
	img, err := Apply(EmptyImage(), 1, []Record{
		DelegationTokenRecord{TokenID: "t1", Owner: "User:alice", Requester: "User:admin", Renewers: []string{"User:bob"},
			IssueMs: 1000, MaxMs: 9000, ExpiryMs: 2000},
		DelegationTokenRecord{TokenID: "t2", Owner: "User:carol", Requester: "User:carol", IssueMs: 1000, MaxMs: 9000, ExpiryMs: 2000},
		DelegationTokenRecord{TokenID: "t1", Owner: "User:alice", Requester: "User:admin", Renewers: []string{"User:bob"},
			IssueMs: 1000, MaxMs: 9000, ExpiryMs: 5000},
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := img.DelegationToken("t1")
	if !ok || tok.ExpiryMs != 5000 || !tok.OwnerOrRenewer("User:bob") || tok.OwnerOrRenewer("User:admin") {
		t.Fatalf("t1 after its renewal: %+v %t", tok, ok)
	}
	if tok.Expired(5000) || !tok.Expired(5001) {
		t.Errorf("t1 expires after 5000: Expired(5000) %t, Expired(5001) %t", tok.Expired(5000), tok.Expired(5001))
	}
	rebuilt, err := Apply(EmptyImage(), 1, mustDecode(t, EncodeBatch(img.Records())))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rebuilt.DelegationTokens(), img.DelegationTokens()) {
		t.Errorf("rebuilt tokens %+v, want %+v", rebuilt.DelegationTokens(), img.DelegationTokens())
	}
	next, err := Apply(img, 2, []Record{RemoveDelegationTokenRecord{TokenID: "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	if ids := next.DelegationTokens(); len(ids) != 1 || ids[0].TokenID != "t2" {
		t.Errorf("after removing t1: %+v", ids)
	}
	if _, ok := img.DelegationToken("t1"); !ok {
		t.Error("Apply changed its input image")
	}
	for _, bad := range []Record{RemoveDelegationTokenRecord{TokenID: "nope"}, DelegationTokenRecord{TokenID: "t3"}} {
		if _, err := Apply(img, 3, []Record{bad}); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
