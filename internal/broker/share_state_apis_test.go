package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/share"
)

// shareStateClient sends the share coordinator's requests to a broker's handlers, one
// share partition each, and returns that partition's answer.
type shareStateClient struct {
	t       *testing.T
	b       *Broker
	group   string
	topicID [16]byte
}

type stateBatch = kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch

func batch(first, last int64, state int8, count int16) stateBatch {
	return stateBatch{FirstOffset: first, LastOffset: last, DeliveryState: state, DeliveryCount: count}
}

func (c shareStateClient) write(partition, stateEpoch, leaderEpoch int32, start int64, batches ...stateBatch) int16 {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = c.group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = c.topicID
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.StateBatches = partition, stateEpoch, leaderEpoch, start, batches
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call[*kmsg.WriteShareGroupStateResponse](c.t, c.b, req).Topics[0].Partitions[0].ErrorCode
}

func (c shareStateClient) read(partition, leaderEpoch int32) kmsg.ReadShareGroupStateResponseTopicPartition {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = c.group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = c.topicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = partition, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call[*kmsg.ReadShareGroupStateResponse](c.t, c.b, req).Topics[0].Partitions[0]
}

func (c shareStateClient) initialize(partition, stateEpoch int32, start int64) int16 {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = c.group
	rt := kmsg.NewInitializeShareGroupStateRequestTopic()
	rt.TopicID = c.topicID
	rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.StartOffset = partition, stateEpoch, start
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call[*kmsg.InitializeShareGroupStateResponse](c.t, c.b, req).Topics[0].Partitions[0].ErrorCode
}

func (c shareStateClient) delete(partition int32) int16 {
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = c.group
	rt := kmsg.NewDeleteShareGroupStateRequestTopic()
	rt.TopicID = c.topicID
	rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	rp.Partition = partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call[*kmsg.DeleteShareGroupStateResponse](c.t, c.b, req).Topics[0].Partitions[0].ErrorCode
}

func (c shareStateClient) summary(partition, leaderEpoch int32) kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = c.group
	rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	rt.TopicID = c.topicID
	rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = partition, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call[*kmsg.ReadShareGroupStateSummaryResponse](c.t, c.b, req).Topics[0].Partitions[0]
}

// state renders a read answer as "start/epoch: batches".
func state(p kmsg.ReadShareGroupStateResponseTopicPartition) string {
	s := fmt.Sprintf("%d/%d:", p.StartOffset, p.StateEpoch)
	for _, b := range p.StateBatches {
		s += fmt.Sprintf(" [%d-%d %d×%d]", b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount)
	}
	return s
}

