package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (h *harness) txnCommit(group string, pid int64, member string, generation int32, offsets map[TopicPartition]int64) *kmsg.TxnOffsetCommitResponse {
	h.t.Helper()
	return h.txnCommitAt(3, group, pid, member, generation, offsets)
}

// txnCommitAt is txnCommit at a version of TxnOffsetCommit.
func (h *harness) txnCommitAt(version int16, group string, pid int64, member string, generation int32, offsets map[TopicPartition]int64) *kmsg.TxnOffsetCommitResponse {
	h.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = version
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", group, pid, 0
	req.MemberID, req.Generation = member, generation
	byTopic := map[string]int{}
	for tp, o := range offsets {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = tp.Partition, o
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return recv(h.t, h.c.TxnOffsetCommit(req, 0))
}

// stableFetch fetches one partition's offset asking for stable offsets (v7): the
// offset and the partition's error code.
func (h *harness) stableFetch(group string, tp TopicPartition) (int64, int16) {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, group, true
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
	req.Topics = append(req.Topics, t)
	resp := h.c.OffsetFetch(req)
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// marker appends a transaction marker to partition 0 of the memory log, as a
// WriteTxnMarkers would, and tells the coordinator.
func (h *harness) marker(pid int64, commit bool) {
	h.log.mu.Lock()
	h.log.parts[0] = append(h.log.parts[0], Record{Txn: &TxnInfo{ProducerID: pid, Marker: true, Commit: commit}})
	h.log.mu.Unlock()
	h.c.CompleteTxn(0, pid, commit)
}

// TestTxnOffsetsPendingUntilMarker: offsets committed in a transaction are invisible
// (UNSTABLE_OFFSET_COMMIT for stable fetches) until the commit marker; an abort drops
// them; both survive a reload as the log says.
func TestTxnOffsetsPendingUntilMarker(t *testing.T) {
	h := newHarness(t, nil)
	tp0, tp1 := TopicPartition{"in", 0}, TopicPartition{"in", 1}
	h.commit("g", "", -1, map[TopicPartition]int64{tp0: 5})
	if r := h.txnCommit("g", 7, "", -1, map[TopicPartition]int64{tp0: 10, tp1: 20}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %+v", r)
	}
	if got := h.fetch("g"); got[tp0] != 5 || len(got) != 1 {
		t.Fatalf("offsets before the marker: %v", got)
	}
	if off, code := h.stableFetch("g", tp0); code != kerr.UnstableOffsetCommit.Code || off != -1 {
		t.Fatalf("stable fetch before the marker: %d %d", off, code)
	}
	h.start() // the pending commit survives a reload
	if _, code := h.stableFetch("g", tp0); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("stable fetch after a reload: %d", code)
	}
	h.marker(7, true)
	if got := h.fetch("g"); got[tp0] != 10 || got[tp1] != 20 {
		t.Fatalf("offsets after the commit marker: %v", got)
	}
	if off, code := h.stableFetch("g", tp1); code != 0 || off != 20 {
		t.Fatalf("stable fetch after the marker: %d %d", off, code)
	}
	h.txnCommit("g", 8, "", -1, map[TopicPartition]int64{tp0: 99})
	h.marker(8, false)
	h.start()
	if got := h.fetch("g"); got[tp0] != 10 || got[tp1] != 20 {
		t.Fatalf("offsets after an abort and a reload: %v", got)
	}
	if _, code := h.stableFetch("g", tp0); code != 0 {
		t.Fatalf("stable fetch after the abort: %d", code)
	}
}

// TestTxnMarkerWhileLoading: a transaction's marker written while the partition loads,
// after the load read the log, still ends the transaction. Before, the coordinator
// left it to the load, which never saw it: the aborted offsets stayed pending, and the
// producer's next committed transaction made them the group's offsets, so the records
// of the aborted transaction were skipped by the next consumer of their partitions.
func TestTxnMarkerWhileLoading(t *testing.T) {
	for _, commit := range []bool{false, true} {
		h := newHarness(t, nil)
		tp0, tp1 := TopicPartition{"in", 0}, TopicPartition{"in", 1}
		h.txnCommit("g", 7, "", -1, map[TopicPartition]int64{tp0: 10, tp1: 20})
		hold, read := make(chan struct{}), make(chan struct{})
		h.log.mu.Lock()
		h.log.loadHold, h.log.loadRead = hold, read
		h.log.mu.Unlock()
		h.c.UnloadPartition(0)
		loaded := make(chan error, 1)
		go func() { loaded <- h.c.LoadPartition(context.Background(), 0) }()
		<-read
		h.marker(7, commit)
		close(hold)
		if err := <-loaded; err != nil {
			t.Fatal(err)
		}
		want0, want1 := int64(-1), int64(-1)
		if commit {
			want0, want1 = 10, 20
		}
		for tp, want := range map[TopicPartition]int64{tp0: want0, tp1: want1} {
			if off, code := h.stableFetch("g", tp); code != 0 || off != want {
				t.Fatalf("commit=%v: stable fetch of %v after the load: offset %d, error %d; want %d, no error", commit, tp, off, code, want)
			}
		}
		// The producer's next transaction commits tp1 only.
		h.txnCommit("g", 7, "", -1, map[TopicPartition]int64{tp1: 30})
		h.marker(7, true)
		got := h.fetch("g")
		off0, has0 := got[tp0]
		if got[tp1] != 30 || has0 != commit || (commit && off0 != 10) {
			t.Fatalf("commit=%v: offsets after the next transaction: %v; want %v at 30 and %v committed only by the first transaction's commit", commit, got, tp1, tp0)
		}
	}
}

// TestTxnOffsetsOvertakenByPlainCommit: a plain commit written after a transactional
// one wins when the transaction commits, live and on reload.
func TestTxnOffsetsOvertakenByPlainCommit(t *testing.T) {
	h := newHarness(t, nil)
	tp0 := TopicPartition{"in", 0}
	h.txnCommit("g", 7, "", -1, map[TopicPartition]int64{tp0: 10})
	h.commit("g", "", -1, map[TopicPartition]int64{tp0: 50})
	h.marker(7, true)
	if got := h.fetch("g"); got[tp0] != 50 {
		t.Fatalf("live: %v", got)
	}
	h.start()
	if got := h.fetch("g"); got[tp0] != 50 {
		t.Fatalf("reloaded: %v", got)
	}
	if h.log.mixedBatches != 0 {
		t.Fatalf("%d records appended in another producer's batch", h.log.mixedBatches)
	}
}

// TestTxnOffsetsLaterRecordWins: two transactions commit an offset of the same
// partition and the one written first ends last; as in Kafka (record offsets
// compared), the offset written later stays the group's, live and reloaded.
func TestTxnOffsetsLaterRecordWins(t *testing.T) {
	h := newHarness(t, nil)
	tp0 := TopicPartition{"in", 0}
	h.txnCommit("g", 7, "", -1, map[TopicPartition]int64{tp0: 10})
	h.txnCommit("g", 8, "", -1, map[TopicPartition]int64{tp0: 20})
	h.marker(8, true)
	h.marker(7, true)
	if got := h.fetch("g"); got[tp0] != 20 {
		t.Fatalf("live: %v", got)
	}
	h.start()
	if got := h.fetch("g"); got[tp0] != 20 {
		t.Fatalf("reloaded: %v", got)
	}
	// Written after the committed one, a transaction's offset wins when it commits.
	h.txnCommit("g", 9, "", -1, map[TopicPartition]int64{tp0: 30})
	h.marker(9, true)
	if got := h.fetch("g"); got[tp0] != 30 {
		t.Fatalf("a later transaction: %v", got)
	}
}

// TestTxnOffsetCommitChecksMember: from v3 the member and generation must be current
// (KIP-447).
func TestTxnOffsetCommitChecksMember(t *testing.T) {
	h := newHarness(t, nil)
	members, _, gen := h.stable("g", joinOpts{})
	tp0 := TopicPartition{"in", 0}
	for _, tc := range []struct {
		member string
		gen    int32
		want   int16
	}{
		{members[0], gen, 0},
		{"ghost", gen, kerr.UnknownMemberID.Code},
		{members[0], gen + 1, kerr.IllegalGeneration.Code},
		{"", -1, 0},
	} {
		r := h.txnCommit("g", 7, tc.member, tc.gen, map[TopicPartition]int64{tp0: 1})
		if got := r.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("member %q generation %d: code %d, want %d", tc.member, tc.gen, got, tc.want)
		}
	}
}

