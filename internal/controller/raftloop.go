package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// raftLoop owns the RawNode, its storage and the disk log. Only its goroutine (run)
// touches them.
type raftLoop struct {
	c         *Controller
	logger    *slog.Logger
	node      *raft.RawNode
	storage   *raft.MemoryStorage
	disk      *diskLog
	confState *pb.ConfState
	applied   uint64
	snapIndex uint64
	pending   map[uint64]*proposal // by proposal seq; proposals of this node only
	isLeader  bool
	caughtUp  bool
	// fatal stops the loop with this error (set by functions run on the loop).
	fatal error
	// mismatched lists the voters that refused this node's cluster id.
	mismatched map[int32]string
	// peers is what the leader knows of each voter's replication, for DescribeQuorum.
	peers map[uint64]*peerContact
	// ignoredHeartbeats lists the senders of impossible heartbeats already logged.
	ignoredHeartbeats map[int32]bool
}

// peerContact is when the leader last heard from a voter and when that voter last
// had everything the leader had.
type peerContact struct {
	lastFetch, lastCaughtUp time.Time
}

// newRaftLoop loads the disk log and builds the RawNode. It publishes the image of
// the snapshot, if any; committed entries after it are applied by the loop.
func (c *Controller) newRaftLoop() (*raftLoop, error) {
	storage := raft.NewMemoryStorage()
	voters := []uint64{c.raftID}
	if !c.single {
		voters = voters[:0]
		for _, id := range slices.Sorted(maps.Keys(c.opts.Voters)) {
			voters = append(voters, RaftID(id))
		}
	}
	bootstrap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: pb.EnsureConfState(&pb.ConfState{Voters: voters})}}
	if err := storage.ApplySnapshot(bootstrap); err != nil {
		return nil, err
	}
	disk, snap, _, err := openDiskLog(c.opts.Dir, c.logger, storage)
	if err != nil {
		return nil, fmt.Errorf("controller: open metadata log %s: %w", c.opts.Dir, err)
	}
	l := &raftLoop{
		c: c, logger: c.logger, storage: storage, disk: disk,
		confState: bootstrap.GetMetadata().GetConfState(),
		pending:   map[uint64]*proposal{},
		peers:     map[uint64]*peerContact{},
	}
	if snap != nil {
		img, err := imageFromSnapshot(snap)
		if err != nil {
			disk.close()
			return nil, err
		}
		c.image.Store(img)
		l.applied = snap.GetMetadata().GetIndex()
		l.snapIndex = l.applied
		l.confState = snap.GetMetadata().GetConfState()
	}
	c.storage.Store(storage)
	l.node, err = raft.NewRawNode(c.newRaftConfig(storage, l.applied))
	if err != nil {
		disk.close()
		return nil, fmt.Errorf("controller: start raft: %w", err)
	}
	if c.single {
		// One voter: no need to wait for an election timeout.
		if err := l.node.Campaign(); err != nil {
			disk.close()
			return nil, fmt.Errorf("controller: campaign: %w", err)
		}
	}
	return l, nil
}

func imageFromSnapshot(snap *pb.Snapshot) (*metadata.Image, error) {
	recs, err := metadata.DecodeBatch(snap.GetData())
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot %d: %v", ErrCorruptLog, snap.GetMetadata().GetIndex(), err)
	}
	img, err := metadata.Apply(metadata.EmptyImage(), int64(snap.GetMetadata().GetIndex()), recs)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot %d: %v", ErrCorruptLog, snap.GetMetadata().GetIndex(), err)
	}
	return img, nil
}

func (l *raftLoop) run() {
	c := l.c
	err := l.loop()
	if err != nil && !errors.Is(err, ErrClosed) {
		l.logger.Error("metadata log stopped", "error", err)
	} else {
		err = ErrClosed
	}
	c.loopErr.Store(&err)
	for _, p := range l.pending {
		p.done <- err
	}
	if cerr := l.disk.close(); cerr != nil {
		l.logger.Error("closing metadata log", "error", cerr)
	}
	c.leader.Store(-1)
	close(c.loopDone)
}

