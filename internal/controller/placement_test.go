package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestPlaceReplicas(t *testing.T) {
	brokers := func(racks ...string) []placementBroker {
		out := make([]placementBroker, len(racks))
		for i, r := range racks {
			out[i] = placementBroker{ID: int32(i + 1), Rack: r}
		}
		return out
	}
	tests := []struct {
		name          string
		brokers       []placementBroker
		partitions    int
		rf            int
		wantErr       error
		wantRackSpan  int // racks each partition must span
		maxLeaderSkew int // most minus fewest leaderships per broker
	}{
		{name: "one broker", brokers: brokers(""), partitions: 3, rf: 1, wantRackSpan: 1},
		{name: "three brokers rf 3", brokers: brokers("", "", ""), partitions: 6, rf: 3, wantRackSpan: 1},
		{name: "rf above brokers", brokers: brokers("", ""), partitions: 1, rf: 3, wantErr: ErrInvalidReplicationFactor},
		{name: "three racks rf 3", brokers: brokers("a", "a", "b", "b", "c", "c"), partitions: 12, rf: 3, wantRackSpan: 3},
		{name: "two racks rf 3", brokers: brokers("a", "a", "b", "b"), partitions: 8, rf: 3, wantRackSpan: 2},
		{name: "uneven racks", brokers: brokers("a", "a", "a", "b"), partitions: 8, rf: 2, wantRackSpan: 2},
		{name: "no rack counts as a rack", brokers: brokers("a", "", "a", ""), partitions: 4, rf: 2, wantRackSpan: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for start := range 3 {
				got, err := placeReplicas(tt.brokers, tt.partitions, tt.rf, start)
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("err = %v, want %v", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				rack := map[int32]string{}
				for _, b := range tt.brokers {
					rack[b.ID] = b.Rack
				}
				leaders := map[int32]int{}
				for p, replicas := range got {
					if len(replicas) != tt.rf {
						t.Fatalf("partition %d: %v", p, replicas)
					}
					racks := map[string]bool{}
					for i, r := range replicas {
						if slices.Index(replicas, r) != i {
							t.Fatalf("partition %d: broker %d twice in %v", p, r, replicas)
						}
						racks[rack[r]] = true
					}
					if len(racks) < tt.wantRackSpan {
						t.Fatalf("partition %d: %v spans %d racks, want %d", p, replicas, len(racks), tt.wantRackSpan)
					}
					leaders[replicas[0]]++
				}
				if tt.partitions%len(tt.brokers) == 0 {
					for _, b := range tt.brokers {
						if leaders[b.ID] != tt.partitions/len(tt.brokers) {
							t.Fatalf("leaders %v are not spread evenly over %d brokers", leaders, len(tt.brokers))
						}
					}
				}
			}
		})
	}
}

func TestPlaceReplicasSpreadsFollowers(t *testing.T) {
	var brokers []placementBroker
	for i := range 5 {
		brokers = append(brokers, placementBroker{ID: int32(i)})
	}
	got, err := placeReplicas(brokers, 20, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[string]bool{}
	for _, r := range got {
		pairs[fmt.Sprint(r)] = true
	}
	// 20 partitions over 5 brokers: the follower offset moves every 5 partitions,
	// so no leader/follower pair repeats.
	if len(pairs) != 20 {
		t.Fatalf("only %d distinct replica lists: %v", len(pairs), got)
	}
}