// TestShareCoordinatorAPIs drives the share coordinator's five requests on one node
// (which leads every __share_group_state partition): state batches laid over the
// stored ones, leader-epoch and state-epoch fencing, initialization, deletion, the
// summary, request validation, and the state read back from the log once the
// coordinator's memory is gone.
func TestShareCoordinatorAPIs(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "shared", 2)
	tp, _ := b.image().Topic("shared")
	c := shareStateClient{t: t, b: b, group: "g", topicID: tp.ID}
	const avail, acked, archived = 0, 2, 4
	expect := func(what string, got, want int16) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	expectState := func(what string, p kmsg.ReadShareGroupStateResponseTopicPartition, want string) {
		t.Helper()
		if p.ErrorCode != 0 || state(p) != want {
			t.Fatalf("%s: %v %q, want %q", what, kerr.ErrorForCode(p.ErrorCode), state(p), want)
		}
	}

	expectState("no state yet", c.read(0, 0), "-1/0:")
	expect("first write", c.write(0, 0, 3, 10, batch(10, 14, acked, 1), batch(15, 19, avail, 1)), 0)
	expectState("read back", c.read(0, 3), "10/0: [10-14 2×1] [15-19 0×1]")
	expect("write of an older leader epoch", c.write(0, 0, 2, 12), kerr.FencedLeaderEpoch.Code)
	expect("read of an older leader epoch", c.read(0, 2).ErrorCode, kerr.FencedLeaderEpoch.Code)
	expectState("a new leader reads", c.read(0, 5), "10/0: [10-14 2×1] [15-19 0×1]")
	expect("the deposed leader writes", c.write(0, 0, 4, 12), kerr.FencedLeaderEpoch.Code)
	expect("the new leader moves the start and acknowledges", c.write(0, 0, 5, 15, batch(15, 16, acked, 1), batch(21, 21, archived, 3)), 0)
	expectState("batches laid over the stored ones", c.read(0, 5), "15/0: [15-16 2×1] [17-19 0×1] [21-21 4×3]")
	expect("start -1 keeps the start", c.write(0, 0, 5, -1, batch(17, 17, acked, 2)), 0)
	expectState("one offset changed", c.read(0, 5), "15/0: [15-16 2×1] [17-17 2×2] [18-19 0×1] [21-21 4×3]")

	sum := c.summary(0, -1)
	if sum.ErrorCode != 0 || sum.StartOffset != 15 || sum.StateEpoch != 0 || sum.LeaderEpoch != 5 || sum.DeliveryCompleteCount != 4 {
		t.Fatalf("summary: %+v", sum)
	}
	expect("summary of an older leader epoch", c.summary(0, 1).ErrorCode, kerr.FencedLeaderEpoch.Code)
	if s := c.summary(1, -1); s.ErrorCode != 0 || s.StartOffset != -1 {
		t.Fatalf("summary without state: %+v", s)
	}

	expect("initialize under state epoch 1", c.initialize(0, 1, 100), 0)
	expectState("initialized afresh", c.read(0, 5), "100/1:")
	expect("write of the older state epoch", c.write(0, 0, 5, 120), kerr.FencedStateEpoch.Code)
	expect("initialize under the older state epoch", c.initialize(0, 0, 7), kerr.FencedStateEpoch.Code)
	expect("write of the new state epoch", c.write(0, 1, 5, 101, batch(101, 102, acked, 1)), 0)

	// Another share partition of the same group and one of another group.
	expect("write partition 1", c.write(1, 0, 0, 0, batch(0, 4, avail, 2)), 0)
	other := c
	other.group = "h"
	expect("write another group", other.write(0, 0, 0, 7), 0)

	// The state is read back from the log as it was answered: merged snapshots and
	// initializations replayed.
	want := map[string]string{}
	for _, k := range []struct {
		c shareStateClient
		p int32
	}{{c, 0}, {c, 1}, {other, 0}} {
		want[k.c.group+fmt.Sprint(k.p)] = state(k.c.read(k.p, -1))
	}
	forgetShareState(b)
	for _, k := range []struct {
		c shareStateClient
		p int32
	}{{c, 0}, {c, 1}, {other, 0}} {
		expectState("after reloading "+k.c.group+fmt.Sprint(k.p), k.c.read(k.p, -1), want[k.c.group+fmt.Sprint(k.p)])
	}
	expect("a reloaded leader epoch still fences", c.write(0, 1, 4, 101), kerr.FencedLeaderEpoch.Code)

	// A deleted state has no start offset and the next state epoch, so that a leader
	// still holding it is fenced; its leader epoch still fences deposed leaders.
	expect("delete", c.delete(0), 0)
	expectState("deleted", c.read(0, 5), "-1/2:")
	expect("write of the deleted state's epoch", c.write(0, 1, 5, 101, batch(101, 101, acked, 1)), kerr.FencedStateEpoch.Code)
	expect("read of an older leader epoch after the delete", c.read(0, 4).ErrorCode, kerr.FencedLeaderEpoch.Code)
	if s := c.summary(0, -1); s.ErrorCode != 0 || s.StartOffset != -1 || s.StateEpoch != 2 {
		t.Fatalf("summary of a deleted state: %+v", s)
	}
	expect("delete again", c.delete(0), 0)
	expectState("deleted again", c.read(0, 5), "-1/3:")
	forgetShareState(b)
	expectState("deleted, after reloading", c.read(0, 5), "-1/3:")
	expect("write of the new state epoch after the delete", c.write(0, 3, 5, 200, batch(200, 200, acked, 1)), 0)
	expectState("written afresh", c.read(0, 5), "200/3: [200-200 2×1]")
	expectState("the other group's state is kept", other.read(0, -1), "7/0:")

	// Requests the coordinator refuses.
	unknown := c
	unknown.topicID = [16]byte{1}
	expect("unknown topic", unknown.write(0, 0, 0, 0), kerr.UnknownTopicOrPartition.Code)
	expect("unknown partition", c.read(2, 0).ErrorCode, kerr.UnknownTopicOrPartition.Code)
	expect("negative partition", c.initialize(-1, 0, 0), kerr.InvalidRequest.Code)
	noGroup := c
	noGroup.group = ""
	expect("empty group", noGroup.read(0, 0).ErrorCode, kerr.InvalidRequest.Code)
	expect("batch ending before it starts", c.write(1, 0, 0, 0, batch(5, 4, avail, 1)), kerr.InvalidRequest.Code)
	expect("unknown delivery state", c.write(1, 0, 0, 0, batch(4, 4, 1, 1)), kerr.InvalidRequest.Code)
	expect("a batch ending at the largest int64", c.write(1, 0, 0, 0, batch(5, math.MaxInt64, acked, 1)), kerr.InvalidRequest.Code)
	expect("a window of 2^40 offsets", c.write(1, 0, 0, 0, batch(0, 1<<40, acked, 1)), kerr.InvalidRequest.Code)
	expect("a window of 2^20 offsets", c.write(1, 0, 0, 0, batch(1<<20-1, 1<<20-1, avail, 1)), 0)
	expectState("the refused write changed nothing", c.read(1, -1), "0/0: [0-4 0×2] [1048575-1048575 0×1]")
	expect("delete of a deleted topic's state", unknown.delete(0), 0)
}

