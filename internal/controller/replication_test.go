package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

var testTopicID = metadata.TopicID{7}

// brokerStates describes brokers 1, 2, … by a letter each: a(ctive), f(enced),
// s(hutting down).
func brokerRecords(states string) []metadata.Record {
	var recs []metadata.Record
	for i, s := range states {
		id := metadata.NodeID(i + 1)
		recs = append(recs, metadata.RegisterBrokerRecord{
			NodeID: id, Epoch: 10 + int64(i), IncarnationID: fmt.Sprint(i),
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9000 + int32(i)}},
			Fenced:    s == 'f', InControlledShutdown: s == 's',
		})
	}
	return recs
}

// testImage is brokers plus topic "t" whose partitions are given.
func testImage(t *testing.T, brokers string, parts ...metadata.PartitionRecord) *metadata.Image {
	t.Helper()
	recs := append(brokerRecords(brokers), metadata.TopicRecord{Name: "t", ID: testTopicID})
	for i, p := range parts {
		p.Topic, p.Partition = testTopicID, int32(i)
		recs = append(recs, p)
	}
	img, err := metadata.Apply(metadata.EmptyImage(), 1, recs)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func applyAll(t *testing.T, img *metadata.Image, recs []metadata.Record) *metadata.Image {
	t.Helper()
	if len(recs) == 0 {
		return img
	}
	next, err := metadata.Apply(img, img.Offset()+1, recs)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func partition0(img *metadata.Image) metadata.Partition {
	t, _ := img.Topic("t")
	return t.Partitions[0]
}

func never(*metadata.Topic) bool  { return false }
func always(*metadata.Topic) bool { return true }

// describe prints the fields a table compares.
func describe(p metadata.Partition) string {
	s := fmt.Sprintf("leader=%d isr=%v replicas=%v epochs=%d/%d", p.Leader, p.ISR, p.Replicas, p.LeaderEpoch, p.PartitionEpoch)
	if p.Reassigning() {
		s += fmt.Sprintf(" adding=%v removing=%v", p.AddingReplicas, p.RemovingReplicas)
	}
	if p.LeaderRecoveryState == metadata.Recovering {
		s += " recovering"
	}
	if len(p.OfflineReplicas) > 0 {
		s += fmt.Sprintf(" offline=%v", p.OfflineReplicas)
	}
	return s
}

func TestBrokerEventsMovePartitions(t *testing.T) {
	rf3 := metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}
	tests := []struct {
		name    string
		brokers string
		part    metadata.PartitionRecord
		event   func(img *metadata.Image) ([]metadata.Record, []electionEvent)
		want    string
		unclean bool // the event must report an unclean election
	}{
		{
			name: "fencing the leader elects the next ISR member and shrinks the ISR", brokers: "aaa", part: rf3,
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) {
				return removeBrokerUpdates(img, 1, never)
			},
			want: "leader=2 isr=[2 3] replicas=[1 2 3] epochs=1/1",
		},
		{
			name: "fencing a follower only shrinks the ISR; the leader epoch stays", brokers: "aaa", part: rf3,
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) {
				return removeBrokerUpdates(img, 3, never)
			},
			want: "leader=1 isr=[1 2] replicas=[1 2 3] epochs=0/1",
		},
		{
			name: "the elected leader skips fenced ISR members", brokers: "afa",
			part: rf3,
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) {
				return removeBrokerUpdates(img, 1, never)
			},
			want: "leader=3 isr=[2 3] replicas=[1 2 3] epochs=1/1",
		},
		{
			name: "the last ISR member stays: the partition goes offline (KIP-841)", brokers: "aaa",
			part: metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1},
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) {
				return removeBrokerUpdates(img, 1, never)
			},
			want: "leader=-1 isr=[1] replicas=[1 2 3] epochs=1/1",
		},
		{
			name: "unclean election takes a live replica outside the ISR", brokers: "aaa",
			part: metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1},
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) {
				return removeBrokerUpdates(img, 1, always)
			},
			want:    "leader=2 isr=[2] replicas=[1 2 3] epochs=1/1 recovering",
			unclean: true,
		},
		{
			name: "unfencing the last ISR member brings the partition back", brokers: "faa",
			part:  metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: -1},
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) { return unfenceUpdates(img, 1, never) },
			want:  "leader=1 isr=[1] replicas=[1 2 3] epochs=1/1",
		},
		{
			name: "unfencing a broker outside the ISR leaves the partition offline", brokers: "ffa",
			part:  metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: -1},
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) { return unfenceUpdates(img, 2, never) },
			want:  "leader=-1 isr=[1] replicas=[1 2 3] epochs=0/0",
		},
		{
			name: "the periodic unclean election runs only where the topic allows it", brokers: "faa",
			part:  metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: -1},
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) { return uncleanUpdates(img, never) },
			want:  "leader=-1 isr=[1] replicas=[1 2 3] epochs=0/0",
		},
		{
			name: "controlled shutdown moves the leadership like fencing", brokers: "aaa", part: rf3,
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) {
				b, _ := img.Broker(1)
				return transitionUpdates(img, b, stateControlledShutdown, never)
			},
			want: "leader=2 isr=[2 3] replicas=[1 2 3] epochs=1/1",
		},
		{
			name: "preferred election returns the leadership to the first replica", brokers: "aaa",
			part: metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2},
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) {
				recs, events, _ := electLeadersUpdates(img, ElectPreferred, map[string][]int32{"t": {0}})
				return recs, events
			},
			want: "leader=1 isr=[1 2 3] replicas=[1 2 3] epochs=1/1",
		},
		{
			name: "leader rebalance elects the preferred replica when its broker is imbalanced", brokers: "aaa",
			part:  metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 3},
			event: func(img *metadata.Image) ([]metadata.Record, []electionEvent) { return imbalancedUpdates(img, 0.1) },
			want:  "leader=1 isr=[1 2 3] replicas=[1 2 3] epochs=1/1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := testImage(t, tt.brokers, tt.part)
			recs, events := tt.event(img)
			got := partition0(applyAll(t, img, recs))
			if d := describe(got); d != tt.want {
				t.Fatalf("got  %s\nwant %s", d, tt.want)
			}
			unclean := slices.ContainsFunc(events, func(e electionEvent) bool { return e.Unclean })
			if unclean != tt.unclean {
				t.Fatalf("unclean reported = %v, events %+v", unclean, events)
			}
		})
	}
}

