package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

// lifecycleController is a single-node controller with brokers 1–3 registered and
// unfenced and topic "t" (3 partitions, RF 3); it returns the broker epochs.
func lifecycleController(t *testing.T) (*Controller, *clock.Fake, map[int32]int64) {
	o := testOptions(t, t.TempDir())
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	o.Clock = clk
	o.SessionTimeout = 2 * time.Second
	c := startController(t, o)
	epochs := map[int32]int64{}
	for _, id := range []int32{1, 2, 3} {
		epochs[id] = register(t, c, id)
	}
	if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "t", NumPartitions: 3, ReplicationFactor: 3}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	return c, clk, epochs
}

func heartbeat(t *testing.T, c *Controller, id int32, epoch int64, shutdown bool) HeartbeatReply {
	t.Helper()
	r, err := c.BrokerHeartbeat(ctx(t), Heartbeat{BrokerID: id, BrokerEpoch: epoch, MetadataOffset: c.Image().Offset(), WantShutdown: shutdown})
	if err != nil {
		t.Fatalf("heartbeat of %d: %v", id, err)
	}
	return r
}

// silenceBroker3 advances the clock past the session timeout while brokers 1 and 2
// heartbeat and 3 does not, and waits until 3 is fenced.
func silenceBroker3(t *testing.T, c *Controller, clk *clock.Fake, epochs map[int32]int64) {
	t.Helper()
	for range 12 {
		clk.Advance(250 * time.Millisecond)
		heartbeat(t, c, 1, epochs[1], false)
		heartbeat(t, c, 2, epochs[2], false)
	}
	waitFor(t, "broker 3 fenced", func() bool { b, _ := c.Image().Broker(3); return b.Fenced })
}

func TestSessionExpiryFencesAndMovesLeaders(t *testing.T) {
	c, clk, epochs := lifecycleController(t)
	silenceBroker3(t, c, clk, epochs)
	tp, _ := c.Image().Topic("t")
	for _, p := range tp.Partitions {
		if p.Leader == 3 || len(p.ISR) != 2 || p.LeaderEpoch < 0 {
			t.Fatalf("partition %d = %+v", p.Partition, p)
		}
	}
	// Heartbeats of the fenced incarnation keep it fenced until it has caught up;
	// it is then unfenced, but only AlterPartition brings it back into ISRs.
	r := heartbeat(t, c, 3, epochs[3], false)
	if r.IsFenced || !r.IsCaughtUp {
		t.Fatalf("reply = %+v", r)
	}
	tp, _ = c.Image().Topic("t")
	for _, p := range tp.Partitions {
		if len(p.ISR) != 2 {
			t.Fatalf("partition %d = %+v", p.Partition, p)
		}
	}
}

func TestControlledShutdown(t *testing.T) {
	c, _, epochs := lifecycleController(t)
	r := heartbeat(t, c, 2, epochs[2], true)
	if r.ShouldShutdown {
		t.Fatalf("broker 2 may not go before the others applied the moves: %+v", r)
	}
	b, _ := c.Image().Broker(2)
	if !b.InControlledShutdown || hasLeaderships(c.Image(), 2) {
		t.Fatalf("broker 2 = %+v, leads %v", b, hasLeaderships(c.Image(), 2))
	}
	heartbeat(t, c, 1, epochs[1], false)
	heartbeat(t, c, 3, epochs[3], false)
	if r := heartbeat(t, c, 2, epochs[2], true); !r.ShouldShutdown || !r.IsFenced {
		t.Fatalf("reply = %+v", r)
	}
	if b, _ := c.Image().Broker(2); !b.Fenced {
		t.Fatalf("broker 2 = %+v", b)
	}
	// A new incarnation may register at once: the previous one said goodbye.
	if _, err := c.RegisterBroker(ctx(t), Registration{NodeID: 2, IncarnationID: NewIncarnationID()}); err != nil {
		t.Fatal(err)
	}
}

// TestFencedBrokerShutsDown: a broker fenced before it asks to shut down (its session
// expired, or it was cut off) may go at once, and its repeated heartbeats asking so
// record nothing more in the metadata log.
func TestFencedBrokerShutsDown(t *testing.T) {
	c, clk, epochs := lifecycleController(t)
	silenceBroker3(t, c, clk, epochs)
	offset := c.Image().Offset()
	for range 5 {
		if r := heartbeat(t, c, 3, epochs[3], true); !r.ShouldShutdown || !r.IsFenced {
			t.Fatalf("reply = %+v", r)
		}
	}
	if got := c.Image().Offset(); got != offset {
		t.Fatalf("heartbeats of a fenced broker shutting down moved the metadata log from offset %d to %d", offset, got)
	}
	if b, _ := c.Image().Broker(3); !b.Fenced {
		t.Fatalf("broker 3 = %+v", b)
	}
}

