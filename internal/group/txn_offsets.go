package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (KIP-98, KIP-447). TxnOffsetCommit writes a group's
// offsets to __consumer_offsets in a transactional batch of the producer; they stay
// pending — OffsetFetch does not return them, and answers UNSTABLE_OFFSET_COMMIT for
// their partitions when asked for stable offsets — until the transaction's marker is
// written to the partition (CompleteTxn; on load, the marker record). A commit makes
// them the group's offsets, unless a plain commit of the same partition was written
// after them; an abort drops them.

// TxnInfo marks a __consumer_offsets record of a transaction: an offset committed by
// ProducerID at ProducerEpoch (written in a transactional batch), or, with Marker, the
// marker that ends that producer's transaction (Commit or abort; no key or value),
// as Log.Load reads them back.
type TxnInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	Marker        bool
	Commit        bool
	// Guard is the transaction verification guard the group's __consumer_offsets log
	// gave a TxnOffsetCommit before its partition was verified (0: none): the append
	// is refused if the producer's transaction ended meanwhile, instead of opening
	// another one there that no marker would close.
	Guard uint64
}

// txnOffset is an offset committed in a transaction not decided yet.
type txnOffset struct {
	offset CommittedOffset
	// seq orders the transactional commits of the group as they were written
	// (group.txnSeq when it was replayed).
	seq int64
	// overtaken: an offset of the partition written after it became the group's (a
	// plain commit, or another transaction's that committed), so the transaction's
	// commit leaves that one in place. Kafka compares their log offsets: the record
	// written last wins, whatever order the transactions end in, which is also what
	// compaction of __consumer_offsets keeps.
	overtaken bool
}

func (g *group) addTxnOffset(producerID int64, tp TopicPartition, o CommittedOffset) {
	if g.txnOffsets == nil {
		g.txnOffsets = map[int64]map[TopicPartition]*txnOffset{}
	}
	if g.txnOffsets[producerID] == nil {
		g.txnOffsets[producerID] = map[TopicPartition]*txnOffset{}
	}
	g.txnSeq++
	g.txnOffsets[producerID][tp] = &txnOffset{offset: o, seq: g.txnSeq}
}

// overtakeTxnOffsets notes a plain commit (or, deleted, a tombstone) of tp written
// after the pending transactional ones.
func (g *group) overtakeTxnOffsets(tp TopicPartition, deleted bool) {
	for producerID, offsets := range g.txnOffsets {
		if p := offsets[tp]; p != nil {
			if !deleted {
				p.overtaken = true
				continue
			}
			delete(offsets, tp)
			if len(offsets) == 0 {
				delete(g.txnOffsets, producerID)
			}
		}
	}
}

// completeTxn applies (commit) or drops the offsets producerID committed in its
// transaction.
func (g *group) completeTxn(producerID int64, commit bool) {
	offsets := g.txnOffsets[producerID]
	if offsets == nil {
		return
	}
	delete(g.txnOffsets, producerID)
	if !commit {
		return
	}
	for tp, p := range offsets {
		if p.overtaken {
			continue
		}
		g.offsets[tp] = p.offset
		// The pending offsets of other transactions written before this one are
		// overtaken by it; those written after it stay ahead.
		for _, other := range g.txnOffsets {
			if q := other[tp]; q != nil && q.seq < p.seq {
				q.overtaken = true
			}
		}
	}
}

// txnPartitions returns the partitions with an offset committed in a transaction not
// decided yet.
func (g *group) txnPartitions() []TopicPartition {
	var out []TopicPartition
	for _, offsets := range g.txnOffsets {
		for tp := range offsets {
			if !slices.Contains(out, tp) {
				out = append(out, tp)
			}
		}
	}
	return out
}

// unstable reports whether tp has an offset committed in a transaction not decided
// yet.
func (g *group) unstable(tp TopicPartition) bool {
	for _, offsets := range g.txnOffsets {
		if offsets[tp] != nil {
			return true
		}
	}
	return false
}

// txnEnd is a transaction marker written to a partition while it loads.
type txnEnd struct {
	producerID int64
	commit     bool
}