func TestFencingRecordsAndStates(t *testing.T) {
	img := testImage(t, "aaa", metadata.PartitionRecord{Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2})
	b, _ := img.Broker(2)
	recs, _ := transitionUpdates(img, b, stateFenced, never)
	img = applyAll(t, img, recs)
	if b, _ := img.Broker(2); !b.Fenced || b.Active() {
		t.Fatalf("broker 2 = %+v", b)
	}
	if d := describe(partition0(img)); d != "leader=3 isr=[3] replicas=[2 3] epochs=1/1" {
		t.Fatal(d)
	}
	b, _ = img.Broker(2)
	recs, _ = transitionUpdates(img, b, stateUnfenced, never)
	img = applyAll(t, img, recs)
	if b, _ := img.Broker(2); b.Fenced {
		t.Fatalf("broker 2 still fenced")
	}
	// Unfenced, but not back in the ISR: only the leader's AlterPartition adds it.
	if d := describe(partition0(img)); d != "leader=3 isr=[3] replicas=[2 3] epochs=1/1" {
		t.Fatal(d)
	}
}

// TestUnregisterUpdates: unregistering a broker, live or fenced, takes it out of every
// ISR but where it is the last member (KIP-841, as fencing does), moves its
// leaderships to other in-sync replicas, leaves the partitions it only holds a replica
// of alone, and ends with the unregistration itself; an unknown id is
// ErrBrokerIDNotRegistered.
func TestUnregisterUpdates(t *testing.T) {
	parts := []metadata.PartitionRecord{
		{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}, // led: the leadership moves
		{Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2},       // follower: leaves the ISR
		{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},          // last ISR member: stays, no leader
		{Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2},          // out of the ISR already: unchanged
		{Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2},       // not a replica: unchanged
		{Replicas: []int32{4}, ISR: []int32{4}, Leader: metadata.NoLeader},
	}
	for _, tc := range []struct {
		name    string
		brokers string
		id      int32
		want    []string
	}{
		{"live broker", "aaaf", 1, []string{
			"leader=2 isr=[2 3] replicas=[1 2 3] epochs=1/1",
			"leader=2 isr=[2] replicas=[2 1] epochs=0/1",
			"leader=-1 isr=[1] replicas=[1 2] epochs=1/1",
			"leader=2 isr=[2] replicas=[1 2] epochs=0/0",
			"leader=2 isr=[2 3] replicas=[2 3] epochs=0/0",
			"leader=-1 isr=[4] replicas=[4] epochs=0/0",
		}},
		{"fenced broker, the last ISR member of a partition", "aaaf", 4, []string{
			"leader=1 isr=[1 2 3] replicas=[1 2 3] epochs=0/0",
			"leader=2 isr=[2 1] replicas=[2 1] epochs=0/0",
			"leader=1 isr=[1] replicas=[1 2] epochs=0/0",
			"leader=2 isr=[2] replicas=[1 2] epochs=0/0",
			"leader=2 isr=[2 3] replicas=[2 3] epochs=0/0",
			"leader=-1 isr=[4] replicas=[4] epochs=0/0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := testImage(t, tc.brokers, parts...)
			before, _ := img.Broker(metadata.NodeID(tc.id))
			recs, _, err := unregisterUpdates(img, tc.id, never)
			if err != nil {
				t.Fatal(err)
			}
			if last, ok := recs[len(recs)-1].(metadata.UnregisterBrokerRecord); !ok || last != (metadata.UnregisterBrokerRecord{NodeID: before.NodeID, Epoch: before.Epoch}) {
				t.Fatalf("last record = %#v, want the unregistration of broker %d at epoch %d", recs[len(recs)-1], tc.id, before.Epoch)
			}
			img = applyAll(t, img, recs)
			if b, ok := img.Broker(metadata.NodeID(tc.id)); ok {
				t.Fatalf("broker %d still registered: %+v", tc.id, b)
			}
			tp, _ := img.Topic("t")
			for i, p := range tp.Partitions {
				if d := describe(p); d != tc.want[i] {
					t.Errorf("partition %d: %s, want %s", i, d, tc.want[i])
				}
			}
			if _, _, err := unregisterUpdates(img, tc.id, never); !errors.Is(err, ErrBrokerIDNotRegistered) {
				t.Fatalf("second unregistration: %v, want ErrBrokerIDNotRegistered", err)
			}
		})
	}
}

