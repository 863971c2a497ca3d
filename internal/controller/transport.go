package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// Transport carries Raft messages between the voters of a multi-node controller
// quorum. A single-node quorum needs none.
//
// Addresses in messages are Raft ids, not node ids: see RaftID and NodeIDOf.
type Transport interface {
	// Send delivers msgs to their recipients, best effort: Raft retries lost
	// messages. It is called from the raft loop and must not block. The messages
	// must not be modified; they may be retained.
	Send(msgs []*pb.Message)
}

// RaftID is the Raft id of node id n. Raft reserves id 0 for "none", while Kafka node
// ids start at 0, so the two are offset by one.
func RaftID(n int32) uint64 { return uint64(n) + 1 }

// NodeIDOf is the node id of Raft id id (-1 for Raft's "none").
func NodeIDOf(id uint64) int32 { return int32(id) - 1 }

// NetTransport is the network Transport: one outbound connection per other voter,
// to the address controller.quorum.voters gives for it (its controller listener).
// Each peer has a queue and a sender goroutine: Send only appends to queues, so the
// raft loop never waits for the network. The sender takes everything queued, sends
// it as one RaftRequest (internal/protocol) and waits for the acknowledgement, so
// messages to a peer arrive in the order Raft produced them. A failed request drops
// its messages and tells Raft the peer is unreachable (and that any snapshot in it
// failed); an acknowledged snapshot is reported as delivered. Connections
// reconnect with backoff (internal/peer).
type NetTransport struct {
	self     int32
	logger   *slog.Logger
	timeout  time.Duration
	reporter transportReporter
	peers    map[uint64]*peerQueue
	ctx      context.Context // ended by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// transportReporter is the part of Controller a transport reports to.
type transportReporter interface {
	ReportUnreachable(id int32)
	ReportSnapshot(id int32, delivered bool)
	ReportClusterMismatch(id int32, theirs string)
	ClusterID() string
}

// NetTransportOptions configure a NetTransport.
type NetTransportOptions struct {
	NodeID int32
	// Voters maps node id to the host:port of its controller listener.
	Voters map[int32]string
	Logger *slog.Logger
	// RequestTimeout (controller.quorum.request.timeout.ms) bounds one request; a
	// peer that does not acknowledge in time is unreachable. Default 2s.
	RequestTimeout time.Duration
	// RetryBackoff (controller.quorum.retry.backoff.ms) is the first wait before
	// reconnecting; it doubles up to 1s.
	RetryBackoff time.Duration
	// Security secures the connections to the controllers' listener (TLS, SASL).
	Security peer.Security
}

// maxQueuedMessages bounds a peer's queue; beyond it messages are dropped (Raft
// resends what matters).
const maxQueuedMessages = 4096

// maxRaftBatchBytes bounds one RaftRequest (snapshots may exceed it alone).
const maxRaftBatchBytes = 1 << 20

// NewNetTransport returns a transport; Start it with the controller it serves.
func NewNetTransport(o NetTransportOptions) *NetTransport {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 2 * time.Second
	}
	t := &NetTransport{
		self: o.NodeID, logger: o.Logger.With("component", "raft-transport"),
		timeout: o.RequestTimeout, peers: map[uint64]*peerQueue{},
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	for id, addr := range o.Voters {
		if id == o.NodeID {
			continue
		}
		t.peers[RaftID(id)] = &peerQueue{
			id:   id,
			conn: peer.New(addr, peer.Options{ClientID: "samsa-raft", BackoffMin: o.RetryBackoff, DialTimeout: o.RequestTimeout, Security: o.Security}),
			wake: make(chan struct{}, 1),
		}
	}
	return t
}

// Start starts the sender goroutines, reporting to c.
func (t *NetTransport) Start(c *Controller) {
	t.reporter = c
	for _, q := range t.peers {
		t.wg.Go(func() { t.runPeer(q) })
	}
}

// Close stops the senders and closes the connections.
func (t *NetTransport) Close() {
	t.cancel()
	for _, q := range t.peers {
		q.conn.Close()
	}
	t.wg.Wait()
}

type peerQueue struct {
	id   int32
	conn *peer.Conn
	wake chan struct{}
	mu   struct {
		sync.Mutex
		msgs []*pb.Message
	}
	unreachable bool // owned by the sender goroutine
}

// Send implements Transport.
func (t *NetTransport) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		q := t.peers[m.GetTo()]
		if q == nil {
			continue
		}
		q.mu.Lock()
		full := len(q.mu.msgs) >= maxQueuedMessages
		if !full {
			q.mu.msgs = append(q.mu.msgs, m)
		}
		q.mu.Unlock()
		if full {
			// Never report from the raft loop's goroutine: reports go through it.
			go t.failed(q.id, []*pb.Message{m})
			continue
		}
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

func (t *NetTransport) failed(id int32, msgs []*pb.Message) {
	for _, m := range msgs {
		if m.GetType() == pb.MessageType_MsgSnap {
			t.reporter.ReportSnapshot(id, false)
		}
	}
	t.reporter.ReportUnreachable(id)
}

func (t *NetTransport) runPeer(q *peerQueue) {
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-q.wake:
		}
		for {
			batch := q.take()
			if len(batch) == 0 {
				break
			}
			t.sendBatch(q, batch)
		}
	}
}

