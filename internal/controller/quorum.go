package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// ReplicaStatus is one member of the metadata quorum as the leader sees it.
type ReplicaStatus struct {
	NodeID int32
	// LogEndOffset is the highest metadata offset known to be on the replica (-1
	// when unknown).
	LogEndOffset int64
	// LastFetch is when the leader last heard from it; LastCaughtUp when it last had
	// everything the leader had. Zero when unknown (and for the leader itself).
	LastFetch, LastCaughtUp time.Time
}

// QuorumStatus is what DescribeQuorum (API 55) reports.
type QuorumStatus struct {
	LeaderID int32
	// LeaderEpoch is the Raft term of the current leader.
	LeaderEpoch int32
	// HighWatermark is the committed metadata offset.
	HighWatermark int64
	Voters        []ReplicaStatus
	// Observers are nodes that read the metadata log without voting (brokers that
	// are not controllers).
	Observers []ReplicaStatus
}

// QuorumStatus reports the quorum as this node sees it; only the leader knows the
// other replicas' offsets (NOT_CONTROLLER elsewhere).
func (c *Controller) QuorumStatus(ctx context.Context) (QuorumStatus, error) {
	type result struct {
		st  QuorumStatus
		err error
	}
	done := make(chan result, 1)
	fn := func(l *raftLoop) {
		if !l.isLeader {
			done <- result{err: fmt.Errorf("%w: the leader is %d", ErrNotController, l.c.Leader())}
			return
		}
		st := l.node.Status()
		last, _ := l.storage.LastIndex()
		qs := QuorumStatus{
			LeaderID:      c.opts.NodeID,
			LeaderEpoch:   int32(st.GetTerm()),
			HighWatermark: int64(st.GetCommit()),
		}
		for _, id := range slices.Sorted(maps.Keys(st.Progress)) {
			rs := ReplicaStatus{NodeID: NodeIDOf(id), LogEndOffset: int64(st.Progress[id].Match)}
			if id == l.c.raftID {
				rs.LogEndOffset = int64(last)
			} else if pc := l.peers[id]; pc != nil {
				rs.LastFetch, rs.LastCaughtUp = pc.lastFetch, pc.lastCaughtUp
			}
			qs.Voters = append(qs.Voters, rs)
		}
		qs.Observers = c.observers.list()
		done <- result{st: qs}
	}
	select {
	case c.loopFnCh <- fn:
	case <-c.loopDone:
		return QuorumStatus{}, c.stoppedErr()
	case <-ctx.Done():
		return QuorumStatus{}, ctx.Err()
	}
	select {
	case r := <-done:
		return r.st, r.err
	case <-c.loopDone:
		return QuorumStatus{}, c.stoppedErr()
	case <-ctx.Done():
		return QuorumStatus{}, ctx.Err()
	}
}

// onLoop runs fn on the raft loop goroutine, waiting only for room in the queue.
func (c *Controller) onLoop(fn func(*raftLoop)) {
	select {
	case c.loopFnCh <- fn:
	case <-c.loopDone:
	case <-c.stopCh:
	}
}

// ReportUnreachable tells Raft that a message to node id could not be delivered, so
// that it probes the peer instead of streaming to it. Transports call it.
func (c *Controller) ReportUnreachable(id int32) {
	c.onLoop(func(l *raftLoop) { l.node.ReportUnreachable(RaftID(id)) })
}

// ReportSnapshot tells Raft whether a snapshot sent to node id arrived. Transports
// call it for every MsgSnap they were given.
func (c *Controller) ReportSnapshot(id int32, delivered bool) {
	status := raft.SnapshotFinish
	if !delivered {
		status = raft.SnapshotFailure
	}
	c.onLoop(func(l *raftLoop) { l.node.ReportSnapshot(RaftID(id), status) })
}

