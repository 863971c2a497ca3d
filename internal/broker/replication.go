package broker

// The data plane of replication, on the broker: followers fetch from their leaders
// through a replica.FetcherManager whose LeaderClient is a Fetch v15 request over a
// peer connection to the leader's inter-broker listener; leaders serve those fetches in
// fetch.go (ServeFollower); the ISR loop asks the active controller for ISR changes
// (AlterPartition) and applies nothing until the metadata brings them back.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/bufpool"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/replica"
)

// replicaFetchVersion is the Fetch version followers send: flexible, the last fetched
// epoch and diverging epochs in the answer (KIP-320, v12), topics named by id (v13),
// and the follower's id with its broker epoch in ReplicaState (KIP-903, v15), so
// that the leader tells a restarted follower from the incarnation before it.
// replicaFetchVersionByName is what a fetch with a partition whose topic id is not
// known yet is sent at (topic names, the replica id alone).
const (
	replicaFetchVersion       = 15
	replicaFetchVersionByName = 12
)

// newFetchers builds the follower fetchers of this node.
func (b *Broker) newFetchers() *replica.FetcherManager {
	ms := func(v int32) time.Duration { return time.Duration(v) * time.Millisecond }
	return replica.NewFetcherManager(replica.FetcherConfig{
		LocalNode:         b.nodeID,
		BrokerEpoch:       b.BrokerEpoch,
		Dial:              b.dialLeader,
		MaxWait:           ms(b.cfg.ReplicaFetchWaitMaxMs),
		MinBytes:          b.cfg.ReplicaFetchMinBytes,
		MaxBytes:          b.cfg.ReplicaFetchResponseMaxBytes,
		PartitionMaxBytes: b.cfg.ReplicaFetchMaxBytes,
		Backoff:           ms(b.cfg.ReplicaFetchBackoffMs),
		Clock:             b.clock,
		Logger:            b.logger.With("component", "replica-fetcher"),
		OnFailure:         b.storageFailed, // an I/O error takes the directory offline, as on the leader
	})
}

// interBrokerAddr is the address of broker node's inter-broker listener, as the image
// has it.
func (b *Broker) interBrokerAddr(node int32) (string, error) {
	br, ok := b.image().Broker(metadata.NodeID(node))
	if !ok {
		return "", fmt.Errorf("broker %d is not registered", node)
	}
	ep, ok := br.Endpoint(b.cfg.InterBrokerListenerName)
	if !ok {
		return "", fmt.Errorf("broker %d has no %s listener (inter.broker.listener.name)", node, b.cfg.InterBrokerListenerName)
	}
	return net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), nil
}

// dialLeader returns a client to a leader's inter-broker listener, as the image has it.
func (b *Broker) dialLeader(leader int32) (replica.LeaderClient, error) {
	addr, err := b.interBrokerAddr(leader)
	if err != nil {
		return nil, err
	}
	conn := peer.New(addr, peer.Options{
		ClientID:        fmt.Sprintf("samsa-replica-fetcher-%d", b.nodeID),
		MaxResponseSize: max(b.cfg.ReplicaFetchResponseMaxBytes, 0) + 64<<20,
		Security:        b.interBroker,
	})
	timeout := time.Duration(b.cfg.ReplicaSocketTimeoutMs+b.cfg.ReplicaFetchWaitMaxMs) * time.Millisecond
	return &leaderClient{conn: conn, timeout: timeout, pool: &b.replicaFrames}, nil
}

// leaderClient is replica.LeaderClient over the Kafka protocol. Responses are read into
// buffers of the broker's pool, which the records handed to the fetcher alias until
// the next Fetch: a follower allocates nothing per fetch of megabytes.
type leaderClient struct {
	conn    *peer.Conn
	timeout time.Duration
	pool    *bufpool.Pool
	release func() // gives the previous response's buffer back
}

func (c *leaderClient) Close() {
	c.releasePrevious()
	c.conn.Close()
}

func (c *leaderClient) releasePrevious() {
	if c.release != nil {
		c.release()
		c.release = nil
	}
}

