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
