package broker

// A consumer's Fetch, one partition at a time, and fetch from the closest replica
// (KIP-392).
//
// The leader serves a consumer up to the high watermark (the last stable offset for
// read_committed). From v11 a consumer's fetch may also go to a follower — Kafka's
// clients do so when a leader named it as their preferred read replica — and the
// follower serves it up to its own high watermark, which never passes the leader's:
// an offset between the follower's high watermark and its log end gets no records
// yet, one outside its log OFFSET_OUT_OF_RANGE (the client then asks the leader).
// Kafka serves these fetches on followers whatever replica.selector.class says, and
// so does Samsa; before v11 only the leader answers.
//
// With replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector,
// a leader answering a consumer that names its rack (v11+, client.rack) picks the
// replica it should read from: the leader itself when it is in that rack, else the
// most caught-up in-sync follower in the rack that holds the fetch offset (see
// replica.Partition.ReadReplicas). When that is a follower the answer carries no
// records, only preferred_read_replica, and is sent at once.
//
// A consumer naming the epoch of the last batch it fetched (LastFetchedEpoch, v12+)
// gets DivergingEpoch, and no records, when that epoch ends here before its fetch
// offset (KIP-320, as Kafka checks it for every fetch).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/replica"
)

// preferredReadReplicaVersion is the first Fetch version with a consumer's rack and
// a preferred read replica (KIP-392).
const preferredReadReplicaVersion = 11

// serveConsumer reads one partition of a consumer's fetch into pr. It returns the
// record bytes found and whether the fetch is to be answered at once (an error, or a
// preferred read replica instead of records).
func (b *Broker) serveConsumer(st *fetchState, r *kmsg.FetchRequest, img *metadata.Image, p *replica.Partition,
	rp *kmsg.FetchRequestTopicPartition, pr *fetchPartitionResult, maxBytes int64, minOneBatch bool) (int64, bool) {
	// Followers serve consumers from v11 (KIP-392).
	if err := readablePartition(p, rp.CurrentLeaderEpoch, r.Version < preferredReadReplicaVersion); err != nil {
		pr.errorCode = errorCode(err)
		return 0, true
	}
	st.watch(p, p.Changes()) // the count first: a change while p is read moves it
	pr.highWatermark = p.HighWatermark()
	pr.lastStableOffset = p.LastStableOffset()
	pr.logStartOffset = p.Log.LogStartOffset()
	if r.Version >= preferredReadReplicaVersion && r.Rack != "" && b.cfg.ReplicaSelectorClass == config.RackAwareReplicaSelector {
		if id := b.preferredReadReplica(img, p, r.Rack, rp.FetchOffset); id >= 0 {
			pr.preferredReadReplica = id
			return 0, true
		}
	}
	// KIP-320: a consumer naming the epoch of the last batch it fetched (v12+) learns
	// that its log diverged from this one, as a follower does.
	diverging, epoch, end, err := p.ConsumerDivergence(rp.LastFetchedEpoch, rp.FetchOffset)
	if err != nil {
		pr.errorCode = errorCode(err)
		return 0, true
	}
	if diverging {
		pr.diverging, pr.divergingEpoch, pr.divergingEnd = true, epoch, end
		return 0, true
	}
	limit := pr.highWatermark
	if r.IsolationLevel == 1 {
		limit = pr.lastStableOffset
	}
	res, ranges, err := p.Log.ReadAppend(st.ranges, rp.FetchOffset, int(maxBytes), limit, minOneBatch)
	st.ranges = ranges
	if err != nil {
		b.storageFailed(p, err)
		pr.errorCode = errorCode(err)
		return 0, true
	}
	pr.ranges, pr.size = res.Ranges, res.Size
	if r.IsolationLevel == 1 && res.Size > 0 {
		n := len(st.aborted)
		st.aborted = p.Log.AbortedTransactions(rp.FetchOffset, res.NextOffset, st.aborted)
		pr.aborted = st.aborted[n:]
	}
	return res.Size, false
}

// preferredReadReplica returns the follower a consumer in clientRack should read p
// from, or -1 when the leader (this node) should serve it.
func (b *Broker) preferredReadReplica(img *metadata.Image, p *replica.Partition, clientRack string, fetchOffset int64) int32 {
	if !p.IsLeader() {
		return -1
	}
	rackOf := func(id int32) (string, bool) {
		br, ok := img.Broker(metadata.NodeID(id))
		if !ok || br.Fenced {
			return "", false
		}
		_, reachable := b.clientEndpoint(br, "")
		return br.Rack, reachable
	}
	return selectRackReplica(clientRack, b.nodeID, rackOf, p.ReadReplicas(fetchOffset))
}

// selectRackReplica is Kafka's RackAwareReplicaSelector: the leader when it is in
// the client's rack or no candidate is; otherwise the candidate in the client's rack
// with the largest log end, then the most recently caught up, then the lowest id. It
// returns -1 for the leader. rackOf reports a broker's rack and whether clients can
// reach it (registered, unfenced, with a client endpoint).
func selectRackReplica(clientRack string, leader int32, rackOf func(int32) (string, bool), candidates []replica.ReadReplica) int32 {
	if rack, ok := rackOf(leader); ok && rack == clientRack {
		return -1
	}
	best := -1
	for i, c := range candidates {
		if rack, ok := rackOf(c.ID); !ok || rack != clientRack {
			continue
		}
		if best < 0 || betterReadReplica(c, candidates[best]) {
			best = i
		}
	}
	if best < 0 {
		return -1
	}
	return candidates[best].ID
}

func betterReadReplica(a, b replica.ReadReplica) bool {
	switch {
	case a.LogEnd != b.LogEnd:
		return a.LogEnd > b.LogEnd
	case !a.LastCaughtUp.Equal(b.LastCaughtUp):
		return a.LastCaughtUp.After(b.LastCaughtUp)
	}
	return a.ID < b.ID
}