// TestTxnOffsetCommitConsumerGroup: into a KIP-848 consumer group a transactional
// commit names a member at its member epoch (GenerationID); any other epoch is
// ILLEGAL_GENERATION up to v5, as Kafka answers a transactional producer, and
// STALE_MEMBER_EPOCH from v6 (KIP-1319). A group that does not exist refuses a
// generation: ILLEGAL_GENERATION up to v5, GROUP_ID_NOT_FOUND from v6.
func TestTxnOffsetCommitConsumerGroup(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("in", 2)
	m := &cmember{id: "m1", topics: []string{"in"}}
	if r := h.cgHeartbeat("g", m, true); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %d", r.ErrorCode)
	}
	tp0 := TopicPartition{"in", 0}
	for _, tc := range []struct {
		group, member string
		gen           int32
		want, wantV6  int16
	}{
		{"g", m.id, m.epoch, 0, 0},
		{"g", m.id, m.epoch + 1, kerr.IllegalGeneration.Code, kerr.StaleMemberEpoch.Code},
		{"g", m.id, m.epoch - 1, kerr.IllegalGeneration.Code, kerr.StaleMemberEpoch.Code},
		{"g", "ghost", m.epoch, kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code},
		{"g", "", -1, 0, 0}, // names no member: accepted, as Kafka does
		{"g", "", 3, kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code},
		{"nobody", "x", 3, kerr.IllegalGeneration.Code, kerr.GroupIDNotFound.Code},
		{"nobody", "", -1, 0, 0},
	} {
		for version, want := range map[int16]int16{3: tc.want, 5: tc.want, 6: tc.wantV6} {
			r := h.txnCommitAt(version, tc.group, 7, tc.member, tc.gen, map[TopicPartition]int64{tp0: 1})
			if got := r.Topics[0].Partitions[0].ErrorCode; got != want {
				t.Errorf("v%d, group %q member %q epoch %d: code %d, want %d", version, tc.group, tc.member, tc.gen, got, want)
			}
		}
	}
	h.marker(7, true)
	if got := h.fetch("g"); got[tp0] != 1 {
		t.Fatalf("consumer group offsets after the commit marker: %v", got)
	}
}