func TestDuplicateRegistrationWhileTheOtherHeartbeats(t *testing.T) {
	c, clk, epochs := lifecycleController(t)
	heartbeat(t, c, 2, epochs[2], false)
	_, err := c.RegisterBroker(ctx(t), Registration{NodeID: 2, IncarnationID: NewIncarnationID()})
	if !errors.Is(err, ErrDuplicateBrokerRegistration) {
		t.Fatalf("err = %v", err)
	}
	clk.Advance(3 * time.Second)
	waitFor(t, "broker 2 fenced", func() bool { b, _ := c.Image().Broker(2); return b.Fenced })
	if _, err := c.RegisterBroker(ctx(t), Registration{NodeID: 2, IncarnationID: NewIncarnationID()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BrokerHeartbeat(ctx(t), Heartbeat{BrokerID: 2, BrokerEpoch: epochs[2]}); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("old epoch heartbeat: %v", err)
	}
}

// TestUnregisterBroker: an unknown id is ErrBrokerIDNotRegistered (BROKER_ID_NOT_REGISTERED);
// a fenced broker and a live one are unregistered — each leaves every ISR and
// leadership, the image no longer has it — and the live one's next heartbeat is
// STALE_BROKER_EPOCH, after which it registers again at once (its session went with
// its registration), fenced at a new epoch.
func TestUnregisterBroker(t *testing.T) {
	c, clk, epochs := lifecycleController(t)
	err := c.UnregisterBroker(ctx(t), 7)
	if !errors.Is(err, ErrBrokerIDNotRegistered) || err.Error() != "broker id not registered: broker 7 is not registered" {
		t.Fatalf("unregister 7: %v", err)
	}
	if code, _ := ErrorCode(err); code != 102 {
		t.Fatalf("unregister 7: code %d, want BROKER_ID_NOT_REGISTERED (102)", code)
	}

	silenceBroker3(t, c, clk, epochs)
	if err := c.UnregisterBroker(ctx(t), 3); err != nil {
		t.Fatalf("unregister fenced broker 3: %v", err)
	}
	if err := c.UnregisterBroker(ctx(t), 3); !errors.Is(err, ErrBrokerIDNotRegistered) {
		t.Fatalf("unregister 3 again: %v", err)
	}
	tp, _ := c.Image().Topic("t")
	led2 := 0
	for _, p := range tp.Partitions {
		if p.Leader == 2 {
			led2++
		}
	}
	if led2 == 0 {
		t.Fatalf("broker 2 leads nothing before its unregistration: %+v", tp.Partitions)
	}
	if err := c.UnregisterBroker(ctx(t), 2); err != nil {
		t.Fatalf("unregister live broker 2: %v", err)
	}
	img := c.Image()
	if got := img.Brokers(); len(got) != 1 || got[0].NodeID != 1 {
		t.Fatalf("brokers after unregistering 2 and 3: %+v", got)
	}
	tp, _ = img.Topic("t")
	for _, p := range tp.Partitions {
		if p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) || len(p.Replicas) != 3 {
			t.Fatalf("partition %d = %+v, want led by 1 with ISR [1] and its 3 replicas", p.Partition, p)
		}
	}

	if _, err := c.BrokerHeartbeat(ctx(t), Heartbeat{BrokerID: 2, BrokerEpoch: epochs[2]}); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("heartbeat of unregistered broker 2: %v", err)
	}
	epoch, err := c.RegisterBroker(ctx(t), Registration{NodeID: 2, IncarnationID: NewIncarnationID()})
	if err != nil {
		t.Fatalf("broker 2 registering again: %v", err)
	}
	if b, ok := c.Image().Broker(2); !ok || !b.Fenced || epoch <= epochs[2] || b.Epoch != epoch {
		t.Fatalf("broker 2 registered again = %+v (epoch %d, was %d)", b, epoch, epochs[2])
	}
}