// take removes up to maxRaftBatchBytes of queued messages (at least one).
func (q *peerQueue) take() []*pb.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	size, n := 0, 0
	for n < len(q.mu.msgs) && (n == 0 || size < maxRaftBatchBytes) {
		size += proto.Size(q.mu.msgs[n])
		n++
	}
	batch := q.mu.msgs[:n:n]
	q.mu.msgs = q.mu.msgs[n:]
	if len(q.mu.msgs) == 0 {
		q.mu.msgs = nil
	}
	return batch
}

func (t *NetTransport) sendBatch(q *peerQueue, batch []*pb.Message) {
	req := &protocol.RaftRequest{ClusterID: t.reporter.ClusterID(), From: t.self, Messages: make([][]byte, 0, len(batch))}
	timeout := t.timeout
	for _, m := range batch {
		b, err := proto.Marshal(m)
		if err != nil {
			t.logger.Error("cannot encode raft message", "error", err)
			continue
		}
		if m.GetType() == pb.MessageType_MsgSnap {
			timeout = max(timeout, 30*time.Second)
		}
		req.Messages = append(req.Messages, b)
	}
	ctx, cancel := context.WithTimeout(t.ctx, timeout)
	defer cancel()
	resp, err := q.conn.Request(ctx, req)
	if err == nil {
		if r := resp.(*protocol.RaftResponse); r.ErrorCode == kerr.InconsistentClusterID.Code {
			t.reporter.ReportClusterMismatch(q.id, r.ClusterID)
			err = errors.New("the peer belongs to cluster " + r.ClusterID)
		} else if r.ErrorCode != 0 {
			err = kerr.ErrorForCode(r.ErrorCode)
		}
	}
	if err != nil {
		if !q.unreachable {
			q.unreachable = true
			t.logger.Warn("controller peer unreachable", "peer", q.id, "addr", q.conn.Addr(), "error", err)
		}
		t.failed(q.id, batch)
		return
	}
	if q.unreachable {
		q.unreachable = false
		t.logger.Info("controller peer reachable again", "peer", q.id, "addr", q.conn.Addr())
	}
	for _, m := range batch {
		if m.GetType() == pb.MessageType_MsgSnap {
			t.reporter.ReportSnapshot(q.id, true)
		}
	}
}

// ReceiveRaft is the receiving half of NetTransport, called by the controller
// listener's handler: it checks the sender's cluster id and steps the messages into
// Raft in order.
func (c *Controller) ReceiveRaft(ctx context.Context, req *protocol.RaftRequest) *protocol.RaftResponse {
	mine := c.ClusterID()
	resp := &protocol.RaftResponse{ClusterID: mine}
	if req.ClusterID != "" && mine != "" && req.ClusterID != mine {
		if _, warned := c.refused.LoadOrStore(req.From, true); !warned {
			c.logger.Warn("refusing Raft messages from a node of another cluster", "peer", req.From, "their_cluster_id", req.ClusterID, "cluster_id", mine)
		}
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	for _, b := range req.Messages {
		m := &pb.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			resp.ErrorCode = kerr.CorruptMessage.Code
			return resp
		}
		if m.GetTo() != c.raftID {
			continue
		}
		if err := c.Step(ctx, m); err != nil {
			resp.ErrorCode = kerr.NotController.Code
			return resp
		}
	}
	return resp
}