// forgetShareState drops the coordinator's memory, as a new leader starts without it.
func forgetShareState(b *Broker) {
	b.shareState.mu.Lock()
	clear(b.shareState.mu.parts)
	b.shareState.mu.Unlock()
}

func TestShareCoordinatorErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err               error
		coordinator, user int16
	}{
		{nil, 0, 0},
		{share.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch.Code, kerr.NotLeaderForPartition.Code},
		{fmt.Errorf("x: %w", share.ErrFencedStateEpoch), kerr.FencedStateEpoch.Code, kerr.FencedStateEpoch.Code},
		{fmt.Errorf("x: %w", errShareStateNotLocal), kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code},
		{group.ErrNotCoordinator, kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code},
		{replica.ErrNotEnoughReplicas, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorNotAvailable.Code},
		{context.DeadlineExceeded, kerr.RequestTimedOut.Code, kerr.CoordinatorNotAvailable.Code},
		{fmt.Errorf("%w: %w", errShareCoordinatorUnavailable, kerr.NotCoordinator), kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code},
		{replica.ErrNotLeader, kerr.NotCoordinator.Code, kerr.NotLeaderForPartition.Code},
	} {
		if got := shareCoordinatorErrorCode(tc.err); got != tc.coordinator {
			t.Errorf("%v: coordinator answers %v, want %v", tc.err, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.coordinator))
		}
		if got := shareErrorCode(tc.err); got != tc.user {
			t.Errorf("%v: share fetch answers %v, want %v", tc.err, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.user))
		}
	}
	// What a remote coordinator answers comes back as the same errors.
	for code, want := range map[int16]error{
		0:                                   nil,
		kerr.FencedLeaderEpoch.Code:         share.ErrFencedLeaderEpoch,
		kerr.FencedStateEpoch.Code:          share.ErrFencedStateEpoch,
		kerr.NotCoordinator.Code:            errShareCoordinatorUnavailable,
		kerr.CoordinatorLoadInProgress.Code: errShareCoordinatorUnavailable,
		kerr.CoordinatorNotAvailable.Code:   errShareCoordinatorUnavailable,
		kerr.UnknownTopicOrPartition.Code:   kerr.UnknownTopicOrPartition,
		kerr.RequestTimedOut.Code:           kerr.RequestTimedOut,
	} {
		if err := shareCoordinatorError(code); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("code %d: %v, want %v", code, err, want)
		}
	}
}

