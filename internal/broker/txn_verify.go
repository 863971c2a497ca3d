package broker

// Partition verification (KIP-890 part 1) and implicit adds (part 2). Before a
// partition leader appends the batch that starts a producer's transaction in a
// partition, it asks the transaction coordinator whether the partition is in that
// transaction (AddPartitionsToTxn v5 with VerifyOnly, in process when this node is the
// coordinator); with transactions v2 (Produce v12+, TxnOffsetCommit v5+) the producer
// does not add partitions itself and the leader's request adds it. A batch the
// coordinator does not vouch for is refused (INVALID_TXN_STATE), so a late write of a
// transaction that was aborted never lands after its marker. The log's verification
// guard closes the window between the answer and the append.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/storage"
	"github.com/samsa-streaming/samsa/internal/txn"
)

// verifyVersion is the AddPartitionsToTxn version brokers send each other (the
// batched form with VerifyOnly).
const verifyVersion = 5

// verifyTxnPartition asks the coordinator of transactional id id whether tp is in the
// transaction of producerID at epoch (add: add it). It returns the coordinator's code.
// CONCURRENT_TRANSACTIONS — the producer's previous transaction is still completing,
// which transactions v2 producers meet at the start of every transaction — is asked
// again every add.partitions.to.txn.retry.backoff.ms for up to
// add.partitions.to.txn.retry.backoff.max.ms, as Kafka's leaders do, before the
// producer is told to retry.
func (b *Broker) verifyTxnPartition(ctx context.Context, id string, producerID int64, epoch int16, tp txn.TopicPartition, add bool) int16 {
	ms := func(v int32) time.Duration { return time.Duration(v) * time.Millisecond }
	backoff, budget := ms(b.cfg.AddPartitionsToTxnRetryBackoffMs), ms(b.cfg.AddPartitionsToTxnRetryBackoffMaxMs)
	for waited := time.Duration(0); ; waited += backoff {
		code := b.askTxnCoordinator(ctx, id, producerID, epoch, tp, add)
		if code != kerr.ConcurrentTransactions.Code || waited+backoff > budget {
			return code
		}
		expired, stop := b.after(backoff)
		select {
		case <-expired:
		case <-ctx.Done():
			stop()
			return code
		}
	}
}

// askTxnCoordinator sends one verification to the coordinator of id.
func (b *Broker) askTxnCoordinator(ctx context.Context, id string, producerID int64, epoch int16, tp txn.TopicPartition, add bool) int16 {
	node := b.txnCoordinatorNode(id)
	switch {
	case node < 0:
		return kerr.CoordinatorNotAvailable.Code
	case node == b.nodeID:
		select {
		case codes := <-b.txns.AddPartitions(id, producerID, epoch, []txn.TopicPartition{tp}, !add, add):
			return codes[0]
		case <-ctx.Done():
			return kerr.RequestTimedOut.Code
		}
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(verifyVersion)
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = id, producerID, epoch, !add
	t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
	rt.Topics = append(rt.Topics, t)
	req.Transactions = append(req.Transactions, rt)
	r, err := b.peers.request(ctx, node, req)
	if err != nil {
		b.logger.Debug("verifying a transaction with its coordinator", "broker", node, "transactional_id", id, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	resp := r.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode == kerr.ClusterAuthorizationFailed.Code {
		b.logger.Warn("a transaction coordinator refused this node's verification (CLUSTER_AUTHORIZATION_FAILED): make the nodes' principal on the inter-broker listener a super user",
			"broker", node, "listener", b.cfg.InterBrokerListenerName)
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, rt := range resp.Transactions {
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				if t.Topic == tp.Topic && p.Partition == tp.Partition {
					return p.ErrorCode
				}
			}
		}
	}
	return kerr.CoordinatorNotAvailable.Code
}

// verifyProduce verifies the transactional batch h of a Produce request before it is
// appended to p, when it would start its producer's transaction there; the options it
// returns carry the log's verification guard. version is the Produce version: v12+
// adds the partition (transactions v2).
func (b *Broker) verifyProduce(p *replica.Partition, h *record.Header, txnID *string, version int16, timeoutMs int32) (storage.AppendOptions, error) {
	if txnID == nil {
		return storage.AppendOptions{}, fmt.Errorf("a transactional batch of producer %d in a request without a transactional id: %w", h.ProducerID, kerr.InvalidRecord)
	}
	add := version >= 12
	if !add && !b.cfg.TransactionPartitionVerificationEnable {
		return storage.AppendOptions{}, nil
	}
	guard, needed := p.Log.TxnVerification(h.ProducerID, h.ProducerEpoch)
	if !needed {
		return storage.AppendOptions{}, nil
	}
	if *txnID == "" {
		// Kafka asks its coordinator, which refuses an empty transactional id.
		return storage.AppendOptions{}, fmt.Errorf("a transactional batch of producer %d in a request whose transactional id is empty: set the producer's transactional id: %w", h.ProducerID, kerr.InvalidRequest)
	}
	ctx, cancel := b.requestContext(timeoutMs)
	defer cancel()
	code := b.verifyTxnPartition(ctx, *txnID, h.ProducerID, h.ProducerEpoch, txn.TopicPartition{Topic: p.Topic, Partition: p.Index}, add)
	if err := verificationError(code, *txnID, p.Topic, p.Index); err != nil {
		return storage.AppendOptions{}, err
	}
	if add {
		// Transactions v2 end every transaction with a marker of a newer epoch, which
		// refuses a late batch of it by itself; the guard would instead trip on the
		// previous transaction's marker, which may land while this one is verified.
		return storage.AppendOptions{}, nil
	}
	return storage.AppendOptions{TxnGuard: guard}, nil
}

// verificationError maps the coordinator's answer to the error a producer gets: the
// partition not in the transaction is INVALID_TXN_STATE, a fenced producer
// INVALID_PRODUCER_EPOCH (as Kafka answers produces), anything else — the coordinator
// moving, loading, busy — NOT_ENOUGH_REPLICAS, which every client retries.
func verificationError(code int16, id, topic string, partition int32) error {
	if code == 0 {
		return nil
	}
	var to *kerr.Error
	switch code {
	case kerr.InvalidTxnState.Code:
		to = kerr.InvalidTxnState
	case kerr.ProducerFenced.Code, kerr.InvalidProducerIDMapping.Code, kerr.InvalidProducerEpoch.Code:
		to = kerr.InvalidProducerEpoch
	default:
		to = kerr.NotEnoughReplicas
	}
	return fmt.Errorf("the coordinator of transactional id %q answered %s for %s-%d: %w", id, kerr.ErrorForCode(code), topic, partition, to)
}
