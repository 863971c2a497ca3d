package broker

// OffsetForLeaderEpoch (key 23), versions 0–4.
//
// For a requested leader epoch, the largest epoch at or below it that this log has and
// the end offset of that epoch (the start offset of the next one, or the log end offset
// for the current epoch) — what a consumer uses to detect log truncation after a leader
// change (KIP-320). CurrentLeaderEpoch is validated (v2+).

import (
	"cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.OffsetForLeaderEpoch, 0, 4, (*Broker).handleOffsetForLeaderEpoch) }

func (b *Broker) handleOffsetForLeaderEpoch(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.SetVersion(req.Version)
	img := b.image()
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		var authErr error
		if r.ReplicaID >= 0 { // a follower
			if !b.authorizeCluster(req, auth.OpClusterAction) {
				authErr = kerr.ClusterAuthorizationFailed
			}
		} else {
			authErr = b.topicAuthError(req, auth.OpDescribe, rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			p := b.namedReplica(img, rt.Topic, rp.Partition)
			if err := cmp.Or(authErr, fetchablePartition(p, rp.CurrentLeaderEpoch)); err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				sp.LeaderEpoch, sp.EndOffset = p.Log.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