// Fetch sends one Fetch request with this node's replica id and maps the answer.
func (c *leaderClient) Fetch(ctx context.Context, req *replica.FetchRequest) ([]replica.FetchResult, error) {
	c.releasePrevious()
	r := kmsg.NewPtrFetchRequest()
	r.SetVersion(replicaFetchVersion)
	r.ReplicaID = -1 // v15 carries the replica's id in ReplicaState
	r.ReplicaState.ID, r.ReplicaState.Epoch = req.ReplicaID, req.BrokerEpoch
	for _, fp := range req.Partitions {
		if fp.TopicID == ([16]byte{}) {
			r.SetVersion(replicaFetchVersionByName)
			r.ReplicaID, r.ReplicaState = req.ReplicaID, kmsg.NewFetchRequestReplicaState()
			break
		}
	}
	r.MaxWaitMillis = int32(req.MaxWait / time.Millisecond)
	r.MinBytes, r.MaxBytes = req.MinBytes, req.MaxBytes
	byTopic := map[string]int{}
	names := map[[16]byte]string{} // a v13+ answer names topics by id alone
	for _, fp := range req.Partitions {
		names[fp.TopicID] = fp.Topic
		i, ok := byTopic[fp.Topic]
		if !ok {
			i = len(r.Topics)
			byTopic[fp.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = fp.Topic, fp.TopicID
			r.Topics = append(r.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.FetchOffset = fp.Partition, fp.CurrentLeaderEpoch, fp.FetchOffset
		p.LastFetchedEpoch, p.LogStartOffset, p.PartitionMaxBytes = fp.LastFetchedEpoch, fp.LogStartOffset, fp.MaxBytes
		r.Topics[i].Partitions = append(r.Topics[i].Partitions, p)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	kresp, release, err := c.conn.RequestPooled(ctx, r, c.pool)
	if err != nil {
		return nil, err
	}
	c.release = release
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("fetch from the leader: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	var out []replica.FetchResult
	for _, t := range resp.Topics {
		topic := t.Topic
		if r.Version >= 13 {
			topic = names[t.TopicID]
		}
		for _, p := range t.Partitions {
			out = append(out, replica.FetchResult{
				Topic: topic, Partition: p.Partition, Err: fetchErr(p.ErrorCode),
				HighWatermark: p.HighWatermark, LogStartOffset: p.LogStartOffset,
				DivergingEpoch: p.DivergingEpoch.Epoch, DivergingEndOffset: p.DivergingEpoch.EndOffset,
				Records: p.RecordBatches,
			})
		}
	}
	return out, nil
}

// fetchErr maps a leader's partition error for the fetcher.
func fetchErr(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.OffsetOutOfRange.Code:
		return replica.ErrFetchOffsetOutOfRange
	case kerr.FencedLeaderEpoch.Code:
		return replica.ErrFencedLeaderEpoch
	case kerr.UnknownLeaderEpoch.Code:
		return replica.ErrUnknownLeaderEpoch
	case kerr.NotLeaderForPartition.Code:
		return replica.ErrNotLeader
	}
	// Any other (UNKNOWN_TOPIC_ID: the leader has not applied the topic yet) is
	// retried after a backoff.
	return fmt.Errorf("%w: %v", replica.ErrRetriable, kerr.ErrorForCode(code))
}

// isrLoop proposes ISR changes for the partitions led here: every half of
// replica.lag.time.max.ms (shrinks), and whenever a follower out of the ISR caught up
// (expansions, nudged by the fetch path).
func (b *Broker) isrLoop(ctx context.Context) {
	lagMax := time.Duration(b.cfg.ReplicaLagTimeMaxMs) * time.Millisecond
	every := max(lagMax/2, 10*time.Millisecond)
	for {
		tick := make(chan struct{})
		t := b.clock.AfterFunc(every, func() { close(tick) })
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-tick:
			b.replicaFrames.Trim(b.clock.Now().Add(-10 * time.Second)) // buffers of leaders no longer followed
		case <-b.isrWake:
			t.Stop()
		}
		b.proposeISRChanges(ctx, lagMax)
	}
}

// nudgeISR asks the ISR loop to look now (a follower out of the ISR caught up).
func (b *Broker) nudgeISR() {
	select {
	case b.isrWake <- struct{}{}:
	default:
	}
}

// proposeISRChanges sends one AlterPartition with every ISR change due.
func (b *Broker) proposeISRChanges(ctx context.Context, lagMax time.Duration) {
	now := b.clock.Now()
	img := b.image()
	var (
		items []controller.AlterPartitionItem
		parts []*replica.Partition
		chs   []replica.ISRChange
	)
	for _, p := range b.replicas.All() {
		ch, ok := p.ProposeISR(now, lagMax, func(id int32, epoch int64) bool {
			why := isrIneligible(img, p, id, epoch)
			if why != "" {
				b.logISRWait(p, id, now, "a follower that caught up is not eligible for the ISR", "follower", id, "why", why)
			}
			return why == ""
		})
		if !ok {
			continue
		}
		item := alterPartitionItem(p, ch, b.nodeID, b.BrokerEpoch())
		items, parts, chs = append(items, item), append(parts, p), append(chs, ch)
	}
	if len(items) == 0 {
		return
	}
	actx, cancel := context.WithTimeout(ctx, time.Duration(b.cfg.ControllerQuorumRequestTimeoutMs)*time.Millisecond)
	defer cancel()
	results, err := b.channel.AlterPartition(actx, b.nodeID, b.BrokerEpoch(), items)
	if err != nil {
		// The controller may have applied the changes: they stay in flight (the high
		// watermark counts their members) and go again at the next round.
		for _, p := range parts {
			p.RetryISR()
		}
		if ctx.Err() == nil {
			b.logger.Info("ISR changes not confirmed; sending them again", "partitions", len(parts), "err", err)
		}
		return
	}
	for i, p := range parts {
		r := findAlterResult(results, items[i])
		switch {
		case r != nil && errors.Is(r.Err, controller.ErrIneligibleReplica):
			// Refused and not applied, at the current partition epoch: forgotten.
			p.CancelISR()
			b.logger.Debug("ISR change refused", "topic", p.Topic, "partition", p.Index, "isr", chs[i].ISR, "err", r.Err)
		case r == nil || r.Err != nil && !errors.Is(r.Err, controller.ErrNewLeaderElected):
			// Fenced, stale or unknown: the metadata that ends it is on its way, or the
			// change goes again; until then the high watermark counts its members.
			p.RetryISR()
			var rerr error
			if r != nil {
				rerr = r.Err
			}
			b.logISRWait(p, -1, now, "ISR change not applied; waiting for the metadata or sending it again", "isr", chs[i].ISR, "err", rerr)
		default:
			for range chs[i].Added {
				b.metrics.ISRExpand()
			}
			for range chs[i].Removed {
				b.metrics.ISRShrink()
			}
			b.logger.Info("ISR changed", "topic", p.Topic, "partition", p.Index, "isr", chs[i].ISR,
				"added", chs[i].Added, "removed", chs[i].Removed, "recovered", chs[i].Recovered)
		}
	}
}

// alterPartitionItem is the AlterPartition entry asking for ch on p, led here by
// node at brokerEpoch. Each follower is named with the broker epoch it fetched with
// (Kafka's Partition.addBrokerEpochToIsr), not the one its registration has now: the
// controller refuses a member whose registration moved on (KIP-903), so a restarted
// broker never joins on its previous incarnation's fetches.
func alterPartitionItem(p *replica.Partition, ch replica.ISRChange, node int32, brokerEpoch int64) controller.AlterPartitionItem {
	item := controller.AlterPartitionItem{TopicID: metadata.TopicID(p.TopicID), Topic: p.Topic, Partition: p.Index,
		LeaderEpoch: ch.LeaderEpoch, PartitionEpoch: ch.PartitionEpoch}
	for i, id := range ch.ISR {
		m := controller.ISRMember{BrokerID: id, BrokerEpoch: -1}
		switch {
		case id == node:
			m.BrokerEpoch = brokerEpoch
		case i < len(ch.BrokerEpochs):
			m.BrokerEpoch = ch.BrokerEpochs[i]
		}
		item.NewISR = append(item.NewISR, m)
	}
	if ch.Recovered {
		item.LeaderRecoveryState = metadata.Recovered
	}
	return item
}

// isrIneligible says why broker id, whose fetches came at fetchEpoch (-1: unknown),
// may not join the ISR of p, "" when it may (Kafka's isReplicaIsrEligible, and what
// the controller checks): registered, unfenced, not shutting down, registered at the
// epoch it fetched with, and its replica of p not offline.
func isrIneligible(img *metadata.Image, p *replica.Partition, id int32, fetchEpoch int64) string {
	br, ok := img.Broker(metadata.NodeID(id))
	switch {
	case !ok:
		return "not registered"
	case br.Fenced:
		return "fenced"
	case br.InControlledShutdown:
		return "shutting down"
	case fetchEpoch != -1 && fetchEpoch != br.Epoch:
		return fmt.Sprintf("fetching at broker epoch %d, registered at %d", fetchEpoch, br.Epoch)
	}
	if t, ok := img.TopicByID(metadata.TopicID(p.TopicID)); ok && int(p.Index) < len(t.Partitions) &&
		slices.Contains(t.Partitions[p.Index].OfflineReplicas, id) {
		return "its replica is offline"
	}
	return ""
}

// isrWaitLogEvery bounds how often the ISR loop says why a partition's ISR change is
// not made: a stuck ISR says why in the log, a passing one does not flood it.
const isrWaitLogEvery = 10 * time.Second

// logISRWait logs msg for p (and follower, -1 for none) at most every
// isrWaitLogEvery. Only the ISR loop calls it.
func (b *Broker) logISRWait(p *replica.Partition, follower int32, now time.Time, msg string, kv ...any) {
	k := isrWaitKey{p, follower}
	if last, ok := b.isrWaitLogged[k]; ok && now.Sub(last) < isrWaitLogEvery {
		return
	}
	if b.isrWaitLogged == nil {
		b.isrWaitLogged = map[isrWaitKey]time.Time{}
	}
	if len(b.isrWaitLogged) >= 1024 { // partitions deleted, leaderships gone: forget the old
		for k, last := range b.isrWaitLogged {
			if now.Sub(last) >= isrWaitLogEvery {
				delete(b.isrWaitLogged, k)
			}
		}
	}
	b.isrWaitLogged[k] = now
	b.logger.Info(msg, append([]any{"topic", p.Topic, "partition", p.Index}, kv...)...)
}

// isrWaitKey is what logISRWait counts its messages by.
type isrWaitKey struct {
	p        *replica.Partition
	follower int32
}

func findAlterResult(results []controller.AlterPartitionResult, item controller.AlterPartitionItem) *controller.AlterPartitionResult {
	for i := range results {
		r := &results[i]
		if r.Partition == item.Partition && (r.TopicID == item.TopicID || r.Topic == item.Topic) {
			return r
		}
	}
	return nil
}

// followerFetchWaiter is what a replica fetch with nothing to return waits on: any of
// its partitions' log end moving.
func waitLogEnd(parts []*replica.Partition, wake chan struct{}) {
	for _, p := range parts {
		p.WaitLogEnd(wake)
	}
}

// applyReplication makes one local partition follow its metadata state: leaders stop
// fetching, followers fetch from their leader.
func (b *Broker) applyReplication(p *replica.Partition, part metadata.Partition) {
	ch, err := p.Apply(replica.State{
		Leader: part.Leader, LeaderEpoch: part.LeaderEpoch, PartitionEpoch: part.PartitionEpoch,
		Replicas: part.Replicas, ISR: part.ISR, Recovering: part.LeaderRecoveryState == metadata.Recovering,
	}, b.clock.Now())
	if err != nil {
		b.logger.Error("applying the partition's metadata", "topic", p.Topic, "partition", p.Index, "err", err)
		b.storageFailed(p, err)
	}
	switch {
	case ch.BecameLeader:
		b.fetchers.Unfollow(p)
		if part.LeaderRecoveryState == metadata.Recovering || len(part.ISR) < len(part.Replicas) {
			b.nudgeISR()
		}
	case ch.Leaderless:
		b.fetchers.Unfollow(p)
	case ch.BecameFollower:
		b.fetchers.Follow(p, ch.Leader, ch.Epoch)
	case part.Leader != b.nodeID && part.Leader >= 0 && b.fetchers.Following(p) != part.Leader:
		b.fetchers.Follow(p, part.Leader, part.LeaderEpoch)
	}
}