// TestOfflineReplicas: a broker whose replicas of some partitions went offline (their
// log directory failed) leaves those partitions' ISRs and leaderships and keeps the
// others; it stays the last ISR member where no one else is (KIP-841); partitions it
// has no part in, or that it no longer is in the ISR of, do not change.
func TestOfflineReplicas(t *testing.T) {
	img := testImage(t, "aaa",
		metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}, // led, offline
		metadata.PartitionRecord{Replicas: []int32{2, 1, 3}, ISR: []int32{2, 1, 3}, Leader: 2}, // followed, offline
		metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}, // led, online
		metadata.PartitionRecord{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},          // last ISR member
		metadata.PartitionRecord{Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2},       // not a replica
	)
	offline := []PartitionRef{{testTopicID, 0}, {testTopicID, 1}, {testTopicID, 3}, {testTopicID, 4}, {metadata.TopicID{9}, 0}}
	recs, events := offlineReplicaUpdates(img, 1, offline, never)
	img = applyAll(t, img, recs)
	tp, _ := img.Topic("t")
	want := []string{
		"leader=2 isr=[2 3] replicas=[1 2 3] epochs=1/1 offline=[1]",
		"leader=2 isr=[2 3] replicas=[2 1 3] epochs=0/1 offline=[1]",
		"leader=1 isr=[1 2 3] replicas=[1 2 3] epochs=0/0",
		"leader=-1 isr=[1] replicas=[1 2] epochs=1/1 offline=[1]",
		"leader=2 isr=[2 3] replicas=[2 3] epochs=0/0",
	}
	for i, w := range want {
		if d := describe(tp.Partitions[i]); d != w {
			t.Errorf("partition %d: %s, want %s", i, d, w)
		}
	}
	if len(events) != 2 || events[0].From != 1 || events[0].To != 2 || events[1].To != metadata.NoLeader {
		t.Errorf("leadership changes %+v, want partition 0 to broker 2 and partition 3 to none", events)
	}
	// Reported again (the broker's next heartbeat): nothing more changes.
	if recs, _ := offlineReplicaUpdates(img, 1, offline, never); len(recs) != 0 {
		t.Errorf("a repeated report changed %d partitions", len(recs))
	}

	// Broker 1 stays active, but its offline replicas may not lead: not when another
	// broker unfences (which elects leaders for leaderless partitions), not in a
	// preferred election, not by joining an ISR again.
	if recs, _ := unfenceUpdates(img, 3, never); len(recs) != 0 {
		t.Errorf("an unfence elected %d leaders, want none (the last ISR member's replica is offline)", len(recs))
	}
	if recs, _, _ := electLeadersUpdates(img, ElectPreferred, nil); len(recs) != 0 {
		t.Errorf("a preferred election changed %d partitions, want none", len(recs))
	}
	p0 := tp.Partitions[0]
	_, results, err := alterPartitionUpdates(img, 2, 11, []AlterPartitionItem{{TopicID: testTopicID, Partition: 0,
		LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, NewISR: []ISRMember{{BrokerID: 2, BrokerEpoch: -1}, {BrokerID: 3, BrokerEpoch: -1}, {BrokerID: 1, BrokerEpoch: -1}}}}, never)
	if err != nil || !errors.Is(results[0].Err, ErrIneligibleReplica) {
		t.Errorf("an ISR taking back an offline replica: %v, %+v; want INELIGIBLE_REPLICA", err, results)
	}
	// Where the topic allows unclean elections, an online replica outside the ISR
	// takes the leaderless partition.
	recs, _ = uncleanUpdates(img, always)
	if unclean := applyAll(t, img, recs); describe(mustTopic(t, unclean).Partitions[3]) != "leader=2 isr=[2] replicas=[1 2] epochs=2/2 recovering offline=[1]" {
		t.Errorf("unclean election: %s", describe(mustTopic(t, unclean).Partitions[3]))
	}

	// The same process registering again keeps its replicas offline; a new process
	// (another incarnation) starts with none, and the partition it alone has in sync
	// can have it back as leader.
	again := applyAll(t, img, brokerRecords("a")) // broker 1, same incarnation
	if d := describe(mustTopic(t, again).Partitions[3]); d != "leader=-1 isr=[1] replicas=[1 2] epochs=1/1 offline=[1]" {
		t.Errorf("after the same incarnation registered again: %s", d)
	}
	restarted := brokerRecords("a")[0].(metadata.RegisterBrokerRecord)
	restarted.Epoch, restarted.IncarnationID = 20, "restarted"
	img = applyAll(t, img, []metadata.Record{restarted})
	for i, p := range mustTopic(t, img).Partitions {
		if len(p.OfflineReplicas) != 0 {
			t.Errorf("partition %d after a new incarnation registered: %s", i, describe(p))
		}
	}
	recs, _ = unfenceUpdates(img, 1, never)
	if d := describe(mustTopic(t, applyAll(t, img, recs)).Partitions[3]); d != "leader=1 isr=[1] replicas=[1 2] epochs=2/2" {
		t.Errorf("after the new incarnation unfenced: %s", d)
	}
}

