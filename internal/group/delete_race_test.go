package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// holdWriter makes the memory log hold appends and commits into a bystander group, so
// that the partition's writer is busy and what follows queues behind it. release lets
// every held and queued append through.
func (h *harness) holdWriter() (release func()) {
	h.t.Helper()
	var bystander <-chan *kmsg.OffsetCommitResponse
	open := h.holdAppend("the bystander's append to be held", func() {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group = 8, "bystander"
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "other", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
		bystander = h.c.OffsetCommit(req)
	})
	return func() {
		open()
		if r := recv(h.t, bystander); r.Topics[0].Partitions[0].ErrorCode != 0 {
			h.t.Fatalf("bystander commit: %+v", r)
		}
	}
}

// groupView is what clients can see of a group: whether it is listed, as what, and its
// committed offsets.
func (h *harness) groupView(group string) string {
	h.t.Helper()
	listed := "not listed"
	for _, s := range h.c.Groups() {
		if s.Group == group {
			listed = s.Type + " " + s.State + fmt.Sprintf(" with %d members", len(s.Members))
		}
	}
	return fmt.Sprintf("%s, offsets %v", listed, h.fetch(group))
}

// The async helpers send a request and return a wait for its error code.

func asyncCommit(h *harness, group string, tp TopicPartition, offset int64) func() int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, group, -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: tp.Topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: tp.Partition, Offset: offset}}}}
	ch := h.c.OffsetCommit(req)
	return func() int16 { return recv(h.t, ch).Topics[0].Partitions[0].ErrorCode }
}

func asyncTxnCommit(h *harness, group string, pid int64, tp TopicPartition, offset int64) func() int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.Generation = 3, "tx", group, pid, -1
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: tp.Topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: tp.Partition, Offset: offset}}}}
	ch := h.c.TxnOffsetCommit(req, 0)
	return func() int16 { return recv(h.t, ch).Topics[0].Partitions[0].ErrorCode }
}

func asyncDeleteGroup(h *harness, group string) func() int16 {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group}
	ch := h.c.DeleteGroups(req)
	return func() int16 { return recv(h.t, ch).Groups[0].ErrorCode }
}

func asyncOffsetDelete(h *harness, group string, tp TopicPartition) func() int16 {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	t := kmsg.NewOffsetDeleteRequestTopic()
	t.Topic = tp.Topic
	t.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: tp.Partition}}
	req.Topics = append(req.Topics, t)
	ch := h.c.OffsetDelete(req)
	return func() int16 {
		r := recv(h.t, ch)
		return max(r.ErrorCode, r.Topics[0].Partitions[0].ErrorCode)
	}
}

// TestDeletionRacingQueuedCommits: a deletion (DeleteGroups, OffsetDelete, offset
// expiry) decided while an offset commit of the same group is accepted but still queued
// behind another append. The commit reaches the log before the deletion's tombstones, so
// the deletion must account for it: what clients see once both are answered is what a
// restart loads from the log, and an acknowledged commit the deletion did not cover
// stays.
func TestDeletionRacingQueuedCommits(t *testing.T) {
	t0 := TopicPartition{"t", 0}
	t1 := TopicPartition{"t", 1}
	for _, tc := range []struct {
		name     string
		commit   func(h *harness) func() int16 // queued behind the held append
		deletion func(h *harness) func() int16 // decided after it; nil: none answered
		after    func(h *harness)              // once both are answered
		want     string
	}{{
		name:     "DeleteGroups after a commit of a new partition",
		commit:   func(h *harness) func() int16 { return asyncCommit(h, "g", t1, 20) },
		deletion: func(h *harness) func() int16 { return asyncDeleteGroup(h, "g") },
		want:     "not listed, offsets map[]",
	}, {
		name:     "DeleteGroups after a transactional commit",
		commit:   func(h *harness) func() int16 { return asyncTxnCommit(h, "g", 7, t1, 20) },
		deletion: func(h *harness) func() int16 { return asyncDeleteGroup(h, "g") },
		after:    func(h *harness) { h.marker(7, true) }, // the transaction commits after the deletion
		want:     "not listed, offsets map[]",
	}, {
		name:     "OffsetDelete of the last offset while another partition's commit is queued",
		commit:   func(h *harness) func() int16 { return asyncCommit(h, "g", t1, 20) },
		deletion: func(h *harness) func() int16 { return asyncOffsetDelete(h, "g", t0) },
		want:     "classic Empty with 0 members, offsets map[{t 1}:20]",
	}, {
		name:     "OffsetDelete of the partition whose commit is queued",
		commit:   func(h *harness) func() int16 { return asyncCommit(h, "g", t0, 30) },
		deletion: func(h *harness) func() int16 { return asyncOffsetDelete(h, "g", t0) },
		want:     "not listed, offsets map[]",
	}, {
		name: "expiry of an offset whose new commit is queued",
		commit: func(h *harness) func() int16 {
			h.clock.Advance(h.cfg.OffsetsRetention - 30*time.Second) // one check: nothing due yet
			return asyncCommit(h, "g", t0, 30)
		},
		deletion: func(h *harness) func() int16 {
			h.clock.Advance(h.cfg.OffsetsRetentionCheckInterval) // the old commit of t-0 is due
			return nil
		},
		want: "classic Empty with 0 members, offsets map[{t 0}:30]",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			if code := asyncCommit(h, "g", t0, 10)(); code != 0 {
				t.Fatalf("seed commit: error %d", code)
			}
			release := h.holdWriter()
			commit := tc.commit(h)
			deletion := tc.deletion(h)
			release()
			if code := commit(); code != 0 {
				t.Fatalf("commit: error %d", code)
			}
			if deletion != nil {
				if code := deletion(); code != 0 {
					t.Fatalf("deletion: error %d", code)
				}
			}
			if tc.after != nil {
				tc.after(h)
			}
			answered := h.groupView("g")
			h.start()
			if reloaded := h.groupView("g"); answered != tc.want || reloaded != tc.want {
				t.Fatalf("group once answered: %s\nafter a reload: %s\nwant: %s", answered, reloaded, tc.want)
			}
		})
	}
}

