package broker

// DescribeQuorum (key 55), versions 0–2; on the client listeners and the controller
// listener.
//
// Describes the metadata quorum (__cluster_metadata partition 0): the leader (the
// active controller), its epoch (the Raft term), the high watermark (the committed
// metadata offset), and for every voter and observer its log end offset and, from
// v1, when the leader last heard from it and when it last had the whole log
// (milliseconds since the epoch; -1 for the leader itself and when unknown). A
// broker forwards the request to the active controller; a voter that is not the
// leader answers the partition with NOT_LEADER_OR_FOLLOWER. From v2 the voters'
// controller listener endpoints are listed. Offsets are metadata offsets (Raft
// indexes): a replica's log end offset is the last entry it has, not the next one.

import (
	"context"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.DescribeQuorum, 0, 2, (*Broker).handleDescribeQuorum)
	registerController(kmsg.DescribeQuorum, 0, 2, (*Broker).serveDescribeQuorum)
}

// metadataTopic is the name Kafka gives the metadata log.
const metadataTopic = "__cluster_metadata"

func (b *Broker) handleDescribeQuorum(req *protocol.Request) <-chan protocol.Response {
	return b.forward(req, 0, nil)
}

func (b *Broker) serveDescribeQuorum(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.DescribeQuorumRequest)
	resp := kmsg.NewPtrDescribeQuorumResponse()
	resp.SetVersion(r.Version)
	var status controller.QuorumStatus
	var statusErr error
	fetched := false
	for _, t := range r.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition = p.Partition
			if t.Topic != metadataTopic || p.Partition != 0 {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			if !fetched {
				status, statusErr = b.controller.QuorumStatus(ctx)
				fetched = true
			}
			if statusErr != nil {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
				rp.ErrorMessage = errorMessage(statusErr)
				rp.LeaderID = b.controller.Leader()
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = status.LeaderID, status.LeaderEpoch, status.HighWatermark
			for _, v := range status.Voters {
				rp.CurrentVoters = append(rp.CurrentVoters, replicaState(v))
			}
			for _, o := range status.Observers {
				rp.Observers = append(rp.Observers, replicaState(o))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if r.Version >= 2 {
		voters, _ := b.cfg.QuorumVoters()
		for _, id := range slices.Sorted(maps.Keys(voters)) {
			addr := voters[id]
			host, port, err := net.SplitHostPort(addr)
			n, perr := strconv.Atoi(port)
			if err != nil || perr != nil {
				continue
			}
			node := kmsg.NewDescribeQuorumResponseNode()
			node.NodeID = id
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = b.cfg.ControllerListenerNames[0], host, uint16(n)
			node.Listeners = append(node.Listeners, l)
			resp.Nodes = append(resp.Nodes, node)
		}
	}
	return resp
}

func replicaState(s controller.ReplicaStatus) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	rs.ReplicaID, rs.LogEndOffset = s.NodeID, s.LogEndOffset
	rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = millisOrUnknown(s.LastFetch), millisOrUnknown(s.LastCaughtUp)
	return rs
}

func millisOrUnknown(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}