func mustTopic(t *testing.T, img *metadata.Image) *metadata.Topic {
	t.Helper()
	tp, ok := img.Topic("t")
	if !ok {
		t.Fatal("topic t is gone")
	}
	return tp
}

func TestNextBrokerState(t *testing.T) {
	tests := []struct {
		cur      brokerState
		hb       Heartbeat
		leads    bool
		shutdown int64 // offset of the controlled shutdown
		lowest   int64 // lowest offset of the active brokers
		want     brokerState
	}{
		{cur: stateFenced, hb: Heartbeat{MetadataOffset: 4}, want: stateFenced},
		{cur: stateFenced, hb: Heartbeat{MetadataOffset: 5}, want: stateUnfenced},
		{cur: stateFenced, hb: Heartbeat{MetadataOffset: 9, WantFence: true}, want: stateFenced},
		{cur: stateFenced, hb: Heartbeat{WantShutdown: true}, want: stateShutdownNow},
		{cur: stateUnfenced, hb: Heartbeat{MetadataOffset: 9}, want: stateUnfenced},
		{cur: stateUnfenced, hb: Heartbeat{WantFence: true}, want: stateFenced},
		{cur: stateUnfenced, hb: Heartbeat{WantShutdown: true}, leads: true, want: stateControlledShutdown},
		{cur: stateUnfenced, hb: Heartbeat{WantShutdown: true}, want: stateShutdownNow},
		{cur: stateControlledShutdown, hb: Heartbeat{WantShutdown: true}, leads: true, want: stateControlledShutdown},
		{cur: stateControlledShutdown, hb: Heartbeat{WantShutdown: true}, shutdown: 20, lowest: 19, want: stateControlledShutdown},
		{cur: stateControlledShutdown, hb: Heartbeat{WantShutdown: true}, shutdown: 20, lowest: 20, want: stateShutdownNow},
	}
	for _, tt := range tests {
		if got := nextBrokerState(tt.cur, tt.hb, 5, tt.leads, tt.shutdown, tt.lowest); got != tt.want {
			t.Errorf("%v + %+v (leads %v, shutdown %d, lowest %d) = %v, want %v", tt.cur, tt.hb, tt.leads, tt.shutdown, tt.lowest, got, tt.want)
		}
	}
}