// TestCoalesce: queued writes share one batch only when they have one producer (none,
// or one transaction's); a job without records (a consumer group's wait for earlier
// writes) goes with any batch, first or not.
func TestCoalesce(t *testing.T) {
	plain := writeJob{records: []Record{{Key: []byte("k")}}}
	txn := func(pid int64) writeJob {
		return writeJob{records: []Record{{Key: []byte("k"), Txn: &TxnInfo{ProducerID: pid}}}}
	}
	wait := writeJob{}
	for _, tc := range []struct {
		name string
		jobs []writeJob
		want int
	}{
		{"plain commits", []writeJob{plain, plain, plain}, 3},
		{"one transaction", []writeJob{txn(1), txn(1)}, 2},
		{"plain then transactional", []writeJob{plain, txn(1)}, 1},
		{"two producers", []writeJob{txn(1), txn(2)}, 1},
		{"a wait first", []writeJob{wait, txn(1), txn(1), plain}, 3},
		{"waits only", []writeJob{wait, wait}, 2},
		{"a wait between", []writeJob{txn(1), wait, txn(1), txn(2)}, 3},
		{"a wait last", []writeJob{plain, wait}, 2},
	} {
		if got := coalesce(tc.jobs); got != tc.want {
			t.Errorf("%s: coalesce = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestTxnOffsetsOutliveExpiry: as in Kafka, an offset with a transactional commit
// pending does not expire, and a group with a transaction open is not deleted by
// expiry, so the commit marker still finds the group and applies the offsets.
func TestTxnOffsetsOutliveExpiry(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetention = time.Hour
		c.OffsetsRetentionCheckInterval = time.Minute
	})
	tp0, tp1 := TopicPartition{"in", 0}, TopicPartition{"in", 1}
	h.commit("g", "", -1, map[TopicPartition]int64{tp0: 5})
	for _, group := range []string{"g", "only-txn"} {
		if r := h.txnCommit(group, 7, "", -1, map[TopicPartition]int64{tp0: 10, tp1: 20}); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit to %s: %+v", group, r)
		}
	}
	for range 61 {
		h.clock.Advance(time.Minute)
	}
	// An expiry pass has run after the retention: wait for it through a group that
	// has nothing pending.
	h.commit("plain", "", -1, map[TopicPartition]int64{tp0: 1})
	for range 61 {
		h.clock.Advance(time.Minute)
	}
	waitFor(t, "the plain group's offsets expired", func() bool { return h.c.CommittedOffsets("plain") == nil })
	if got := h.c.CommittedOffsets("g"); got[tp0].Offset != 5 {
		t.Fatalf("g's offset with a pending transactional commit: %v; want it kept at 5", got)
	}
	h.marker(7, true)
	for _, group := range []string{"g", "only-txn"} {
		if got := h.fetch(group); got[tp0] != 10 || got[tp1] != 20 {
			t.Fatalf("%s after the commit marker: %v; want in-0 at 10 and in-1 at 20", group, got)
		}
	}
	h.start()
	for _, group := range []string{"g", "only-txn"} {
		if got := h.fetch(group); got[tp0] != 10 || got[tp1] != 20 {
			t.Fatalf("%s after a reload: %v; want in-0 at 10 and in-1 at 20", group, got)
		}
	}
}

// TestDeleteGroupDropsPendingTxnOffsets: deleting an empty group also deletes the
// offsets a transaction committed for it and has not ended (Kafka writes tombstones
// for them too), so the transaction's later commit marker does not bring the group
// back — neither in memory nor when the log is loaded again.
func TestDeleteGroupDropsPendingTxnOffsets(t *testing.T) {
	h := newHarness(t, nil)
	tp0 := TopicPartition{"in", 0}
	h.commit("g", "", -1, map[TopicPartition]int64{{"other", 0}: 3})
	for _, group := range []string{"g", "only-txn"} {
		if r := h.txnCommit(group, 7, "", -1, map[TopicPartition]int64{tp0: 10}); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit to %s: %+v", group, r)
		}
	}
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = []string{"g", "only-txn"}
	for _, g := range recv(t, h.c.DeleteGroups(req)).Groups {
		if g.ErrorCode != 0 {
			t.Fatalf("deleting %s: %v", g.Group, kerr.ErrorForCode(g.ErrorCode))
		}
	}
	h.marker(7, true)
	for _, group := range []string{"g", "only-txn"} {
		if got := h.c.CommittedOffsets(group); got != nil {
			t.Fatalf("%s, deleted, has offsets after the commit marker: %v", group, got)
		}
	}
	h.start()
	for _, group := range []string{"g", "only-txn"} {
		if got := h.c.CommittedOffsets(group); got != nil {
			t.Fatalf("%s, deleted, has offsets after a reload: %v", group, got)
		}
	}
}