// CompleteTxn applies (commit) or drops the offsets producerID committed in its
// transaction to the groups of __consumer_offsets partition p, once the
// transaction's marker is written there. A partition not loaded here replays the
// marker when it loads. One loading may have read its log before the marker, so the
// marker is applied once the load ends too: applying it a second time finds nothing
// (the producer's next transaction cannot have written offsets yet, since this one has
// not ended until its markers are written). A TxnOffsetCommit of the producer written
// before the marker may not be replayed yet (its wait for the high watermark ends with
// the marker's): the marker is applied after it, as the log orders them.
func (c *Coordinator) CompleteTxn(p int32, producerID int64, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part := c.mu.partitions[p]
	switch {
	case part == nil:
	case part.loading:
		part.txnEnds = append(part.txnEnds, txnEnd{producerID, commit})
	case part.txnWrites[producerID] > 0:
		if part.endsAfterWrites == nil {
			part.endsAfterWrites = map[int64]bool{}
		}
		part.endsAfterWrites[producerID] = commit
	default:
		part.completeTxnLocked(producerID, commit)
	}
}

// txnWriteQueuedLocked counts a TxnOffsetCommit write of producerID handed to the
// writer; txnWriteReplayedLocked uncounts it in its replay, and applies a marker that
// came meanwhile once the producer has no write left.
func (part *partition) txnWriteQueuedLocked(producerID int64) {
	if part.txnWrites == nil {
		part.txnWrites = map[int64]int{}
	}
	part.txnWrites[producerID]++
}

func (part *partition) txnWriteReplayedLocked(producerID int64) {
	if part.txnWrites[producerID]--; part.txnWrites[producerID] > 0 {
		return
	}
	delete(part.txnWrites, producerID)
	if commit, ok := part.endsAfterWrites[producerID]; ok {
		delete(part.endsAfterWrites, producerID)
		part.completeTxnLocked(producerID, commit)
	}
}

func (part *partition) completeTxnLocked(producerID int64, commit bool) {
	for _, g := range part.groups {
		g.completeTxn(producerID, commit)
	}
}

// TxnOffsetCommit handles a TxnOffsetCommit request (v0–v6): the offsets are written
// in a transactional batch of the producer and stay pending until its transaction
// ends. The caller has checked with the transaction coordinator that the group's
// partition is in the transaction, and from v6 resolved the topics' ids to their
// names (the answer names them by id). From v3 the member and generation are checked
// as Kafka does (KIP-447), without refusing commits during a rebalance. guard is
// TxnInfo.Guard. The channel receives exactly one response.
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, guard uint64) <-chan *kmsg.TxnOffsetCommitResponse {
	ch := make(chan *kmsg.TxnOffsetCommitResponse, 1)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txnCommitLocked(req, guard, resp, ch, c.clock.Now())
	return ch
}

func (c *Coordinator) txnCommitLocked(req *kmsg.TxnOffsetCommitRequest, guard uint64, resp *kmsg.TxnOffsetCommitResponse, ch chan *kmsg.TxnOffsetCommitResponse, now time.Time) {
	fail := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		ch <- resp
	}
	part, code := c.partitionOfLocked(req.Group)
	if code != kerrNone {
		fail(code)
		return
	}
	g := part.groups[req.Group]
	existed := g != nil
	if g == nil {
		g = newGroup(req.Group, part.id, now)
		part.groups[req.Group] = g
	}
	cleanup := func() {
		if g.useless() && len(g.txnOffsets) == 0 && part.groups[g.id] == g {
			delete(part.groups, g.id)
		}
	}
	code, check := validateTxnCommit(g, existed, req)
	if code != kerrNone {
		cleanup()
		fail(code)
		return
	}
	type commit struct {
		tp TopicPartition
		o  CommittedOffset
	}
	var commits []commit
	var records []Record
	txn := &TxnInfo{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Guard: guard}
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			rp := &resp.Topics[ti].Partitions[pi]
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			switch {
			case c.topicExists != nil && !c.topicExists(t.Topic, p.Partition):
				rp.ErrorCode = kerrUnknownTopicOrPartition
			case len(meta) > c.cfg.MaxMetadataSize:
				rp.ErrorCode = kerrOffsetMetadataTooLarge
			default:
				leaderEpoch := p.LeaderEpoch
				if req.Version < 2 {
					leaderEpoch = -1
				}
				cm := commit{tp: TopicPartition{Topic: t.Topic, Partition: p.Partition},
					o: CommittedOffset{Offset: p.Offset, LeaderEpoch: leaderEpoch, Metadata: meta, CommitTime: time.UnixMilli(now.UnixMilli())}}
				commits = append(commits, cm)
				r := offsetRecord(g.id, cm.tp, cm.o)
				r.Txn = txn
				records = append(records, r)
			}
		}
	}
	groupID := g.id
	tps := make([]TopicPartition, len(commits))
	for i, cm := range commits {
		tps[i] = cm.tp
	}
	if check != nil {
		if code := check.refuses(c.currentTopics(), tps); code != kerrNone {
			// The whole request fails, as in Kafka; an unknown partition keeps its error.
			cleanup()
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					if rp := &resp.Topics[i].Partitions[j]; rp.ErrorCode != kerrUnknownTopicOrPartition {
						rp.ErrorCode = code
					}
				}
			}
			ch <- resp
			return
		}
	}
	if len(records) == 0 {
		cleanup()
		ch <- resp
		return
	}
	part.txnWriteQueuedLocked(req.ProducerID)
	c.appendCommitsLocked(part, g, tps, records, func(err error) {
		defer part.txnWriteReplayedLocked(req.ProducerID)
		if err != nil {
			code := appendErrorCode(err)
			for ti := range resp.Topics {
				for pi := range resp.Topics[ti].Partitions {
					if rp := &resp.Topics[ti].Partitions[pi]; rp.ErrorCode == kerrNone {
						rp.ErrorCode = code
					}
				}
			}
			if c.mu.partitions[part.id] == part {
				cleanup()
			}
			ch <- resp
			return
		}
		live := part.groups[groupID] // g may have been deleted meanwhile
		if live == nil {
			live = newGroup(groupID, part.id, c.clock.Now())
			part.groups[groupID] = live
		}
		for _, cm := range commits {
			live.addTxnOffset(req.ProducerID, cm.tp, cm.o)
		}
		ch <- resp
	})
}