func TestRegisterUpdates(t *testing.T) {
	img := testImage(t, "aa", metadata.PartitionRecord{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	img = applyAll(t, img, []metadata.Record{metadata.ClusterRecord{ClusterID: "c1"}})
	reg := Registration{NodeID: 1, ClusterID: "c1", IncarnationID: "new", Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}}

	if _, _, _, err := registerUpdates(img, reg, true, 100, never); !errors.Is(err, ErrDuplicateBrokerRegistration) {
		t.Fatalf("live previous incarnation: err = %v", err)
	}
	other := reg
	other.ClusterID = "c2"
	if _, _, _, err := registerUpdates(img, other, false, 100, never); !errors.Is(err, ErrInconsistentClusterID) {
		t.Fatalf("other cluster: err = %v", err)
	}
	recs, epoch, _, err := registerUpdates(img, reg, false, 100, never)
	if err != nil || epoch != 100 {
		t.Fatalf("epoch %d, err %v", epoch, err)
	}
	img = applyAll(t, img, recs)
	b, _ := img.Broker(1)
	if !b.Fenced || b.Epoch != 100 || b.IncarnationID != "new" {
		t.Fatalf("broker = %+v", b)
	}
	// The previous incarnation left the ISR and the leadership.
	if d := describe(partition0(img)); d != "leader=2 isr=[2] replicas=[1 2] epochs=1/1" {
		t.Fatal(d)
	}
	// The same incarnation again: same epoch, nothing to write.
	recs, epoch, _, err = registerUpdates(img, reg, true, 200, never)
	if err != nil || epoch != 100 || len(recs) != 0 {
		t.Fatalf("repeat: recs %v epoch %d err %v", recs, epoch, err)
	}
}

func TestAlterPartitionValidation(t *testing.T) {
	base := metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 8}
	isr := func(ids ...int32) []ISRMember {
		out := make([]ISRMember, len(ids))
		for i, id := range ids {
			out[i] = ISRMember{BrokerID: id, BrokerEpoch: -1}
		}
		return out
	}
	item := func(f func(*AlterPartitionItem)) AlterPartitionItem {
		it := AlterPartitionItem{TopicID: testTopicID, Partition: 0, LeaderEpoch: 5, PartitionEpoch: 8, NewISR: isr(1, 2, 3)}
		if f != nil {
			f(&it)
		}
		return it
	}
	tests := []struct {
		name    string
		brokers string
		broker  int32
		item    AlterPartitionItem
		wantErr error
		want    string
	}{
		{name: "expand", brokers: "aaa", broker: 1, item: item(nil), want: "leader=1 isr=[1 2 3] replicas=[1 2 3] epochs=5/9"},
		{name: "shrink", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.NewISR = isr(1) }), want: "leader=1 isr=[1] replicas=[1 2 3] epochs=5/9"},
		{name: "old leader epoch", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.LeaderEpoch = 4 }), wantErr: ErrFencedLeaderEpoch},
		{name: "newer leader epoch", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.LeaderEpoch = 6 }), wantErr: ErrNotController},
		{name: "old partition epoch", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.PartitionEpoch = 7 }), wantErr: ErrInvalidUpdateVersion},
		{name: "not the leader", brokers: "aaa", broker: 2, item: item(nil), wantErr: ErrInvalidRequest},
		{name: "not a replica", brokers: "aaaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.NewISR = isr(1, 4) }), wantErr: ErrInvalidRequest},
		{name: "without the leader", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.NewISR = isr(2, 3) }), wantErr: ErrInvalidRequest},
		{name: "fenced member (KIP-841)", brokers: "aaf", broker: 1, item: item(nil), wantErr: ErrIneligibleReplica},
		{name: "shutting-down member", brokers: "aas", broker: 1, item: item(nil), wantErr: ErrIneligibleReplica},
		{name: "stale member epoch (KIP-903)", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.NewISR[2].BrokerEpoch = 3 }), wantErr: ErrIneligibleReplica},
		{name: "matching member epoch", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.NewISR[2].BrokerEpoch = 12 }), want: "leader=1 isr=[1 2 3] replicas=[1 2 3] epochs=5/9"},
		{name: "unknown topic id", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.TopicID = metadata.TopicID{9} }), wantErr: ErrUnknownTopicID},
		{name: "unknown partition", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.Partition = 3 }), wantErr: ErrUnknownTopic},
		{name: "by name (v0-v1)", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.TopicID, i.Topic = metadata.TopicID{}, "t" }), want: "leader=1 isr=[1 2 3] replicas=[1 2 3] epochs=5/9"},
		{name: "recovering with an ISR of two", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.LeaderRecoveryState = metadata.Recovering }), wantErr: ErrInvalidRequest},
		{name: "recovered back to recovering", brokers: "aaa", broker: 1, item: item(func(i *AlterPartitionItem) { i.NewISR, i.LeaderRecoveryState = isr(1), metadata.Recovering }), wantErr: ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := testImage(t, tt.brokers, base)
			recs, results, err := alterPartitionUpdates(img, tt.broker, 10+int64(tt.broker)-1, []AlterPartitionItem{tt.item}, never)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != nil {
				if !errors.Is(results[0].Err, tt.wantErr) || len(recs) != 0 {
					t.Fatalf("err = %v, want %v (records %v)", results[0].Err, tt.wantErr, recs)
				}
				return
			}
			if results[0].Err != nil {
				t.Fatal(results[0].Err)
			}
			got := partition0(applyAll(t, img, recs))
			if d := describe(got); d != tt.want || describe(results[0].State) != tt.want {
				t.Fatalf("got  %s (result %s)\nwant %s", d, describe(results[0].State), tt.want)
			}
		})
	}
	img := testImage(t, "aaa", base)
	if _, _, err := alterPartitionUpdates(img, 1, 99, []AlterPartitionItem{item(nil)}, never); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("stale broker epoch: %v", err)
	}
}