func (l *raftLoop) loop() error {
	c := l.c
	for {
		if err := l.processReady(); err != nil {
			return err
		}
		l.checkCaughtUp()
		if l.fatal != nil {
			return l.fatal
		}
		select {
		case <-c.stopCh:
			return ErrClosed
		case <-c.tickCh:
			l.node.Tick()
		case m := <-c.recvCh:
			if l.impossibleHeartbeat(m) {
				continue
			}
			l.noteContact(m)
			if err := l.node.Step(m); err != nil {
				l.logger.Debug("raft message dropped", "type", m.GetType().String(), "from", NodeIDOf(m.GetFrom()), "error", err)
			}
		case p := <-c.proposeCh:
			l.propose(p)
		case fn := <-c.loopFnCh:
			fn(l)
		}
	}
}

// impossibleHeartbeat reports (and logs, once per sender) a heartbeat that commits
// past the end of this node's log, which Raft would answer with a panic. A leader
// commits in a heartbeat only what the node has acknowledged, and the node
// acknowledges only what it has stored: such a heartbeat comes from a node of another
// quorum (a stopped cluster's leader still sending to an address this node now
// listens on, before this node knows a cluster id to refuse it by), or this node's
// metadata log was lost. The node ignores it rather than crash.
func (l *raftLoop) impossibleHeartbeat(m *pb.Message) bool {
	if m.GetType() != pb.MsgHeartbeat {
		return false
	}
	last, _ := l.storage.LastIndex()
	if m.GetCommit() <= last {
		return false
	}
	from := NodeIDOf(m.GetFrom())
	if !l.ignoredHeartbeats[from] {
		if l.ignoredHeartbeats == nil {
			l.ignoredHeartbeats = map[int32]bool{}
		}
		l.ignoredHeartbeats[from] = true
		l.logger.Error("ignoring Raft heartbeats that commit past this node's metadata log: the sender belongs to another quorum, or this node's metadata log was lost",
			"peer", from, "commit", m.GetCommit(), "last_offset", last, "term", m.GetTerm())
	}
	return true
}

func (l *raftLoop) propose(p *proposal) {
	if !l.isLeader {
		p.done <- fmt.Errorf("%w: the active controller is %d", ErrNotController, l.c.Leader())
		return
	}
	if err := l.node.Propose(p.data); err != nil {
		p.done <- fmt.Errorf("%w: %v", ErrNotController, err)
		return
	}
	l.pending[p.seq] = p
}

// processReady follows the Ready contract: persist (snapshot, entries, HardState,
// fsync), then send, then apply, then Advance.
func (l *raftLoop) processReady() error {
	for l.node.HasReady() {
		rd := l.node.Ready()
		if rd.SoftState != nil {
			l.softState(rd.SoftState)
		}
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := l.installSnapshot(rd.Snapshot); err != nil {
				return err
			}
		}
		if err := l.disk.save(rd.HardState, rd.Entries, rd.MustSync); err != nil {
			return err
		}
		if err := l.storage.Append(rd.Entries); err != nil {
			return err
		}
		if rd.HardState != nil {
			if err := l.storage.SetHardState(rd.HardState); err != nil {
				return err
			}
		}
		if len(rd.Messages) > 0 && l.c.opts.Transport != nil {
			l.c.opts.Transport.Send(rd.Messages)
		}
		if err := l.apply(rd.CommittedEntries); err != nil {
			return err
		}
		l.node.Advance(rd)
		if err := l.maybeSnapshot(); err != nil {
			return err
		}
	}
	return nil
}

