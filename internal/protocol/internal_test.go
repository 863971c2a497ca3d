package protocol

import (
	"reflect"
	"testing"
)

// TestReplicasOfflineRoundTrip: the request and its answer read back as written; a
// request cut short, or with a partition count its bytes cannot hold, is refused.
func TestReplicasOfflineRoundTrip(t *testing.T) {
	req := &ReplicasOfflineRequest{BrokerID: 3, BrokerEpoch: 1 << 40, Partitions: []ReplicaRef{
		{TopicID: [16]byte{1, 2, 3}, Partition: 0}, {TopicID: [16]byte{15: 9}, Partition: 1<<31 - 1},
	}}
	b := req.AppendTo(nil)
	got := new(ReplicasOfflineRequest)
	if err := got.ReadFrom(b); err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("read back %+v, %v; want %+v", got, err, req)
	}
	if err := new(ReplicasOfflineRequest).ReadFrom(b[:len(b)-1]); err == nil {
		t.Fatal("a request cut short was read")
	}
	huge := (&ReplicasOfflineRequest{BrokerID: 3}).AppendTo(nil)
	huge[len(huge)-1] = 0x7f // 127 partitions in no bytes
	if err := new(ReplicasOfflineRequest).ReadFrom(huge); err == nil {
		t.Fatal("a partition count the bytes cannot hold was read")
	}
	resp := &ReplicasOfflineResponse{ErrorCode: 41}
	back := new(ReplicasOfflineResponse)
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil || back.ErrorCode != 41 {
		t.Fatalf("response read back %+v, %v", back, err)
	}
	if NewInternalRequest(ReplicasOfflineKey).Key() != ReplicasOfflineKey {
		t.Fatal("NewInternalRequest does not know the key")
	}
}

// TestDelegationTokenRoundTrip: the request and its answer read back as written; a
// request cut short is refused.
func TestDelegationTokenRoundTrip(t *testing.T) {
	req := &DelegationTokenRequest{Op: TokenCreate, Requester: "User:admin", Owner: "User:alice",
		Renewers: []string{"User:bob", "User:carol"}, PeriodMs: -1, HMAC: []byte{1, 2, 3}}
	b := req.AppendTo(nil)
	got := new(DelegationTokenRequest)
	if err := got.ReadFrom(b); err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("read back %+v, %v; want %+v", got, err, req)
	}
	if err := new(DelegationTokenRequest).ReadFrom(b[:len(b)-1]); err == nil {
		t.Fatal("a request cut short was read")
	}
	resp := &DelegationTokenResponse{ErrorCode: 65, ErrorMessage: "not found", TokenID: "id", HMAC: []byte{9},
		IssueMs: 1, ExpiryMs: 2, MaxMs: 3}
	back := new(DelegationTokenResponse)
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil || !reflect.DeepEqual(back, resp) {
		t.Fatalf("response read back %+v, %v; want %+v", back, err, resp)
	}
	if NewInternalRequest(DelegationTokenKey).Key() != DelegationTokenKey {
		t.Fatal("NewInternalRequest does not know the key")
	}
}