// ReportClusterMismatch tells the controller that voter id refused its messages
// because it belongs to cluster theirs. When a majority of the voters do, this node
// is the odd one out: its metadata log stops with ErrInconsistentClusterID, naming
// both ids.
func (c *Controller) ReportClusterMismatch(id int32, theirs string) {
	c.onLoop(func(l *raftLoop) {
		if l.mismatched == nil {
			l.mismatched = map[int32]string{}
		}
		l.mismatched[id] = theirs
		if len(l.mismatched) >= len(c.opts.Voters)/2+1 {
			l.fatal = fmt.Errorf("%w: this node's stored cluster id is %s but voters %v belong to cluster %s: "+
				"the log directories belong to another cluster; give this node empty log.dirs to join cluster %s",
				ErrInconsistentClusterID, c.opts.ClusterID, slices.Sorted(maps.Keys(l.mismatched)), theirs, theirs)
		}
	})
}

// ClusterID is the cluster id this node's Raft messages carry: the metadata log's
// once known, else the stored one ("" for a new node).
func (c *Controller) ClusterID() string {
	if id := c.Image().ClusterID(); id != "" {
		return id
	}
	return c.opts.ClusterID
}

// NodeID is this node's id.
func (c *Controller) NodeID() int32 { return c.opts.NodeID }

// MetadataChunk is what a metadata fetch returns: either a snapshot of the whole
// image (Snapshot set, Entries empty) or committed entries after the requested
// offset. HighWatermark is the offset the answering node has applied.
type MetadataChunk struct {
	LeaderID      int32
	HighWatermark int64
	// Snapshot holds metadata.EncodeBatch(image.Records()) of the image at
	// SnapshotOffset, when the requested offset is no longer in the log.
	Snapshot       []byte
	SnapshotOffset int64
	Entries        []MetadataEntry
}

// MetadataEntry is one committed metadata log entry. Data is the proposal as stored
// in the log (see doc.go); empty for entries without records.
type MetadataEntry struct {
	Offset int64
	Data   []byte
}

// maxFetchBytes bounds one metadata fetch answer (entries, not snapshots).
const maxFetchBytes = 4 << 20

// FetchMetadata serves an observer (a node that is not a voter): committed entries
// from offset from, waiting up to maxWait for some to exist. When from is older than
// the log kept here, it returns the current image as a snapshot instead. Any voter
// answers; the active controller's answers are the freshest.
func (c *Controller) FetchMetadata(ctx context.Context, observer int32, from int64, maxWait time.Duration) (MetadataChunk, error) {
	img := c.Image()
	if img.Offset() < from && maxWait > 0 {
		img = c.waitForOffset(ctx, from, maxWait)
	}
	chunk := MetadataChunk{LeaderID: c.Leader(), HighWatermark: img.Offset()}
	defer func() {
		c.observers.record(ReplicaStatus{NodeID: observer, LogEndOffset: from - 1, LastFetch: c.opts.Clock.Now()})
	}()
	if from > img.Offset() {
		return chunk, nil
	}
	storage := c.storage.Load()
	if storage == nil {
		return chunk, ErrClosed
	}
	first, _ := storage.FirstIndex()
	if from < 1 || uint64(from) < first {
		chunk.Snapshot = metadata.EncodeBatch(img.Records())
		chunk.SnapshotOffset = img.Offset()
		return chunk, nil
	}
	ents, err := storage.Entries(uint64(from), uint64(img.Offset())+1, maxFetchBytes)
	if err != nil {
		// Compacted meanwhile: the observer asks again and gets a snapshot.
		return chunk, nil
	}
	for _, e := range ents {
		me := MetadataEntry{Offset: int64(e.GetIndex())}
		if e.GetType() == pb.EntryNormal {
			me.Data = e.GetData()
		}
		chunk.Entries = append(chunk.Entries, me)
	}
	return chunk, nil
}

// waitForOffset returns the image once it reaches offset, or after maxWait.
func (c *Controller) waitForOffset(ctx context.Context, offset int64, maxWait time.Duration) *metadata.Image {
	reached := make(chan struct{})
	c.notify.waitFor(offset, reached)
	defer c.notify.cancelWait(reached)
	if c.Image().Offset() >= offset {
		return c.Image()
	}
	timer := c.opts.Clock.AfterFunc(maxWait, func() { c.notify.cancelWait(reached) })
	defer timer.Stop()
	select {
	case <-reached:
	case <-ctx.Done():
	case <-c.loopDone:
	}
	return c.Image()
}