func TestAlterPartitionRecoveredAfterUncleanElection(t *testing.T) {
	img := testImage(t, "aaa", metadata.PartitionRecord{Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, LeaderRecoveryState: metadata.Recovering})
	it := AlterPartitionItem{TopicID: testTopicID, LeaderEpoch: 1, PartitionEpoch: 1, NewISR: []ISRMember{{2, -1}}, LeaderRecoveryState: metadata.Recovered}
	recs, results, err := alterPartitionUpdates(img, 2, 11, []AlterPartitionItem{it}, never)
	if err != nil || results[0].Err != nil {
		t.Fatal(err, results[0].Err)
	}
	if got := partition0(applyAll(t, img, recs)); got.LeaderRecoveryState != metadata.Recovered || got.PartitionEpoch != 2 || got.LeaderEpoch != 1 {
		t.Fatalf("partition = %+v", got)
	}
}

func TestReassignmentSteps(t *testing.T) {
	img := testImage(t, "aaaaa", metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
	step := func(what string, recs []metadata.Record, want string) {
		t.Helper()
		img = applyAll(t, img, recs)
		if d := describe(partition0(img)); d != want {
			t.Fatalf("%s:\ngot  %s\nwant %s", what, d, want)
		}
	}
	// 1. Start: the new replicas join the replica set; nothing is removed yet.
	recs, _, errs := reassignUpdates(img, []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{4, 5, 1}}}, never)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	step("start", recs, "leader=1 isr=[1 2 3] replicas=[4 5 1 2 3] epochs=0/1 adding=[4 5] removing=[2 3]")
	if got := listReassignments(img, nil); len(got) != 1 || !slices.Equal(got[0].AddingReplicas, []int32{4, 5}) {
		t.Fatalf("list = %+v", got)
	}
	// 2. Replica 4 catches up: the ISR grows, the reassignment goes on.
	ap := func(isr ...int32) []metadata.Record {
		t.Helper()
		p := partition0(img)
		members := make([]ISRMember, len(isr))
		for i, id := range isr {
			members[i] = ISRMember{id, -1}
		}
		recs, results, err := alterPartitionUpdates(img, p.Leader, 10+int64(p.Leader)-1,
			[]AlterPartitionItem{{TopicID: testTopicID, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: members}}, never)
		if err != nil || results[0].Err != nil {
			t.Fatal(err, results[0].Err)
		}
		return recs
	}
	step("4 in sync", ap(1, 2, 3, 4), "leader=1 isr=[1 2 3 4] replicas=[4 5 1 2 3] epochs=0/2 adding=[4 5] removing=[2 3]")
	// 3. Replica 5 catches up: every target replica is in the ISR, so the removing
	// replicas leave the replica set and the ISR, and the leader epoch moves.
	step("5 in sync", ap(1, 2, 3, 4, 5), "leader=1 isr=[1 4 5] replicas=[4 5 1] epochs=1/3")
	if got := listReassignments(img, nil); len(got) != 0 {
		t.Fatalf("list = %+v", got)
	}
	// A reassignment that only reorders completes at once.
	recs, _, _ = reassignUpdates(img, []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{1, 4, 5}}}, never)
	step("reorder", recs, "leader=1 isr=[1 4 5] replicas=[1 4 5] epochs=1/4")
}

