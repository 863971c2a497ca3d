package group

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetCommitRefusalWaitsForQueuedWrites: a commit (and a ConsumerGroupHeartbeat)
// refused from memory that holds a write not committed yet — the removal of a member
// whose session expired — is answered once that write is done. When the write fails (this node's log can no longer be
// written: it lost the partition, or its disk failed), the answer is the write's
// retriable error, not UNKNOWN_MEMBER_ID for a removal the log never got: the member
// finds its coordinator again and commits there, still a member. (A coordinator stalled
// past its members' sessions, then resumed, expires them before it reads the heartbeats
// waiting in its sockets.) When the removal is committed, the commit is refused with
// UNKNOWN_MEMBER_ID.
func TestOffsetCommitRefusalWaitsForQueuedWrites(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 2)
	m := &cmember{id: "m", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{m}, 2)
	commit := func() <-chan *kmsg.OffsetCommitResponse {
		return h.c.OffsetCommit(commitRequest(9, "g", "m", m.epoch, map[TopicPartition]int64{{"t", 0}: 5}))
	}
	code := func(ch <-chan *kmsg.OffsetCommitResponse) int16 { return recv(t, ch).Topics[0].Partitions[0].ErrorCode }
	if c := code(commit()); c != 0 {
		t.Fatalf("commit of a member: error %d", c)
	}
	members := func() int {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"g"}
		g := recv(t, h.c.ConsumerGroupDescribe(req)).Groups[0]
		if g.ErrorCode != 0 {
			return -1
		}
		return len(g.Members)
	}

	for _, c := range []struct {
		fail error
		want []int16
	}{
		{errors.New("the log cannot be written"), []int16{kerrNotCoordinator, kerrCoordinatorNotAvailable}},
		{nil, []int16{kerrUnknownMemberID}},
	} {
		release := h.holdAppend("the removal of m, its session expired, held in the writer", func() {
			h.clock.Advance(h.cfg.ConsumerSessionTimeout + time.Second)
		})
		answered := commit()
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "g", "m", m.epoch
		beat := h.c.ConsumerGroupHeartbeat(hb, "client", "/127.0.0.1", nil)
		select {
		case resp := <-answered:
			t.Fatalf("commit answered %d while the member's removal was not written", resp.Topics[0].Partitions[0].ErrorCode)
		case resp := <-beat:
			t.Fatalf("heartbeat answered %d while the member's removal was not written", resp.ErrorCode)
		default:
		}
		h.log.setAppendErr(c.fail)
		release()
		got, gotBeat := code(answered), recv(t, beat).ErrorCode
		h.log.setAppendErr(nil)
		for what, got := range map[string]int16{"commit": got, "heartbeat": gotBeat} {
			if got != c.want[0] && (len(c.want) == 1 || got != c.want[1]) {
				t.Fatalf("%s while the removal's write ended with %v: error %d, want one of %v", what, c.fail, got, c.want)
			}
		}
		if c.fail != nil {
			// The partition is loaded again from its log, where m is still a member.
			waitFor(t, "the group loaded again with its member", func() bool { return members() == 1 })
		}
	}
}
