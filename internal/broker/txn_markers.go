package broker

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/txn"
)

// markerWriter is the transaction coordinator's txn.Markers: it sends WriteTxnMarkers
// to the leader of each partition of a transaction (in process when that is this
// node), one request per leader, and retries the partitions that failed — a leader
// moved, not enough replicas, a broker unreachable — after a backoff, finding their
// leaders again, until every partition has its marker or is gone, or the coordinator
// gives the partition up (ctx).
type markerWriter struct{ b *Broker }

// markerRetryBackoff is the pause before markers that failed are sent again (Kafka's
// retry.backoff.ms).
const markerRetryBackoff = 100 * time.Millisecond

// markerWriteVersion is the WriteTxnMarkers version sent between brokers: v2 names
// each marker's transaction version (KIP-1228).
const markerWriteVersion = 2

func (w markerWriter) Write(ctx context.Context, m txn.Marker) error {
	b := w.b
	remaining := m.Partitions
	for {
		img := b.image()
		byLeader := map[int32][]txn.TopicPartition{}
		var retry []txn.TopicPartition
		for _, tp := range remaining {
			t, ok := img.Topic(tp.Topic)
			if !ok || int(tp.Partition) >= len(t.Partitions) {
				continue // deleted: nothing to end there
			}
			if leader := t.Partitions[tp.Partition].Leader; leader >= 0 {
				byLeader[leader] = append(byLeader[leader], tp)
			} else {
				retry = append(retry, tp)
			}
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		fenced := false
		for leader, tps := range byLeader {
			wg.Go(func() {
				codes := w.send(ctx, leader, m, tps)
				mu.Lock()
				defer mu.Unlock()
				for i, code := range codes {
					switch code {
					case 0, kerr.InvalidProducerEpoch.Code:
						// Written, or a newer epoch of the producer wrote there since: the
						// transaction is over in that partition.
					case kerr.TransactionCoordinatorFenced.Code:
						fenced = true
					default:
						retry = append(retry, tps[i])
					}
				}
			})
		}
		wg.Wait()
		switch {
		case fenced:
			return txn.ErrFenced
		case len(retry) == 0:
			return nil
		}
		b.logger.Debug("transaction markers to retry", "transactional_id", m.TransactionalID, "producer_id", m.ProducerID,
			"partitions", len(retry))
		remaining = retry
		expired, stop := b.after(markerRetryBackoff)
		select {
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-expired:
		}
	}
}

// send writes marker m to partitions tps of one leader and returns a code per
// partition.
func (w markerWriter) send(ctx context.Context, leader int32, m txn.Marker, tps []txn.TopicPartition) []int16 {
	b := w.b
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(markerWriteVersion)
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	rm.TransactionVersion = m.TransactionVersion
	index := map[txn.TopicPartition]int{}
	for i, tp := range tps {
		index[tp] = i
		if n := len(rm.Topics); n == 0 || rm.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			rm.Topics = append(rm.Topics, t)
		}
		t := &rm.Topics[len(rm.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, rm)
	codes := make([]int16, len(tps))
	for i := range codes {
		codes[i] = kerr.NotLeaderForPartition.Code // unanswered: try again
	}
	var resp *kmsg.WriteTxnMarkersResponse
	if leader == b.nodeID {
		resp = b.writeTxnMarkers(req)
	} else {
		ctx, cancel := context.WithTimeout(ctx, markerWriteTimeout+5*time.Second)
		defer cancel()
		r, err := b.peers.request(ctx, leader, req)
		if err != nil {
			b.logger.Debug("sending transaction markers", "broker", leader, "err", err)
			return codes
		}
		resp = r.(*kmsg.WriteTxnMarkersResponse)
		if refusedByPeer(resp) {
			b.logger.Warn("a broker refused this node's transaction markers (CLUSTER_AUTHORIZATION_FAILED): make the nodes' principal on the inter-broker listener a super user",
				"broker", leader, "listener", b.cfg.InterBrokerListenerName)
		}
	}
	for _, rm := range resp.Markers {
		for _, t := range rm.Topics {
			for _, p := range t.Partitions {
				if i, ok := index[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}]; ok {
					codes[i] = p.ErrorCode
				}
			}
		}
	}
	return codes
}

// refusedByPeer reports whether a leader refused markers for want of CLUSTER_ACTION.
func refusedByPeer(resp *kmsg.WriteTxnMarkersResponse) bool {
	for _, rm := range resp.Markers {
		for _, t := range rm.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == kerr.ClusterAuthorizationFailed.Code {
					return true
				}
			}
		}
	}
	return false
}