func (l *raftLoop) softState(ss *raft.SoftState) {
	leader := int32(-1)
	if ss.Lead != raft.None {
		leader = NodeIDOf(ss.Lead)
	}
	if prev := l.c.leader.Swap(leader); prev != leader {
		l.logger.Info("metadata quorum leader changed", "leader", leader, "previous", prev, "state", ss.RaftState.String())
	}
	l.c.raftState.Store(int32(ss.RaftState))
	wasLeader := l.isLeader
	l.isLeader = ss.RaftState == raft.StateLeader
	if !l.isLeader && l.c.activeTerm.Load() != 0 {
		l.c.setActive(0)
	}
	if wasLeader && !l.isLeader {
		// Proposals of the old term may or may not commit; their callers get a
		// retriable error either way.
		for seq, p := range l.pending {
			p.done <- fmt.Errorf("%w: leadership lost", ErrNotController)
			delete(l.pending, seq)
		}
	}
}

// installSnapshot handles a snapshot sent by the leader.
func (l *raftLoop) installSnapshot(snap *pb.Snapshot) error {
	img, err := imageFromSnapshot(snap)
	if err != nil {
		return err
	}
	if err := l.disk.saveSnapshot(snap, true); err != nil {
		return err
	}
	if err := l.storage.ApplySnapshot(snap); err != nil {
		return err
	}
	prev := l.c.image.Swap(img)
	l.c.notify.push(notification{prev: prev, next: img})
	l.applied = snap.GetMetadata().GetIndex()
	l.snapIndex = l.applied
	l.confState = snap.GetMetadata().GetConfState()
	l.logger.Info("installed metadata snapshot from the leader", "offset", l.applied)
	return nil
}

// apply applies committed entries to the image, publishes it once and queues the
// subscriber calls and the completions of this node's proposals.
func (l *raftLoop) apply(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	prev := l.c.image.Load()
	img := prev
	var completions []func()
	for _, e := range ents {
		index := e.GetIndex()
		if index <= l.applied {
			continue
		}
		var applyErr error
		var next *metadata.Image
		switch e.GetType() {
		case pb.EntryNormal:
			if len(e.GetData()) == 0 { // a new leader's empty entry
				break
			}
			node, seq, recs, err := decodeProposal(e.GetData())
			if err == nil {
				next, err = metadata.Apply(img, int64(index), recs)
			}
			if err != nil {
				// Deterministic on every node: the entry becomes a no-op.
				l.logger.Error("metadata log entry rejected", "offset", index, "error", err)
				applyErr = err
			}
			if node == l.c.opts.NodeID {
				if p, ok := l.pending[seq]; ok {
					delete(l.pending, seq)
					completions = append(completions, func() { p.done <- applyErr })
				}
			}
		case pb.EntryConfChange:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("%w: conf change at %d: %v", ErrCorruptLog, index, err)
			}
			l.confState = l.node.ApplyConfChange(&cc)
		case pb.EntryConfChangeV2:
			var cc pb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("%w: conf change at %d: %v", ErrCorruptLog, index, err)
			}
			l.confState = l.node.ApplyConfChange(&cc)
		}
		if next == nil {
			var err error
			if next, err = metadata.Apply(img, int64(index), nil); err != nil {
				return err
			}
		}
		img = next
		l.applied = index
	}
	l.maybeActivate(ents)
	if img != prev {
		l.c.image.Store(img)
		l.c.notify.push(notification{prev: prev, next: img, completions: completions})
	} else if len(completions) > 0 {
		l.c.notify.push(notification{completions: completions})
	}
	return nil
}

// maybeActivate makes this node the active controller once, as leader, it applied an
// entry of its own term: everything earlier leaders committed is then in its image.
func (l *raftLoop) maybeActivate(applied []*pb.Entry) {
	if !l.isLeader || l.c.activeTerm.Load() != 0 || len(applied) == 0 {
		return
	}
	term := l.node.BasicStatus().GetTerm()
	if applied[len(applied)-1].GetTerm() != term {
		return
	}
	l.c.setActive(term)
	l.peers = map[uint64]*peerContact{}
	l.logger.Info("this node is the active controller", "epoch", term, "offset", l.applied)
	select {
	case l.c.activatedCh <- struct{}{}:
	default:
	}
}

