package broker

import (
	"slices"
	"testing"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/replica"
)

// TestISRProposalNamesTheFetchingIncarnation (KIP-903): the leader asks the controller
// for an ISR naming each follower at the broker epoch it fetched with, and does not
// propose a follower known only from another incarnation than the one registered: a
// broker that restarted (new epoch in the image) must fetch again before it can join,
// or the previous incarnation's position — which its log may have lost — would let
// it in at the registration's epoch, which the controller accepts.
func TestISRProposalNamesTheFetchingIncarnation(t *testing.T) {
	img, err := metadata.Apply(metadata.EmptyImage(), 1, []metadata.Record{
		metadata.RegisterBrokerRecord{NodeID: 1, Epoch: 9},
		metadata.RegisterBrokerRecord{NodeID: 2, Epoch: 6},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &replica.Partition{Topic: "t", Index: 0, TopicID: [16]byte{1}}
	for _, c := range []struct {
		fetchEpoch int64
		want       bool
	}{{5, false}, {6, true}, {-1, true}} {
		if got := isrIneligible(img, p, 2, c.fetchEpoch) == ""; got != c.want {
			t.Errorf("broker 2 registered at epoch 6, fetched at %d: eligible %v, want %v", c.fetchEpoch, got, c.want)
		}
	}
	if why := isrIneligible(img, p, 2, 5); why != "fetching at broker epoch 5, registered at 6" {
		t.Errorf("why broker 2 fetching at epoch 5 may not join: %q", why)
	}
	if why := isrIneligible(img, p, 3, -1); why != "not registered" {
		t.Errorf("why broker 3, never registered, may not join: %q", why)
	}
	item := alterPartitionItem(p, replica.ISRChange{LeaderEpoch: 1, PartitionEpoch: 2, ISR: []int32{1, 2},
		BrokerEpochs: []int64{-1, 5}}, 1, 9)
	want := []controller.ISRMember{{BrokerID: 1, BrokerEpoch: 9}, {BrokerID: 2, BrokerEpoch: 5}}
	if !slices.Equal(item.NewISR, want) {
		t.Fatalf("new ISR %+v, want %+v (the leader at its own epoch, node 2 at the epoch it fetched with)", item.NewISR, want)
	}
}
