package broker

// The transaction coordinator on a broker: internal/txn over the __transaction_state
// partitions this node leads (loaded with the partition's leader epoch as coordinator
// epoch, unloaded when the leadership moves, as the group coordinator is over
// __consumer_offsets), its markers written with WriteTxnMarkers to each partition's
// leader (txn_markers.go), and the requests between brokers that transactions need,
// over one peer connection per broker.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/txn"
)

// transactionStateTopic is Kafka's internal topic for transaction state.
const transactionStateTopic = "__transaction_state"

// txnStateLog gives the transaction coordinator the __transaction_state partitions.
type txnStateLog struct{ b *Broker }

var _ txn.Log = txnStateLog{}

func (l txnStateLog) log() internalLog {
	return internalLog{b: l.b, topic: transactionStateTopic, notCoordinator: txn.ErrNotCoordinator}
}

// Append writes records as one batch and waits until the high watermark covers it.
func (l txnStateLog) Append(ctx context.Context, p int32, records []txn.Record) error {
	recs := make([]record.Record, len(records))
	for i, r := range records {
		recs[i] = record.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	return l.log().append(ctx, p, recs, nil)
}

// Load reads every record of the partition from the log start to the log end.
func (l txnStateLog) Load(ctx context.Context, p int32, fn func(txn.Record) error) error {
	return l.log().load(ctx, p, func(_ *record.Header, r *record.Record, marker *record.ControlRecord) error {
		if marker != nil {
			return nil
		}
		return fn(txn.Record{Key: r.Key, Value: r.Value})
	})
}

// txnConfig turns broker properties into the coordinator's settings.
func txnConfig(c *config.Broker) txn.Config {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return txn.Config{
		NumPartitions:         c.TransactionStateLogNumPartitions,
		MaxTimeout:            ms(int64(c.TransactionMaxTimeoutMs)),
		IDExpiration:          ms(int64(c.TransactionalIDExpirationMs)),
		AbortTimedOutInterval: ms(int64(c.TransactionAbortTimedOutCleanupIntervalMs)),
		RemoveExpiredInterval: ms(int64(c.TransactionRemoveExpiredCleanupIntervalMs)),
	}
}

// newTxnCoordinator builds the transaction coordinator of this node.
func (b *Broker) newTxnCoordinator() *txn.Coordinator {
	return txn.New(txn.Options{
		Log:              txnStateLog{b},
		Markers:          markerWriter{b},
		ProducerIDs:      b.producers.allocate,
		OffsetsPartition: b.groups.PartitionFor,
		Clock:            b.clock,
		Logger:           b.logger.With("component", "txn"),
		Config:           txnConfig(b.cfg),
		OnEnd:            b.metrics.TransactionEnded,
	})
}

// updateTxnPartition makes the transaction coordinator load (in the background, at
// the leader epoch) or unload a __transaction_state partition as this node gains or
// loses its leadership.
func (b *Broker) updateTxnPartition(p int32, leader bool, epoch int32) {
	loaded, has := b.txns.PartitionEpoch(p)
	switch {
	case leader && (!has || loaded != epoch):
		go func() {
			if err := b.txns.LoadPartition(context.Background(), p, epoch); err != nil {
				b.logger.Error("cannot load transaction state partition", "partition", p, "epoch", epoch, "err", err)
			}
		}()
	case !leader && has:
		b.txns.UnloadPartition(p)
	}
}

// ensureTransactionStateTopic creates __transaction_state on first use, compacted,
// with transaction.state.log.num.partitions partitions and
// transaction.state.log.replication.factor replicas (never fewer: until that many
// brokers are registered FindCoordinator answers COORDINATOR_NOT_AVAILABLE), and
// returns the image that has it.
func (b *Broker) ensureTransactionStateTopic() (*metadata.Image, error) {
	return b.ensureInternalTopic(transactionStateTopic, func() internalTopic {
		return internalTopic{b.cfg.TransactionStateLogNumPartitions, b.cfg.TransactionStateRF(), "transaction.state.log.replication.factor", map[string]string{
			"cleanup.policy":                 "compact",
			"segment.bytes":                  strconv.FormatInt(b.cfg.TransactionStateLogSegmentBytes, 10),
			"min.insync.replicas":            strconv.Itoa(int(b.cfg.TransactionStateMinISR())),
			"unclean.leader.election.enable": "false",
			"compression.type":               "producer",
		}}
	})
}

// txnCoordinatorNode returns the node coordinating a transactional id (the leader of
// its __transaction_state partition), -1 when there is none.
func (b *Broker) txnCoordinatorNode(id string) int32 {
	t, ok := b.image().Topic(transactionStateTopic)
	p := b.txns.PartitionFor(id)
	if !ok || int(p) >= len(t.Partitions) {
		return -1
	}
	return t.Partitions[p].Leader
}

// brokerPeers holds one connection per broker to its inter-broker listener, for the
// requests between brokers that transactions make (WriteTxnMarkers to partition
// leaders, AddPartitionsToTxn from partition leaders to coordinators) and the share
// coordinator's requests (share_store.go). A connection is
// replaced when the broker's address changes in the metadata.
type brokerPeers struct {
	b  *Broker
	mu struct {
		sync.Mutex
		conns  map[int32]*peer.Conn
		closed bool
	}
}

// request sends req to broker node and returns its response.
func (ps *brokerPeers) request(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	conn, err := ps.conn(node)
	if err != nil {
		return nil, err
	}
	return conn.Request(ctx, req)
}

// conn returns the connection to broker node's inter-broker listener, as the image
// has it (a new one when its address changed).
func (ps *brokerPeers) conn(node int32) (*peer.Conn, error) {
	b := ps.b
	addr, err := b.interBrokerAddr(node)
	if err != nil {
		return nil, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.mu.closed {
		return nil, peer.ErrClosed
	}
	if ps.mu.conns == nil {
		ps.mu.conns = map[int32]*peer.Conn{}
	}
	conn := ps.mu.conns[node]
	if conn == nil || conn.Addr() != addr {
		if conn != nil {
			conn.Close()
		}
		conn = peer.New(addr, peer.Options{ClientID: fmt.Sprintf("samsa-broker-%d", b.nodeID), Security: b.interBroker, Downgrade: brokerDowngrades})
		ps.mu.conns[node] = conn
	}
	return conn, nil
}

func (ps *brokerPeers) close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.mu.closed = true
	for _, c := range ps.mu.conns {
		c.Close()
	}
	ps.mu.conns = nil
}