func TestReassignmentCancel(t *testing.T) {
	img := testImage(t, "aaaa", metadata.PartitionRecord{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	if _, _, errs := reassignUpdates(img, []Reassignment{{Topic: "t", Partition: 0}}, never); !errors.Is(errs[0], ErrNoReassignmentInProgress) {
		t.Fatalf("cancel without reassignment: %v", errs[0])
	}
	recs, _, _ := reassignUpdates(img, []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{3, 4}}}, never)
	img = applyAll(t, img, recs)
	recs, _, errs := reassignUpdates(img, []Reassignment{{Topic: "t", Partition: 0}}, never)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	img = applyAll(t, img, recs)
	if d := describe(partition0(img)); d != "leader=1 isr=[1 2] replicas=[1 2] epochs=1/2" {
		t.Fatal(d)
	}
	for _, bad := range [][]int32{{}, {1, 1}, {9}} {
		if _, _, errs := reassignUpdates(img, []Reassignment{{Topic: "t", Partition: 0, Replicas: bad}}, never); !errors.Is(errs[0], ErrInvalidReplicaAssignment) {
			t.Errorf("replicas %v: err = %v", bad, errs[0])
		}
	}
	if _, _, errs := reassignUpdates(img, []Reassignment{{Topic: "u", Partition: 0, Replicas: []int32{1}}}, never); !errors.Is(errs[0], ErrUnknownTopic) {
		t.Errorf("unknown topic: %v", errs[0])
	}
}

func TestElectLeadersResults(t *testing.T) {
	img := testImage(t, "afa",
		metadata.PartitionRecord{Replicas: []int32{1, 3}, ISR: []int32{1, 3}, Leader: 1}, // preferred already
		metadata.PartitionRecord{Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 3}, // preferred is fenced
		metadata.PartitionRecord{Replicas: []int32{3, 1}, ISR: []int32{3, 1}, Leader: 1}, // can move back
		metadata.PartitionRecord{Replicas: []int32{2, 3}, ISR: []int32{2}, Leader: -1},   // offline
	)
	_, _, results := electLeadersUpdates(img, ElectPreferred, map[string][]int32{"t": {0, 1, 2, 9}})
	want := []error{ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable, nil, ErrUnknownTopic}
	for i, r := range results {
		if !errors.Is(r.Err, want[i]) || (want[i] == nil) != (r.Err == nil) {
			t.Errorf("partition %d: %v, want %v", r.Partition, r.Err, want[i])
		}
	}
	// Every partition: the ones that need no election are left out.
	_, _, results = electLeadersUpdates(img, ElectPreferred, nil)
	if len(results) != 3 {
		t.Fatalf("results = %+v", results)
	}
	recs, events, results := electLeadersUpdates(img, ElectUnclean, map[string][]int32{"t": {3, 0}})
	if results[0].Err != nil || !errors.Is(results[1].Err, ErrElectionNotNeeded) || len(recs) != 1 || !events[0].Unclean {
		t.Fatalf("unclean: %+v %+v", results, events)
	}
}
