package broker

import (
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/replica"
)

// TestSelectRackReplica is Kafka's RackAwareReplicaSelector: the leader in the
// client's rack serves it; else the most caught-up candidate in that rack; else the
// leader.
func TestSelectRackReplica(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	racks := map[int32]string{1: "a", 2: "b", 3: "b", 4: "c", 5: "a"}
	fenced := map[int32]bool{4: true}
	rackOf := func(id int32) (string, bool) {
		r, ok := racks[id]
		return r, ok && !fenced[id]
	}
	tests := []struct {
		name       string
		clientRack string
		leader     int32
		candidates []replica.ReadReplica
		want       int32
	}{
		{"leader in the client's rack", "a", 1, []replica.ReadReplica{{ID: 5, LogEnd: 10}}, -1},
		{"no candidate in the client's rack", "b", 1, []replica.ReadReplica{{ID: 5, LogEnd: 10}}, -1},
		{"no candidate at all", "b", 1, nil, -1},
		{"the one in the client's rack", "b", 1, []replica.ReadReplica{{ID: 2, LogEnd: 10}, {ID: 5, LogEnd: 12}}, 2},
		{"the largest log end", "b", 1, []replica.ReadReplica{{ID: 2, LogEnd: 10}, {ID: 3, LogEnd: 11}}, 3},
		{"then the most recently caught up", "b", 1, []replica.ReadReplica{
			{ID: 2, LogEnd: 10, LastCaughtUp: t0.Add(time.Second)}, {ID: 3, LogEnd: 10, LastCaughtUp: t0}}, 2},
		{"then the lowest id", "b", 1, []replica.ReadReplica{{ID: 3, LogEnd: 10}, {ID: 2, LogEnd: 10}}, 2},
		{"a fenced broker is no candidate", "c", 1, []replica.ReadReplica{{ID: 4, LogEnd: 10}}, -1},
		{"an unknown broker is no candidate", "b", 1, []replica.ReadReplica{{ID: 9, LogEnd: 10}}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := selectRackReplica(tt.clientRack, tt.leader, rackOf, tt.candidates); got != tt.want {
				t.Fatalf("selected %d, want %d", got, tt.want)
			}
		})
	}
}