// TestTxnMarkerBeforeCommitReplay: a transaction's marker is committed to the
// partition after its TxnOffsetCommit's batch (log order), but CompleteTxn can run
// before that commit's replay does — the two writes' high watermark waits wake
// together, e.g. when a stalled follower leaves the ISR, and a producer fenced or timed
// out meanwhile has its transaction aborted. The marker must still end the offsets
// committed before it. Before, CompleteTxn found nothing pending, the replay then
// added the offsets, and they stayed pending until the partition reloaded: stable
// fetches answered UNSTABLE_OFFSET_COMMIT for good, and a later commit marker of the
// producer would have applied the aborted offsets.
func TestTxnMarkerBeforeCommitReplay(t *testing.T) {
	h := newHarness(t, nil)
	tp0 := TopicPartition{"in", 0}
	h.commit("g", "", -1, map[TopicPartition]int64{tp0: 5})
	gate := make(chan struct{})
	h.log.mu.Lock()
	h.log.appendGate = gate
	h.log.mu.Unlock()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.Generation = "tx", "g", 7, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = tp0.Topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = tp0.Partition, 99
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ch := h.c.TxnOffsetCommit(req, 0)
	waitFor(t, "the commit's append", func() bool {
		h.log.mu.Lock()
		defer h.log.mu.Unlock()
		return h.log.blocked == 1
	})
	h.c.CompleteTxn(0, 7, false) // the abort marker, committed after the batch
	h.log.mu.Lock()
	h.log.appendGate = nil
	h.log.mu.Unlock()
	close(gate)
	if r := recv(t, ch); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %+v", r)
	}
	h.log.mu.Lock()
	h.log.parts[0] = append(h.log.parts[0], Record{Txn: &TxnInfo{ProducerID: 7, Marker: true}})
	h.log.mu.Unlock()
	if off, code := h.stableFetch("g", tp0); code != 0 || off != 5 {
		t.Fatalf("stable fetch after the abort marker: offset %d code %d, want 5 and no error", off, code)
	}
	h.c.CompleteTxn(0, 7, true) // the producer's next transaction, without offsets
	if got := h.fetch("g"); got[tp0] != 5 {
		t.Fatalf("offsets after the next commit: %v", got)
	}
	h.start()
	if off, code := h.stableFetch("g", tp0); code != 0 || off != 5 {
		t.Fatalf("stable fetch after a reload: offset %d code %d", off, code)
	}
}

