package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (h *harness) txnCommit(group string, pid int64, member string, generation int32, offsets map[TopicPartition]int64) *kmsg.TxnOffsetCommitResponse {
	h.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
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
	return recv(h.t, h.c.TxnOffsetCommit(req))
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
