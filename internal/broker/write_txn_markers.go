package broker

// WriteTxnMarkers (key 27), versions 0–2.
//
// Transaction coordinators send it to each partition's leader to end a transaction
// there: for every marker, a control batch (commit or abort, with the coordinator
// epoch) of the producer is appended to each of its partitions led here, as an acks=all
// write, and the partition answers once the marker is committed. The log checks the
// producer epoch (INVALID_PRODUCER_EPOCH when a newer epoch wrote there) and the
// coordinator epoch (TRANSACTION_COORDINATOR_FENCED when a newer coordinator did).
// From v2 each marker names its transaction version (KIP-1228): a transactions v2
// marker must carry an epoch above the producer's records, so a late copy of one
// cannot end the producer's next transaction (storage.AppendOptions.TxnVersion).
// Once a marker is committed to a __consumer_offsets partition, the group coordinator
// applies or drops the offsets the transaction committed there. `samsa transactions
// abort` sends it too, for a hanging transaction, as Kafka's kafka-transactions.sh
// does.
//
// Authorization: ALTER on the cluster (what an administrator aborting a hanging
// transaction has) or CLUSTER_ACTION on the cluster (the brokers: their principal must
// be a super user), as Kafka checks; otherwise every partition answers
// CLUSTER_AUTHORIZATION_FAILED.

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// Answered from its own goroutine (later): it waits for the markers to replicate.
func init() { register(kmsg.WriteTxnMarkers, 0, 2, later((*Broker).handleWriteTxnMarkers)) }

// markerWriteTimeout bounds how long a marker waits to be replicated (Kafka's
// request.timeout.ms for the coordinator's markers).
const markerWriteTimeout = 30 * time.Second

func (b *Broker) handleWriteTxnMarkers(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.WriteTxnMarkersRequest)
	if !b.allowed(req, auth.OpAlter, auth.ResourceCluster, auth.ClusterName) &&
		!b.authorizeCluster(req, auth.OpClusterAction) {
		return reply(writeTxnMarkersErrors(r, kerr.ClusterAuthorizationFailed.Code))
	}
	return reply(b.writeTxnMarkers(r))
}

// writeTxnMarkersErrors answers code for every partition of every marker of r.
func writeTxnMarkersErrors(r *kmsg.WriteTxnMarkersRequest, code int16) *kmsg.WriteTxnMarkersResponse {
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range r.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// writeTxnMarkers appends every marker of r to its partitions and answers once each
// is committed or failed.
func (b *Broker) writeTxnMarkers(r *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	ctx, cancel := context.WithTimeout(b.serving, markerWriteTimeout)
	defer cancel()
	now := b.clock.Now()
	var wg sync.WaitGroup
	for _, m := range r.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	for i, m := range r.Markers {
		batch, err := markerBatch(m, now)
		for j, t := range m.Topics {
			for k, idx := range t.Partitions {
				rp := &resp.Markers[i].Topics[j].Partitions[k]
				rp.Partition = idx
				if err != nil {
					rp.ErrorCode = errorCode(err)
					continue
				}
				p, info, err := b.appendMarker(t.Topic, idx, batch, m.TransactionVersion, now)
				if err != nil {
					rp.ErrorCode = errorCode(err)
					continue
				}
				wg.Add(1)
				go func(m kmsg.WriteTxnMarkersRequestMarker, topic string) {
					defer wg.Done()
					if err := waitHighWatermark(ctx, p, info.LastOffset+1, info.LeaderEpoch); err != nil {
						rp.ErrorCode = errorCode(err)
						return
					}
					if topic == offsetsTopic {
						b.groups.CompleteTxn(idx, m.ProducerID, m.Committed)
					}
				}(m, t.Topic)
			}
		}
	}
	wg.Wait()
	return resp
}

// markerBatch builds the control batch of a marker.
func markerBatch(m kmsg.WriteTxnMarkersRequestMarker, now time.Time) ([]byte, error) {
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch = m.ProducerID, m.ProducerEpoch
	opts.Transactional, opts.Control = true, true
	opts.BaseTimestamp = now.UnixMilli()
	typ := record.ControlAbort
	if m.Committed {
		typ = record.ControlCommit
	}
	return record.Build(opts, []record.Record{record.ControlRecord{Type: typ, CoordinatorEpoch: m.CoordinatorEpoch}.Record()})
}

// appendMarker appends a marker batch of transaction version txnVersion to a
// partition led here (acks=all).
func (b *Broker) appendMarker(topic string, partition int32, batch []byte, txnVersion int8, now time.Time) (*replica.Partition, storage.AppendInfo, error) {
	p := b.replicas.Get(topic, partition)
	if err := fetchablePartition(p, -1); err != nil {
		return nil, storage.AppendInfo{}, err
	}
	// The batch is stamped in place by the append: every partition gets its own copy.
	info, err := p.AppendAsLeaderTxn(append([]byte(nil), batch...), true, now, storage.AppendOptions{Coordinator: true, TxnVersion: txnVersion})
	if err != nil {
		b.storageFailed(p, err)
		return nil, info, err
	}
	return p, info, nil
}