// TestTxnOffsetCommitChecksAfterReload: after the partition reloads (the coordinator
// moved), a transactional commit is checked against the members and epochs the log
// holds — a consumer group's member epoch, a classic group's generation — and the
// offsets pending before the move are still pending.
func TestTxnOffsetCommitChecksAfterReload(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("in", 2)
	m := &cmember{id: "m1", topics: []string{"in"}}
	if r := h.cgHeartbeat("g", m, true); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %d", r.ErrorCode)
	}
	tp0 := TopicPartition{"in", 0}
	if r := h.txnCommit("g", 7, m.id, m.epoch, map[TopicPartition]int64{tp0: 1}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit before the reload: %+v", r)
	}
	members, leader, gen := h.stable("c", joinOpts{}, joinOpts{})
	h.start()
	if _, code := h.stableFetch("g", tp0); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("stable fetch after the reload: %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
	for _, tc := range []struct {
		group, member string
		gen           int32
		want          int16
	}{
		{"g", m.id, m.epoch, 0},
		{"g", m.id, m.epoch + 1, kerr.IllegalGeneration.Code},
		{"g", "ghost", m.epoch, kerr.UnknownMemberID.Code},
		{"c", leader, gen, 0},
		{"c", members[len(members)-1], gen + 1, kerr.IllegalGeneration.Code},
		{"c", "ghost", gen, kerr.UnknownMemberID.Code},
	} {
		r := h.txnCommit(tc.group, 8, tc.member, tc.gen, map[TopicPartition]int64{tp0: 2})
		if got := r.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("after the reload, group %q member %q generation %d: code %d, want %d", tc.group, tc.member, tc.gen, got, tc.want)
		}
	}
	h.marker(7, true)
	if off, code := h.stableFetch("g", tp0); code != kerr.UnstableOffsetCommit.Code { // producer 8's still pending
		t.Fatalf("stable fetch after producer 7's marker: %d %d", off, code)
	}
	h.marker(8, true)
	if off, code := h.stableFetch("g", tp0); code != 0 || off != 2 {
		t.Fatalf("stable fetch after both markers: %d %d", off, code)
	}
}