// noteContact records, on the leader, when a voter last answered and when it last
// had the whole log.
func (l *raftLoop) noteContact(m *pb.Message) {
	if !l.isLeader {
		return
	}
	switch m.GetType() {
	case pb.MessageType_MsgAppResp, pb.MessageType_MsgHeartbeatResp, pb.MessageType_MsgSnapStatus:
	default:
		return
	}
	pc := l.peers[m.GetFrom()]
	if pc == nil {
		pc = &peerContact{}
		l.peers[m.GetFrom()] = pc
	}
	now := l.c.opts.Clock.Now()
	pc.lastFetch = now
	last, _ := l.storage.LastIndex()
	switch {
	case m.GetType() == pb.MessageType_MsgAppResp && !m.GetReject() && m.GetIndex() >= last:
		pc.lastCaughtUp = now
	case m.GetType() == pb.MessageType_MsgHeartbeatResp:
		// An idle follower answers heartbeats only: it is caught up if it already
		// has the last entry.
		l.node.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id == m.GetFrom() && pr.Match >= last {
				pc.lastCaughtUp = now
			}
		})
	}
}

// maybeSnapshot writes the image as a snapshot and compacts the log once enough
// entries were applied since the last one.
func (l *raftLoop) maybeSnapshot() error {
	if l.applied-l.snapIndex < l.c.opts.SnapshotEvery {
		return nil
	}
	img := l.c.image.Load() // the loop is the only writer: img.Offset() == l.applied
	snap, err := l.storage.CreateSnapshot(l.applied, l.confState, metadata.EncodeBatch(img.Records()))
	if err != nil {
		return fmt.Errorf("create snapshot: %w", err)
	}
	if err := l.disk.saveSnapshot(snap, false); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	if err := l.storage.Compact(l.applied); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return fmt.Errorf("compact: %w", err)
	}
	l.snapIndex = l.applied
	l.logger.Info("wrote metadata snapshot", "offset", l.applied)
	return nil
}

// checkCaughtUp closes caughtUp once a leader is known and this node applied the
// commit index (for the leader itself: an entry of its own term, so everything
// earlier leaders committed is in).
func (l *raftLoop) checkCaughtUp() {
	if l.caughtUp {
		return
	}
	st := l.node.BasicStatus()
	commit := st.HardState.GetCommit()
	if st.Lead == raft.None || l.applied < commit {
		return
	}
	if st.Lead == l.c.raftID {
		if term, err := l.storage.Term(commit); err != nil || term != st.HardState.GetTerm() {
			return
		}
	}
	l.caughtUp = true
	close(l.c.caughtUp)
}

// Proposal entry layout: version u8 (1), proposing node id i32, proposal seq u64,
// then metadata.EncodeBatch of the records.
const proposalVersion = 1

func encodeProposal(node int32, seq uint64, recs []metadata.Record) []byte {
	b := []byte{proposalVersion}
	b = binary.BigEndian.AppendUint32(b, uint32(node))
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, metadata.EncodeBatch(recs)...)
}

func decodeProposal(b []byte) (node int32, seq uint64, recs []metadata.Record, err error) {
	if len(b) < 13 || b[0] != proposalVersion {
		return -1, 0, nil, fmt.Errorf("%w: bad proposal header", metadata.ErrCorruptRecord)
	}
	node = int32(binary.BigEndian.Uint32(b[1:]))
	seq = binary.BigEndian.Uint64(b[5:])
	recs, err = metadata.DecodeBatch(b[13:])
	return node, seq, recs, err
}

// raftLogger adapts slog to raft.Logger.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...any)                 { r.Panic(v...) }
func (r raftLogger) Fatalf(format string, v ...any) { r.Panicf(format, v...) }
func (r raftLogger) Panic(v ...any) {
	msg := fmt.Sprint(v...)
	r.l.Error(msg)
	panic(msg)
}
func (r raftLogger) Panicf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	r.l.Error(msg)
	panic(msg)
}