// TestHeartbeatIntoGroupBeingDeleted: a KIP-848 or share group join that arrives after
// DeleteGroups decided, before its tombstones are written, is refused with
// COORDINATOR_NOT_AVAILABLE (as a classic JoinGroup is); its retry creates the group
// afresh, and a reload agrees.
func TestHeartbeatIntoGroupBeingDeleted(t *testing.T) {
	for _, tc := range []struct {
		kind            string
		join            func(h *harness, member string) int16 // joins and leaves
		asyncJoin       func(h *harness, member string) func() int16
		settle          func(t *testing.T, h *harness, member string)
		wantAfterSettle string
	}{{
		kind: "consumer",
		join: func(h *harness, member string) int16 {
			m := &cmember{id: member, topics: []string{"t"}}
			if code := h.cgHeartbeat("g", m, true).ErrorCode; code != 0 {
				return code
			}
			m.epoch = leaveEpoch
			return h.cgHeartbeat("g", m, false).ErrorCode
		},
		asyncJoin: func(h *harness, member string) func() int16 {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = 1, "g", member, 5000
			req.SubscribedTopicNames = []string{"t"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			ch := h.c.ConsumerGroupHeartbeat(req, "client", "/127.0.0.1", nil)
			return func() int16 { return recv(h.t, ch).ErrorCode }
		},
		settle: func(t *testing.T, h *harness, member string) {
			settle(t, h, "g", []*cmember{{id: member, topics: []string{"t"}}}, 2)
		},
		wantAfterSettle: "consumer Stable with 1 members, offsets map[]",
	}, {
		kind: "share",
		join: func(h *harness, member string) int16 {
			m := &smember{id: member, topics: []string{"t"}}
			if code := h.shHeartbeat("g", m).ErrorCode; code != 0 {
				return code
			}
			m.epoch = leaveEpoch
			return h.shHeartbeat("g", m).ErrorCode
		},
		asyncJoin: func(h *harness, member string) func() int16 {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.GroupID, req.MemberID, req.SubscribedTopicNames = "g", member, []string{"t"}
			ch := h.c.ShareGroupHeartbeat(req, "client", "/127.0.0.1")
			return func() int16 { return recv(h.t, ch).ErrorCode }
		},
		settle: func(t *testing.T, h *harness, member string) {
			if code := h.shHeartbeat("g", &smember{id: member, topics: []string{"t"}}).ErrorCode; code != 0 {
				t.Fatalf("share join: error %d", code)
			}
		},
		wantAfterSettle: "share Stable with 1 members, offsets map[]",
	}} {
		t.Run(tc.kind, func(t *testing.T) {
			h, ft := newConsumerHarness(t, nil)
			ft.set("t", 2)
			if code := tc.join(h, "m1"); code != 0 {
				t.Fatalf("join and leave: error %d", code)
			}
			release := h.holdWriter()
			del := asyncDeleteGroup(h, "g")
			join := tc.asyncJoin(h, "m2")
			release()
			if code := del(); code != 0 {
				t.Fatalf("delete: error %d", code)
			}
			if code := join(); code != kerrCoordinatorNotAvailable {
				t.Fatalf("join into the group being deleted: error %d, want COORDINATOR_NOT_AVAILABLE (%d)", code, kerrCoordinatorNotAvailable)
			}
			tc.settle(t, h, "m2")
			answered := h.groupView("g")
			h.start()
			if reloaded := h.groupView("g"); answered != tc.wantAfterSettle || reloaded != tc.wantAfterSettle {
				t.Fatalf("group once answered: %s\nafter a reload: %s\nwant: %s", answered, reloaded, tc.wantAfterSettle)
			}
		})
	}
}