func TestAlterPartitionThroughTheController(t *testing.T) {
	c, _, epochs := lifecycleController(t)
	tp, _ := c.Image().Topic("t")
	p := tp.Partitions[0]
	isr := []ISRMember{{BrokerID: p.Leader, BrokerEpoch: epochs[p.Leader]}}
	results, err := c.AlterPartition(ctx(t), p.Leader, epochs[p.Leader], []AlterPartitionItem{{
		TopicID: tp.ID, Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr,
	}})
	if err != nil || results[0].Err != nil {
		t.Fatal(err, results)
	}
	tp, _ = c.Image().Topic("t")
	if got := tp.Partitions[0]; len(got.ISR) != 1 || got.PartitionEpoch != p.PartitionEpoch+1 || results[0].State.PartitionEpoch != got.PartitionEpoch {
		t.Fatalf("partition = %+v, result %+v", got, results[0])
	}
	// The same request again names an old partition epoch.
	results, _ = c.AlterPartition(ctx(t), p.Leader, epochs[p.Leader], []AlterPartitionItem{{
		TopicID: tp.ID, Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr,
	}})
	if !errors.Is(results[0].Err, ErrInvalidUpdateVersion) {
		t.Fatalf("err = %v", results[0].Err)
	}
}

func TestManualAssignmentSkipsFencedReplicas(t *testing.T) {
	c, clk, epochs := lifecycleController(t)
	silenceBroker3(t, c, clk, epochs)
	r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "m", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {3, 1}, 1: {3}}}}, false)
	if !errors.Is(r[0].Err, ErrInvalidReplicaAssignment) {
		t.Fatalf("all replicas fenced: %v", r[0].Err)
	}
	r = c.CreateTopics(ctx(t), []CreateTopic{{Name: "m", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {3, 1}}}}, false)
	if r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	tp, _ := c.Image().Topic("m")
	if p := tp.Partitions[0]; p.Leader != 1 || len(p.ISR) != 1 {
		t.Fatalf("partition = %+v", p)
	}
	if r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "rf3", NumPartitions: 1, ReplicationFactor: 3}}, false); !errors.Is(r[0].Err, ErrInvalidReplicationFactor) {
		t.Fatalf("rf 3 with a fenced broker: %v", r[0].Err)
	}
}

func TestErrorCodesRoundTrip(t *testing.T) {
	for _, e := range errorCodes {
		code, ok := ErrorCode(fmt.Errorf("wrapped: %w", e.err))
		if !ok || code != e.code.Code {
			t.Errorf("ErrorCode(%v) = %d, %v", e.err, code, ok)
		}
		back := ErrorForCode(code, nil)
		if want, _ := ErrorCode(back); want != code {
			t.Errorf("ErrorForCode(%d) = %v", code, back)
		}
	}
	if ErrorForCode(0, nil) != nil {
		t.Error("code 0 is not an error")
	}
	msg := "details"
	if err := ErrorForCode(74, &msg); !errors.Is(err, ErrFencedLeaderEpoch) || !strings.Contains(err.Error(), msg) {
		t.Errorf("ErrorForCode(74) = %v", err)
	}
}

// A heartbeat counts from when it arrives, not from when the command goroutine gets
// to it: brokers that heartbeat while the controller is busy for longer than the
// session timeout are not fenced, and one that stayed silent is.
func TestHeartbeatsQueuedBehindLongWorkKeepTheSession(t *testing.T) {
	c, clk, epochs := lifecycleController(t)
	release := make(chan struct{})
	busy := make(chan struct{})
	go func() {
		_, _ = run(context.Background(), c, func(context.Context) (struct{}, error) {
			close(busy)
			<-release
			return struct{}{}, nil
		})
	}()
	<-busy
	for range 12 { // 3 s in all, past the 2 s session timeout
		clk.Advance(250 * time.Millisecond)
		for _, id := range []int32{1, 2} {
			hctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			_, err := c.BrokerHeartbeat(hctx, Heartbeat{BrokerID: id, BrokerEpoch: epochs[id], MetadataOffset: c.Image().Offset()})
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("heartbeat of %d while the controller is busy: %v, want it to wait", id, err)
			}
		}
	}
	close(release)
	if _, err := run(ctx(t), c, func(context.Context) (struct{}, error) { c.maintain(); return struct{}{}, nil }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 2, 3} {
		b, _ := c.Image().Broker(metadata.NodeID(id))
		if want := id == 3; b.Fenced != want {
			t.Errorf("broker %d fenced = %v, want %v", id, b.Fenced, want)
		}
	}
}
