package group

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeShowsOnlyCommittedState: a consumer or share group's heartbeat changes
// the group in memory as soon as its records are queued. A describe answered from
// memory then showed a member whose join was not yet committed, and lost with the
// write (a coordinator killed before its followers had the records). Kafka's describes
// read the committed state; here the answer waits until what it read is committed,
// and a group whose write failed is answered NOT_COORDINATOR.
func TestDescribeShowsOnlyCommittedState(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	first := &cmember{id: "first", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{first}, 4)

	hold := func() (release func(fail error)) {
		end := h.holdConsumerJoin("g", "second")
		return func(fail error) {
			if resp := end(fail); (resp.ErrorCode != 0) != (fail != nil) {
				t.Fatalf("the join's answer %+v, with the write failing: %v", resp, fail != nil)
			}
		}
	}
	members := func(d kmsg.ConsumerGroupDescribeResponseGroup) []string {
		var ids []string
		for _, m := range d.Members {
			ids = append(ids, m.MemberID)
		}
		return ids
	}
	describe := func() <-chan *kmsg.ConsumerGroupDescribeResponse {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"g"}
		return h.c.ConsumerGroupDescribe(req)
	}

	// The join fails to be written: the describe asked meanwhile never shows it.
	release := hold()
	d := describe()
	select {
	case resp := <-d:
		t.Fatalf("described while the join was not committed: members %v", members(resp.Groups[0]))
	default:
	}
	release(errors.New("disk full"))
	if g := recv(t, d).Groups[0]; g.ErrorCode != kerrNotCoordinator {
		t.Fatalf("describe across a failed write: error %d, members %v; want NOT_COORDINATOR", g.ErrorCode, members(g))
	}
	waitFor(t, "the partition reloaded from its log, without the second member", func() bool {
		g := recv(t, describe()).Groups[0]
		return g.ErrorCode == 0 && len(g.Members) == 1 && g.Members[0].MemberID == "first"
	})

	// The join is committed: the describe asked meanwhile shows it, once committed.
	release = hold()
	d = describe()
	select {
	case resp := <-d:
		t.Fatalf("described while the join was not committed: members %v", members(resp.Groups[0]))
	default:
	}
	release(nil)
	if g := recv(t, d).Groups[0]; g.ErrorCode != 0 || len(g.Members) != 2 {
		t.Fatalf("describe after the join was committed: error %d, members %v; want both", g.ErrorCode, members(g))
	}
}

// holdConsumerJoin sends a ConsumerGroupHeartbeat joining member to group and holds
// its write in the log's append until release, which lets the write end with fail (nil:
// it succeeds) and returns the join's answer.
func (h *harness) holdConsumerJoin(group, member string) func(fail error) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	return holdWrite(h, "the join of "+member+" held in the writer", func() <-chan *kmsg.ConsumerGroupHeartbeatResponse {
		join := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		join.Version, join.Group, join.MemberID, join.RebalanceTimeoutMillis = 1, group, member, 5000
		join.SubscribedTopicNames, join.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return h.c.ConsumerGroupHeartbeat(join, "client", "/127.0.0.1", nil)
	})
}

// holdWrite runs send, which must make the coordinator write, and holds that write in
// the log's append (what names it) until release, which lets the write end with fail
// (nil: it succeeds) and returns send's answer.
func holdWrite[R any](h *harness, what string, send func() <-chan R) func(fail error) R {
	h.t.Helper()
	var answer <-chan R
	release := h.holdAppend(what, func() { answer = send() })
	return func(fail error) R {
		h.t.Helper()
		h.log.setAppendErr(fail)
		release()
		resp := recv(h.t, answer)
		h.log.setAppendErr(nil)
		return resp
	}
}