// TestShareStateRequestsAnswerLater: the share coordinator's requests are answered
// from a goroutine of their own, so a connection's next requests are read while one
// waits (for its write to replicate, or here for its share partition's lock). A
// broker's share partition leaders send all their state requests to another broker on
// one connection, which reads one request at a time: answered in Handle, they queued
// behind each other's commits. Handle must return while the operation cannot go on,
// and the answer come once it can.
func TestShareStateRequestsAnswerLater(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "shared", 1)
	tp, _ := b.image().Topic("shared")
	c := shareStateClient{t: t, b: b, group: "g", topicID: tp.ID}
	if code := c.initialize(0, 1, 0); code != 0 { // the state partition exists and is loaded
		t.Fatalf("initialize: %v", kerr.ErrorForCode(code))
	}
	held := b.shareState.keyLock(share.Key{Group: "g", TopicID: tp.ID, Partition: 0})
	held.Lock()
	unlocked := false
	defer func() {
		if !unlocked {
			held.Unlock()
		}
	}()

	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = "g"
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = tp.ID
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = 0, 1, 0, 5
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	returned := make(chan (<-chan protocol.Response), 1)
	go func() {
		returned <- b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
	}()
	var answer <-chan protocol.Response
	select {
	case answer = <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Handle of a WriteShareGroupState did not return while its share partition was locked")
	}
	select {
	case <-answer:
		t.Fatal("answered before the write could be made")
	default:
	}
	held.Unlock()
	unlocked = true
	select {
	case r := <-answer:
		if code := r.Body.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("write: %v", kerr.ErrorForCode(code))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer once the share partition was unlocked")
	}
	if got := c.read(0, 0); got.StartOffset != 5 {
		t.Fatalf("start after the write: %d, want 5", got.StartOffset)
	}
}

// TestShareStateRequestOfManyPartitions: the share coordinator serves the partitions
// of one request side by side — one whose share partition is held back does not keep
// the others of its request waiting — and the operations a request names for the
// same share partition in their order.
func TestShareStateRequestOfManyPartitions(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "shared", 8)
	tp, _ := b.image().Topic("shared")
	c := shareStateClient{t: t, b: b, group: "g", topicID: tp.ID}
	key := func(p int32) share.Key { return share.Key{Group: "g", TopicID: tp.ID, Partition: p} }
	// A partition whose key lock is not partition 0's (the locks are striped).
	other := int32(1)
	for b.shareState.keyLock(key(other)) == b.shareState.keyLock(key(0)) {
		other++
	}
	for _, p := range []int32{0, other} {
		if code := c.initialize(p, 1, 0); code != 0 {
			t.Fatalf("initialize %d: %v", p, kerr.ErrorForCode(code))
		}
	}

	held := b.shareState.keyLock(key(0))
	held.Lock()
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = "g"
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = tp.ID
	for _, p := range []int32{0, other} {
		rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = p, 1, 0, int64(5+p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	answer := b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
	deadline := time.Now().Add(10 * time.Second)
	for c.summary(other, -1).StartOffset != int64(5+other) {
		if time.Now().After(deadline) {
			held.Unlock()
			t.Fatalf("partition %d not written while partition 0, before it in the request, waited", other)
		}
		time.Sleep(5 * time.Millisecond)
	}
	held.Unlock()
	select {
	case r := <-answer:
		for i, p := range r.Body.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions {
			if p.Partition != rt.Partitions[i].Partition || p.ErrorCode != 0 {
				t.Fatalf("answer %d: partition %d, %v; want partition %d written", i, p.Partition, kerr.ErrorForCode(p.ErrorCode), rt.Partitions[i].Partition)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer once partition 0 was free")
	}
	if got := c.read(0, 0).StartOffset; got != 5 {
		t.Fatalf("partition 0 starts at %d after the write, want 5", got)
	}

	// Partition 0 named twice: initialized at state epoch 2, then 3 (in the other
	// order the second would be fenced).
	init := kmsg.NewPtrInitializeShareGroupStateRequest()
	init.GroupID = "g"
	it := kmsg.NewInitializeShareGroupStateRequestTopic()
	it.TopicID = tp.ID
	for _, st := range []struct {
		p     int32
		epoch int32
		start int64
	}{{0, 2, 10}, {other, 2, 11}, {0, 3, 20}} {
		ip := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		ip.Partition, ip.StateEpoch, ip.StartOffset = st.p, st.epoch, st.start
		it.Partitions = append(it.Partitions, ip)
	}
	init.Topics = append(init.Topics, it)
	for i, p := range call[*kmsg.InitializeShareGroupStateResponse](t, b, init).Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("initialization %d (partition %d): %v", i, p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if got := c.summary(0, -1); got.StateEpoch != 3 || got.StartOffset != 20 {
		t.Fatalf("partition 0 after two initializations: state epoch %d, start %d; want 3, 20", got.StateEpoch, got.StartOffset)
	}
}
