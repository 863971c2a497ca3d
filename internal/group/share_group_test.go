package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// smember is a simulated share group member: it keeps the assignment the
// coordinator last sent it, as a share consumer does.
type smember struct {
	id     string
	epoch  int32
	topics []string
	owned  Assignment
}

// shHeartbeat sends one ShareGroupHeartbeat of m (its subscription only when it
// joins, as clients do) and applies the response.
func (h *harness) shHeartbeat(group string, m *smember) *kmsg.ShareGroupHeartbeatResponse {
	h.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID = group
	req.MemberID = m.id
	req.MemberEpoch = m.epoch
	if m.epoch == 0 {
		req.SubscribedTopicNames = m.topics
	}
	resp := recv(h.t, h.c.ShareGroupHeartbeat(req, "client", "/127.0.0.1"))
	if resp.ErrorCode != 0 {
		return resp
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = Assignment{}
		for _, t := range resp.Assignment.TopicPartitions {
			for _, p := range t.Partitions {
				m.owned.add(TopicID(t.TopicID), p)
			}
		}
	}
	return resp
}

// TestShareGroupMemberGoneReassigns: when a share group member leaves or its
// session expires, the partitions it had go to the members that stay, at their
// next heartbeat. Otherwise no member fetches them and their records (released
// by the member that left) are never delivered again.
func TestShareGroupMemberGoneReassigns(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone func(h *harness, stay []*smember, leaver *smember)
	}{
		{"leave", func(h *harness, _ []*smember, leaver *smember) {
			leaver.epoch = leaveEpoch
			if r := h.shHeartbeat("g", leaver); r.ErrorCode != 0 {
				h.t.Fatalf("leave: error %d", r.ErrorCode)
			}
		}},
		{"session expired", func(h *harness, stay []*smember, leaver *smember) {
			for range 2 * int(h.cfg.ShareSessionTimeout/time.Second) {
				h.clock.Advance(time.Second)
				for _, m := range stay {
					if r := h.shHeartbeat("g", m); r.ErrorCode != 0 {
						h.t.Fatalf("heartbeat of %s: error %d", m.id, r.ErrorCode)
					}
				}
			}
			if r := h.shHeartbeat("g", leaver); r.ErrorCode != kerrUnknownMemberID {
				h.t.Fatalf("heartbeat of the expired member: error %d, want UNKNOWN_MEMBER_ID", r.ErrorCode)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ft := newConsumerHarness(t, func(c *Config) { c.ShareSessionTimeout = 5 * time.Second })
			ft.set("t", 3)
			a := &smember{id: "a", topics: []string{"t"}}
			b := &smember{id: "b", topics: []string{"t"}}
			c := &smember{id: "c", topics: []string{"t"}}
			all := []*smember{a, b, c}
			for range 3 { // join, then pick up the assignments of the later joins
				for _, m := range all {
					if r := h.shHeartbeat("g", m); r.ErrorCode != 0 {
						t.Fatalf("heartbeat of %s: error %d", m.id, r.ErrorCode)
					}
				}
			}
			for _, m := range all {
				if m.owned.size() != 1 {
					t.Fatalf("before: %s owns %v, want one partition each", m.id, m.owned)
				}
			}

			tc.gone(h, []*smember{a, b}, c)
			for range 2 {
				for _, m := range []*smember{a, b} {
					if r := h.shHeartbeat("g", m); r.ErrorCode != 0 {
						t.Fatalf("heartbeat of %s after %s: error %d", m.id, tc.name, r.ErrorCode)
					}
				}
			}
			for p := range int32(3) {
				if !a.owned.has(topicIDOf("t"), p) && !b.owned.has(topicIDOf("t"), p) {
					t.Fatalf("after %s: partition %d has no member (a owns %v, b owns %v)", tc.name, p, a.owned, b.owned)
				}
			}
		})
	}
}