// validateTxnCommit is Kafka's check of a transactional commit into a group (KIP-447):
// without a generation (v0–2 send none) it is accepted; with one, the member must be
// known at that generation — a consumer group's (KIP-848) at its member epoch, or at
// an older one for the partitions it has owned since then (KIP-1251: the check of
// the partitions is returned, ILLEGAL_GENERATION when one fails) — and a rebalance in
// progress does not refuse it. A commit naming no member (generation -1, no member or
// instance id: v0–2, or a producer given only the group's id) is accepted whatever
// the group's members, in a consumer group as in a classic one. A group that did not
// exist refuses a generation. From v6 (KIP-1319) those two refusals are
// GROUP_ID_NOT_FOUND and, for a consumer-protocol member, STALE_MEMBER_EPOCH, where
// earlier versions answer ILLEGAL_GENERATION.
func validateTxnCommit(g *group, existed bool, req *kmsg.TxnOffsetCommitRequest) (int16, *assignmentEpochCheck) {
	generation, memberID, instanceID := req.Generation, req.MemberID, req.InstanceID
	if req.Version < 3 {
		generation, memberID, instanceID = -1, "", nil
	}
	switch {
	case !existed && generation >= 0 && req.Version >= 6:
		return kerrGroupIDNotFound, nil
	case !existed && generation >= 0:
		return kerrIllegalGeneration, nil
	case g.state == StateDead: // being deleted
		return kerrCoordinatorNotAvailable, nil
	case g.share != nil:
		return kerrGroupIDNotFound, nil
	case g.consumer != nil:
		if generation < 0 && (len(g.consumer.members) == 0 || memberID == "" && instanceID == nil) {
			return kerrNone, nil // an empty group, or a commit that names no member (as Kafka accepts)
		}
		return validateConsumerCommit(g, memberID, generation, req.Version, true)
	}
	return validateClassicTxnCommit(g, memberID, instanceID, generation), nil
}

// validateClassicTxnCommit is validateTxnCommit's check in a classic group.
func validateClassicTxnCommit(g *group, memberID string, instanceID *string, generation int32) int16 {
	switch {
	case generation < 0 && g.state == StateEmpty:
		return kerrNone
	case generation < 0 && memberID == "" && instanceID == nil:
		return kerrNone // an old transactional producer's commit names no member
	case g.staticFenced(instanceID, memberID):
		return kerrFencedInstanceID
	case g.members[memberID] == nil:
		return kerrUnknownMemberID
	case generation != g.generation:
		return kerrIllegalGeneration
	}
	return kerrNone
}

var kerrUnstableOffsetCommit = kerr.UnstableOffsetCommit.Code
