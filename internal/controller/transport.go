package controller

import pb "go.etcd.io/raft/v3/raftpb"

// Transport carries Raft messages between the voters of a multi-node controller
// quorum. A single-node quorum needs none.
//
// Addresses in messages are Raft ids, not node ids: see RaftID and NodeIDOf.
//
// TODO(controller-network): a network implementation (one connection per peer on the
// controller listener, framing protobuf-encoded raftpb.Message, reconnecting with
// backoff, reporting MsgSnap outcomes via ReportSnapshot) is a later issue. Today
// only in-process transports exist (see the tests).
type Transport interface {
	// Send delivers msgs to their recipients, best effort: Raft retries lost
	// messages. It is called from the raft loop and must not block for long. The
	// messages must not be modified; they may be retained.
	Send(msgs []*pb.Message)
}

// RaftID is the Raft id of node id n. Raft reserves id 0 for "none", while Kafka node
// ids start at 0, so the two are offset by one.
func RaftID(n int32) uint64 { return uint64(n) + 1 }

// NodeIDOf is the node id of Raft id id (-1 for Raft's "none").
func NodeIDOf(id uint64) int32 { return int32(id) - 1 }
