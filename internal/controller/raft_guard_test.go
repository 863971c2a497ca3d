package controller

import (
	"context"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

// TestImpossibleHeartbeatIgnored: a Raft heartbeat committing past the end of this
// node's metadata log — from a node of another quorum, reaching this node before it
// knows a cluster id to refuse it by — is ignored: Raft would panic on it, and its
// higher term would have made the node follow a stranger. The controller stays the
// active controller and goes on committing.
func TestImpossibleHeartbeatIgnored(t *testing.T) {
	c := startSingle(t, t.TempDir())
	self := c.opts.NodeID
	hb := &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: proto.Uint64(RaftID(self + 1)), To: proto.Uint64(RaftID(self)),
		Term: proto.Uint64(1000), Commit: proto.Uint64(1 << 20)}
	b, err := proto.Marshal(hb)
	if err != nil {
		t.Fatal(err)
	}
	resp := c.ReceiveRaft(context.Background(), &protocol.RaftRequest{From: self + 1, Messages: [][]byte{b}})
	if resp.ErrorCode != 0 {
		t.Fatalf("ReceiveRaft: error %d", resp.ErrorCode)
	}
	register(t, c, 7) // a proposal committed after the heartbeat
	if leader := c.Leader(); leader != self {
		t.Fatalf("the active controller is %d after the heartbeat, want %d (this node)", leader, self)
	}
}
